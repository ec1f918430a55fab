import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fencingScenarios } from '../../test/support/store-fencing-scenarios';
import { fileStoreUri, openArtifactStore } from '../artifacts/store';
import { isNewerToken } from './fencing';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-fencing-file-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;

describe('the run lease on a file:// store (link(2) create-if-absent)', () => {
  it('reports its conditional writes as atomic', async () => {
    expect(await openArtifactStore(fileStoreUri(path.join(work, 'probe'))).conditionalWrites()).toBe('atomic');
  });
  fencingScenarios(() => openArtifactStore(fileStoreUri(path.join(work, `store-${++n}`))));
});

describe('fencing tokens', () => {
  it('order by segment, then attempt, then start', () => {
    expect(isNewerToken({ segment: 2, attempt: 1, startedAt: 0 }, { segment: 1, attempt: 9, startedAt: 9 })).toBe(true);
    expect(isNewerToken({ segment: 1, attempt: 2, startedAt: 0 }, { segment: 1, attempt: 1, startedAt: 9 })).toBe(true);
    expect(isNewerToken({ segment: 1, attempt: 1, startedAt: 5 }, { segment: 1, attempt: 1, startedAt: 4 })).toBe(true);
    expect(isNewerToken({ segment: 1, attempt: 1, startedAt: 4 }, { segment: 1, attempt: 1, startedAt: 4 })).toBe(false);
    expect(isNewerToken({ segment: 1, attempt: 3, startedAt: 4 }, { segment: 2, attempt: 1, startedAt: 0 })).toBe(false);
  });
});

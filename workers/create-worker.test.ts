import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readActivityDeps } from './create-worker';

describe('readActivityDeps', () => {
  it('reads the node data dir and copies the environment once: a later change of the environment reaches no activity', () => {
    const env: NodeJS.ProcessEnv = { CODEGREP_DATA_DIR: 'relative/node-data', JUDGE_KEY: 'at-start' };
    const deps = readActivityDeps(null, env);
    expect(deps.client).toBeNull();
    expect(deps.nodeDataDir).toBe(path.resolve('relative/node-data'));
    env.JUDGE_KEY = 'changed-later';
    expect(deps.env.JUDGE_KEY).toBe('at-start');
    expect(Object.isFrozen(deps.env)).toBe(true);
    expect(readActivityDeps(null, {}).nodeDataDir).toBeNull();
  });
});

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { effectiveRecipeRows } from './report';

describe('effectiveRecipeRows', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("lists the trainer's effective recipe with each value's source, and nothing when it wrote none", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'recipe-'));
    dirs.push(dir);
    expect(effectiveRecipeRows(dir)).toEqual([]);
    writeFileSync(
      path.join(dir, 'recipe.json'),
      JSON.stringify({
        recipe: { value: 'codescout', source: 'config' },
        algorithm: { value: 'gspo', source: 'CodeScout §3.4: GSPO (Eq. 2-3)' },
        lr: { value: 2e-6, source: 'config' },
      }),
    );
    expect(effectiveRecipeRows(dir)).toEqual([
      ['recipe', '"codescout"', 'config'],
      ['algorithm', '"gspo"', 'CodeScout §3.4: GSPO (Eq. 2-3)'],
      ['lr', '0.000002', 'config'],
    ]);
  });
});

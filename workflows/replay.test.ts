import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowsPath } from '../workers/cpu';

const historiesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/histories');
const histories = readdirSync(historiesDir)
  .filter((file) => file.endsWith('.json'))
  .map((file) => ({ file, history: JSON.parse(readFileSync(path.join(historiesDir, file), 'utf8')) }));

/**
 * Committed histories of real runs replay against today's workflow code: a change that alters the commands a
 * workflow issues for an old history must go behind `patched()` (docs/design.md "Temporal conventions"), or this test fails.
 */
describe('workflow replay of committed histories', () => {
  it('has histories to replay (recorded with scripts/record-histories.sh)', () => {
    expect(histories.length).toBeGreaterThanOrEqual(3);
    // The evaluation workflow's: bm25 and a predictions file over 2 shards each, and an agent retriever whose
    // endpoint refuses the key (its shards fail, the retriever is reported and left out).
    expect(histories.map((h) => h.file)).toContain('eval2_evaluation.json');
    // The downstream workflow's (acme/calc, none + oracle over 3 instances) and the demo's training stage (a smoke
    // run: one segment on the GPU queue, the report) with the pipeline that ran it after the TrainingRun restructuring.
    expect(histories.map((h) => h.file)).toEqual(
      expect.arrayContaining(['acme-calc_downstream.json', 'demo3_training.json', 'demo3_pipeline.json']),
    );
  });

  it('replays every committed history without nondeterminism', async () => {
    Runtime.install({ logger: new DefaultLogger('WARN') });
    const results = [];
    for await (const result of Worker.runReplayHistories(
      { workflowsPath, replayName: 'codegrep' },
      histories.map(({ file, history }) => ({ workflowId: file.replace(/\.json$/, ''), history })),
    )) {
      results.push(result);
    }
    expect(results).toHaveLength(histories.length);
    for (const result of results) expect(result.error, `${result.workflowId}: ${result.error}`).toBeUndefined();
  }, 180_000);
});

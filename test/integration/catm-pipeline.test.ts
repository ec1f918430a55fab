import { mkdtempSync, rmSync, writeFileSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import type { PipelineResult } from '../../workflows/pipeline';
import { reply, startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { sharedData } from '../support/repo-root';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

const trajectories = path.join(sharedData, 'openhands_trajectories.sample.jsonl');
const instances = path.join(sharedData, 'swebench_verified.jsonl');
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-catm-it-'));
const taskQueue = uniqueTaskQueue('catm-it');
let stopWorker: () => Promise<void>;
let llm: ScriptedOpenAiServer;

/** The judge's file path, as the prompt shows it. */
function promptPath(body: { messages?: Array<{ content?: unknown }> }): string {
  const text = (body.messages ?? []).map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
  return /<file_path>\s*([^<\s]+)\s*<\/file_path>/.exec(text)?.[1] ?? '';
}

beforeAll(async () => {
  ({ stop: stopWorker } = await startWorker(taskQueue));
  // Deterministic verdicts: test files are NOT_RELEVANT, one reply in 10 is unclear prose (defaulted).
  llm = await startScriptedOpenAiServer({
    script: (body, callIndex) => {
      const file = promptPath(body);
      if (/(^|\/)tests?\//.test(file)) return reply.text('NOT_RELEVANT');
      if (callIndex % 10 === 3) return reply.text('I am not sure, it depends.');
      return reply.text('RELEVANT');
    },
  });
});

afterAll(async () => {
  await stopWorker?.();
  await llm?.close();
  rmSync(work, { recursive: true, force: true });
});

async function runPipeline(runId: string, config: Record<string, unknown>): Promise<PipelineResult> {
  const { client, close } = await testClient();
  try {
    return await client.workflow.execute('pipeline', {
      taskQueue,
      workflowId: `${runId}/pipeline`,
      args: [{ runId, dataDir: work, recipe: 'test', stages: ['catm'], ...config }],
    });
  } finally {
    await close();
  }
}

describe('pipeline → catm on the real dev server', () => {
  it('turns the real OpenHands sample into judged, weighted labels and samples in Parquet (judge: none)', async () => {
    const result = await runPipeline('it-none', { inputs: { trajectories, instances } });
    const catm = result.catm!;
    expect(catm.summaryValues.mining.rowsRead).toBe(48);
    expect(catm.summaryValues.mining.viewCalls).toBe(280);
    expect(catm.summaryValues.judge.mode).toBe('none');

    const candidates = await readParquetObjects(catm.candidates.uri);
    const judgements = await readParquetObjects(catm.judgements.uri);
    const labels = await readParquetObjects(catm.labels.uri);
    const samples = await readParquetObjects(catm.samples.uri);
    expect(candidates.length).toBe(catm.summaryValues.mining.candidatesAfterTokenFilter);
    expect(candidates.every((c) => (c.postReasoningTokens as number) >= 30)).toBe(true);
    expect(judgements.length).toBe(candidates.length);
    expect(new Set(judgements.map((j) => j.verdict))).toEqual(new Set(['SKIPPED']));
    // Every candidate is weighted (none judged out); retained ones carry w ≥ 0.15.
    expect(labels.length).toBe(candidates.length);
    for (const label of labels) expect(label.retained).toBe((label.weight as number) >= 0.15);
    const meanWeight = labels.reduce((sum, l) => sum + (l.weight as number), 0) / labels.length;
    expect(meanWeight).toBeCloseTo(1, 9); // Eq. 2 normalises by µraw

    expect(samples.length).toBe(500); // every Verified instance; those without trajectories keep gold-only targets
    const withCatm = samples.filter((s) => (s.catmFiles as unknown[]).length > 0);
    expect(withCatm.length).toBe(catm.summaryValues.weighting.samplesWithCatm);
    expect(withCatm.length).toBeGreaterThan(0);
    expect(withCatm.length).toBeLessThanOrEqual(48);
    for (const sample of samples) {
      const gold = sample.goldFiles as string[];
      const targets = sample.targetFiles as string[];
      expect(targets.slice(0, gold.length)).toEqual(gold);
      expect(new Set(targets).size).toBe(targets.length);
      for (const file of sample.catmFiles as Array<{ path: string }>) expect(targets).toContain(file.path);
    }
    const django = samples.find((s) => s.instanceId === 'django__django-11099');
    expect(django?.goldFiles).toEqual(['django/contrib/auth/validators.py']);

    const summary = JSON.parse(readFileSync(catm.summary.uri, 'utf8'));
    expect(summary.weighting.samplesWritten).toBe(500);
  });

  it('is a cache hit when re-run with the same inputs and config', async () => {
    const first = await runPipeline('it-cache', { inputs: { trajectories, instances } });
    const second = await runPipeline('it-cache', { inputs: { trajectories, instances } });
    expect(second.catm!.samples).toEqual(first.catm!.samples);
    expect(second.catm!.judgements.sha256).toBe(first.catm!.judgements.sha256);
  });

  it('judges with an OpenAI-compatible endpoint: NOT_RELEVANT files are dropped, unclear replies defaulted', async () => {
    const before = llm.requests.length;
    const result = await runPipeline('it-llm', {
      inputs: { trajectories, instances },
      judge: { mode: 'llm', baseUrl: llm.baseUrl, model: 'judge-model', concurrency: 16 },
    });
    const catm = result.catm!;
    const judgements = await readParquetObjects(catm.judgements.uri);
    const labels = await readParquetObjects(catm.labels.uri);
    expect(llm.requests.length - before).toBe(judgements.length);
    const counts = catm.summaryValues.judge;
    expect(counts.relevant + counts.notRelevant + counts.defaulted + counts.errors).toBe(judgements.length);
    expect(counts.notRelevant).toBeGreaterThan(0);
    expect(counts.defaulted).toBeGreaterThan(0);
    for (const j of judgements) {
      if (/(^|\/)tests?\//.test(j.path as string)) expect(j.verdict).toBe('NOT_RELEVANT');
      expect(j.model).toBe('judge-model');
    }
    expect(labels.length).toBe(judgements.length - counts.notRelevant);
    expect(labels.some((l) => /(^|\/)tests?\//.test(l.path as string))).toBe(false);
    // Shards live under the judge config: one directory for this endpoint and model.
    expect(readdirSync(path.join(work, 'it-llm', 'catm', 'judge-shards')).length).toBe(1);
  });
});

describe('bad inputs', () => {
  it('a missing input file fails at once, naming the field and the file', async () => {
    const missing = path.join(work, 'nope.jsonl');
    const error = await runPipeline('it-missing', { inputs: { trajectories: missing, instances } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const message = collectMessages(error);
    expect(message).toContain('inputs.trajectories');
    expect(message).toContain(missing);
  });

  it('a file of the wrong format fails with the accepted extensions', async () => {
    const csv = path.join(work, 'trajectories.csv');
    writeFileSync(csv, 'trajectory_id,instance_id\n1,2\n');
    const error = (await runPipeline('it-csv', { inputs: { trajectories: csv, instances } }).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect(collectMessages(error)).toMatch(/\.jsonl.*\.parquet/);
  });

  it('instances that all fail to parse fail the stage with the skip reasons counted (no ✓ with 0 samples)', async () => {
    // Three rows as CodeScout's SWE-Smith files had them before use_patch was read: no base_commit.
    const rows = readFileSync(instances, 'utf8')
      .split('\n')
      .filter(Boolean)
      .slice(0, 3)
      .map((line) => JSON.stringify({ ...(JSON.parse(line) as Record<string, unknown>), base_commit: null }));
    const broken = path.join(work, 'no-base-commit.jsonl');
    writeFileSync(broken, rows.join('\n') + '\n');
    const error = await runPipeline('it-no-samples', { inputs: { trajectories, instances: broken } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const message = collectMessages(error);
    expect(message).toContain('no sample from the 3 rows of instances');
    expect(message).toContain('missingOrInvalid:base_commit 3');
    expect(message).toMatch(/row 1: column base_commit: expected a full 40-hex-digit commit id/);
  });

  it('an empty file and a truncated last line are counted, not fatal', async () => {
    const empty = path.join(work, 'empty.jsonl');
    writeFileSync(empty, '');
    const emptyRun = await runPipeline('it-empty', { inputs: { trajectories: empty, instances } });
    expect(emptyRun.catm!.summaryValues.mining.rowsRead).toBe(0);
    expect(emptyRun.catm!.summaryValues.weighting.samplesWritten).toBe(500);

    const lines = readFileSync(trajectories, 'utf8').split('\n').filter(Boolean).slice(0, 3);
    const truncated = path.join(work, 'truncated.jsonl');
    writeFileSync(truncated, `${lines[0]}\n${lines[1]}\n${lines[2]!.slice(0, 500)}`);
    const truncatedRun = await runPipeline('it-truncated', { inputs: { trajectories: truncated, instances } });
    const mining = truncatedRun.catm!.summaryValues.mining;
    expect(mining.rowsRead).toBe(3);
    expect(mining.trajectoriesMined).toBe(2);
    expect(mining.rowsSkipped.malformedRow).toBe(1);
  });
});

function collectMessages(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  while (current instanceof Error) {
    parts.push(current.message);
    current = (current as Error & { cause?: unknown }).cause;
  }
  return parts.join(' | ');
}

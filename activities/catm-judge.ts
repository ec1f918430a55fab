import path from 'node:path';
import { Context, log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, openAppendLog, readAppendLog, writeParquetArtifact } from '../lib/artifacts';
import { countVerdicts, problemStatements, readMinedCandidates } from '../lib/labels/judge-artifacts';
import { JUDGE_PROMPT_VERSION } from '../lib/labels/judge-prompt';
import { judgeCandidates, type JudgeRunCounts } from '../lib/labels/judge-run';
import { judgementKey, knownJudgements } from '../lib/labels/judge-resume';
import { JudgeInputSchema, type JudgeCounts, type JudgeInput, type JudgeOutput } from '../schemas/catm';
import {
  JUDGEMENT_SCHEMA_NAME,
  JUDGEMENT_SCHEMA_VERSION,
  judgementArrowSchema,
  type JudgeCandidate,
  type Judgement,
} from '../schemas/judge';
import { ProgressReporter, rethrowLlmFailure, type ActivityDeps } from './kit';

const verdictCounts = (c: JudgeRunCounts | JudgeCounts) => ({
  relevant: c.relevant,
  notRelevant: c.notRelevant,
  defaulted: c.defaulted,
  skipped: c.skipped,
  errors: c.errors,
});

/**
 * CATM stage 2 (CodeGrep §3.4): judge every candidate. Each judgement is appended to a shard as soon as it is
 * known; a retried attempt reads the shards and asks only for what is missing, so a killed worker or server
 * resumes without repeating or losing a judgement. The Parquet artifact is written from the shards at the end.
 */
export function makeJudge(deps: Pick<ActivityDeps, 'env'>): (input: JudgeInput) => Promise<JudgeOutput> {
  return (input) => judge(deps, input);
}

/** `judge` with the worker's deps: the endpoint's API key is `deps.env[judge.apiKeyEnv]`. */
async function judge(deps: Pick<ActivityDeps, 'env'>, rawInput: JudgeInput): Promise<JudgeOutput> {
  const input = JudgeInputSchema.parse(rawInput);
  const ctx = Context.current();
  const outDir = path.join(input.runDir, 'catm');
  const judgementsPath = path.join(outDir, 'judgements.parquet');
  const { mode } = input.judge;
  const llm = mode === 'llm' ? { baseUrl: input.judge.baseUrl!, model: input.judge.model! } : null;
  const configHash = hashConfig({
    stage: 'judge',
    mode,
    baseUrl: llm?.baseUrl ?? null,
    model: llm?.model ?? null,
    promptVersion: JUDGE_PROMPT_VERSION,
  });
  const expectation = {
    schemaName: JUDGEMENT_SCHEMA_NAME,
    schemaVersion: JUDGEMENT_SCHEMA_VERSION,
    inputs: [input.candidates],
    configHash,
  };

  const cached = await findCachedArtifact(judgementsPath, expectation);
  if (cached) {
    log.info('judge: cache hit', { judgements: cached.uri });
    return { judgements: cached, counts: await countVerdicts(cached.uri), mode, cached: true };
  }

  // Shards live under the config hash: a different judge model never reuses another model's verdicts.
  const shardDir = path.join(outDir, 'judge-shards', configHash.slice(0, 16));
  const known = knownJudgements((await readAppendLog(shardDir)).records);
  if (mode === 'none') log.warn('judge: no endpoint configured (judge.mode = none): every candidate is kept with verdict SKIPPED');
  else log.info('judge: starting', { model: input.judge.model, baseUrl: input.judge.baseUrl, resumed: known.size });

  const shard = await openAppendLog(shardDir, `attempt-${ctx.info.attempt}-${process.pid}`);
  const progress = new ProgressReporter();
  const total = input.candidates.rows;
  const apiKey = deps.env[input.judge.apiKeyEnv];
  let summary;
  try {
    summary = await judgeCandidates({
      candidates: await judgeInputs(input, llm !== null),
      alreadyJudged: new Set(known.keys()),
      llm: llm ? { ...llm, ...(apiKey ? { apiKey } : {}) } : null,
      concurrency: input.judge.concurrency,
      timeoutMs: input.judge.timeoutMs,
      maxAttempts: input.judge.maxAttempts,
      signal: ctx.cancellationSignal,
      onJudgement: async (judgement) => {
        await shard.append([judgement]);
        known.set(judgementKey(judgement.trajectoryId, judgement.path), judgement);
      },
      onProgress: (c) => {
        const done = c.resumed + c.relevant + c.notRelevant + c.defaulted + c.errors + c.skipped;
        progress.report({ stage: 'judge', done, total, unit: 'candidates', counts: verdictCounts(c) });
      },
    });
  } catch (error) {
    rethrowLlmFailure(error);
  } finally {
    progress.close();
    await shard.close();
  }

  const judgements = await writeParquetArtifact({
    path: judgementsPath,
    arrowSchema: judgementArrowSchema,
    rows: judgementRows(input.candidates.uri, known),
    ...expectation,
  });
  const counts = { ...(await countVerdicts(judgements.uri)), resumed: summary.counts.resumed };
  progress.report({ stage: 'judge', done: total, total, unit: 'candidates', counts: verdictCounts(counts) });
  await progress.flush();
  log.info('judge: done', { ...counts, requests: summary.counts.requests, wallMs: Math.round(summary.wallMs) });
  return { judgements, counts, mode, cached: false };
}

/** The candidates with their task's problem statement (the prompt shows it; `judge: none` sends no prompt). */
async function judgeInputs(input: JudgeInput, withStatements: boolean): Promise<AsyncGenerator<JudgeCandidate>> {
  const wantedInstances = new Set<string>();
  for await (const candidate of readMinedCandidates(input.candidates.uri)) wantedInstances.add(candidate.instanceId);
  const statements = withStatements ? await problemStatements(input.instancesPath, wantedInstances) : new Map<string, string>();
  return (async function* () {
    for await (const candidate of readMinedCandidates(input.candidates.uri))
      yield { ...candidate, problemStatement: statements.get(candidate.instanceId) ?? '' };
  })();
}

/** One row per candidate, in candidate order, from the shards (the durable truth). */
async function* judgementRows(candidatesUri: string, known: ReadonlyMap<string, Judgement>): AsyncGenerator<Judgement> {
  for await (const candidate of readMinedCandidates(candidatesUri)) {
    const judgement = known.get(judgementKey(candidate.trajectoryId, candidate.path));
    if (!judgement) throw new Error(`judge: no judgement for ${candidate.trajectoryId} ${candidate.path} after the run`);
    yield { ...judgement, error: judgement.error ?? null };
  }
}

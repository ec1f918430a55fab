import path from 'node:path';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import {
  findCachedArtifact,
  hashConfig,
  openAppendLog,
  readAppendLog,
  readRows,
  writeParquetArtifact,
} from '../lib/artifacts';
import { JUDGE_PROMPT_VERSION } from '../lib/labels/judge-prompt';
import { judgeCandidates, judgementKey, type JudgeRunCounts } from '../lib/labels/judge-run';
import { LlmError } from '../lib/llm/errors';
import { JudgeInputSchema, type JudgeCounts, type JudgeInput, type JudgeOutput } from '../schemas/catm';
import { parseInstanceRecord } from '../schemas/instances';
import {
  JUDGEMENT_SCHEMA_NAME,
  JUDGEMENT_SCHEMA_VERSION,
  JudgementSchema,
  judgementArrowSchema,
  type JudgeCandidate,
  type Judgement,
} from '../schemas/judge';
import { MinedCandidateSchema, type MinedCandidate } from '../schemas/mining';
import { ProgressReporter } from './kit';

async function* minedCandidates(uri: string): AsyncGenerator<MinedCandidate> {
  for await (const record of readRows(uri)) {
    if ('error' in record) throw new Error(`candidates artifact ${uri} row ${record.ordinal}: ${record.error}`);
    yield MinedCandidateSchema.parse(record.row);
  }
}

/** Problem statements of the instances that have candidates (the judge prompt shows the task). */
async function problemStatements(instancesPath: string, wanted: Set<string>): Promise<Map<string, string>> {
  const statements = new Map<string, string>();
  for await (const record of readRows(instancesPath)) {
    const parsed = parseInstanceRecord(record, `instances ${instancesPath}`);
    if (parsed.ok && wanted.has(parsed.instance.instance_id)) statements.set(parsed.instance.instance_id, parsed.instance.problem_statement);
  }
  return statements;
}

function toCounts(counts: JudgeRunCounts): JudgeCounts {
  return {
    candidates: counts.candidates,
    relevant: counts.relevant,
    notRelevant: counts.notRelevant,
    defaulted: counts.defaulted,
    skipped: counts.skipped,
    errors: counts.errors,
    resumed: counts.resumed,
  };
}

/**
 * CATM stage 2 (CodeGrep §3.4): judge every candidate. Each judgement is appended to a shard as soon as it is
 * known; a retried attempt reads the shards and asks only for what is missing, so a killed worker or server
 * resumes without repeating or losing a judgement. The Parquet artifact is written from the shards at the end.
 */
export async function judge(rawInput: JudgeInput): Promise<JudgeOutput> {
  const input = JudgeInputSchema.parse(rawInput);
  const ctx = Context.current();
  const outDir = path.join(input.runDir, 'catm');
  const judgementsPath = path.join(outDir, 'judgements.parquet');
  const mode = input.judge.mode;
  const configHash = hashConfig({
    stage: 'judge',
    mode,
    baseUrl: mode === 'llm' ? input.judge.baseUrl : null,
    model: mode === 'llm' ? input.judge.model : null,
    promptVersion: JUDGE_PROMPT_VERSION,
  });

  const cached = await findCachedArtifact(judgementsPath, {
    schemaName: JUDGEMENT_SCHEMA_NAME,
    schemaVersion: JUDGEMENT_SCHEMA_VERSION,
    inputs: [input.candidates],
    configHash,
  });
  if (cached) {
    const counts = await countVerdicts(cached.uri);
    log.info('judge: cache hit', { judgements: cached.uri });
    return { judgements: cached, counts, mode, cached: true };
  }

  // Shards live under the config hash: a different judge model never reuses another model's verdicts.
  const shardDir = path.join(outDir, 'judge-shards', configHash.slice(0, 16));
  const existing = await readAppendLog(shardDir);
  const known = new Map<string, Judgement>();
  for (const record of existing.records) {
    const parsed = JudgementSchema.safeParse(record);
    if (parsed.success) known.set(judgementKey(parsed.data.trajectoryId, parsed.data.path), parsed.data);
  }
  if (mode === 'none') log.warn('judge: no endpoint configured (judge.mode = none): every candidate is kept with verdict SKIPPED');
  else log.info('judge: starting', { model: input.judge.model, baseUrl: input.judge.baseUrl, resumed: known.size });

  const wantedInstances = new Set<string>();
  for await (const candidate of minedCandidates(input.candidates.uri)) wantedInstances.add(candidate.instanceId);
  const statements = mode === 'llm' ? await problemStatements(input.instancesPath, wantedInstances) : new Map<string, string>();

  async function* judgeInputs(): AsyncGenerator<JudgeCandidate> {
    for await (const candidate of minedCandidates(input.candidates.uri)) {
      yield { ...candidate, problemStatement: statements.get(candidate.instanceId) ?? '' };
    }
  }

  const shard = await openAppendLog(shardDir, `attempt-${ctx.info.attempt}-${process.pid}`);
  const progress = new ProgressReporter();
  const total = input.candidates.rows;
  const apiKey = process.env[input.judge.apiKeyEnv];
  let summary;
  try {
    summary = await judgeCandidates({
      candidates: judgeInputs(),
      alreadyJudged: new Set(known.keys()),
      llm: mode === 'llm' ? { baseUrl: input.judge.baseUrl!, model: input.judge.model!, ...(apiKey ? { apiKey } : {}) } : null,
      concurrency: input.judge.concurrency,
      timeoutMs: input.judge.timeoutMs,
      maxAttempts: input.judge.maxAttempts,
      signal: ctx.cancellationSignal,
      onJudgement: async (judgement) => {
        await shard.append([judgement]);
        known.set(judgementKey(judgement.trajectoryId, judgement.path), judgement);
      },
      onProgress: (counts) =>
        progress.report({
          stage: 'judge',
          done: counts.resumed + counts.relevant + counts.notRelevant + counts.defaulted + counts.errors + counts.skipped,
          total,
          unit: 'candidates',
          counts: { relevant: counts.relevant, notRelevant: counts.notRelevant, defaulted: counts.defaulted, skipped: counts.skipped, errors: counts.errors },
        }),
    });
  } catch (error) {
    if (error instanceof LlmError) {
      throw ApplicationFailure.create({ type: error.failureType, message: error.message, nonRetryable: error.nonRetryable });
    }
    throw error;
  } finally {
    progress.close();
    await shard.close();
  }

  // One row per candidate, in candidate order, from the shards (the durable truth).
  async function* rows(): AsyncGenerator<Judgement> {
    for await (const candidate of minedCandidates(input.candidates.uri)) {
      const judgement = known.get(judgementKey(candidate.trajectoryId, candidate.path));
      if (!judgement) throw new Error(`judge: no judgement for ${candidate.trajectoryId} ${candidate.path} after the run`);
      yield { ...judgement, error: judgement.error ?? null };
    }
  }
  const judgements = await writeParquetArtifact({
    path: judgementsPath,
    schemaName: JUDGEMENT_SCHEMA_NAME,
    schemaVersion: JUDGEMENT_SCHEMA_VERSION,
    arrowSchema: judgementArrowSchema,
    rows: rows(),
    inputs: [input.candidates],
    configHash,
  });
  const counts = { ...(await countVerdicts(judgements.uri)), resumed: summary.counts.resumed };
  progress.report({ stage: 'judge', done: total, total, unit: 'candidates', counts: { relevant: counts.relevant, notRelevant: counts.notRelevant, defaulted: counts.defaulted, skipped: counts.skipped, errors: counts.errors } });
  await progress.flush();
  log.info('judge: done', { ...counts, requests: summary.counts.requests, wallMs: Math.round(summary.wallMs) });
  return { judgements, counts, mode, cached: false };
}

async function countVerdicts(uri: string): Promise<JudgeCounts> {
  const counts: JudgeCounts = { candidates: 0, relevant: 0, notRelevant: 0, defaulted: 0, skipped: 0, errors: 0, resumed: 0 };
  for await (const record of readRows(uri)) {
    if ('error' in record) continue;
    const judgement = JudgementSchema.parse(record.row);
    counts.candidates++;
    if (judgement.verdict === 'RELEVANT') counts.relevant++;
    else if (judgement.verdict === 'NOT_RELEVANT') counts.notRelevant++;
    else if (judgement.verdict === 'SKIPPED') counts.skipped++;
    else if (judgement.error) counts.errors++;
    else counts.defaulted++;
  }
  return counts;
}

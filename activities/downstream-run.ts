import { Context, log } from '@temporalio/activity';
import { writeBytesAtomically, writeJsonArtifact } from '../lib/artifacts';
import { lockPathFor, trajectoryPathFor } from '../lib/downstream/layout';
import { runPlannedPair } from '../lib/downstream/runs/run-pair';
import { findPair, finishedRecord, loadPlan, recordExpectation } from '../lib/downstream/runs/run-records';
import { withRepoLock } from '../lib/worktrees/repo-lock';
import { RunDownstreamPairInputSchema, type RunDownstreamPairInput, type RunDownstreamPairOutput } from '../schemas/downstream/activity-io';
import type { PlannedPair } from '../schemas/downstream/plan';
import { invalidInput, ProgressReporter, rethrowAsFailure, type ActivityDeps } from './kit';

/**
 * One (configuration, instance) run of the downstream study (CodeGrep §4.3; lib/downstream/runs/run-pair.ts), written
 * as a run record (JSON + manifest keyed by the run's hash) with the conversation beside it. A record already
 * there is returned without running anything, so a retried, resumed or repeated stage never runs a finished
 * pair again. Past `runTimeoutMs` the agent and harness processes are killed and the pair is an `error` row, not
 * a retry. Cancellation of the workflow kills them too.
 */
export function makeRunDownstreamPair(
  deps: Pick<ActivityDeps, 'env'>,
): (input: RunDownstreamPairInput) => Promise<RunDownstreamPairOutput> {
  return (input) => runDownstreamPair(deps, input);
}

/** `runDownstreamPair` with the worker's deps: the agent's API key is `deps.env[agent.apiKeyEnv]`, and its processes inherit `deps.env`. */
async function runDownstreamPair(deps: Pick<ActivityDeps, 'env'>, rawInput: RunDownstreamPairInput): Promise<RunDownstreamPairOutput> {
  const input = RunDownstreamPairInputSchema.parse(rawInput);
  const context = Context.current();
  const plan = await loadPlan(input.plan).catch(rethrowAsFailure);
  const pair = findPair(plan, input.configuration, input.instanceId);
  if (!pair) throw invalidInput(`downstream plan has no run (${input.configuration}, ${input.instanceId})`);
  const before = await reuse(pair);
  if (before) return before;

  // Heartbeats carry cancellation to the activity: the reporter keeps them going while the agent and the tests run.
  // (The workflow counts the stage's finished runs; this pair's details only say which attempt is running.)
  const progress = new ProgressReporter();
  progress.report({ stage: 'runs', done: 0, total: 1, unit: 'runs', counts: { attempt: context.info.attempt } });
  try {
    // One attempt per pair at a time: an attempt of a terminated or timed-out workflow may still be stopping
    // when the next one starts. A lock whose holder died (a killed worker) is broken at once.
    return await withRepoLock(
      lockPathFor(input.runDir, pair.configuration, pair.instanceId),
      async () => {
        const reused = await reuse(pair);
        if (reused) return reused;
        const { record, trajectory } = await runPlannedPair({
          ...input,
          plan,
          pair,
          signal: context.cancellationSignal,
          attempt: context.info.attempt,
          env: deps.env,
        });
        if (trajectory.length > 0)
          await writeBytesAtomically(trajectoryPathFor(pair.recordPath), `${JSON.stringify(trajectory, null, 1)}\n`);
        const ref = await writeJsonArtifact(pair.recordPath, record, recordExpectation(pair));
        const { row } = record;
        const { configuration, instanceId, outcome, rounds } = row;
        log.info('downstream run: done', { configuration, instanceId, outcome, rounds, ms: record.durationMs });
        return { row, record: ref, reused: false };
      },
      { signal: context.cancellationSignal, waitTimeoutMs: input.runTimeoutMs + 5 * 60_000 },
    );
  } finally {
    progress.close();
  }
}

/** The pair's finished record as this activity's output, or null when it still has to run. */
async function reuse(pair: PlannedPair): Promise<RunDownstreamPairOutput | null> {
  const existing = await finishedRecord(pair);
  if (!existing) return null;
  log.info('downstream run: finished before, reused', { configuration: pair.configuration, instanceId: pair.instanceId });
  return { row: existing.record.row, record: existing.ref, reused: true };
}

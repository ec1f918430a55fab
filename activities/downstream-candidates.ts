import { Context, log } from '@temporalio/activity';
import { retrieveCandidates } from '../lib/downstream/plan/candidates';
import {
  RetrieveDownstreamCandidatesInputSchema,
  type RetrieveDownstreamCandidatesInput,
  type RetrieveDownstreamCandidatesOutput,
} from '../schemas/downstream/activity-io';
import { ProgressReporter, rethrowPredictorFailure, type ActivityDeps } from './kit';

/**
 * The files a served trained policy finds for every downstream instance (a configuration with source `agent`;
 * lib/downstream/plan/candidates.ts), as an evaluation-predictions Parquet the downstream plan reads. The workflow
 * runs it while the policy server it started answers. Finished instances are kept, so a retry asks only about
 * the rest.
 */
export function makeRetrieveDownstreamCandidates(
  deps: Pick<ActivityDeps, 'env'>,
): (input: RetrieveDownstreamCandidatesInput) => Promise<RetrieveDownstreamCandidatesOutput> {
  return (input) => retrieveDownstreamCandidates(deps, input);
}

/** `retrieveDownstreamCandidates` with the worker's deps: the policy's API key (its retriever's `apiKeyEnv`) is read from `deps.env`. */
async function retrieveDownstreamCandidates(
  deps: Pick<ActivityDeps, 'env'>,
  rawInput: RetrieveDownstreamCandidatesInput,
): Promise<RetrieveDownstreamCandidatesOutput> {
  const input = RetrieveDownstreamCandidatesInputSchema.parse(rawInput);
  const progress = new ProgressReporter();
  const unit = `instances asked of ${input.retriever.served?.model ?? input.configuration}`;
  try {
    const retrieved = await retrieveCandidates({
      runDir: input.runDir,
      configuration: input.configuration,
      retriever: input.retriever,
      instancesFile: input.instancesFile,
      ...(input.instances ? { instances: input.instances } : {}),
      checkouts: input.checkouts,
      ...(input.isolation ? { isolation: input.isolation } : {}),
      signal: Context.current().cancellationSignal,
      env: deps.env,
      onProgress: (done, total) => progress.report({ stage: 'plan', done, total, unit, counts: {} }),
    });
    log.info('downstream candidates: done', { configuration: input.configuration, ...retrieved, predictions: retrieved.predictions.uri });
    return retrieved;
  } catch (error) {
    return rethrowPredictorFailure(error);
  } finally {
    progress.close();
  }
}

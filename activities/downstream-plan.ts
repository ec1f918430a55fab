import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, sourceRef, writeJsonArtifact } from '../lib/artifacts';
import { downstreamPaths } from '../lib/downstream/layout';
import { planDownstreamRuns, planWarnings } from '../lib/downstream/plan/plan';
import { PlanDownstreamInputSchema, type PlanDownstreamInput, type PlanDownstreamOutput } from '../schemas/downstream/activity-io';
import { DOWNSTREAM_PLAN_SCHEMA_NAME, DOWNSTREAM_PLAN_SCHEMA_VERSION } from '../schemas/downstream/plan';
import { rethrowAsFailure } from './kit';

/**
 * The downstream stage's plan (lib/downstream/plan/plan.ts), written as `downstream/plans/<hash>.json`: what every
 * pair runs, and which pairs are already finished. Input problems a retry cannot fix fail at once, naming the
 * config key.
 */
export async function planDownstream(rawInput: PlanDownstreamInput): Promise<PlanDownstreamOutput> {
  const input = PlanDownstreamInputSchema.parse(rawInput);
  const config = input.downstream;
  const planning = await planDownstreamRuns({
    runId: input.runId,
    runDir: input.runDir,
    config,
    instancesFile: input.instancesFile,
    predictions: input.predictions,
  }).catch(rethrowAsFailure);
  const { plan, pending, finished } = planning;

  const configHash = hashConfig({ stage: 'downstream-plan', pairs: plan.pairs.map((p) => p.runHash), baseline: config.baseline });
  const planRef = await writeJsonArtifact(path.join(downstreamPaths(input.runDir).plans, `${configHash.slice(0, 16)}.json`), plan, {
    schemaName: DOWNSTREAM_PLAN_SCHEMA_NAME,
    schemaVersion: DOWNSTREAM_PLAN_SCHEMA_VERSION,
    inputs: [await sourceRef(input.instancesFile), ...planning.predictionInputs],
    configHash,
  });

  const warnings = planWarnings(planning);
  const counts = {
    pairs: plan.pairs.length,
    finished,
    pending: pending.pairs.length,
    instances: plan.instances.length,
    warnings: warnings.length,
  };
  log.info('downstream plan', counts);
  return {
    plan: planRef,
    total: plan.pairs.length,
    finished,
    pending,
    instances: plan.instances.length,
    invalidInstances: planning.invalidInstances.length,
    warnings,
  };
}

import { InputFileError } from '../../artifacts';
import type { ArtifactRef } from '../../../schemas/artifact-ref';
import type { DownstreamConfig } from '../../../schemas/downstream/config';
import type { DownstreamInstance } from '../../../schemas/downstream/instance';
import type { PendingRuns } from '../../../schemas/downstream/activity-io';
import type { DownstreamPlan, PlannedConfiguration, PlannedPair } from '../../../schemas/downstream/plan';
import { recordPathFor } from '../layout';
import { readDownstreamInstances } from './plan-instances';
import { loadPredictions } from './plan-predictions';
import { describeAgent, describeHarness, runHash } from '../runs/run-identity';
import { hasFinishedRecord } from '../runs/run-records';

const MAX_LISTED_ERRORS = 50;

export interface PlanDownstreamOptions {
  runId: string;
  runDir: string;
  config: DownstreamConfig;
  instancesFile: string;
  /** Predictions artifacts by configuration name (from the evaluation stage), overriding the config's path. */
  predictions: Record<string, ArtifactRef>;
}

export interface DownstreamPlanning {
  plan: DownstreamPlan;
  /** Pairs whose record is already there and valid. */
  finished: number;
  pending: PendingRuns;
  /** The predictions files read, as inputs of the plan artifact. */
  predictionInputs: ArtifactRef[];
  /** Unreadable instance rows (all of them; the plan keeps the first 50). */
  invalidInstances: string[];
}

/**
 * The downstream stage's plan: the instances (validated, subset applied), each predictions configuration's
 * files per instance, and every (configuration, instance) pair with the hash that makes its finished record
 * reusable. Pairs whose record is already there and valid count as finished, so a rerun, a resumed workflow
 * or a continued-as-new one runs only what is missing. Input problems a retry cannot fix (unknown subset ids,
 * a missing predictions file, no instance at all) throw InputFileError, naming the config key.
 */
export async function planDownstreamRuns(options: PlanDownstreamOptions): Promise<DownstreamPlanning> {
  const { config } = options;
  const read = await readDownstreamInstances(options.instancesFile, config.instances);
  const { instances } = read;
  const configurations = await planConfigurations(options, instances);
  const { pairs, pending, finished } = await planPairs(options, instances, configurations);
  const plan: DownstreamPlan = {
    runId: options.runId,
    baseline: config.baseline,
    agent: describeAgent(config.agent),
    harness: describeHarness(config.harness),
    instancesFile: options.instancesFile,
    configurations: configurations.planned,
    instances,
    invalidInstances: read.invalid.slice(0, MAX_LISTED_ERRORS),
    pairs,
  };
  return { plan, finished, pending, predictionInputs: configurations.predictionInputs, invalidInstances: read.invalid };
}

/** Each configuration's plan, and what its pairs need of it: its predicted files and the policy that found them. */
interface PlannedConfigurations {
  planned: PlannedConfiguration[];
  predictedByConfiguration: Map<string, Map<string, string[]>>;
  policyByConfiguration: Map<string, string>;
  predictionInputs: ArtifactRef[];
}

/** The configurations in config order, each predictions configuration with its predictions file read. */
async function planConfigurations(
  options: PlanDownstreamOptions,
  instances: readonly DownstreamInstance[],
): Promise<PlannedConfigurations> {
  const planned: PlannedConfiguration[] = [];
  const predictedByConfiguration = new Map<string, Map<string, string[]>>();
  const policyByConfiguration = new Map<string, string>();
  const predictionInputs: ArtifactRef[] = [];
  for (const [index, configuration] of options.config.configurations.entries()) {
    const base = { name: configuration.name, source: configuration.source, ...(configuration.k ? { k: configuration.k } : {}) };
    if (configuration.source === 'none' || configuration.source === 'oracle') {
      planned.push({ ...base, predictionsFrom: null, missingPredictions: [], predictionErrors: [] });
      continue;
    }
    const where = `downstream.configurations.${index}`;
    const artifact = options.predictions[configuration.name];
    // An `agent` configuration's files are the served policy's, retrieved by the workflow before it plans.
    if (configuration.source === 'agent' && artifact === undefined)
      throw new InputFileError(
        `${where}.policy`,
        `${where} (${configuration.name}) has source "agent" but its policy's files were not retrieved: run it through the downstream workflow, which serves the policy`,
      );
    const loaded = await loadPredictions(configuration, where, artifact);
    predictedByConfiguration.set(configuration.name, loaded.files);
    if (loaded.from.policy) policyByConfiguration.set(configuration.name, loaded.from.policy.adapterSha256);
    const { uri, sha256, format } = loaded.from;
    predictionInputs.push({ uri, sha256, rows: loaded.files.size, schema: `predictions.${format}`, schemaVersion: 1 });
    planned.push({
      ...base,
      predictionsFrom: loaded.from,
      missingPredictions: instances.filter((i) => !loaded.files.has(i.instance_id)).map((i) => i.instance_id),
      predictionErrors: loaded.errors.slice(0, MAX_LISTED_ERRORS),
    });
  }
  return { planned, predictedByConfiguration, policyByConfiguration, predictionInputs };
}

/** Every (configuration, instance) pair with its run hash; a pair with a valid record is finished, the others pending. */
async function planPairs(
  options: PlanDownstreamOptions,
  instances: readonly DownstreamInstance[],
  { predictedByConfiguration, policyByConfiguration }: PlannedConfigurations,
): Promise<{ pairs: PlannedPair[]; pending: PendingRuns; finished: number }> {
  const { config } = options;
  // Instance-major: every configuration of an instance before the next instance, so paired results accumulate from the start.
  const pairs: PlannedPair[] = [];
  const pending: PendingRuns = {
    configurations: config.configurations.map((c) => c.name),
    instanceIds: instances.map((i) => i.instance_id),
    pairs: [],
  };
  let finished = 0;
  for (const [instanceIndex, instance] of instances.entries()) {
    for (const [configurationIndex, configuration] of config.configurations.entries()) {
      const predicted = predictedByConfiguration.get(configuration.name);
      const predictedFiles = predicted ? (predicted.get(instance.instance_id) ?? []) : null;
      const pair: PlannedPair = {
        configuration: configuration.name,
        instanceId: instance.instance_id,
        runHash: runHash({
          configuration,
          predictedFiles,
          policyAdapterSha256: policyByConfiguration.get(configuration.name) ?? null,
          instance,
          agent: config.agent,
          harness: config.harness,
        }),
        recordPath: recordPathFor(options.runDir, configuration.name, instance.instance_id),
        predictedFiles,
      };
      pairs.push(pair);
      if (await hasFinishedRecord(pair)) finished += 1;
      else pending.pairs.push([configurationIndex, instanceIndex]);
    }
  }
  return { pairs, pending, finished };
}

/** Short warnings for the UI: skipped instance rows, missing or unusable predictions. */
export function planWarnings(planning: DownstreamPlanning): string[] {
  const warnings: string[] = [];
  const invalid = planning.invalidInstances;
  if (invalid.length > 0) warnings.push(`${invalid.length} unreadable instance row(s) skipped (first: ${invalid[0]})`);
  for (const c of planning.plan.configurations) {
    const missing = c.missingPredictions.length;
    if (missing > 0) warnings.push(`${c.name}: no prediction for ${missing} instance(s); they run with the issue unchanged`);
    if (c.predictionErrors.length > 0)
      warnings.push(`${c.name}: ${c.predictionErrors.length} unusable prediction row(s) (first: ${c.predictionErrors[0]})`);
  }
  return warnings;
}

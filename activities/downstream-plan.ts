import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, log } from '@temporalio/activity';
import { canonicalJson, checkCachedArtifact, hashConfig, readRows, sha256File, sourceRef, writeJsonArtifact } from '../lib/artifacts';
import { readPredictionsFile } from '../lib/retrievers/predictions-file';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { DownstreamInstanceSchema, type DownstreamInstance } from '../schemas/downstream';
import {
  DOWNSTREAM_PLAN_SCHEMA_NAME,
  DOWNSTREAM_PLAN_SCHEMA_VERSION,
  DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
  DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
  PlanDownstreamInputSchema,
  PredictionsParquetRowSchema,
  type DownstreamAgentConfig,
  type DownstreamConfiguration,
  type DownstreamHarnessConfig,
  type DownstreamPlan,
  type PlanDownstreamInput,
  type PlanDownstreamOutput,
  type PlannedConfiguration,
  type PlannedPair,
} from '../schemas/downstream-config';

/** Where the stage writes, under `<runDir>/downstream/`. */
export const downstreamPaths = (runDir: string) => {
  const root = path.join(runDir, 'downstream');
  return {
    root,
    plans: path.join(root, 'plans'),
    records: path.join(root, 'runs'),
    checkouts: path.join(root, 'checkouts'),
    locks: path.join(root, 'locks'),
    swebench: path.join(root, 'swebench'),
    runsParquet: path.join(root, 'runs.parquet'),
    tableJson: path.join(root, 'table.json'),
    reportMarkdown: path.join(root, 'report.md'),
    reportHtml: path.join(root, 'report.html'),
  };
};

/** A configuration or instance name as one path segment: readable, and distinct names never collide. */
export function fileSafe(name: string): string {
  const clean = name.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[-.]+/, '').slice(0, 80);
  if (clean === name) return clean;
  return `${clean || 'x'}-${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

export function recordPathFor(runDir: string, configuration: string, instanceId: string): string {
  return path.join(downstreamPaths(runDir).records, fileSafe(configuration), `${fileSafe(instanceId)}.json`);
}

/**
 * What decides a run's result, and so whether a finished record can be reused: the model and its sampling
 * settings, or the outside agent's command; the harness and its interpreter or command. Where the endpoint
 * lives, API keys, timeouts, retries and concurrency are left out: moving a vLLM server to another port must
 * not redo 500 runs.
 */
export function agentIdentity(agent: DownstreamAgentConfig): Record<string, unknown> {
  return agent.kind === 'builtin'
    ? { kind: agent.kind, model: agent.model, maxRounds: agent.maxRounds, temperature: agent.temperature, maxTokensPerCall: agent.maxTokensPerCall ?? null }
    : { kind: agent.kind, command: agent.command, outputFile: agent.outputFile ?? null };
}

export function harnessIdentity(harness: DownstreamHarnessConfig): Record<string, unknown> {
  return harness.kind === 'local'
    ? { kind: harness.kind, interpreter: harness.interpreter, testRunner: harness.testRunner }
    : { kind: harness.kind, command: harness.command, modelName: harness.modelName ?? null };
}

export function describeAgent(agent: DownstreamAgentConfig): string {
  return agent.kind === 'builtin'
    ? `built-in agent, model ${agent.model} at ${agent.baseUrl}, temperature ${agent.temperature}, ≤ ${agent.maxRounds} rounds`
    : `OpenHands command ${JSON.stringify(agent.command)}`;
}

export function describeHarness(harness: DownstreamHarnessConfig): string {
  if (harness.kind === 'swebench') return `SWE-bench harness command ${JSON.stringify(harness.command)}`;
  const runner = typeof harness.testRunner === 'string' ? harness.testRunner : `custom ${JSON.stringify(harness.testRunner.argv)}`;
  return `local harness, ${runner} with ${harness.interpreter}`;
}

function invalidInput(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message });
}

const MAX_LISTED_ERRORS = 50;

async function readInstances(file: string): Promise<{ instances: DownstreamInstance[]; invalid: string[] }> {
  const instances: DownstreamInstance[] = [];
  const invalid: string[] = [];
  const seen = new Map<string, number>();
  for await (const record of readRows(file)) {
    if ('error' in record) {
      invalid.push(`row ${record.ordinal}: ${record.error}`);
      continue;
    }
    const parsed = DownstreamInstanceSchema.safeParse(record.row);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const id = (record.row as { instance_id?: unknown } | null)?.instance_id;
      invalid.push(`row ${record.ordinal}${typeof id === 'string' ? ` (${id})` : ''}: ${issue.path.length > 0 ? `column ${issue.path.join('.')}: ` : ''}${issue.message}`);
      continue;
    }
    const first = seen.get(parsed.data.instance_id);
    if (first !== undefined) {
      invalid.push(`row ${record.ordinal}: instance ${parsed.data.instance_id} again (first on row ${first}); ignored`);
      continue;
    }
    seen.set(parsed.data.instance_id, record.ordinal);
    instances.push(parsed.data);
  }
  return { instances, invalid };
}

interface LoadedPredictions {
  from: NonNullable<PlannedConfiguration['predictionsFrom']>;
  files: Map<string, string[]>;
  errors: string[];
}

/** A predictions configuration's files per instance, from the evaluation stage's Parquet or an outside JSONL. */
async function loadPredictions(configuration: DownstreamConfiguration, where: string, artifact: ArtifactRef | undefined): Promise<LoadedPredictions> {
  const file = artifact?.uri ?? configuration.predictions;
  if (file === undefined) {
    throw invalidInput(
      `${where} (${configuration.name}) has source "predictions" but no predictions file: set ${where}.predictions to a predictions JSONL or the evaluation stage's predictions Parquet, or run the evaluation stage in the same pipeline`,
    );
  }
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw invalidInput(`${where}.predictions (${configuration.name}): file ${file} does not exist${artifact ? ' (artifact of an earlier stage)' : ''}`);
  }
  const sha256 = await sha256File(file);
  const files = new Map<string, string[]>();
  const errors: string[] = [];
  if (path.extname(file).toLowerCase() === '.parquet') {
    const retrievers = new Set<string>();
    const rows: Array<{ ordinal: number; instanceId: string; retriever: string | null; files: string[] }> = [];
    for await (const record of readRows(file)) {
      if ('error' in record) {
        errors.push(`row ${record.ordinal}: ${record.error}`);
        continue;
      }
      const parsed = PredictionsParquetRowSchema.safeParse(record.row);
      if (!parsed.success) {
        errors.push(`row ${record.ordinal}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
        continue;
      }
      if (parsed.data.retriever !== null) retrievers.add(parsed.data.retriever);
      rows.push({ ordinal: record.ordinal, ...parsed.data });
    }
    // The evaluation stage's Parquet holds every retriever: a configuration picks its own by `retriever`, or by
    // being named like one of them.
    const retriever = configuration.retriever ?? (retrievers.size > 1 && retrievers.has(configuration.name) ? configuration.name : undefined);
    if (retriever === undefined && retrievers.size > 1) {
      throw invalidInput(
        `${where}.predictions (${configuration.name}): ${file} holds ${retrievers.size} retrievers (${[...retrievers].sort().join(', ')}); set ${where}.retriever to one of them, or name the configuration like it`,
      );
    }
    if (retriever !== undefined && !retrievers.has(retriever)) {
      throw invalidInput(`${where}.retriever (${configuration.name}): ${file} has no rows of retriever "${retriever}" (it has ${[...retrievers].sort().join(', ') || 'none'})`);
    }
    for (const row of rows) {
      if (retriever !== undefined && row.retriever !== retriever) continue;
      if (files.has(row.instanceId)) errors.push(`row ${row.ordinal}: instance ${row.instanceId} again; the first row is used`);
      else files.set(row.instanceId, row.files);
    }
    const used = retriever ?? (retrievers.size === 1 ? [...retrievers][0]! : null);
    return { from: { uri: file, sha256, format: 'parquet', retriever: used }, files, errors };
  }
  if (configuration.retriever !== undefined) {
    throw invalidInput(`${where}.retriever (${configuration.name}): only a predictions Parquet file has retrievers; ${file} is read as JSONL`);
  }
  let read;
  try {
    read = await readPredictionsFile(file);
  } catch (error) {
    throw invalidInput(`${where}.predictions (${configuration.name}): ${error instanceof Error ? error.message : String(error)}`);
  }
  for (const prediction of read.predictions) files.set(prediction.instanceId, prediction.files);
  for (const error of read.errors) errors.push(`line ${error.line}: ${error.message}`);
  return { from: { uri: file, sha256, format: 'jsonl', retriever: null }, files, errors };
}

/**
 * The downstream stage's plan: the instances (validated, subset applied), each predictions configuration's
 * files per instance, and every (configuration, instance) pair with the hash that makes its finished record
 * reusable. Pairs whose record is already there and valid are reported finished, so a rerun, a resumed
 * workflow or a continued-as-new one runs only what is missing. Input problems a retry cannot fix (unknown
 * subset ids, a missing predictions file, no instance at all) fail at once, naming the config key.
 */
export async function planDownstream(rawInput: PlanDownstreamInput): Promise<PlanDownstreamOutput> {
  const input = PlanDownstreamInputSchema.parse(rawInput);
  const config = input.downstream;
  if (!existsSync(input.instancesFile) || !statSync(input.instancesFile).isFile()) {
    throw invalidInput(`downstream.instancesFile (or inputs.instances): file ${input.instancesFile} does not exist`);
  }
  const read = await readInstances(input.instancesFile);
  let instances = read.instances;
  if (config.instances) {
    const byId = new Map(instances.map((i) => [i.instance_id, i]));
    const unknown = config.instances.filter((id) => !byId.has(id));
    if (unknown.length > 0) {
      const invalidIds = unknown.filter((id) => read.invalid.some((line) => line.includes(`(${id})`)));
      throw invalidInput(
        `downstream.instances: ${unknown.length} id(s) are not valid instances of ${input.instancesFile}: ${unknown.slice(0, 10).join(', ')}${unknown.length > 10 ? ', …' : ''}` +
          (invalidIds.length > 0 ? ` (unreadable rows: ${read.invalid.filter((l) => invalidIds.some((id) => l.includes(`(${id})`))).slice(0, 3).join('; ')})` : ''),
      );
    }
    instances = config.instances.map((id) => byId.get(id)!);
  }
  if (instances.length === 0) {
    throw invalidInput(`downstream: ${input.instancesFile} has no valid instance${read.invalid.length > 0 ? ` (${read.invalid.length} unreadable rows; first: ${read.invalid[0]})` : ''}`);
  }

  const planned: PlannedConfiguration[] = [];
  const predictedByConfiguration = new Map<string, Map<string, string[]>>();
  const predictionInputs: ArtifactRef[] = [];
  for (const [index, configuration] of config.configurations.entries()) {
    if (configuration.source !== 'predictions') {
      planned.push({ name: configuration.name, source: configuration.source, ...(configuration.k ? { k: configuration.k } : {}), predictionsFrom: null, missingPredictions: [], predictionErrors: [] });
      continue;
    }
    const loaded = await loadPredictions(configuration, `downstream.configurations.${index}`, input.predictions[configuration.name]);
    predictedByConfiguration.set(configuration.name, loaded.files);
    predictionInputs.push({ uri: loaded.from.uri, sha256: loaded.from.sha256, rows: loaded.files.size, schema: `predictions.${loaded.from.format}`, schemaVersion: 1 });
    planned.push({
      name: configuration.name,
      source: configuration.source,
      ...(configuration.k ? { k: configuration.k } : {}),
      predictionsFrom: loaded.from,
      missingPredictions: instances.filter((i) => !loaded.files.has(i.instance_id)).map((i) => i.instance_id),
      predictionErrors: loaded.errors.slice(0, MAX_LISTED_ERRORS),
    });
  }

  const agent = agentIdentity(config.agent);
  const harness = harnessIdentity(config.harness);
  const pairs: PlannedPair[] = [];
  const pending: PlanDownstreamOutput['pending'] = {
    configurations: config.configurations.map((c) => c.name),
    instanceIds: instances.map((i) => i.instance_id),
    pairs: [],
  };
  let finished = 0;
  for (const [instanceIndex, instance] of instances.entries()) {
    const instanceDigest = createHash('sha256').update(canonicalJson(instance)).digest('hex');
    for (const [configurationIndex, configuration] of config.configurations.entries()) {
      const predicted = predictedByConfiguration.get(configuration.name);
      const predictedFiles = predicted ? (predicted.get(instance.instance_id) ?? []) : null;
      const runHash = hashConfig({
        record: DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
        configuration: { name: configuration.name, source: configuration.source, k: configuration.k ?? null },
        predictedFiles,
        instance: instanceDigest,
        agent,
        harness,
      });
      const recordPath = recordPathFor(input.runDir, configuration.name, instance.instance_id);
      pairs.push({ configuration: configuration.name, instanceId: instance.instance_id, runHash, recordPath, predictedFiles });
      const check = await checkCachedArtifact(recordPath, {
        schemaName: DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
        schemaVersion: DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
        inputs: [],
        configHash: runHash,
      });
      if (check.hit) finished += 1;
      else pending.pairs.push([configurationIndex, instanceIndex]);
    }
  }

  const plan: DownstreamPlan = {
    runId: input.runId,
    baseline: config.baseline,
    agent: describeAgent(config.agent),
    harness: describeHarness(config.harness),
    instancesFile: input.instancesFile,
    configurations: planned,
    instances,
    invalidInstances: read.invalid.slice(0, MAX_LISTED_ERRORS),
    pairs,
  };
  const configHash = hashConfig({ stage: 'downstream-plan', pairs: pairs.map((p) => p.runHash), baseline: config.baseline });
  const planRef = await writeJsonArtifact(path.join(downstreamPaths(input.runDir).plans, `${configHash.slice(0, 16)}.json`), plan, {
    schemaName: DOWNSTREAM_PLAN_SCHEMA_NAME,
    schemaVersion: DOWNSTREAM_PLAN_SCHEMA_VERSION,
    inputs: [await sourceRef(input.instancesFile), ...predictionInputs],
    configHash,
  });

  const warnings: string[] = [];
  if (read.invalid.length > 0) warnings.push(`${read.invalid.length} unreadable instance row(s) skipped (first: ${read.invalid[0]})`);
  for (const c of planned) {
    if (c.missingPredictions.length > 0) warnings.push(`${c.name}: no prediction for ${c.missingPredictions.length} instance(s); they run with the issue unchanged`);
    if (c.predictionErrors.length > 0) warnings.push(`${c.name}: ${c.predictionErrors.length} unusable prediction row(s) (first: ${c.predictionErrors[0]})`);
  }
  log.info('downstream plan', { pairs: pairs.length, finished, pending: pending.pairs.length, instances: instances.length, warnings: warnings.length });
  return {
    plan: planRef,
    total: pairs.length,
    finished,
    pending,
    instances: instances.length,
    invalidInstances: read.invalid.length,
    warnings,
  };
}

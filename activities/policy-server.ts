import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure, CancelledFailure, Context, log } from '@temporalio/activity';
import * as policyServer from '../lib/policy-server';
import { runDirOnNode } from '../lib/store-sync';
import { reapStaleTrainer } from '../lib/training';
import { readValidationRecords } from '../lib/training/validation';
import { bestValidatedStep } from '../lib/training/validation-choice';
import {
  PolicyServerHeartbeatSchema,
  ServePolicyInputSchema,
  type PolicyServerReady,
  type ServePolicyInput,
} from '../schemas/policy-server';
import { configError, openRunStore, type ActivityDeps } from './kit';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The signal the owner workflow takes (workflows/policy-server.ts). */
export const POLICY_SERVER_READY_SIGNAL = 'policyServerReady';

/**
 * One checkpoint served on the GPU worker (lib/policy-server) for as long as its owner needs it: the
 * activity starts the server, signals the owner workflow `policyServerReady` with the endpoint once a
 * health request names the checkpoint, then heartbeats until it is cancelled (the owner's stage ended, the
 * owner was cancelled or ended: Temporal delivers that through the heartbeat), and stops the server's
 * process group before it returns. A server that dies fails the attempt; the retry reaps whatever the
 * earlier attempt left (its pid record), binds the same port (heartbeat details), so the URL the stage holds
 * stays good, and signals again. A worker killed outright stops heartbeating: the retry on the next worker
 * reaps the orphan on the same host.
 */
export function makeServePolicy(
  deps: Pick<ActivityDeps, 'client' | 'nodeDataDir' | 'env' | 'store'>,
): (input: ServePolicyInput) => Promise<void> {
  return (input) => servePolicy(deps, input);
}

/**
 * `servePolicy` with the worker's deps: the owner is signalled through `deps.client`; with a store it works in
 * `deps.nodeDataDir`; the server runs with the environment the worker read at start (`deps.env`: CUDA, caches).
 */
async function servePolicy(
  deps: Pick<ActivityDeps, 'client' | 'nodeDataDir' | 'env' | 'store'>,
  rawInput: ServePolicyInput,
): Promise<void> {
  const input = ServePolicyInputSchema.parse(rawInput);
  const context = Context.current();
  const beat = () => context.heartbeat(current);
  let current: unknown = context.info.heartbeatDetails;
  beat();
  const keepAlive = setInterval(beat, Math.max(200, (context.info.heartbeatTimeoutMs ?? 30_000) / 3));
  const previous = PolicyServerHeartbeatSchema.safeParse(context.info.heartbeatDetails);
  try {
    const runDir = input.store ? runDirOnNode(input.runDir, input.runId, deps.nodeDataDir) : input.runDir;
    // `best`: the highest validation metric of the run's records (written on the CPU node, in the run's data dir).
    const bestStep = input.bestStep ?? (input.checkpoint === 'best' ? bestValidatedStep(await readValidationRecords(input.runDir)) : null);
    let choice = input.checkpoint;
    if (input.store)
      choice = await policyServer.pullServedCheckpoint(openRunStore(deps, input.store), input.runId, runDir, input.checkpoint, bestStep);
    const checkpoint = await policyServer.resolveServedCheckpoint({ runId: input.runId, runDir }, choice, bestStep);
    const logDir = policyServer.policyServerLogDir(runDir, checkpoint.step);
    const stale = await reapStaleTrainer(policyServer.policyServerFiles(logDir).pidFile, 10_000);
    if (stale.action === 'terminated' || stale.action === 'killed')
      log.warn(`policy server: stopped a server an earlier attempt left running (${stale.action})`, { stale: stale.found });
    // The port is chosen (or taken from the last attempt) and recorded before the server starts, so even a server
    // killed while it loads comes back on the same URL.
    const port = previous.success ? previous.data.port : await policyServer.freePort(input.host);
    current = { port, pid: 0, step: checkpoint.step };
    beat();
    const server = await policyServer.startPolicyServer({
      checkpoint,
      python: input.python,
      projectRoot,
      env: { ...deps.env },
      backend: input.backend,
      logDir,
      host: input.host,
      port,
      readyTimeoutMs: input.readyTimeoutMs,
      signal: context.cancellationSignal,
    });
    current = { port: server.port, pid: server.pid, step: checkpoint.step };
    beat();
    const ready: PolicyServerReady = {
      requestId: input.requestId,
      attempt: context.info.attempt,
      runId: input.runId,
      step: checkpoint.step,
      adapterSha256: checkpoint.adapterSha256,
      baseModel: checkpoint.baseModel,
      model: server.model,
      baseUrl: server.baseUrl,
      backend: server.backend,
      requestLog: server.requestLog,
      trainedWith: checkpoint.trainedWith,
    };
    log.info('policy server: ready', { ...ready });
    const { client } = deps;
    if (!client) throw new Error('policy server: the worker gave this activity no Temporal client to signal its owner with');
    await client.workflow.getHandle(input.ownerWorkflowId).signal(POLICY_SERVER_READY_SIGNAL, ready);
    const exit = await server.exited;
    if (context.cancellationSignal.aborted) throw new CancelledFailure('policy server stopped: its owner no longer needs it');
    throw ApplicationFailure.create({
      type: 'PolicyServerExited',
      message: `the policy server for ${checkpoint.servedName} exited (code ${exit.code}, signal ${exit.signal}); see ${server.stderr}`,
    });
  } catch (error) {
    if (error instanceof policyServer.CheckpointChoiceError) throw configError(error.message);
    if (context.cancellationSignal.aborted && !(error instanceof CancelledFailure))
      throw new CancelledFailure(`policy server stopped: ${(error as Error).message}`);
    throw error;
  } finally {
    clearInterval(keepAlive);
  }
}

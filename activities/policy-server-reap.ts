import { log } from '@temporalio/activity';
import * as policyServer from '../lib/policy-server';
import { runDirOnNode } from '../lib/store-sync';
import { reapStaleTrainer } from '../lib/training';
import { ReapPolicyServerInputSchema, type ReapPolicyServerInput, type ReapPolicyServerOutput } from '../schemas/policy-server';
import type { ActivityDeps } from './kit';

/**
 * Reaps the server of one checkpoint that its serving activity left running (the GPU queue's worker runs it,
 * after the owner's serving scope settled). A worker killed while its server answered leaves `trainer.serve`
 * in a process group of its own: it keeps answering, the stage finishes against it, and the lost attempt is
 * cancelled without a retry, so the retry's reaping in `servePolicy` never runs. A server that stopped on
 * cancellation removed its pid record already: then there is nothing to do.
 */
export function makeReapPolicyServer(
  deps: Pick<ActivityDeps, 'nodeDataDir'>,
): (input: ReapPolicyServerInput) => Promise<ReapPolicyServerOutput> {
  return (input) => reapPolicyServer(deps, input);
}

/** `reapPolicyServer` with the worker's deps: with a store, the server's pid record is under `deps.nodeDataDir`. */
async function reapPolicyServer(deps: Pick<ActivityDeps, 'nodeDataDir'>, rawInput: ReapPolicyServerInput): Promise<ReapPolicyServerOutput> {
  const input = ReapPolicyServerInputSchema.parse(rawInput);
  const runDir = input.store ? runDirOnNode(input.runDir, input.runId, deps.nodeDataDir) : input.runDir;
  const { pidFile } = policyServer.policyServerFiles(policyServer.policyServerLogDir(runDir, input.step));
  const reaped = await reapStaleTrainer(pidFile, 10_000);
  if (reaped.action === 'terminated' || reaped.action === 'killed')
    log.warn(`policy server: stopped the server of step ${input.step} a lost attempt left running (${reaped.action})`, {
      stale: reaped.found,
    });
  else if (reaped.action === 'other-host')
    log.warn(
      `policy server: the pid record of step ${input.step} names host ${reaped.found?.host}, not this one: left alone (only that host can stop it; its next serving attempt of this checkpoint reaps it)`,
    );
  return { action: reaped.action, pid: reaped.found?.pid ?? null };
}

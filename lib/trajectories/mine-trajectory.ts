import type { MinedCandidate, TrajectoryRow, ViewSkipReason } from '../../schemas/mining';
import { messageRole, messageText, messageToolCalls, type ToolCall } from './chat-messages';
import { classifyViewedPath } from './classify-path';
import type { MiningTally } from './mining-tally';
import { followingAssistantIndex, isErrorObservation, toolObservations } from './post-reasoning';
import { readViewCall } from './view-calls';
import { resolveWorkspacePath } from './workspace-path';

type Best = { firstTurnIndex: number; postReasoningTurnIndex: number; tokens: number; viewCount: number };

/**
 * CATM stage 1 on one trajectory (CodeGrep §3.4, App. A.2): every str_replace_editor view whose path is a
 * source file of the row's repository, paired with the next assistant message's content. One assistant turn
 * may view several files: each gets that same following message (one-to-many, Table 4). A file viewed several
 * times keeps its longest post-reasoning in tokens (ties: the earliest), and counts its views.
 *
 * Returns one candidate per distinct path, in order of first view, BEFORE the reasoning-length filter. Skips
 * are counted on `tally`; memory is this trajectory only.
 */
export function mineTrajectory(
  row: TrajectoryRow,
  ordinal: number,
  tally: MiningTally,
  countTokens: (text: string) => number,
): MinedCandidate[] {
  const trajectoryId = row.trajectory_id;
  const messages = row.trajectory;
  const tokensOf = memoizedTurnTokens(messages, countTokens);
  const mining: TrajectoryMining = { row, ordinal, tally };

  const byPath = new Map<string, Best>();
  let malformedMessages = 0;
  for (let turn = 0; turn < messages.length; turn++) {
    const role = messageRole(messages[turn]);
    if (role === null) malformedMessages++;
    if (role !== 'assistant') continue;
    for (const { path, reasoningTurn } of mineAssistantTurn(mining, turn)) {
      tally.viewsMined++;
      const tokens = tokensOf(reasoningTurn);
      const best = byPath.get(path);
      if (best === undefined) {
        byPath.set(path, { firstTurnIndex: turn, postReasoningTurnIndex: reasoningTurn, tokens, viewCount: 1 });
      } else {
        best.viewCount++;
        if (tokens > best.tokens) {
          best.tokens = tokens;
          best.postReasoningTurnIndex = reasoningTurn;
        }
      }
    }
  }
  tally.skipMessages('malformedMessage', malformedMessages, ordinal, trajectoryId, `${malformedMessages} message(s) without a string role`);

  return [...byPath].map(([path, best]) => ({
    trajectoryId,
    instanceId: row.instance_id,
    repo: row.repo,
    path,
    postReasoning: messageText(messages[best.postReasoningTurnIndex]),
    postReasoningTokens: best.tokens,
    viewCount: best.viewCount,
    firstTurnIndex: best.firstTurnIndex,
    postReasoningTurnIndex: best.postReasoningTurnIndex,
  }));
}

/** The trajectory being mined, and where its skips are counted. */
interface TrajectoryMining {
  row: TrajectoryRow;
  ordinal: number;
  tally: MiningTally;
}

/** A message's token count, counted once per message however many views it follows. */
function memoizedTurnTokens(messages: TrajectoryRow['trajectory'], countTokens: (text: string) => number): (turn: number) => number {
  const tokensByTurn = new Map<number, number>();
  return (turn) => {
    let n = tokensByTurn.get(turn);
    if (n === undefined) {
      n = countTokens(messageText(messages[turn]));
      tokensByTurn.set(turn, n);
    }
    return n;
  };
}

/**
 * The source files an assistant turn views, in call order, each with the turn of the reasoning that follows;
 * every other view call is counted on the tally under its skip reason.
 */
function* mineAssistantTurn(mining: TrajectoryMining, turn: number): Generator<MinedView> {
  const { row, ordinal, tally } = mining;
  const { calls, malformed } = messageToolCalls(row.trajectory[turn]);
  if (malformed > 0)
    tally.skipMessages('malformedToolCall', malformed, ordinal, row.trajectory_id, `message ${turn}: tool call without function name`);
  // Both are computed on the turn's first view that needs them, then shared by its other views.
  const lazy: TurnFacts = { observationOf: undefined, reasoningTurn: undefined };
  for (const [position, call] of calls.entries()) {
    const outcome = mineViewCall(mining, turn, call, position, lazy);
    if (outcome === null) continue;
    if ('skip' in outcome) tally.skipView(outcome.skip, ordinal, row.trajectory_id, outcome.detail);
    else yield outcome;
  }
}

interface TurnFacts {
  observationOf: ReturnType<typeof toolObservations> | undefined;
  reasoningTurn: number | undefined;
}

type MinedView = { path: string; reasoningTurn: number };
type SkippedView = { skip: ViewSkipReason; detail: string };

/** One tool call: the source file it views and the reasoning turn after it, why it is skipped, or null when it is no view. */
function mineViewCall(
  { row, tally }: TrajectoryMining,
  turn: number,
  call: ToolCall,
  position: number,
  lazy: TurnFacts,
): MinedView | SkippedView | null {
  const view = readViewCall(call);
  if (view.kind === 'notView') return null;
  tally.viewCalls++;
  const where = `message ${turn}`;
  if (view.kind === 'unreadableArguments') return { skip: 'nonJsonArguments', detail: `${where}: ${view.detail}` };
  if (view.path === undefined) return { skip: 'missingPath', detail: `${where}: view without a path` };
  const resolved = resolveWorkspacePath(view.path, row.repo);
  if (resolved.kind === 'outsideRepo') return { skip: 'outsideRepo', detail: `${where}: ${view.path}` };
  if (resolved.kind === 'repoMismatch') {
    return { skip: 'repoMismatch', detail: `${where}: ${view.path} is not in a checkout of ${row.repo}` };
  }
  lazy.observationOf ??= toolObservations(row.trajectory, turn);
  const observation = lazy.observationOf(call.id, position);
  const kind = classifyViewedPath(view.path, resolved.relativePath, observation);
  if (kind !== 'file') return { skip: kind, detail: `${where}: ${view.path}` };
  if (isErrorObservation(observation)) {
    return { skip: 'errorObservation', detail: `${where}: ${observation!.trim().split('\n').slice(0, 2).join(' ').slice(0, 160)}` };
  }
  lazy.reasoningTurn ??= followingAssistantIndex(row.trajectory, turn);
  if (lazy.reasoningTurn < 0) return { skip: 'noFollowingAssistant', detail: `${where}: ${view.path}` };
  return { path: resolved.relativePath, reasoningTurn: lazy.reasoningTurn };
}

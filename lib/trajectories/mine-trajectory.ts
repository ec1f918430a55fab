import type { MinedCandidate, TrajectoryRow } from '../../schemas/mining';
import { messageRole, messageText, messageToolCalls } from './chat-messages';
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

  const tokensByTurn = new Map<number, number>();
  const tokensOf = (turn: number): number => {
    let n = tokensByTurn.get(turn);
    if (n === undefined) {
      n = countTokens(messageText(messages[turn]));
      tokensByTurn.set(turn, n);
    }
    return n;
  };

  const byPath = new Map<string, Best>();
  let malformedMessages = 0;
  for (let turn = 0; turn < messages.length; turn++) {
    const role = messageRole(messages[turn]);
    if (role === null) malformedMessages++;
    if (role !== 'assistant') continue;
    const { calls, malformed } = messageToolCalls(messages[turn]);
    if (malformed > 0)
      tally.skipMessages('malformedToolCall', malformed, ordinal, trajectoryId, `message ${turn}: tool call without function name`);
    let observationOf: ReturnType<typeof toolObservations> | undefined;
    let reasoningTurn: number | undefined;
    calls.forEach((call, position) => {
      const view = readViewCall(call);
      if (view.kind === 'notView') return;
      tally.viewCalls++;
      const where = `message ${turn}`;
      if (view.kind === 'unreadableArguments') return tally.skipView('nonJsonArguments', ordinal, trajectoryId, `${where}: ${view.detail}`);
      if (view.path === undefined) return tally.skipView('missingPath', ordinal, trajectoryId, `${where}: view without a path`);
      const resolved = resolveWorkspacePath(view.path, row.repo);
      if (resolved.kind === 'outsideRepo') return tally.skipView('outsideRepo', ordinal, trajectoryId, `${where}: ${view.path}`);
      if (resolved.kind === 'repoMismatch') {
        return tally.skipView('repoMismatch', ordinal, trajectoryId, `${where}: ${view.path} is not in a checkout of ${row.repo}`);
      }
      observationOf ??= toolObservations(messages, turn);
      const observation = observationOf(call.id, position);
      const kind = classifyViewedPath(view.path, resolved.relativePath, observation);
      if (kind !== 'file') return tally.skipView(kind, ordinal, trajectoryId, `${where}: ${view.path}`);
      if (isErrorObservation(observation)) {
        return tally.skipView(
          'errorObservation',
          ordinal,
          trajectoryId,
          `${where}: ${observation!.trim().split('\n').slice(0, 2).join(' ').slice(0, 160)}`,
        );
      }
      reasoningTurn ??= followingAssistantIndex(messages, turn);
      if (reasoningTurn < 0) return tally.skipView('noFollowingAssistant', ordinal, trajectoryId, `${where}: ${view.path}`);

      tally.viewsMined++;
      const tokens = tokensOf(reasoningTurn);
      const best = byPath.get(resolved.relativePath);
      if (best === undefined) {
        byPath.set(resolved.relativePath, { firstTurnIndex: turn, postReasoningTurnIndex: reasoningTurn, tokens, viewCount: 1 });
      } else {
        best.viewCount++;
        if (tokens > best.tokens) {
          best.tokens = tokens;
          best.postReasoningTurnIndex = reasoningTurn;
        }
      }
    });
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

import { describe, expect, it } from 'vitest';
import { applyTrainerEvent, initialSegmentState } from './trainer-events';
import { TrainerProtocolError } from './step-lines';

const stepLine = (step: number) =>
  JSON.stringify({
    event: 'step',
    step,
    epoch: 0,
    reward_mean: 0.5,
    reward_std: 0.1,
    reward_components: {},
    turns_mean: 2,
    tool_calls_per_turn_mean: 1.5,
    advantage_scale_mean: 0.6,
    answered_ratio: 0.5,
    hit_turn_limit_ratio: 0,
    masked_ratio: 0,
    completion_len_mean: 12,
    truncated_ratio: 0,
    kl: null,
    loss: 0.2,
    clip_ratio: 0,
    grad_norm: 0.3,
    lr: 1e-3,
    step_time_s: 5,
    rollout_time_s: 1,
    update_time_s: 4,
    rollout_tokens: 24,
    train_tokens: 6000,
    rollout_tokens_per_s: 24,
    train_tokens_per_s: 1500,
    checkpoint: null,
  });
const at = (text: string, line = 1) => ({ text, line, file: 'attempt-01.stdout.jsonl', segment: 1, attempt: 1 });
const target = { targetStep: 3, totalSteps: 10 };

describe('applyTrainerEvent', () => {
  it('follows a segment: start, resume, steps (throttled progress), a checkpoint (progress now), the target, the end', () => {
    const state = initialSegmentState({ step: 1, path: '/c/step-00000001' });
    expect(state).toMatchObject({ step: 1, checkpointStep: 1, checkpoint: '/c/step-00000001' });
    let out = applyTrainerEvent(
      state,
      at(
        '{"event": "start", "step": 1, "total_steps": 10, "device": "cpu", "generator": "hf", "parameters": 7, "trainable_parameters": 1, "instances": 2}',
      ),
      target,
    );
    expect(out).toMatchObject({ heartbeat: false, progress: null, targetReached: false, state: { parameters: 7, device: 'cpu' } });
    out = applyTrainerEvent(out.state, at('{"event": "resumed", "step": 1, "checkpoint": "/c/step-00000001"}'), target);
    expect(out).toMatchObject({ heartbeat: true, progress: null });
    out = applyTrainerEvent(out.state, at(stepLine(2), 3), target);
    expect(out).toMatchObject({
      heartbeat: true,
      progress: 'throttled',
      targetReached: false,
      state: { step: 2, latest: { step: 2, kl: null } },
    });
    out = applyTrainerEvent(out.state, at('{"event": "checkpoint", "step": 2, "path": "/c/step-00000002"}'), target);
    expect(out).toMatchObject({ heartbeat: true, progress: 'now', state: { checkpointStep: 2, checkpoint: '/c/step-00000002' } });
    out = applyTrainerEvent(out.state, at(stepLine(3), 5), target);
    expect(out.targetReached).toBe(true);
    out = applyTrainerEvent(out.state, at('{"event": "stopped", "step": 3, "checkpoint": null}'), target);
    expect(out.state).toMatchObject({ finished: 'stopped', step: 3 });
  });

  it('never stops at the target when the target is the budget (the trainer ends by itself)', () => {
    expect(applyTrainerEvent(initialSegmentState(null), at(stepLine(10)), { targetStep: 10, totalSteps: 10 }).targetReached).toBe(false);
  });

  it('ignores lines that are not the trainer JSON, and refuses a step line that breaks the contract', () => {
    const state = initialSegmentState(null);
    expect(applyTrainerEvent(state, at('loading weights…'), target).state).toBe(state);
    expect(applyTrainerEvent(state, at('{"event": "something-new"}'), target).state).toBe(state);
    expect(() => applyTrainerEvent(state, at(JSON.stringify({ ...JSON.parse(stepLine(1)), loss: 'x' })), target)).toThrow(
      TrainerProtocolError,
    );
  });
});

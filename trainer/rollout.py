"""Batched multi-turn rollouts against the environment server.

All B x G rollouts of a step advance together, turn by turn: each turn is ONE
batched generation over the episodes still running (generate_hf.py: HF
`generate` in memory-bounded sub-batches; generate_vllm.py: colocated vLLM), then ONE /episodes/step call carrying
every episode's text, whose observations are appended to each sequence.

A rollout ends when the server says `done` (answer, no tool call, its turn
limit), when its generation budget is spent (CodeGrep App. A.4: 4096 generated
tokens per rollout; the server is told `truncated`), when the next turn would
not fit in `max_seq_len`, or after `max_turns` turns (a guard in case the
server does not end it). Sampling follows CodeGrep App. A.4: temperature 1.0,
top-p 0.9, top-k 50.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .env_client import EnvClient, Episode, EpisodeOutcome
from .tokens import ChatTokens, Sequence, normalise_messages


class StepAborted(Exception):
    """A stop was requested between two turns; the step's rollouts are discarded."""


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    top_k: int


@dataclass
class Rollout:
    episode: Episode
    sequence: Sequence
    history: list                 # chat messages so far (for rendering observations)
    turns: int = 0
    generated_tokens: int = 0
    done: bool = False
    budget_exhausted: bool = False  # generation budget or context ran out mid-answer
    outcome: Optional[EpisodeOutcome] = None
    assistant_texts: list = field(default_factory=list)


def stop_token_ids(tokenizer, model_generation_config=None) -> list:
    """Tokens that end an assistant turn: <|im_end|>, EOS and the model's own EOS list."""
    from .tokens import end_of_turn_token_id

    ids = [end_of_turn_token_id(tokenizer)]
    for extra in (tokenizer.eos_token_id, getattr(model_generation_config, "eos_token_id", None)):
        for i in (extra if isinstance(extra, (list, tuple)) else [extra]):
            if i is not None and i not in ids:
                ids.append(int(i))
    return ids


# The engines (one file each): generate_hf.py (HF `generate` in memory-bounded
# sub-batches) and generate_vllm.py (colocated vLLM); engines.py picks one.
# Each has generate(prompts, budgets, keys) -> token lists, stop_ids and sync_weights(step).


@dataclass(frozen=True)
class RolloutLimits:
    max_turns: int
    max_new_tokens: int            # per rollout, all turns together
    max_new_tokens_per_turn: int
    max_seq_len: int


def run_rollouts(client: EnvClient, generator, chat: ChatTokens, instance_ids: list, group_size: int,
                 seed: int, limits: RolloutLimits, should_stop: Callable[[], bool]) -> list:
    """Open B x G episodes, play them to the end and close them.

    Returns the rollouts in the server's order (grouped by instance). Raises
    StepAborted (after closing the episodes) when `should_stop()` turns true
    between two turns.
    """
    episodes = client.open(instance_ids, group_size, seed)
    try:
        rollouts = [_start(e, chat) for e in episodes]
        for r in rollouts:
            if len(r.sequence) >= limits.max_seq_len:
                raise ValueError(f"instance {r.episode.instance_id}: the prompt alone is {len(r.sequence)} "
                                 f"tokens, not below max_seq_len {limits.max_seq_len}")
        while True:
            active = [r for r in rollouts if not r.done]
            if not active:
                break
            if should_stop():
                raise StepAborted()
            _play_turn(client, generator, chat, active, limits)
    except BaseException:
        client.close_quietly([e.episode_id for e in episodes])
        raise
    outcomes = client.close([e.episode_id for e in episodes])
    for r in rollouts:
        r.outcome = outcomes[r.episode.episode_id]
    return rollouts


def _start(episode: Episode, chat: ChatTokens) -> Rollout:
    messages = normalise_messages(episode.messages, f"episode {episode.episode_id} messages")
    sequence = Sequence()
    sequence.extend(chat.prompt(messages, episode.tools), trainable=False)
    return Rollout(episode=episode, sequence=sequence, history=messages)


def _play_turn(client: EnvClient, generator, chat: ChatTokens, active: list, limits: RolloutLimits) -> None:
    budgets = [min(limits.max_new_tokens_per_turn, limits.max_new_tokens - r.generated_tokens,
                   limits.max_seq_len - len(r.sequence)) for r in active]
    # A rollout's key names it whichever process or sub-batch plays it (seeded sampling).
    keys = [(r.episode.open_seed, r.episode.index, r.turns) for r in active]
    completions = generator.generate([r.sequence.ids for r in active], budgets, keys)
    stops = set(generator.stop_ids)
    steps, ended = [], []
    for r, tokens, budget in zip(active, completions, budgets):
        ended_turn = bool(tokens) and tokens[-1] in stops
        r.sequence.extend(tokens, trainable=True)
        r.generated_tokens += len(tokens)
        r.turns += 1
        text = chat.tokenizer.decode(tokens[:-1] if ended_turn else tokens, skip_special_tokens=False)
        r.assistant_texts.append(text)
        exhausted = not ended_turn and (r.generated_tokens >= limits.max_new_tokens
                                        or len(r.sequence) >= limits.max_seq_len)
        r.budget_exhausted = exhausted
        ended.append(ended_turn)
        steps.append({"episodeId": r.episode.episode_id, "assistantText": text, "truncated": exhausted})
    results = client.step(steps)
    for r, ended_turn, step in zip(active, ended, steps):
        result = results[r.episode.episode_id]
        if result.done or r.budget_exhausted or r.turns >= limits.max_turns:
            r.done = True
            continue
        observations = normalise_messages(result.observations, f"episode {r.episode.episode_id} observations")
        block = chat.observation_block(r.history, r.episode.tools, step["assistantText"], observations)
        # A turn cut by the per-turn cap never produced its end-of-turn token:
        # add it (untrained) so the next turn sees a well-formed conversation.
        closing = [] if ended_turn else [chat.end_of_turn_id]
        if len(r.sequence) + len(closing) + len(block) >= limits.max_seq_len:
            r.done = True  # no room for another turn
            continue
        r.sequence.extend(closing + block, trainable=False)
        r.history = r.history + [{"role": "assistant", "content": step["assistantText"]}] + observations

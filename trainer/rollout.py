"""Batched multi-turn rollouts against the environment server.

All B x G rollouts of a step advance together, turn by turn: each turn is ONE
batched generation over the episodes still running (generate_hf.py: HF
`generate` in memory-bounded sub-batches; generate_vllm.py: colocated vLLM), then ONE /episodes/step call carrying
every episode's text, whose observations are appended to each sequence.

A rollout ends when the server says `done` (answer, no tool call, its turn
limit), when a turn is cut or its generation budget is spent (CodeGrep App.
A.4: 4096 generated tokens per rollout; the server is told `truncated` and
runs no tools), when the next turn would not have room for one token in
`max_seq_len`, or after `max_turns` turns (a guard in case the server does not
end it). No generation is ever asked for 0 tokens, and no empty turn is ever
sent, so the server's turn count T (and c-bar = calls / T, CodeGrep Eq. 3) only
counts turns the policy really took. Sampling: the recipe's temperature, top-p
and top-k, nothing else (the model's generation_config is neutralised).
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
    history: list                 # chat messages so far (for logs and tests; never re-rendered)
    turns: int = 0
    generated_tokens: int = 0
    done: bool = False
    budget_exhausted: bool = False  # a turn was cut, or the budget/context left no room for another
    outcome: Optional[EpisodeOutcome] = None
    assistant_texts: list = field(default_factory=list)
    policy_version: int = 0         # optimizer steps taken by the weights that sampled it (pipeline.py)


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
# Each has generate(prompts, budgets, keys) -> [Completion], stop_ids and sync_weights(step).


@dataclass
class Completion:
    """One row of a batched generation: the sampled token ids and, when the
    sampler reports them, log pi_sampler(token) of each (log-softmax of the
    logits divided by the temperature, over the full vocabulary: the quantity
    the trainer computes, so the two can be compared token by token).

    A generator's `generate(prompts, budgets)` returns one Completion (or a
    bare list of token ids, meaning no log-probs) per prompt."""
    tokens: list
    logprobs: Optional[list] = None


def as_completion(item) -> Completion:
    if isinstance(item, Completion):
        return item
    return Completion(tokens=list(item), logprobs=None)


def neutral_generation_config(model, stop_ids: list, pad_token_id: int):
    """Replace the model's own generation_config (a checkpoint's
    generation_config.json may add a repetition penalty, its own top-k/top-p,
    forced tokens, ...) with one that does nothing, so only the trainer's
    sampling settings apply; return the settings that were dropped."""
    from transformers import GenerationConfig

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    own = getattr(base, "generation_config", None)
    neutral = GenerationConfig(eos_token_id=list(stop_ids), pad_token_id=pad_token_id, bos_token_id=None)
    dropped = {}
    if own is not None:
        reference = GenerationConfig().to_dict()
        for key, value in own.to_dict().items():
            if key in ("eos_token_id", "pad_token_id", "bos_token_id", "transformers_version", "_from_model_config"):
                continue
            if value is not None and value != reference.get(key):
                dropped[key] = value
    base.generation_config = neutral
    return dropped




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
        # A generator spread over several ranks (vLLM tensor parallelism,
        # generate_vllm.py) needs every rank of its group in every turn, with
        # no rows if this rank is done; they also agree on stopping.
        lockstep = getattr(generator, "lockstep", None)
        while True:
            active = [r for r in rollouts if not r.done]
            stopping = should_stop()
            if lockstep is not None:
                playing, stopping = lockstep(bool(active), stopping)
            else:
                playing = bool(active)
            if not playing:
                break
            if stopping:
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


def turn_budget(rollout: Rollout, limits: RolloutLimits) -> int:
    """Tokens the rollout's next turn may generate: the per-turn cap, what is
    left of the rollout's budget, and what is left of the context."""
    return min(limits.max_new_tokens_per_turn, limits.max_new_tokens - rollout.generated_tokens,
               limits.max_seq_len - len(rollout.sequence))


def _play_turn(client: EnvClient, generator, chat: ChatTokens, active: list, limits: RolloutLimits) -> None:
    budgets = [turn_budget(r, limits) for r in active]
    # run_rollouts only keeps a rollout active while its next turn has room
    # for at least one token: no generation is ever asked for 0 tokens (HF
    # raises when every row is at 0, vLLM rejects max_tokens=0).
    if budgets and min(budgets) < 1:
        raise RuntimeError(f"a rollout was left active with no generation budget: {budgets}")
    # A rollout's key names it whichever process or sub-batch plays it (seeded sampling).
    keys = [(r.episode.open_seed, r.episode.index, r.turns) for r in active]
    completions = [as_completion(c) for c in generator.generate([r.sequence.ids for r in active], budgets, keys)]
    stops = set(generator.stop_ids)
    steps = []
    for r, completion, budget in zip(active, completions, budgets):
        tokens = completion.tokens
        if not tokens or len(tokens) > budget:
            raise RuntimeError(f"generator returned {len(tokens)} tokens for a turn budget of {budget}")
        ended_turn = tokens[-1] in stops
        r.sequence.extend(tokens, trainable=True, logprobs=completion.logprobs)
        r.generated_tokens += len(tokens)
        r.turns += 1
        text = chat.tokenizer.decode(tokens[:-1] if ended_turn else tokens, skip_special_tokens=False)
        r.assistant_texts.append(text)
        # Truncated: the turn was cut before its end-of-turn token (by the
        # per-turn cap, the rollout's budget or the context), or it spent the
        # rollout's last generation token so no next turn can follow. Either
        # way the server runs no tools and ends the episode (ENV_PROTOCOL.md);
        # half-written tool calls are never executed as if finished.
        r.budget_exhausted = (not ended_turn) or r.generated_tokens >= limits.max_new_tokens
        steps.append({"episodeId": r.episode.episode_id, "assistantText": text, "truncated": r.budget_exhausted})
    results = client.step(steps) if steps else {}
    for r in active:
        result = results[r.episode.episode_id]
        if result.done or r.budget_exhausted or r.turns >= limits.max_turns:
            r.done = True
            continue
        observations = normalise_messages(result.observations, f"episode {r.episode.episode_id} observations")
        block = chat.observation_block(observations)
        if len(r.sequence) + len(block) + 1 > limits.max_seq_len:
            # No room for even one more generated token: end here (the server
            # is closed without another step) instead of a zero-budget turn.
            r.done = True
            r.budget_exhausted = True
            continue
        r.sequence.extend(block, trainable=False)
        r.history = r.history + [{"role": "assistant", "content": r.assistant_texts[-1]}] + observations

"""Batched multi-turn rollouts against the environment server.

All B x G rollouts of a step advance together, turn by turn: each turn is ONE
batched generation over the episodes still running (HF `generate` with left
padding, or vLLM when it is installed), then ONE /episodes/step call carrying
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

import os
import shutil
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

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


def stop_token_ids(tokenizer, model_generation_config=None) -> list:
    """Tokens that end an assistant turn: <|im_end|>, EOS and the model's own EOS list."""
    from .tokens import end_of_turn_token_id

    ids = [end_of_turn_token_id(tokenizer)]
    for extra in (tokenizer.eos_token_id, getattr(model_generation_config, "eos_token_id", None)):
        for i in (extra if isinstance(extra, (list, tuple)) else [extra]):
            if i is not None and i not in ids:
                ids.append(int(i))
    return ids


def _cut(tokens: list, budget: int, stops: set) -> list:
    tokens = tokens[:budget]
    for i, t in enumerate(tokens):
        if t in stops:
            return tokens[:i + 1]
    return tokens


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


class SamplerLogprobs:
    """A logits processor that records log-softmax(logits / T) of each sampled
    token and then applies exactly the configured sampling settings
    (temperature, top-k, top-p) and nothing else.

    HF calls it once per generated position with the raw logits; the token
    sampled from the previous call is the last column of `input_ids`, so only
    one [batch, vocab] row of log-probs is kept at a time."""

    def __init__(self, sampling: Sampling):
        from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                            TopPLogitsWarper)
        self.temperature = sampling.temperature
        self.warpers = [TemperatureLogitsWarper(sampling.temperature)]
        if sampling.top_k > 0:
            self.warpers.append(TopKLogitsWarper(sampling.top_k))
        if sampling.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(sampling.top_p))
        self.previous = None
        self.recorded = []

    def __call__(self, input_ids, scores):
        if self.previous is not None:
            self.recorded.append(self.previous.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        return scores

    def finish(self, last_tokens) -> list:
        """[batch, generated] log-probs, given the tokens sampled at the last position."""
        if self.previous is not None:
            self.recorded.append(self.previous.gather(-1, last_tokens[:, None].to(self.previous.device)).squeeze(-1))
        return torch.stack(self.recorded, dim=1).tolist() if self.recorded else []


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


class HFGenerator:
    """One batched `model.generate` call per turn over the active episodes.

    The model's generation_config is neutralised first (`neutral_generation_config`)
    and the sampling chain is built here (SamplerLogprobs), so HF applies no
    setting the trainer was not configured with, and every sampled token's
    log-prob under the sampler is recorded."""

    name = "hf"

    def __init__(self, model, pad_token_id: int, stop_ids: list, sampling: Sampling, device):
        self.model = model
        self.pad_token_id = pad_token_id
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        self.device = device
        self.ignored_generation_config = neutral_generation_config(model, self.stop_ids, pad_token_id)

    def sync_weights(self, step: int) -> None:
        """The HF path samples from the training model itself: nothing to sync."""

    @torch.no_grad()
    def generate(self, prompts: list, budgets: list) -> list:
        if not prompts or min(budgets) < 1:
            raise ValueError(f"generate needs prompts and budgets >= 1, got budgets {budgets}")
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: prompts end at the same column
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt):] = 1
        recorder = SamplerLogprobs(self.sampling)
        was_training = self.model.training
        self.model.eval()
        try:
            from transformers import LogitsProcessorList

            # temperature 1 / top-k 0 / top-p 1 keep HF's own warpers out: the
            # recorder applies the configured ones after recording.
            output = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=max(budgets),
                eos_token_id=self.stop_ids, pad_token_id=self.pad_token_id, use_cache=True,
                logits_processor=LogitsProcessorList([recorder]))
        finally:
            self.model.train(was_training)
        new_tokens = output[:, width:]
        logprobs = recorder.finish(new_tokens[:, -1]) if new_tokens.shape[1] else [[] for _ in prompts]
        stops = set(self.stop_ids)
        completions = []
        for tokens, lps, budget in zip(new_tokens.tolist(), logprobs, budgets):
            kept = _cut(tokens, budget, stops)
            completions.append(Completion(tokens=kept, logprobs=lps[:len(kept)]))
        return completions


class VllmGenerator:
    """vLLM colocated with training (CodeGrep App. A.4): the current LoRA adapter
    is saved after every update and passed to vLLM as a new LoRARequest."""

    name = "vllm"

    def __init__(self, model_path: str, policy, lora_rank: int, stop_ids: list, sampling: Sampling,
                 max_seq_len: int, seed: int, gpu_memory_utilization: float, prefix_caching: bool,
                 adapter_dir: str):
        from vllm import LLM

        self.policy = policy
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        self.seed = seed
        self.adapter_dir = adapter_dir
        self.lora_request = None
        engine = dict(model=model_path, enable_lora=True, max_lora_rank=lora_rank, max_loras=1,
                      gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_seq_len,
                      enable_prefix_caching=prefix_caching, seed=seed, dtype="bfloat16")
        try:
            # "vllm": ignore the model's generation_config.json (its repetition
            # penalty, top-k, ...); only the trainer's SamplingParams apply.
            self.llm = LLM(**engine, generation_config="vllm")
        except TypeError:  # a vLLM without the option never reads the model's defaults
            self.llm = LLM(**engine)

    def sync_weights(self, step: int) -> None:
        from vllm.lora.request import LoRARequest

        path = os.path.join(self.adapter_dir, f"step-{step}")
        self.policy.save_pretrained(path)
        previous, self.lora_request = self.lora_request, LoRARequest(f"policy-step-{step}", step + 1, path)
        # A fresh id per step: vLLM never serves a stale cached adapter, and
        # with max_loras=1 it evicts the previous one on first use of the new.
        if previous is not None:
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    def generate(self, prompts: list, budgets: list) -> list:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not prompts or min(budgets) < 1:
            raise ValueError(f"generate needs prompts and budgets >= 1, got budgets {budgets}")
        # Per-request seeds drawn from torch's RNG keep a resumed run's samples
        # tied to the checkpointed RNG state (vLLM's kernels may still differ).
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),)).tolist()
        # vLLM reports log-probs of the raw logits (before temperature), which
        # are the trainer's quantity only at temperature 1 (both papers' setting).
        want_logprobs = self.sampling.temperature == 1.0
        params = [SamplingParams(temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                 top_k=self.sampling.top_k if self.sampling.top_k > 0 else -1,
                                 repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                                 min_p=0.0, max_tokens=budget,
                                 seed=seed, stop_token_ids=self.stop_ids, skip_special_tokens=False,
                                 logprobs=0 if want_logprobs else None)
                  for budget, seed in zip(budgets, seeds)]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=self.lora_request, use_tqdm=False)
        stops = set(self.stop_ids)
        completions = []
        for o, budget in zip(outputs, budgets):
            sample = o.outputs[0]
            tokens = _cut(list(sample.token_ids), budget, stops)
            logprobs = None
            if want_logprobs and sample.logprobs is not None:
                logprobs = [float(step[t].logprob) for step, t in zip(sample.logprobs, tokens)]
            completions.append(Completion(tokens=tokens, logprobs=logprobs))
        return completions


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
    if min(budgets) < 1:
        raise RuntimeError(f"a rollout was left active with no generation budget: {budgets}")
    completions = [as_completion(c) for c in generator.generate([r.sequence.ids for r in active], budgets)]
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
    results = client.step(steps)
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

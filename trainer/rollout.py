"""Batched multi-turn rollouts against the environment server.

All B x G rollouts of a step advance together, turn by turn: each turn is ONE
batched generation over the episodes still running (HF `generate` with left
padding, or vLLM when it is installed), then ONE /episodes/step call carrying
every episode's text, whose observations are appended to each sequence.

A rollout ends when the server says `done` (answer, no tool call, its turn
limit), when its generation budget is spent (CodeGrep App. A.4: 4096 generated
tokens per rollout; the server is told `truncated`), when the next turn would
not fit in `max_seq_len`, or after `max_turns` turns (a guard in case the
server does not end it). Sampling follows CodeGrep App. A.4: temperature 1.0,
top-p 0.9, top-k 50.
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


def _cut(tokens: list, budget: int, stops: set) -> list:
    tokens = tokens[:budget]
    for i, t in enumerate(tokens):
        if t in stops:
            return tokens[:i + 1]
    return tokens


class HFGenerator:
    """One batched `model.generate` call per turn over the active episodes."""

    name = "hf"

    def __init__(self, model, pad_token_id: int, stop_ids: list, sampling: Sampling, device):
        self.model = model
        self.pad_token_id = pad_token_id
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        self.device = device

    def sync_weights(self, step: int) -> None:
        """The HF path samples from the training model itself: nothing to sync."""

    @torch.no_grad()
    def generate(self, prompts: list, budgets: list) -> list:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: prompts end at the same column
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt):] = 1
        was_training = self.model.training
        self.model.eval()
        try:
            output = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                do_sample=True, temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                top_k=self.sampling.top_k, max_new_tokens=max(budgets), eos_token_id=self.stop_ids,
                pad_token_id=self.pad_token_id, use_cache=True)
        finally:
            self.model.train(was_training)
        new_tokens = output[:, width:].tolist()
        stops = set(self.stop_ids)
        return [_cut(tokens, budget, stops) for tokens, budget in zip(new_tokens, budgets)]


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
        self.llm = LLM(model=model_path, enable_lora=True, max_lora_rank=lora_rank, max_loras=1,
                       gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_seq_len,
                       enable_prefix_caching=prefix_caching, seed=seed, dtype="bfloat16")

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

        # Per-request seeds drawn from torch's RNG keep a resumed run's samples
        # tied to the checkpointed RNG state (vLLM's kernels may still differ).
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),)).tolist()
        params = [SamplingParams(temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                 top_k=self.sampling.top_k, max_tokens=budget, seed=seed,
                                 stop_token_ids=self.stop_ids, skip_special_tokens=False)
                  for budget, seed in zip(budgets, seeds)]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=self.lora_request, use_tqdm=False)
        stops = set(self.stop_ids)
        return [_cut(list(o.outputs[0].token_ids), budget, stops) for o, budget in zip(outputs, budgets)]


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
    completions = generator.generate([r.sequence.ids for r in active], budgets)
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

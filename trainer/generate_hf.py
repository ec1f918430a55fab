"""The Hugging Face rollout engine: `model.generate` in memory-bounded sub-batches.

One turn of B x G rollouts at the papers' shape (64 x 8 = 512 rows, contexts
up to 32K tokens) does not fit one left-padded `generate` call: its KV cache
alone is rows x (longest prompt + new tokens) x (2 x layers x kv_heads x
head_dim x bytes), about 340 GB at turn 1 for Qwen3-0.6B. So the rows of a
turn are sorted by length and packed greedily into sub-batches whose padded
KV footprint, rows x (longest prompt + largest budget), stays within
`token_budget` tokens; each sub-batch is one `generate` call, and its cache
is freed before the next starts.

Sampling is per rollout, not per batch: every row draws its uniforms from a
generator seeded by its key (the /episodes/open seed, the episode's index in
that answer, the turn), and picks its token by inverse-CDF over the
temperature / top-k / top-p distribution (CodeGrep App. A.4: 1.0, 50, 0.9).
A rollout therefore samples the same tokens whichever sub-batch, process
(trainer/distributed.py) or resumed run plays it, up to floating-point
differences of the padded batch shapes.

The KV cache is not carried across turns: between two turns every rollout
grows by a different observation block, and transformers' cache cannot be
re-padded per row, so each turn re-encodes its prompt (prefill is one
forward pass per sub-batch; the decode steps dominate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

import torch

from .rollout import Completion, neutral_generation_config

# Fraction of the free accelerator memory (after the model is loaded) that an
# automatic token budget gives to one generate call's KV cache; the rest is
# headroom for prefill activations and the allocator.
AUTO_BUDGET_MEMORY_FRACTION = 0.5
# CPU: no device memory to measure; enough for the tests and the CPU benchmark.
CPU_DEFAULT_TOKEN_BUDGET = 65536


def kv_bytes_per_token(model_config, dtype: torch.dtype) -> int:
    """Bytes of KV cache one token costs: keys and values of every layer."""
    heads = getattr(model_config, "num_key_value_heads", None) or model_config.num_attention_heads
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    return 2 * model_config.num_hidden_layers * heads * head_dim * torch.finfo(dtype).bits // 8


def auto_token_budget(model, device) -> int:
    """A token budget from the free memory of `device` (a fixed one on CPU)."""
    if device.type != "cuda":
        return CPU_DEFAULT_TOKEN_BUDGET
    free, _total = torch.cuda.mem_get_info(device)
    per_token = kv_bytes_per_token(model.config, next(model.parameters()).dtype)
    return max(1, int(free * AUTO_BUDGET_MEMORY_FRACTION // per_token))


def plan_sub_batches(prompt_lengths: list, budgets: list, token_budget: int) -> list:
    """Row indices per sub-batch: rows sorted by prompt length (least padding),
    packed while rows x (longest prompt + largest budget) <= token_budget.

    A single row larger than the budget cannot be split and is refused: the
    caller sets token_budget >= max_seq_len so that never happens.
    """
    order = sorted(range(len(prompt_lengths)), key=lambda i: (prompt_lengths[i], budgets[i]))
    batches, current, width, new = [], [], 0, 0
    for i in order:
        need = prompt_lengths[i] + budgets[i]
        if need > token_budget:
            raise ValueError(f"one rollout needs {need} KV tokens (prompt {prompt_lengths[i]} + budget {budgets[i]}), "
                             f"more than the generation token budget {token_budget}; raise hf_generation_tokens "
                             "to at least max_seq_len")
        w, n = max(width, prompt_lengths[i]), max(new, budgets[i])
        if current and (len(current) + 1) * (w + n) > token_budget:
            batches.append(current)
            current, w, n = [], prompt_lengths[i], budgets[i]
        current.append(i)
        width, new = w, n
    if current:
        batches.append(current)
    return batches


def row_seed(key) -> int:
    """A 63-bit seed from a row key such as (open seed, episode index, turn)."""
    digest = hashlib.sha256(repr(tuple(key)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def filtered_logprobs(scores: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """log-probs after temperature, top-k, then top-p (HF's order); filtered-out tokens are -inf."""
    logits = scores.float() / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (the first token always).
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.log_softmax(logits, dim=-1)


class RowSampler:
    """A logits processor that samples each row from its own uniforms and
    forces `generate` (run greedy) to take that token."""

    def __init__(self, uniforms: torch.Tensor, prompt_width: int, sampling):
        self.uniforms = uniforms          # [rows, max_new_tokens], one per decode position
        self.prompt_width = prompt_width
        self.sampling = sampling
        self.chosen_logprobs = []         # per position: [rows] log-prob of the chosen token

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        position = input_ids.shape[1] - self.prompt_width
        logprobs = filtered_logprobs(scores, self.sampling.temperature, self.sampling.top_k, self.sampling.top_p)
        cdf = logprobs.exp().cumsum(dim=-1)
        # u > 0, so the first CDF entry >= u is a token with positive probability.
        u = self.uniforms[:, position:position + 1].to(cdf.device).clamp(min=1e-7) * cdf[:, -1:]
        chosen = torch.searchsorted(cdf, u).clamp(max=cdf.shape[-1] - 1)
        # The sampler's log-prob as the trainer computes it: log-softmax(logits / T)
        # over the full vocabulary (top-k / top-p only decide which token is drawn).
        full = torch.log_softmax(scores.float() / self.sampling.temperature, dim=-1)
        self.chosen_logprobs.append(full.gather(-1, chosen).squeeze(-1).cpu())
        forced = torch.full_like(scores, float("-inf"))
        return forced.scatter(-1, chosen, 0.0)


@dataclass
class GenerateCall:
    """One `generate` call, for tests and the benchmark."""
    rows: int
    kv_tokens: int  # rows x (prompt width + max new tokens): the padded KV footprint


class HFGenerator:
    """Rollout engine on the training model itself (nothing to sync after an update)."""

    name = "hf"

    def __init__(self, model, pad_token_id: int, stop_ids: list, sampling, device, *,
                 token_budget: Optional[int] = None, greedy: bool = False):
        self.model = model
        self.pad_token_id = pad_token_id
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        self.device = device
        self.token_budget = token_budget or auto_token_budget(model, device)
        self.greedy = greedy
        self.generate_calls: list = []
        # Only the trainer's sampling settings apply (a checkpoint's generation_config is dropped).
        self.ignored_generation_config = neutral_generation_config(model, self.stop_ids, pad_token_id)

    def sync_weights(self, step: int) -> None:
        """The HF path samples from the training model itself: nothing to sync."""

    def describe(self) -> dict:
        return {"engine": self.name, "token_budget": self.token_budget, "greedy": self.greedy}

    @torch.no_grad()
    def generate(self, prompts: list, budgets: list, keys: Optional[list] = None) -> list:
        """One Completion per prompt: the sampled tokens and, unless greedy, each one's
        log-softmax(logits / T) over the full vocabulary (the trainer's quantity)."""
        if not prompts or min(budgets) < 1:
            raise ValueError(f"generate needs prompts and budgets >= 1, got budgets {budgets}")
        if keys is None:  # no stable names: draw row seeds from torch's (checkpointed) RNG
            keys = [(int(s),) for s in torch.randint(0, 2**62, (len(prompts),)).tolist()]
        outputs, logprobs = [None] * len(prompts), [None] * len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            for rows in plan_sub_batches([len(p) for p in prompts], budgets, self.token_budget):
                tokens, lps = self._generate_rows([prompts[i] for i in rows], [budgets[i] for i in rows],
                                                  [keys[i] for i in rows])
                for i, t, lp in zip(rows, tokens, lps):
                    outputs[i], logprobs[i] = t, lp
        finally:
            self.model.train(was_training)
        return [Completion(tokens=t, logprobs=lp) for t, lp in zip(outputs, logprobs)]

    def _generate_rows(self, prompts: list, budgets: list, keys: list) -> tuple:
        width, max_new = max(len(p) for p in prompts), max(budgets)
        self.generate_calls.append(GenerateCall(rows=len(prompts), kv_tokens=len(prompts) * (width + max_new)))
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: prompts end at the same column
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt):] = 1
        sampler = None
        extra = {}
        if not self.greedy:
            uniforms = torch.stack([torch.rand(max_new, generator=torch.Generator().manual_seed(row_seed(k)),
                                               dtype=torch.float64) for k in keys]).float()
            sampler = RowSampler(uniforms, width, self.sampling)
            from transformers import LogitsProcessorList
            extra["logits_processor"] = LogitsProcessorList([sampler])
        output = self.model.generate(
            input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), do_sample=False,
            max_new_tokens=max_new, eos_token_id=self.stop_ids, pad_token_id=self.pad_token_id, use_cache=True,
            temperature=None, top_p=None, top_k=None, **extra)
        new_tokens = output[:, width:].tolist()
        stops = set(self.stop_ids)
        results, lps = [], []
        for row, (tokens, budget) in enumerate(zip(new_tokens, budgets)):
            cut = cut_at_stop(tokens, budget, stops)
            results.append(cut)
            lps.append([float(sampler.chosen_logprobs[p][row]) for p in range(len(cut))] if sampler else None)
        return results, lps


def cut_at_stop(tokens: list, budget: int, stops: set) -> list:
    """The tokens up to and including the first stop token, at most `budget` of them."""
    tokens = tokens[:budget]
    for i, t in enumerate(tokens):
        if t in stops:
            return tokens[:i + 1]
    return tokens

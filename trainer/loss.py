"""Group-relative advantages and the GRPO / GSPO / Dr.GRPO policy losses.

All three are critic-free: a prompt's G rollouts form a group and each
rollout's advantage is its reward relative to the group (CodeScout App. E
compares exactly these recipes). They differ in three switches:

| algorithm | importance ratio              | clip (low/high)   | std norm | per-sequence reduction        |
| --------- | ----------------------------- | ----------------- | -------- | ----------------------------- |
| grpo      | per token                     | 0.2 / 0.2         | yes      | mean over the sequence tokens |
| gspo      | per sequence, length-normed   | 3e-4 / 4e-4       | no       | one term per sequence         |
| dr_grpo   | per token                     | 0.2 / 0.2         | no       | token sum / constant budget   |

The clip ranges and std switches are read from lib/recipes/presets.json
(`algorithms`, each with its source); the KL coefficient is a recipe's choice
(CodeGrep App. A.4: 0.02; CodeScout §3.4: none) and comes with the recipe.
The KL estimator is DeepSeekMath's k3. GSPO: CodeScout §3.4 Eq. 2-4
(s_i = exp(mean_t log ratio)); Dr.GRPO: CodeScout App. E (per-sequence token
sum divided by the generation budget).

Truncated importance sampling (optional, `is_weights`): each token's
policy-gradient term (GSPO: each sequence's) is multiplied by a detached
min(pi_old / pi_sampler, cap), correcting for the sampler's distribution
differing from the trainer's (Yao et al. 2025).

On top of any recipe, CodeGrep v2/v3 multiply each rollout's advantage by
s(c̄) = sqrt(min(c̄/4, 1)) (CodeGrep §3.5 Eq. 6-7). The environment computes
s(c̄) (it owns the rewards) and sends it as `advantageScale`; here it is only
applied, after normalisation, as Eq. 6 says: A_i^v2 = A_i * s(c̄_i).

Every loss returns one value per sequence; the caller sums those over the
whole rollout batch and divides by the number of rollouts, so micro-batching
and gradient accumulation give exactly the full-batch gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .recipes import load_presets


@dataclass(frozen=True)
class LossSettings:
    algorithm: str
    clip_low: float
    clip_high: float
    kl_beta: float
    normalize_advantage_std: bool
    # Dr.GRPO's constant normaliser: the rollout's generation budget.
    length_normaliser: float


# Each algorithm's loss shape, from lib/recipes/presets.json (see the table
# above); kl_beta defaults to 0 here because beta belongs to the recipe.
DEFAULTS = {name: {**{k: v["value"] for k, v in shape.items()}, "kl_beta": 0.0}
            for name, shape in load_presets()["algorithms"].items()}

# Added to the group std before dividing, as in TRL / ms-swift (which CodeGrep
# trained with): a group whose rewards are all equal gets advantage 0, not NaN.
STD_EPSILON = 1e-4


def loss_settings(algorithm: str, length_normaliser: float, *, clip_low=None, clip_high=None,
                  kl_beta=None, normalize_advantage_std=None) -> LossSettings:
    """The recipe's defaults with any explicit overrides applied."""
    if algorithm not in DEFAULTS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(DEFAULTS)}")
    d = DEFAULTS[algorithm]
    pick = lambda override, name: d[name] if override is None else override  # noqa: E731
    return LossSettings(
        algorithm=algorithm,
        clip_low=float(pick(clip_low, "clip_low")),
        clip_high=float(pick(clip_high, "clip_high")),
        kl_beta=float(pick(kl_beta, "kl_beta")),
        normalize_advantage_std=bool(pick(normalize_advantage_std, "normalize_advantage_std")),
        length_normaliser=float(length_normaliser),
    )


def group_advantages(rewards: torch.Tensor, normalize_std: bool,
                     scales: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Advantages for rewards shaped [groups, group_size].

    A_i = r_i - mean(group), divided by (std(group) + 1e-4) when normalize_std
    (sample std, unbiased, as TRL / ms-swift), then multiplied by the
    per-rollout scale s(c̄_i) when given (CodeGrep Eq. 6).
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be [groups, group_size>=2], got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.float64)
    advantages = rewards - rewards.mean(dim=1, keepdim=True)
    if normalize_std:
        advantages = advantages / (rewards.std(dim=1, keepdim=True, unbiased=True) + STD_EPSILON)
    if scales is not None:
        if scales.shape != rewards.shape:
            raise ValueError(f"advantage scales shape {tuple(scales.shape)} != rewards shape {tuple(rewards.shape)}")
        advantages = advantages * scales.to(torch.float64)
    return advantages.to(torch.float32)


def kl_k3(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi || ref) estimate exp(ref - logp) - (ref - logp) - 1 (>= 0)."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1.0


@dataclass
class LossOutput:
    per_sequence: torch.Tensor  # [batch] loss of each sequence (already reduced over its tokens)
    clipped: torch.Tensor       # [batch] number of clipped units (tokens, or 1/0 for a sequence)
    clip_units: torch.Tensor    # [batch] number of units that could clip (tokens, or 1)
    kl_sum: torch.Tensor        # [batch] sum over the sequence's tokens of the k3 KL (0 if no ref)


def truncated_is_weights(old_logps: torch.Tensor, sampler_logps: torch.Tensor, mask: torch.Tensor,
                         cap: float, per_sequence: bool) -> torch.Tensor:
    """min(pi_old / pi_sampler, cap), detached: [batch, tokens], or [batch] for
    a sequence-level ratio (GSPO: exp of the mean token log-ratio)."""
    log_ratio = ((old_logps - sampler_logps) * mask).detach()
    if per_sequence:
        log_ratio = log_ratio.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return torch.exp(log_ratio).clamp(max=cap)


def policy_loss(logps: torch.Tensor, old_logps: torch.Tensor, ref_logps: Optional[torch.Tensor],
                mask: torch.Tensor, advantages: torch.Tensor, settings: LossSettings,
                is_weights: Optional[torch.Tensor] = None) -> LossOutput:
    """Per-sequence policy loss for one micro-batch.

    logps, old_logps, ref_logps, mask: [batch, tokens] (mask 1 = a token the
    policy generated; every other position is ignored). advantages: [batch].
    is_weights: truncated importance-sampling weights ([batch, tokens], or
    [batch] for GSPO), or None. A sequence with no masked-in token contributes 0.
    """
    mask = mask.to(logps.dtype)
    n_tokens = mask.sum(dim=1)
    safe_tokens = n_tokens.clamp(min=1.0)
    adv = advantages.to(logps.dtype)
    log_ratio = (logps - old_logps) * mask
    lo, hi = 1.0 - settings.clip_low, 1.0 + settings.clip_high

    if ref_logps is not None:
        kl_tokens = kl_k3(logps, ref_logps) * mask
    else:
        kl_tokens = torch.zeros_like(logps)
    kl_sum = kl_tokens.sum(dim=1)

    if settings.algorithm == "gspo":
        # CodeScout Eq. 3: s_i = exp((1/|y_i|) sum_t log(pi / pi_old)).
        seq_ratio = torch.exp(log_ratio.sum(dim=1) / safe_tokens)
        unclipped = seq_ratio * adv
        clipped_obj = seq_ratio.clamp(lo, hi) * adv
        per_seq = -torch.minimum(unclipped, clipped_obj)
        if is_weights is not None:
            per_seq = per_seq * is_weights
        if settings.kl_beta > 0:
            per_seq = per_seq + settings.kl_beta * kl_sum / safe_tokens
        clipped = (clipped_obj < unclipped).to(logps.dtype)
        units = (n_tokens > 0).to(logps.dtype)
        per_seq = per_seq * units
        return LossOutput(per_seq, clipped * units, units, kl_sum.detach())

    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv[:, None]
    clipped_obj = ratio.clamp(lo, hi) * adv[:, None]
    surrogate = -torch.minimum(unclipped, clipped_obj)
    if is_weights is not None:
        surrogate = surrogate * is_weights
    per_token = surrogate + settings.kl_beta * kl_tokens
    per_token = per_token * mask
    clipped = ((clipped_obj < unclipped).to(logps.dtype) * mask).sum(dim=1)
    if settings.algorithm == "grpo":
        per_seq = per_token.sum(dim=1) / safe_tokens
    elif settings.algorithm == "dr_grpo":
        per_seq = per_token.sum(dim=1) / settings.length_normaliser
    else:
        raise ValueError(f"unknown algorithm {settings.algorithm!r}")
    return LossOutput(per_seq, clipped, n_tokens, kl_sum.detach())

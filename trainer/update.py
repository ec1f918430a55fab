"""One policy update from a batch of finished rollouts.

The rollouts' sequences are cut into micro-batches of at most
`micro_batch_tokens` padded tokens. Each sequence's loss is divided by the
number of rollouts in its mini-batch, so the accumulated gradient equals the
gradient of the mean loss over all rollouts regardless of micro-batching.
Rollouts whose loss is masked (CodeScout §3.4) still count in that
denominator: masking removes their gradient, it does not up-weight the rest.

Under torchrun each rank holds a contiguous share of the step's rollouts
(trainer/distributed.py). Mini-batches are cut from the step's GLOBAL order
(`global_index`, `global_count`), so a rank's part of mini-batch j is the
rollouts of its share that fall in j (possibly none); each sequence's loss is
divided by the size of the global mini-batch and multiplied by the number of
ranks whose gradients are averaged, so the averaged gradient is the global
mini-batch's mean and N ranks take every one of the M optimizer steps one
rank would. The step's stats come back as sums and counts too (`totals`), so
distributed.reduce_update_stats weights every rank by its tokens.

pi_old is the trainer's log-prob of each sampled token before this step's
first optimizer update. With one mini-batch (the default, as in the papers'
synchronous runs) that is the current log-prob detached (ratio 1: the clip
cannot act, the gradient is the plain policy gradient); with more, pi_old is
computed once before the first update, so later mini-batches are off-policy
and the clip acts.

Log-probs use the sampling temperature (policy.token_logprobs). Where the
sampler reported its own per-token log-probs, the step reports the mean
|log pi_sampler - log pi_old| over trained tokens (`sampler_logprob_diff`),
and with `importance_sampling_cap` each token's term is weighted by
min(pi_old / pi_sampler, cap) (loss.truncated_is_weights). The reference
forward (adapter off) runs only when kl_beta > 0 or KL is tracked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from typing import Optional

from .loss import LossSettings, kl_k3, policy_loss, truncated_is_weights
from .policy import token_logprobs


@dataclass
class TrainItem:
    ids: list
    mask: list
    advantage: float
    weight: float  # 1 = trained, 0 = loss masked
    sampler_logprobs: Optional[list] = None  # aligned with ids; None = the sampler reported none
    global_index: Optional[int] = None  # place in the step's rollouts of all ranks (train.training_items)


def micro_batches(lengths: list, indices: list, max_tokens: int) -> list:
    """Greedy in-order packing: rows x longest row <= max_tokens (a longer
    sequence gets a micro-batch of its own)."""
    batches, current, longest = [], [], 0
    for i in indices:
        if current and max(longest, lengths[i]) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, lengths[i])
    if current:
        batches.append(current)
    return batches


def collate_sampler_logprobs(items: list, rows: list, device) -> tuple:
    """([rows, width] sampler log-probs, [rows] 1 where the row has them)."""
    width = max(len(items[i].ids) for i in rows)
    values = torch.zeros((len(rows), width), dtype=torch.float32)
    present = torch.zeros(len(rows), dtype=torch.float32)
    for r, i in enumerate(rows):
        if items[i].sampler_logprobs is not None:
            values[r, :len(items[i].ids)] = torch.tensor(items[i].sampler_logprobs, dtype=torch.float32)
            present[r] = 1.0
    return values.to(device), present.to(device)


def collate(items: list, rows: list, pad_id: int, device) -> tuple:
    """Right-padded input_ids, attention_mask, loss_mask and advantages for `rows`."""
    width = max(len(items[i].ids) for i in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for r, i in enumerate(rows):
        n = len(items[i].ids)
        input_ids[r, :n] = torch.tensor(items[i].ids, dtype=torch.long)
        attention[r, :n] = 1
        loss_mask[r, :n] = torch.tensor(items[i].mask, dtype=torch.float32) * items[i].weight
    advantages = torch.tensor([items[i].advantage for i in rows], dtype=torch.float32)
    return input_ids.to(device), attention.to(device), loss_mask.to(device), advantages.to(device)


def global_mini_batches(global_index: list, global_count: int, mini_batches: int) -> list:
    """[(rows of this process in global mini-batch j, size of global mini-batch j)] for j < M.

    Contiguous mini-batches of the step's global order keep a prompt's group
    together; every process gets all M entries (some with no rows), so all
    take part in every gradient all-reduce."""
    size = -(-global_count // mini_batches)
    plans = []
    for start in range(0, global_count, size):
        end = min(start + size, global_count)
        plans.append(([i for i, g in enumerate(global_index) if start <= g < end], end - start))
    return plans


def policy_update(model, optimizer, scheduler, items: list, settings: LossSettings, *, pad_id: int,
                  device, micro_batch_tokens: int, mini_batches: int, max_grad_norm: float,
                  track_kl: bool, temperature: float = 1.0, importance_sampling_cap: Optional[float] = None,
                  before_step=None, global_index: Optional[list] = None, global_count: Optional[int] = None,
                  gradient_ranks: int = 1, behaviour_old: bool = False) -> dict:
    """Run `mini_batches` optimizer updates over `items`; return the update's stats.

    `before_step(params)`, when given, runs after each mini-batch's backward
    passes and before clipping: trainer/distributed.py averages the gradients
    over the `gradient_ranks` ranks there. `global_index[i]` is item i's place
    in the step's rollouts of all ranks (`global_count` of them); by default
    this process holds them all. `behaviour_old` (mode: async, pipeline.py):
    pi_old is the sampling policy's log-prob of each token (the rollouts may
    be stale), so the ratio and its clip measure the distance from the policy
    that sampled them.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    need_ref = settings.kl_beta > 0 or track_kl
    if global_index is None:
        global_index, global_count = list(range(len(items))), len(items)
    plans = plan_mini_batches(items, global_index, global_count, mini_batches, micro_batch_tokens)
    logprobs = lambda ids, attn, lmask: token_logprobs(model, ids, attn, lmask, temperature=temperature)  # noqa: E731

    model.train()
    old_cache = old_logprobs(items, plans, pad_id, device, logprobs) if mini_batches > 1 else {}

    totals = dict(loss=0.0, clipped=0.0, clip_units=0.0, kl_sum=0.0, kl_tokens=0.0, tokens=0,
                  mismatch_sum=0.0, mismatch_tokens=0.0, is_weight_sum=0.0, is_weight_units=0.0)
    grad_norms, lrs = [], []
    for _rows, global_rows, micros in plans:
        optimizer.zero_grad(set_to_none=True)
        # The global mini-batch's mean once the ranks' gradients are averaged.
        denominator = float(global_rows) / gradient_ranks
        for rows in micros:
            ids, attn, lmask, adv = collate(items, rows, pad_id, device)
            ref = None
            if need_ref:
                with torch.no_grad(), model.disable_adapter():
                    ref = logprobs(ids, attn, lmask)
            logps = logprobs(ids, attn, lmask)
            old = old_cache.get(tuple(rows), logps.detach())
            sampler, has_sampler = collate_sampler_logprobs(items, rows, device)
            old, is_weights = sampler_terms(old, sampler, has_sampler, lmask, settings, importance_sampling_cap,
                                            behaviour_old, totals)
            out = policy_loss(logps, old, ref if settings.kl_beta > 0 else None, lmask, adv, settings, is_weights)
            loss = out.per_sequence.sum() / denominator
            loss.backward()
            totals["loss"] += float(loss.detach())
            totals["clipped"] += float(out.clipped.sum())
            totals["clip_units"] += float(out.clip_units.sum())
            totals["tokens"] += int(attn.sum())
            if ref is not None:
                totals["kl_sum"] += float((kl_k3(logps.detach(), ref) * lmask).sum())
                totals["kl_tokens"] += float(lmask.sum())
        if before_step is not None:
            before_step(params)
        grad_norm, lr = clip_and_step(params, optimizer, scheduler, max_grad_norm)
        grad_norms.append(grad_norm)
        lrs.append(lr)
    optimizer.zero_grad(set_to_none=True)
    return update_stats(totals, len(plans), grad_norms, lrs, need_ref)


def plan_mini_batches(items: list, global_index: list, global_count: int, mini_batches: int,
                      micro_batch_tokens: int) -> list:
    """[(this process's rows of global mini-batch j, its global size, its micro-batches)]:
    rows whose loss is masked are in no micro-batch (they add no gradient)."""
    lengths = [len(it.ids) for it in items]
    return [(rows_all, count, micro_batches(lengths, [i for i in rows_all if items[i].weight > 0],
                                            micro_batch_tokens))
            for rows_all, count in global_mini_batches(global_index, global_count, mini_batches)]


def old_logprobs(items: list, plans: list, pad_id: int, device, logprobs) -> dict:
    """pi_old of every micro-batch (keyed by its rows), before the step's first update."""
    old_cache = {}
    with torch.no_grad():
        for _, _, micros in plans:
            for rows in micros:
                ids, attn, lmask, _ = collate(items, rows, pad_id, device)
                old_cache[tuple(rows)] = logprobs(ids, attn, lmask)
    return old_cache


def sampler_terms(old, sampler, has_sampler, lmask, settings: LossSettings, importance_sampling_cap,
                  behaviour_old: bool, totals: dict) -> tuple:
    """(pi_old, truncated importance weights or None) of a micro-batch given the sampler's
    log-probs; counts the sampler/trainer mismatch and the weights into `totals`."""
    sampled_mask = lmask * has_sampler[:, None]
    totals["mismatch_sum"] += float(((sampler - old).abs() * sampled_mask).sum())
    if behaviour_old:
        if float(has_sampler.min()) < 1:
            raise RuntimeError("mode: async needs the sampler's log-probs of every rollout (the HF engine "
                               "always reports them; vLLM only at temperature 1)")
        old = torch.where(lmask > 0, sampler, old)
    totals["mismatch_tokens"] += float(sampled_mask.sum())
    is_weights = None
    if importance_sampling_cap is not None:
        per_sequence = settings.algorithm == "gspo"
        # Rows without sampler log-probs get weight 1 (log-ratio 0).
        is_weights = truncated_is_weights(old, torch.where(sampled_mask > 0, sampler, old), lmask,
                                          importance_sampling_cap, per_sequence)
        units = (lmask.sum(dim=1) > 0).float() if per_sequence else lmask
        totals["is_weight_sum"] += float((is_weights * units).sum())
        totals["is_weight_units"] += float(units.sum())
    return old, is_weights


def clip_and_step(params: list, optimizer, scheduler, max_grad_norm: float) -> tuple:
    """(gradient norm before clipping, learning rate used): clip the accumulated gradient
    to `max_grad_norm`, then one optimizer and one schedule step."""
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    return grad_norm, lr


def update_stats(totals: dict, mini_batches: int, grad_norms: list, lrs: list, need_ref: bool) -> dict:
    """policy_update's result: the step's means and ratios, and the totals behind them."""
    return {
        "loss": totals["loss"] / mini_batches,
        "clip_ratio": totals["clipped"] / totals["clip_units"] if totals["clip_units"] else 0.0,
        "kl": totals["kl_sum"] / totals["kl_tokens"] if totals["kl_tokens"] else None,
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "lr": lrs[0],
        "train_tokens": totals["tokens"],
        "reference_forward": need_ref,
        # mean |log pi_sampler - log pi_old| per trained token (null: no sampler log-probs)
        "sampler_logprob_diff": (totals["mismatch_sum"] / totals["mismatch_tokens"]
                                 if totals["mismatch_tokens"] else None),
        "is_weight_mean": (totals["is_weight_sum"] / totals["is_weight_units"]
                           if totals["is_weight_units"] else None),
        # Sums and counts behind the ratios above, for distributed.reduce_update_stats.
        "totals": {k: totals[k] for k in RATIO_TOTALS},
    }


# ratio stat -> (numerator, denominator) in policy_update's totals
RATIOS = {"clip_ratio": ("clipped", "clip_units"), "kl": ("kl_sum", "kl_tokens"),
          "sampler_logprob_diff": ("mismatch_sum", "mismatch_tokens"),
          "is_weight_mean": ("is_weight_sum", "is_weight_units")}
RATIO_TOTALS = tuple(name for pair in RATIOS.values() for name in pair)


def ratio_stats(totals: dict, empty_clip_ratio: float = 0.0) -> dict:
    """The ratio stats from (summed) totals: None where nothing was counted (clip_ratio: 0)."""
    out = {}
    for key, (num, den) in RATIOS.items():
        out[key] = totals[num] / totals[den] if totals[den] else (empty_clip_ratio if key == "clip_ratio" else None)
    return out

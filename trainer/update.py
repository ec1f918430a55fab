"""One policy update from a batch of finished rollouts.

The rollouts' sequences are cut into micro-batches of at most
`micro_batch_tokens` padded tokens. Each sequence's loss is divided by the
number of rollouts in its mini-batch, so the accumulated gradient equals the
gradient of the mean loss over all rollouts regardless of micro-batching.
Rollouts whose loss is masked (CodeScout §3.4) still count in that
denominator: masking removes their gradient, it does not up-weight the rest.

With one mini-batch (the default, as in the papers' synchronous runs) the
policy that sampled the rollouts is the current one, so pi_old is the current
log-prob detached (ratio 1, gradient of the plain policy-gradient objective).
With more, pi_old is computed once before the first update.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .loss import LossSettings, kl_k3, policy_loss
from .policy import token_logprobs


@dataclass
class TrainItem:
    ids: list
    mask: list
    advantage: float
    weight: float  # 1 = trained, 0 = loss masked


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


def policy_update(model, optimizer, scheduler, items: list, settings: LossSettings, *, pad_id: int,
                  device, micro_batch_tokens: int, mini_batches: int, max_grad_norm: float,
                  track_kl: bool, before_step=None) -> dict:
    """Run `mini_batches` optimizer updates over `items`; return the update's stats.

    `before_step(params)`, when given, runs after each mini-batch's backward
    passes and before clipping: trainer/distributed.py averages the gradients
    over the ranks there.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    lengths = [len(it.ids) for it in items]
    need_ref = settings.kl_beta > 0 or track_kl
    # Contiguous mini-batches keep a prompt's group together.
    size = -(-len(items) // mini_batches)
    splits = [list(range(s, min(s + size, len(items)))) for s in range(0, len(items), size)]
    plans = [(rows_all, micro_batches(lengths, [i for i in rows_all if items[i].weight > 0], micro_batch_tokens))
             for rows_all in splits]

    model.train()
    old_cache = {}
    if mini_batches > 1:
        with torch.no_grad():
            for _, micros in plans:
                for rows in micros:
                    ids, attn, lmask, _ = collate(items, rows, pad_id, device)
                    old_cache[tuple(rows)] = token_logprobs(model, ids, attn, lmask)

    totals = dict(loss=0.0, clipped=0.0, clip_units=0.0, kl_sum=0.0, kl_tokens=0.0, tokens=0)
    grad_norms, lrs = [], []
    for rows_all, micros in plans:
        optimizer.zero_grad(set_to_none=True)
        denominator = float(len(rows_all))
        for rows in micros:
            ids, attn, lmask, adv = collate(items, rows, pad_id, device)
            ref = None
            if need_ref:
                with torch.no_grad(), model.disable_adapter():
                    ref = token_logprobs(model, ids, attn, lmask)
            logps = token_logprobs(model, ids, attn, lmask)
            old = old_cache.get(tuple(rows), logps.detach())
            out = policy_loss(logps, old, ref if settings.kl_beta > 0 else None, lmask, adv, settings)
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
        grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)))
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {
        "loss": totals["loss"] / len(plans),
        "clip_ratio": totals["clipped"] / totals["clip_units"] if totals["clip_units"] else 0.0,
        "kl": totals["kl_sum"] / totals["kl_tokens"] if totals["kl_tokens"] else None,
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "lr": lrs[0],
        "train_tokens": totals["tokens"],
    }

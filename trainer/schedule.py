"""Learning-rate schedules: linear warmup then cosine decay (CodeGrep App. A.4:
peak 5e-6, cosine decay, 5% linear warmup), or constant (CodeScout §4.1:
constant 1e-6). The recipe preset picks one (lib/recipes/presets.json)."""

from __future__ import annotations

import math


def warmup_cosine(total_updates: int, warmup_ratio: float):
    """Multiplier of the peak lr for update i (0-based), for torch's LambdaLR.

    Warmup: (i + 1) / W for the first W = ceil(ratio * total) updates, so the
    very first update already moves the weights (a 0 lr first step would waste
    a whole rollout batch). Then cosine from 1 towards 0 over the rest.
    """
    warmup = math.ceil(warmup_ratio * total_updates)
    decay = max(1, total_updates - warmup)

    def multiplier(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        progress = min(1.0, (i - warmup) / decay)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return multiplier


def lr_multiplier(schedule: str, total_updates: int, warmup_ratio: float):
    """The LambdaLR multiplier of `schedule` ("cosine" or "constant", both after
    an optional linear warmup)."""
    if schedule == "cosine":
        return warmup_cosine(total_updates, warmup_ratio)
    if schedule == "constant":
        warmup = math.ceil(warmup_ratio * total_updates)
        return lambda i: (i + 1) / warmup if i < warmup else 1.0
    raise ValueError(f"unknown lr schedule {schedule!r}; expected cosine or constant")

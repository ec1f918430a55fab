"""The update's stats over ranks (distributed.reduce_update_stats) are weighted by tokens,
and mini-batches are cut from the step's global order (update.global_mini_batches)."""

import pytest

from trainer import distributed
from trainer.update import global_mini_batches


def _stats(clipped, units, kl_sum, kl_tokens, tokens, loss):
    totals = dict(clipped=clipped, clip_units=units, kl_sum=kl_sum, kl_tokens=kl_tokens, mismatch_sum=0.0,
                  mismatch_tokens=0.0, is_weight_sum=0.0, is_weight_units=0.0)
    return {"loss": loss, "clip_ratio": clipped / units, "kl": kl_sum / kl_tokens, "grad_norm": 1.0, "lr": 1e-6,
            "train_tokens": tokens, "reference_forward": True, "sampler_logprob_diff": None,
            "is_weight_mean": None, "totals": totals}


def test_ratios_over_ranks_are_weighted_by_tokens(monkeypatch):
    # Rank 0: 1 of 10 tokens clipped, KL 0.1 per token over 10; rank 1: 45 of 90, KL 0.5 over 90.
    mine, theirs = _stats(1, 10, 1.0, 10, 100, 0.2), _stats(45, 90, 45.0, 90, 900, 0.4)
    monkeypatch.setattr(distributed, "gather", lambda ranks, obj: [mine, theirs])
    out = distributed.reduce_update_stats(distributed.Ranks(0, 2, 0, "gloo"), mine)
    assert out["clip_ratio"] == pytest.approx(46 / 100)   # not (0.1 + 0.5) / 2
    assert out["kl"] == pytest.approx(46.0 / 100)
    assert out["train_tokens"] == 1000
    assert out["loss"] == pytest.approx(0.3)  # per-rank losses are already scaled to the global mini-batch
    assert out["sampler_logprob_diff"] is None and out["is_weight_mean"] is None


def test_mini_batches_follow_the_global_order_on_every_rank():
    # 6 rollouts, 3 mini-batches of 2; rank 0 holds global 0-2, rank 1 holds 3-5.
    assert global_mini_batches([0, 1, 2], 6, 3) == [([0, 1], 2), ([2], 2), ([], 2)]
    assert global_mini_batches([3, 4, 5], 6, 3) == [([], 2), ([0], 2), ([1, 2], 2)]
    # One process: the old contiguous split.
    assert global_mini_batches(list(range(5)), 5, 2) == [([0, 1, 2], 3), ([3, 4], 2)]

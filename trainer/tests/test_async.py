"""mode: async (trainer/pipeline.py; CodeScout §3.4): stale rollouts, bounded staleness,
the clip acting on them, and a resume that learns from exactly the same batches."""

import os

import pytest
import torch
from safetensors.torch import load_file

from trainer import train
from trainer.checkpoint import complete_checkpoints, load_extra_file, read_state
from trainer.config import parse_config
from trainer.pipeline import PENDING_FILE

from .conftest import tiny_config

# GSPO with CodeScout's clip (3e-4 / 4e-4, §4.1) and a large lr, so a stale batch's
# sequence ratio leaves the clip range; KL off as in CodeScout (§3.4).
ASYNC = dict(total_steps=5, algorithm="gspo", kl_beta=0.0, track_kl=False, mode="async", max_staleness=2)


def _run(tmp_path, url, model_dir, resume=None, stop_after=None, **overrides):
    cfg = parse_config(tiny_config(tmp_path, url, model_dir, **{**ASYNC, **overrides}))
    os.makedirs(cfg.output_dir, exist_ok=True)
    lines = []
    stop = train.StopRequest()

    def emit(event, **fields):
        lines.append({"event": event, **fields})
        if stop_after is not None and event == "step" and fields["step"] == stop_after:
            stop.requested, stop.signal_name = True, "SIGTERM"

    assert train.train(cfg, resume, emit, stop) == 0
    return cfg, lines


def _steps(lines):
    return [line for line in lines if line["event"] == "step"]


def _final_adapter(output_dir):
    return load_file(os.path.join(complete_checkpoints(output_dir)[-1][1], "adapter_model.safetensors"))


def test_staleness_stays_within_max_staleness_and_the_clip_acts_on_stale_batches(tmp_path, tiny_model_dir,
                                                                                 env_server):
    _, url = env_server
    cfg, lines = _run(tmp_path, url, tiny_model_dir)
    steps = _steps(lines)
    # Steps 0-2 learn from batches sampled before any update, then each batch is 2 steps old.
    assert [s["policy_version"] for s in steps] == [0, 0, 0, 1, 2]
    assert [s["staleness"] for s in steps] == [0, 1, 2, 2, 2]
    assert all(s["staleness"] <= cfg.max_staleness for s in steps)
    # The importance ratio is against the sampling policy: 1 on a fresh batch (float noise is far
    # below the 3e-4 clip), away from 1 on stale ones, where the clip then acts.
    assert steps[0]["clip_ratio"] == 0.0
    assert all(s["clip_ratio"] > 0 for s in steps if s["staleness"] > 0), [s["clip_ratio"] for s in steps]
    # Each sample records its policy version; the newest checkpoint before the end holds pending batches.
    with_pending = [p for _, p in complete_checkpoints(cfg.output_dir) if load_extra_file(p, PENDING_FILE)]
    pending = load_extra_file(with_pending[-1], PENDING_FILE)
    state = read_state(with_pending[-1])
    for batch in pending:
        assert batch.step >= state["step"] and state["step"] - batch.policy_version <= cfg.max_staleness
        assert all(r.policy_version == batch.policy_version for r in batch.rollouts)
        assert all(r.sequence.sampler_logprobs is not None for r in batch.rollouts)


def test_sync_mode_learns_from_fresh_rollouts_only(tmp_path, tiny_model_dir, env_server):
    _, url = env_server
    _, lines = _run(tmp_path, url, tiny_model_dir, total_steps=3, mode="sync")
    steps = _steps(lines)
    assert [s["staleness"] for s in steps] == [0, 0, 0]
    assert [s["policy_version"] for s in steps] == [0, 1, 2]
    assert all(s["clip_ratio"] == 0.0 for s in steps)  # one mini-batch, on-policy: ratio 1


def test_a_stopped_async_run_resumes_with_the_same_batches_and_no_step_twice(tmp_path, tiny_model_dir, env_server):
    _, url = env_server
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight_dir.mkdir()
    resumed_dir.mkdir()
    _, straight = _run(straight_dir, url, tiny_model_dir)

    cfg, first = _run(resumed_dir, url, tiny_model_dir, stop_after=2)
    assert first[-1]["event"] == "stopped" and [s["step"] for s in _steps(first)] == [1, 2]
    assert load_extra_file(complete_checkpoints(cfg.output_dir)[-1][1], PENDING_FILE), "no pending batches saved"
    _, second = _run(resumed_dir, url, tiny_model_dir, resume="latest")
    resumed_steps = _steps(first) + _steps(second)
    assert [s["step"] for s in resumed_steps] == [1, 2, 3, 4, 5]
    for mine, theirs in zip(resumed_steps, _steps(straight)):
        assert mine["policy_version"] == theirs["policy_version"]
        assert mine["reward_mean"] == theirs["reward_mean"]
        assert mine["rollout_tokens"] == theirs["rollout_tokens"]
        assert mine["clip_ratio"] == pytest.approx(theirs["clip_ratio"], abs=1e-9)
    reference, result = _final_adapter(straight_dir / "run"), _final_adapter(cfg.output_dir)
    assert result.keys() == reference.keys()
    for key in reference:
        assert torch.allclose(result[key], reference[key], atol=1e-6), key


def test_async_mode_is_refused_under_torchrun(tmp_path, tiny_model_dir, env_server, monkeypatch):
    from trainer import distributed

    _, url = env_server
    cfg = parse_config(tiny_config(tmp_path, url, tiny_model_dir, **ASYNC))
    with pytest.raises(ValueError, match="mode: async runs on one trainer process"):
        train._train(cfg, None, lambda *a, **k: None, train.StopRequest(), distributed.Ranks(0, 2, 0, "gloo"))


def test_max_staleness_must_be_positive(tmp_path):
    from trainer.config import ConfigError

    with pytest.raises(ConfigError, match="max_staleness"):
        parse_config(tiny_config(tmp_path, "http://127.0.0.1:9", str(tmp_path), max_staleness=0))
    with pytest.raises(ConfigError, match="'mode'"):
        parse_config(tiny_config(tmp_path, "http://127.0.0.1:9", str(tmp_path), mode="later"))

"""Checkpoint atomicity, retention and round trips."""

import os

import pytest
import torch

from trainer.checkpoint import (COMPLETE_MARKER, DataPosition, capture_rng_state, complete_checkpoints,
                                latest_checkpoint, load_checkpoint, resolve_resume, save_checkpoint)
from trainer.config import LoraConfig
from trainer.policy import load_policy, pick_device_and_dtype


@pytest.fixture(scope="module")
def trained_parts(tiny_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, _ = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 / (i + 1))
    sum(p.sum() for p in params).backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def _save(output_dir, step, parts, keep=3):
    model, optimizer, scheduler = parts
    return save_checkpoint(str(output_dir), step, model=model, optimizer=optimizer, scheduler=scheduler,
                           rng_state=capture_rng_state(), data_position=DataPosition(1, step),
                           extra_state={"data_fingerprint": "abc"}, keep=keep)


def test_incomplete_checkpoint_is_ignored_by_resume_latest(tmp_path, trained_parts):
    good = _save(tmp_path, 2, trained_parts)
    # A newer step directory without the marker: a save killed mid-way, or a
    # directory copied by hand.
    broken = os.path.join(os.path.dirname(good), "step-00000005")
    os.makedirs(broken)
    with open(os.path.join(broken, "trainer_state.json"), "w") as f:
        f.write('{"step": 5}')
    assert latest_checkpoint(str(tmp_path)) == good
    assert resolve_resume(str(tmp_path), "latest") == good
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        resolve_resume(str(tmp_path), broken)
    assert resolve_resume(str(tmp_path), None) is None


def test_retention_keeps_the_newest_k_and_clears_leftovers(tmp_path, trained_parts):
    root = os.path.join(str(tmp_path), "checkpoints")
    os.makedirs(os.path.join(root, ".tmp-step-00000009-123-456"))  # from a killed save
    for step in (1, 2, 3, 4, 5):
        _save(tmp_path, step, trained_parts, keep=2)
    assert [s for s, _ in complete_checkpoints(str(tmp_path))] == [4, 5]
    assert sorted(os.listdir(root)) == ["step-00000004", "step-00000005"]


def test_saving_an_earlier_step_drops_the_abandoned_later_ones(tmp_path, trained_parts):
    for step in (1, 2, 3):
        _save(tmp_path, step, trained_parts)
    # Resumed from step 1 explicitly, the run reaches step 2 again.
    _save(tmp_path, 2, trained_parts)
    assert [s for s, _ in complete_checkpoints(str(tmp_path))] == [1, 2]


def test_resaving_a_step_replaces_it_whole(tmp_path, trained_parts):
    first = _save(tmp_path, 3, trained_parts)
    second = _save(tmp_path, 3, trained_parts)
    assert first == second and os.path.isfile(os.path.join(second, COMPLETE_MARKER))
    assert sorted(os.listdir(os.path.dirname(second))) == ["step-00000003"]


def test_round_trip_restores_weights_optimizer_scheduler_and_state(tmp_path, trained_parts, tiny_model_dir):
    model, optimizer, scheduler = trained_parts
    path = _save(tmp_path, 7, trained_parts)
    assert sorted(os.listdir(path)) == sorted([COMPLETE_MARKER, "README.md", "adapter_config.json", "adapter_model.safetensors",
                                               "optimizer.pt", "rng.pt", "scheduler.pt", "trainer_state.json"])
    device, dtype = pick_device_and_dtype("auto")
    fresh, _ = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    fresh_params = [p for p in fresh.parameters() if p.requires_grad]
    fresh_opt = torch.optim.AdamW(fresh_params, lr=1e-2)
    fresh_sched = torch.optim.lr_scheduler.LambdaLR(fresh_opt, lambda i: 1.0 / (i + 1))
    state, rng = load_checkpoint(path, model=fresh, optimizer=fresh_opt, scheduler=fresh_sched)
    assert state["step"] == 7 and state["data_epoch"] == 1 and state["data_index"] == 7
    assert state["data_fingerprint"] == "abc"
    for (name, a), b in zip(((n, p) for n, p in model.named_parameters() if p.requires_grad), fresh_params):
        assert torch.equal(a, b), name
    assert fresh_sched.last_epoch == scheduler.last_epoch == 1
    saved_state = optimizer.state_dict()["state"]
    for key, value in fresh_opt.state_dict()["state"].items():
        assert torch.equal(value["exp_avg"], saved_state[key]["exp_avg"])
    assert set(rng) >= {"python", "numpy", "torch"}

"""finetune: full (policy.FullFineTune; CodeScout §4.1 trains without LoRA): every weight
trains, checkpoints hold the whole model, and a resume continues from it exactly."""

import os

import torch
from safetensors.torch import load_file

from trainer import train
from trainer.checkpoint import complete_checkpoints

from .conftest import tiny_config, write_config

FULL = dict(finetune="full", algorithm="gspo", kl_beta=0.0, track_kl=False, lr=1e-3, lr_schedule="constant")


def _weights(checkpoint_dir: str) -> dict:
    weights = {}
    for name in os.listdir(checkpoint_dir):
        if name.endswith(".safetensors"):
            weights.update(load_file(os.path.join(checkpoint_dir, name)))
    return weights


def test_full_fine_tuning_trains_every_weight_and_resumes_exactly(tmp_path, tiny_model_dir, env_server):
    _, url = env_server
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight_dir.mkdir()
    resumed_dir.mkdir()
    straight = tiny_config(straight_dir, url, tiny_model_dir, total_steps=2, **FULL)
    assert train.main(["--config", write_config(straight_dir, straight)]) == 0
    checkpoints = complete_checkpoints(straight["output_dir"])
    first, last = _weights(checkpoints[0][1]), _weights(checkpoints[-1][1])
    assert not os.path.exists(os.path.join(checkpoints[-1][1], "adapter_model.safetensors"))
    base = _weights(tiny_model_dir)
    # Not an adapter: the body's own weights moved (a LoRA run leaves them untouched).
    moved = [k for k in base if k in last and not torch.allclose(base[k].float(), last[k].float())]
    assert any("layers.0.mlp" in k for k in moved) and any("self_attn" in k for k in moved), moved[:5]
    assert any(not torch.allclose(first[k], last[k]) for k in last)

    # One step, then a resume for the second: the same weights as two steps straight.
    resumed = tiny_config(resumed_dir, url, tiny_model_dir, total_steps=1, **FULL)
    config_path = write_config(resumed_dir, resumed)
    assert train.main(["--config", config_path]) == 0
    resumed["total_steps"] = 2
    config_path = write_config(resumed_dir, resumed)
    assert train.main(["--config", config_path, "--resume", "latest"]) == 0
    result = _weights(complete_checkpoints(resumed["output_dir"])[-1][1])
    assert result.keys() == last.keys()
    for key in last:
        assert torch.allclose(result[key], last[key], atol=1e-6), key

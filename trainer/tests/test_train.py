"""The training loop end to end on the tiny model and the scripted server."""

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from trainer import train
from trainer.checkpoint import complete_checkpoints, read_state
from trainer.config import LoraConfig
from trainer.env_client import EnvClient
from trainer.loss import loss_settings
from trainer.policy import load_policy, pick_device_and_dtype
from trainer.rollout import HFGenerator, RolloutLimits, Sampling, run_rollouts, stop_token_ids
from trainer.tokens import ChatTokens
from trainer.update import policy_update

from .conftest import tiny_config, write_config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _step_lines(stdout: str) -> list:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_one_step_changes_the_lora_weights_and_nothing_else(tiny_model_dir, env_server):
    _, url = env_server
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    chat = ChatTokens(tokenizer)
    generator = HFGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer), Sampling(1.0, 0.9, 50), device)
    torch.manual_seed(3)
    rollouts = run_rollouts(EnvClient(url), generator, chat, ["repo__a-1", "repo__b-2"], 4, 0,
                            RolloutLimits(3, 32, 8, 1024), lambda: False)
    rollouts, items = train.training_items(rollouts, 4, True, False)
    assert any(it.advantage != 0 for it in items)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0)
    stats = policy_update(model, optimizer, scheduler, items, loss_settings("grpo", 32), pad_id=tokenizer.pad_token_id,
                          device=device, micro_batch_tokens=1024, mini_batches=1, max_grad_norm=1.0, track_kl=True)
    assert stats["grad_norm"] > 0 and stats["train_tokens"] == sum(len(it.ids) for it in items)
    after = model.state_dict()
    lora_keys = [k for k in before if "lora_" in k]
    base_keys = [k for k in before if "lora_" not in k]
    assert len(lora_keys) > 0 and len(base_keys) > 0
    assert any(not torch.equal(before[k], after[k]) for k in lora_keys if "lora_B" in k)
    assert all(torch.equal(before[k], after[k]) for k in base_keys), "a base weight changed"
    # And the base weights on disk are the ones the model runs with.
    disk = load_file(os.path.join(tiny_model_dir, "model.safetensors"))
    for name, tensor in disk.items():
        key = next(k for k in base_keys if k.endswith(name.replace(".weight", ".base_layer.weight"))
                   or k.endswith(name))
        assert torch.equal(after[key], tensor)


def test_step_line_reports_the_training_metrics(tmp_path, tiny_model_dir, env_server, capsys):
    _, url = env_server
    config = tiny_config(tmp_path, url, tiny_model_dir, total_steps=1, recipe="codescout", lr=1e-2)
    del config["algorithm"]
    assert train.main(["--config", write_config(tmp_path, config)]) == 0
    lines = _step_lines(capsys.readouterr().out)
    assert [line["event"] for line in lines] == ["start", "checkpoint", "step", "done"]
    step = lines[2]
    for key in ("step", "reward_mean", "reward_std", "reward_components", "kl", "turns_mean",
                "tool_calls_per_turn_mean", "completion_len_mean", "clip_ratio", "grad_norm", "lr",
                "step_time_s", "rollout_tokens_per_s", "train_tokens_per_s", "checkpoint",
                "sampler_logprob_diff", "is_weight_mean"):
        assert key in step, key
    assert step["step"] == 1 and 1 <= step["turns_mean"] <= 2 and step["tool_calls_per_turn_mean"] == 2
    assert 0 < step["completion_len_mean"] <= 12 and step["hit_turn_limit_ratio"] == 0
    assert set(step["reward_components"]) == {"file_fbeta", "line_fbeta"}
    # CodeScout's optimisation (finding 4): GSPO, its clip, no KL, no std, and no
    # reference forward at all (beta 0, KL tracking off), so no KL to report.
    assert lines[0]["loss"]["algorithm"] == "gspo" and lines[0]["loss"]["clip_high"] == 4e-4
    assert lines[0]["loss"]["kl_beta"] == 0.0 and lines[0]["loss"]["normalize_advantage_std"] is False
    assert step["kl"] is None
    # The first line prints the effective recipe, each value with its source.
    recipe = lines[0]["recipe"]
    assert recipe["recipe"] == {"value": "codescout", "source": "config"}
    assert recipe["algorithm"]["value"] == "gspo" and "CodeScout §3.4" in recipe["algorithm"]["source"]
    assert recipe["lr"] == {"value": 1e-2, "source": "config"}  # an explicit key overrides the preset
    assert recipe["lr_schedule"]["value"] == "constant" and recipe["max_turns"] == {"value": 2, "source": "config"}
    with open(os.path.join(config["output_dir"], "recipe.json")) as f:
        assert json.load(f) == recipe
    # HF samples from the training model itself: sampler and trainer log-probs agree.
    assert step["sampler_logprob_diff"] < 1e-4 and step["is_weight_mean"] is None
    with open(os.path.join(config["output_dir"], "metrics.jsonl")) as f:
        assert json.loads(f.readline())["step"] == 1


def _adapter(checkpoint_dir: str) -> dict:
    return load_file(os.path.join(checkpoint_dir, "adapter_model.safetensors"))


def test_sigterm_then_resume_matches_an_uninterrupted_run(tmp_path, tiny_model_dir, env_server):
    env, url = env_server
    # Reference: 4 steps straight through.
    straight_dir = tmp_path / "straight"
    straight_dir.mkdir()
    straight = tiny_config(straight_dir, url, tiny_model_dir, total_steps=4)
    assert train.main(["--config", write_config(straight_dir, straight)]) == 0
    reference = _adapter(complete_checkpoints(straight["output_dir"])[-1][1])

    # Interrupted: a real SIGTERM to a trainer process once step 2 is reported.
    env.step_delay_s = 0.2  # keep step 3 in flight long enough to be interrupted mid-rollout
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    resumed = tiny_config(resumed_dir, url, tiny_model_dir, total_steps=4)
    config_path = write_config(resumed_dir, resumed)
    child_env = dict(os.environ, PYTHONPATH=REPO_ROOT, OMP_NUM_THREADS="1")
    child = subprocess.Popen([sys.executable, "-c", "import torch, sys; torch.set_num_threads(1); "
                              "from trainer.train import main; sys.exit(main())", "--config", config_path],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env,
                             cwd=REPO_ROOT)
    seen = []
    for line in child.stdout:
        seen.append(json.loads(line))
        if seen[-1]["event"] == "step" and seen[-1]["step"] == 2:
            child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 0
    stopped = seen[-1]
    assert stopped["event"] == "stopped" and stopped["signal"] == "SIGTERM"
    assert stopped["step"] == 2, "the stop should abort step 3 between two turns"
    assert [s for s, _ in complete_checkpoints(resumed["output_dir"])] == [1, 2]
    assert read_state(complete_checkpoints(resumed["output_dir"])[-1][1])["data_index"] == 1  # 4 ids drawn of 3

    env.step_delay_s = 0.0
    assert train.main(["--config", config_path, "--resume", "latest"]) == 0
    final = complete_checkpoints(resumed["output_dir"])[-1]
    assert final[0] == 4
    result = _adapter(final[1])
    assert result.keys() == reference.keys()
    for key in reference:
        assert torch.allclose(result[key], reference[key], atol=1e-6), key
    # The adapters really trained (so equality is not trivial).
    first = _adapter(complete_checkpoints(straight["output_dir"])[0][1])
    assert any(not torch.allclose(first[k], reference[k]) for k in reference)


def test_resume_latest_without_checkpoint_starts_fresh(tmp_path, tiny_model_dir, env_server, capsys):
    _, url = env_server
    config = tiny_config(tmp_path, url, tiny_model_dir, total_steps=1)
    assert train.main(["--config", write_config(tmp_path, config), "--resume", "latest"]) == 0
    events = [line["event"] for line in _step_lines(capsys.readouterr().out)]
    assert "resumed" not in events and events[-1] == "done"


def test_resume_refuses_a_different_data_order(tmp_path, tiny_model_dir, env_server):
    _, url = env_server
    config = tiny_config(tmp_path, url, tiny_model_dir, total_steps=1)
    assert train.main(["--config", write_config(tmp_path, config)]) == 0
    config.update(total_steps=2, seed=8)
    with pytest.raises(RuntimeError, match="different data order"):
        train.main(["--config", write_config(tmp_path, config), "--resume", "latest"])


def test_sigterm_during_update_finishes_the_step_and_checkpoints(tmp_path, tiny_model_dir, env_server,
                                                                 capsys, monkeypatch):
    _, url = env_server
    config = tiny_config(tmp_path, url, tiny_model_dir, total_steps=3, checkpoint_every=10)
    real_update = train.policy_update

    def update_then_signal(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the step is being trained on
        return real_update(*args, **kwargs)

    monkeypatch.setattr(train, "policy_update", update_then_signal)
    assert train.main(["--config", write_config(tmp_path, config)]) == 0
    lines = _step_lines(capsys.readouterr().out)
    assert [line["event"] for line in lines] == ["start", "checkpoint", "step", "stopped"]
    assert lines[2]["step"] == 1 and lines[2]["checkpoint"].endswith("step-00000001")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler removed again


def test_second_mini_batch_is_off_policy_and_gets_clipped(tiny_model_dir, env_server):
    _, url = env_server
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    generator = HFGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer), Sampling(1.0, 0.9, 50), device)
    torch.manual_seed(5)
    rollouts = run_rollouts(EnvClient(url), generator, ChatTokens(tokenizer), ["repo__a-1"], 4, 0,
                            RolloutLimits(2, 16, 8, 1024), lambda: False)
    _, items = train.training_items(rollouts, 4, False, False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0)
    common = dict(pad_id=tokenizer.pad_token_id, device=device, micro_batch_tokens=4096, max_grad_norm=1.0,
                  track_kl=False)
    # A clip range so tight that any moved token ratio on the wrong side of it clips.
    tight = loss_settings("grpo", 16, clip_low=1e-6, clip_high=1e-6, kl_beta=0.0)
    on_policy = policy_update(model, optimizer, scheduler, items, tight, mini_batches=1, **common)
    assert on_policy["clip_ratio"] == 0.0  # pi_old is pi itself: every ratio is exactly 1
    off_policy = policy_update(model, optimizer, scheduler, items, tight, mini_batches=2, **common)
    # Two optimizer updates; the second half of the batch is scored against
    # pi_old from before the first one, so its ratios have moved.
    assert scheduler.last_epoch == 3
    assert 0.0 < off_policy["clip_ratio"] < 1.0


def _fake_rollout(instance, reward, scale=1.0, hit_limit=False, answered=True):
    from types import SimpleNamespace
    return SimpleNamespace(
        episode=SimpleNamespace(instance_id=instance),
        sequence=SimpleNamespace(ids=[1, 2], mask=[0, 1]),
        outcome=SimpleNamespace(reward=reward, advantage_scale=scale, hit_turn_limit=hit_limit, answered=answered))


def test_training_items_group_by_instance_and_mask_unanswered_rollouts():
    rollouts = [_fake_rollout("a", 1.0), _fake_rollout("b", 0.0), _fake_rollout("a", 0.0),
                _fake_rollout("b", 1.0, scale=0.5, hit_limit=True, answered=False)]
    ordered, items = train.training_items(rollouts, 2, False, True)
    assert [r.episode.instance_id for r in ordered] == ["a", "a", "b", "b"]
    assert [it.advantage for it in items] == [0.5, -0.5, -0.5, 0.25]
    assert [it.weight for it in items] == [1.0, 1.0, 1.0, 0.0]
    # An instance drawn twice in one batch (across an epoch boundary) makes two groups.
    twice = [_fake_rollout("a", r) for r in (1.0, 0.0, 3.0, 1.0)]
    _, items = train.training_items(twice, 2, False, False)
    assert [it.advantage for it in items] == [0.5, -0.5, 1.0, -1.0]
    with pytest.raises(RuntimeError, match="not a multiple of group_size 3"):
        train.training_items(twice, 3, False, False)

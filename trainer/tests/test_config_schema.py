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


# Values around every keyword the schema uses: valid ones, and each kind of violation.
PROBES = [
    {},
    {"seed": 1.0},                       # JSON Schema: an integer may be written 1.0
    {"seed": 1.5},
    {"seed": True},                      # a boolean is not a number
    {"top_k": -3},
    {"algorithm": "ppo"},
    {"generator": "hf", "dtype": "float16"},
    {"importance_sampling_cap": None},
    {"importance_sampling_cap": "2"},
    {"max_new_tokens_per_turn": None},
    {"max_new_tokens_per_turn": 0},
    {"chat_template": ""},
    {"chat_template_kwargs": {"enable_thinking": False, "x": [1, {"y": None}]}},
    {"chat_template_kwargs": []},
    {"lora": {"target_modules": []}},
    {"lora": {"target_modules": ["q_proj", ""]}},
    {"lora": {"target_modules": "all-linear", "rank": 4}},
    {"data": {"instance_ids": None, "path": "a.jsonl"}},
    {"data": {"instance_ids": ["a", 3]}},
    {"vllm": {"tensor_parallel_size": 0}},
    {"env_timeout_s": 0.001},
    {"env_timeout_s": -1},
    {"total_steps": 9007199254740992},
    {"surprise": 1},
]


@pytest.mark.parametrize("change", PROBES)
def test_the_hand_written_validator_agrees_with_jsonschema(change):
    # jsonschema is a test-only package (trainer/requirements.txt); the trainer never imports it.
    jsonschema = pytest.importorskip("jsonschema")
    from trainer.json_schema import first_violation, iter_violations

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    value = {**MINIMAL, **change}
    reference = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    ours = list(iter_violations(value, schema))
    assert bool(ours) == bool(reference), (ours, [e.message for e in reference])
    if reference:
        best = jsonschema.exceptions.best_match(reference)
        assert first_violation(value, schema).path == tuple(best.absolute_path)


def test_a_missing_required_key_is_named():
    from trainer.json_schema import first_violation

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    violation = first_violation({k: v for k, v in MINIMAL.items() if k != "env_url"}, schema)
    assert violation.path == () and "'env_url' is a required property" in violation.message


def test_a_schema_keyword_the_validator_lacks_is_refused():
    from trainer.json_schema import SchemaError, check_schema_keywords

    check_schema_keywords({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}})
    with pytest.raises(SchemaError, match="'pattern' is not implemented"):
        check_schema_keywords({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}})


def test_the_committed_schema_uses_only_implemented_keywords():
    from trainer.json_schema import check_schema_keywords

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        check_schema_keywords(json.load(f))


def test_configs_validate_where_jsonschema_cannot_be_imported():
    # The bare GPU image has no jsonschema (trainer/README.md "Install"): block it and validate.
    import subprocess
    import sys

    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'jsonschema': raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from trainer.config import parse_config, ConfigError\n"
            f"base = {MINIMAL!r}\n"
            "assert parse_config(base).total_steps == 10\n"
            "try:\n"
            "    parse_config({**base, 'seed': -1})\n"
            "except ConfigError as e:\n"
            "    assert \"config key 'seed':\" in str(e), e\n"
            "else:\n"
            "    raise SystemExit('a negative seed passed')\n"
            "assert 'jsonschema' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

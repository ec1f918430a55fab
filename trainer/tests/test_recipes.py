"""Recipe presets: each recipe sets its whole recipe from
lib/recipes/presets.json, with a citation per value; explicit keys override."""

import re

import pytest

from trainer.config import ConfigError, parse_config, parse_config_with_recipe
from trainer.recipes import ENVIRONMENT_KEYS, load_presets

MINIMAL = {"model_path": "/models/qwen3", "output_dir": "/runs/a", "env_url": "http://127.0.0.1:9",
           "data": {"instance_ids": ["a", "b"]}, "total_steps": 10}


def test_codescout_gets_codescouts_optimisation():
    c = parse_config({**MINIMAL, "recipe": "codescout"})
    # CodeScout §3.4, §4.1: GSPO, clip 3e-4/4e-4, no std, no KL, constant lr 1e-6, 4 turns, masking.
    assert (c.algorithm, c.clip_low, c.clip_high, c.normalize_advantage_std) == ("gspo", 3e-4, 4e-4, False)
    assert (c.kl_beta, c.track_kl, c.lr, c.lr_schedule, c.warmup_ratio) == (0.0, False, 1e-6, "constant", 0.0)
    assert (c.max_turns, c.temperature, c.mask_unanswered_at_turn_limit) == (4, 1.0, True)


@pytest.mark.parametrize("recipe", ["codegrep-v1", "codegrep-v2", "codegrep-v3"])
def test_codegrep_recipes_get_codegreps_optimisation(recipe):
    c = parse_config({**MINIMAL, "recipe": recipe})
    # CodeGrep §3.6, App. A.4: GRPO, beta 0.02, 5e-6 cosine with 5% warmup, 1.0/0.9/50, 4 turns, 4096 tokens.
    assert (c.algorithm, c.kl_beta, c.normalize_advantage_std, c.clip_low, c.clip_high) == ("grpo", 0.02, True, 0.2, 0.2)
    assert (c.lr, c.lr_schedule, c.warmup_ratio, c.temperature, c.top_p, c.top_k) == (5e-6, "cosine", 0.05, 1.0, 0.9, 50)
    assert (c.max_turns, c.max_new_tokens, c.mask_unanswered_at_turn_limit, c.track_kl) == (4, 4096, False, True)


def test_the_default_recipe_is_codegrep_v3():
    assert parse_config(MINIMAL).recipe == "codegrep-v3"


def test_explicit_keys_override_the_preset_and_are_reported_as_config():
    c, recipe = parse_config_with_recipe({**MINIMAL, "recipe": "codescout", "lr": 2e-6, "max_turns": 6,
                                          "clip_high": 5e-4})
    assert (c.lr, c.max_turns, c.clip_high, c.clip_low) == (2e-6, 6, 5e-4, 3e-4)
    assert recipe["lr"] == {"value": 2e-6, "source": "config"}
    assert recipe["clip_high"] == {"value": 5e-4, "source": "config"}
    assert recipe["clip_low"]["source"].startswith("CodeScout §4.1")


def test_an_overridden_algorithm_brings_its_own_loss_shape_and_keeps_the_recipes_beta():
    c = parse_config({**MINIMAL, "recipe": "codegrep-v3", "algorithm": "gspo"})
    assert (c.clip_low, c.clip_high, c.normalize_advantage_std, c.kl_beta) == (3e-4, 4e-4, False, 0.02)
    c = parse_config({**MINIMAL, "recipe": "codescout", "algorithm": "dr_grpo"})
    assert (c.clip_low, c.clip_high, c.normalize_advantage_std, c.kl_beta) == (0.2, 0.2, False, 0.0)


def test_unknown_recipe_is_a_config_error_naming_the_choices():
    with pytest.raises(ConfigError, match="config key 'recipe': must be one of codegrep-v1, codegrep-v2, "
                                          "codegrep-v3, codescout, got 'v3'"):
        parse_config({**MINIMAL, "recipe": "v3"})


def test_every_preset_value_cites_its_source():
    presets = load_presets()
    trainer_keys = {"algorithm", "kl_beta", "lr", "lr_schedule", "warmup_ratio", "temperature", "top_p", "top_k",
                    "max_turns", "max_new_tokens", "mask_unanswered_at_turn_limit", "track_kl"}
    for name, recipe in presets["recipes"].items():
        assert set(recipe) == trainer_keys | set(ENVIRONMENT_KEYS), name
        for key, entry in recipe.items():
            assert set(entry) == {"value", "source"}, (name, key)
            assert re.search(r"(CodeGrep|CodeScout) (§|App\.)", entry["source"]), (name, key, entry["source"])
    for name, shape in presets["algorithms"].items():
        assert set(shape) == {"clip_low", "clip_high", "normalize_advantage_std"}, name
        assert all("CodeScout" in e["source"] for e in shape.values()), name


def test_constant_schedule_keeps_the_peak_lr():
    from trainer.schedule import lr_multiplier

    constant = lr_multiplier("constant", 100, 0.0)
    assert [constant(i) for i in (0, 50, 99)] == [1.0, 1.0, 1.0]
    cosine = lr_multiplier("cosine", 100, 0.0)
    assert cosine(0) == 1.0 and cosine(99) < 0.01
    with pytest.raises(ValueError, match="unknown lr schedule"):
        lr_multiplier("linear", 10, 0.0)


# CodeScout §4.1 per model size: (batch, group, turns, context, fine-tuning).
@pytest.mark.parametrize("setup, expected", [
    ("codescout-1.7b", (8, 8, 4, 32768, "full")),
    ("codescout-4b", (8, 8, 6, 40960, "full")),
    ("codescout-14b", (32, 4, 4, 51200, "lora")),
])
def test_a_paper_setup_gets_the_papers_shape_for_its_model_size(setup, expected):
    c, effective = parse_config_with_recipe({**MINIMAL, "paper_setup": setup})
    assert (c.batch_size, c.group_size, c.max_turns, c.max_seq_len, c.finetune) == expected
    # CodeScout §3.4: asynchronous, staleness up to 4; the setup brings the CodeScout recipe (GSPO, its clip).
    assert (c.mode, c.max_staleness, c.recipe, c.algorithm, c.clip_low) == ("async", 4, "codescout", "gspo", 3e-4)
    for key in ("batch_size", "group_size", "max_turns", "max_seq_len", "mode", "finetune"):
        assert re.search(r"CodeScout §\d", effective[key]["source"]), (key, effective[key])
    assert effective["paper_setup"] == {"value": setup, "source": "config"}


def test_an_explicit_key_wins_over_the_paper_setup():
    c, effective = parse_config_with_recipe({**MINIMAL, "paper_setup": "codescout-4b", "batch_size": 2,
                                             "finetune": "lora"})
    assert (c.batch_size, c.finetune, c.group_size) == (2, "lora", 8)
    assert effective["batch_size"] == {"value": 2, "source": "config"}


def test_without_a_paper_setup_lora_and_sync_stay_the_default():
    c = parse_config({**MINIMAL, "recipe": "codescout"})
    assert (c.finetune, c.mode, c.lora.r, c.batch_size, c.group_size) == ("lora", "sync", 32, 64, 8)


def test_an_unknown_paper_setup_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="config key 'paper_setup': must be one of codescout-1.7b, codescout-14b"):
        parse_config({**MINIMAL, "paper_setup": "codescout-7b"})


def test_full_fine_tuning_with_a_kl_term_is_refused():
    with pytest.raises(ConfigError, match="config key 'finetune': full fine-tuning has no frozen reference"):
        parse_config({**MINIMAL, "finetune": "full", "recipe": "codegrep-v3"})


def test_the_codescout_rft_preset_holds_the_papers_warm_start_numbers_each_cited():
    # CodeScout §4.1: CodeScout-14B rollouts on 7.7K instances, kept at F1 = 1.0 (file, module, function),
    # ~4K examples, 1 epoch, lr 5e-5, cosine, warmup 0.1, global batch 8, AdamW; then RL 100 steps on 800
    # instances RFT did not see.
    from trainer.recipes import RFT_TRAINER_KEYS, resolve_rft, rft_names

    rft = load_presets()["rft"]["codescout"]
    values = {k: e["value"] for k, e in rft.items()}
    assert values == {"teacher": "CodeScout-14B", "sampled_instances": 7700,
                      "keep_min_f1": {"file": 1.0, "module": 1.0, "function": 1.0}, "kept_examples": 4000,
                      "epochs": 1, "lr": 5e-5, "lr_schedule": "cosine", "warmup_ratio": 0.1, "global_batch_size": 8,
                      "optimizer": "adamw", "rl_steps": 100, "rl_instances": 800}
    assert all(e["source"].startswith("CodeScout §4.1") for e in rft.values())
    assert rft_names() == ["codescout"]
    merged, effective = resolve_rft({"lr": 1e-4})
    assert {k: merged[k] for k in RFT_TRAINER_KEYS} == {"lr": 1e-4, "lr_schedule": "cosine", "warmup_ratio": 0.1,
                                                       "epochs": 1, "global_batch_size": 8}
    assert effective["lr"] == {"value": 1e-4, "source": "config"}
    assert effective["recipe"] == {"value": "codescout", "source": "default"}
    with pytest.raises(ValueError, match="must be one of the RFT presets codescout"):
        resolve_rft({"recipe": "codegrep-v3"})

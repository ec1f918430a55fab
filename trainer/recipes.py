"""Recipe presets: CodeGrep v1/v2/v3 and CodeScout, read from lib/recipes/presets.json.

That JSON file is the one place the papers' recipe values live; the
TypeScript side (lib/recipes/index.ts) reads the same file for what the
environment needs (answer format, reward, masking, turn limit). A config's
`recipe` fills every trainer key the preset names, then the recipe's
algorithm fills its loss shape (clip range, std normalisation); keys given
explicitly in the config win over both. `resolve_recipe` returns the merged
config plus the effective recipe with, per key, its value and where it came
from (the paper section, or "config" for an explicit key).
"""

from __future__ import annotations

import json
import os

PRESETS_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "recipes",
                            "presets.json")

# Preset keys that describe the environment (the TypeScript server applies
# them); the trainer reports them but has no config key for them.
ENVIRONMENT_KEYS = ("reward", "advantage_scale", "answer_format")


def load_presets(path: str = PRESETS_PATH) -> dict:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"recipe presets {path!r} not found (they ship with the repository: lib/recipes/)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def recipe_names(presets: dict = None) -> list:
    return sorted((presets or load_presets())["recipes"])


def setup_names(presets: dict = None) -> list:
    return sorted(k for k in (presets or load_presets()).get("setups", {}) if not k.startswith("$"))


def _fill(raw: dict, merged: dict, effective: dict, key: str, entry: dict) -> None:
    """One preset key: the config's value wins (source "config"); else the preset's
    {value, source} fills `merged` and is recorded as it is."""
    if raw.get(key) is not None:
        effective[key] = {"value": raw[key], "source": "config"}
    else:
        merged[key] = entry["value"]
        effective[key] = dict(entry)


def apply_setup(raw: dict, presets: dict) -> tuple:
    """(config with the `paper_setup` preset's keys filled in where not given, their
    effective entries). A paper setup (presets.json `setups`) is one model size's
    training setup in a paper: batch x group, turns, context, mode, fine-tuning."""
    name = raw.get("paper_setup")
    if name is None:
        return raw, {}
    setups = presets.get("setups", {})
    if name not in setup_names(presets):
        raise ValueError(f"config key 'paper_setup': must be one of {', '.join(setup_names(presets))} (or null), "
                         f"got {name!r}")
    merged, effective = dict(raw), {"paper_setup": {"value": name, "source": "config"}}
    for key, entry in setups[name].items():
        _fill(raw, merged, effective, key, entry)
    return merged, effective


def resolve_recipe(raw: dict, presets: dict = None) -> tuple:
    """(config dict with the preset applied, effective recipe {key: {value, source}}).

    `raw` is the config as given; its `paper_setup` (if any) fills its keys
    first, then `recipe` (default codegrep-v3) names the preset. Raises
    ValueError naming a bad setup, recipe or algorithm.
    """
    presets = presets or load_presets()
    raw, from_setup = apply_setup(raw, presets)
    name = raw.get("recipe", "codegrep-v3")
    if name not in presets["recipes"]:
        raise ValueError(f"config key 'recipe': must be one of {', '.join(recipe_names(presets))}, got {name!r}")
    recipe = presets["recipes"][name]
    merged = dict(raw)
    effective = {"recipe": {"value": name, "source": "config" if "recipe" in raw else "default"}}
    effective.update(from_setup)
    for key, entry in recipe.items():
        if key in from_setup:
            continue  # the paper setup's value (or the config's), already in `merged`
        if key in ENVIRONMENT_KEYS:
            effective[key] = dict(entry)
            continue
        _fill(raw, merged, effective, key, entry)
    algorithm = merged["algorithm"]
    if algorithm not in presets["algorithms"]:
        raise ValueError(f"config key 'algorithm': must be one of {', '.join(presets['algorithms'])}, "
                         f"got {algorithm!r}")
    for key, entry in presets["algorithms"][algorithm].items():
        _fill(raw, merged, effective, key, entry)
    return merged, effective


# The RFT preset keys that are trainer.sft config keys; the rest of a preset (teacher, keep filter, the RL
# that follows) is for the stage that samples and filters the trajectories (the TypeScript RFT stage).
RFT_TRAINER_KEYS = ("lr", "lr_schedule", "warmup_ratio", "epochs", "global_batch_size")


def rft_names(presets: dict = None) -> list:
    return sorted(k for k in (presets or load_presets()).get("rft", {}) if not k.startswith("$"))


def resolve_rft(raw: dict, presets: dict = None) -> tuple:
    """(SFT config dict with the `recipe` RFT preset applied, effective recipe {key: {value, source}}).

    `recipe` (default "codescout", CodeScout §4.1) names a preset of presets.json `rft`; it fills the SFT
    keys the config leaves out. Raises ValueError naming a bad preset or an optimizer trainer.sft lacks."""
    presets = presets or load_presets()
    name = raw.get("recipe", "codescout")
    if name not in rft_names(presets):
        raise ValueError(f"config key 'recipe': must be one of the RFT presets {', '.join(rft_names(presets))} "
                         f"(lib/recipes/presets.json rft), got {name!r}")
    preset = presets["rft"][name]
    if preset["optimizer"]["value"] != "adamw":
        raise ValueError(f"RFT preset {name!r}: optimizer {preset['optimizer']['value']!r}; trainer.sft runs AdamW")
    merged = dict(raw)
    effective = {"recipe": {"value": name, "source": "config" if "recipe" in raw else "default"},
                 "optimizer": dict(preset["optimizer"])}
    for key in RFT_TRAINER_KEYS:
        _fill(raw, merged, effective, key, preset[key])
    return merged, effective

"""The SFT config (`python -m trainer.sft --config CONFIG.json`): keys, defaults, clear errors.

The optimisation keys (lr, its schedule and warmup, epochs, global batch) come from the `recipe` preset
in lib/recipes/presets.json `rft` (default `codescout`: CodeScout §4.1's RFT warm start of Qwen3-1.7B);
keys given in the config win. Unknown keys are an error, as in trainer/config.py, whose type checks this
file reuses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from .config import (DTYPES, FINETUNES, LR_SCHEDULES, LoraConfig, _build_with_recipe, _check_optimizer, _fail,
                     read_config_file)
from .recipes import resolve_rft

FROM_RECIPE = None


@dataclass(frozen=True)
class SftConfig:
    model_dir: str
    output_dir: str
    # JSONL, one kept trajectory per line: {"instance_id", "messages": [OpenAI chat messages], "tools": [...]}.
    examples_path: str
    # The RFT preset of lib/recipes/presets.json `rft` that fills the keys below marked *recipe*.
    recipe: str = "codescout"
    finetune: str = "lora"
    lora: LoraConfig = field(default_factory=LoraConfig)
    lr: float = FROM_RECIPE  # recipe
    lr_schedule: str = FROM_RECIPE  # recipe: "cosine" (after linear warmup) or "constant"
    warmup_ratio: float = FROM_RECIPE  # recipe
    epochs: int = FROM_RECIPE  # recipe
    # Examples per optimizer step, reached by gradient accumulation over micro-batches.
    global_batch_size: int = FROM_RECIPE  # recipe
    seed: int = 0
    save_every: int = 50
    keep_checkpoints: int = 3
    # Where to write the tokenized examples (one JSON line each: instance_id, input_ids, policy_mask);
    # null = <output_dir>/tokens.jsonl.
    tokens_out: Optional[str] = None
    # Padded tokens per forward/backward (the global batch is split into micro-batches of at most this).
    micro_batch_tokens: int = 16384
    # A longer example is an error naming it (nothing is silently cut).
    max_seq_len: int = 32768
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = True
    dtype: str = "auto"
    chat_template_kwargs: dict = field(default_factory=dict)
    chat_template: Optional[str] = None


def parse_sft_config_with_recipe(raw) -> tuple:
    """(SftConfig, effective recipe {key: {value, source}}) from a decoded JSON object."""
    config, effective = _build_with_recipe(SftConfig, raw, resolve_rft)
    _check_ranges(config)
    return config, effective


def _check_ranges(c: SftConfig) -> None:
    for name in ("epochs", "global_batch_size", "save_every", "keep_checkpoints", "micro_batch_tokens", "max_seq_len"):
        if getattr(c, name) < 1:
            _fail(name, f"must be >= 1, got {getattr(c, name)}")
    if c.finetune not in FINETUNES:
        _fail("finetune", f"must be one of {', '.join(FINETUNES)}, got {c.finetune!r}")
    if c.lr_schedule not in LR_SCHEDULES:
        _fail("lr_schedule", f"must be one of {', '.join(LR_SCHEDULES)}, got {c.lr_schedule!r}")
    if c.dtype not in DTYPES:
        _fail("dtype", f"must be one of {', '.join(DTYPES)}, got {c.dtype!r}")
    _check_optimizer(c)
    if c.weight_decay < 0:
        _fail("weight_decay", f"must be >= 0, got {c.weight_decay}")
    if c.lora.r < 1 or c.lora.alpha <= 0:
        _fail("lora", f"r must be >= 1 and alpha > 0, got r={c.lora.r} alpha={c.lora.alpha}")
    if not 0 <= c.lora.dropout < 1:
        _fail("lora.dropout", f"must be in [0, 1), got {c.lora.dropout}")
    if not os.path.isfile(c.examples_path):
        _fail("examples_path", f"file {c.examples_path!r} does not exist")
    if c.chat_template is not None and not os.path.isfile(c.chat_template):
        _fail("chat_template", f"file {c.chat_template!r} does not exist")


def load_sft_config(path: str) -> tuple:
    """(SftConfig, effective recipe) from the JSON file at `path`."""
    return parse_sft_config_with_recipe(read_config_file(path))

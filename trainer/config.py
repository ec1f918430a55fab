"""The trainer's one JSON config: defaults, validation and clear errors.

Every paper parameter that the trainer uses has its default here, next to the
section it comes from. Loss-specific defaults (clip range, KL coefficient, std
normalisation) live with the loss in ``loss.py`` and are only *overridable* here.

Unknown keys are an error, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional


class ConfigError(ValueError):
    """A config value is missing, of the wrong type or out of range."""


ALGORITHMS = ("grpo", "gspo", "dr_grpo")
GENERATORS = ("auto", "hf", "vllm")
DTYPES = ("auto", "bfloat16", "float32")


@dataclass(frozen=True)
class LoraConfig:
    # CodeGrep App. A.4: LoRA rank 32, alpha 64 on all linear projections.
    r: int = 32
    alpha: int = 64
    dropout: float = 0.0
    # "all-linear" is peft's name for every linear layer except the output head.
    target_modules: Any = "all-linear"


@dataclass(frozen=True)
class DataConfig:
    # Exactly one of the two: an inline list of instance ids, or a file of them.
    instance_ids: Optional[list] = None
    # A .jsonl file (one object per line, or one bare string per line) or a
    # .parquet file; `column` names the field holding the instance id.
    path: Optional[str] = None
    column: str = "instance_id"


@dataclass(frozen=True)
class VllmConfig:
    # CodeGrep App. A.4: colocated vLLM takes 35% of GPU memory.
    gpu_memory_utilization: float = 0.35
    enable_prefix_caching: bool = True
    # Sleep (weights to CPU, KV cache freed) during each update, wake for rollouts.
    sleep_mode: bool = True
    # vLLM tensor parallelism for large models; needs one trainer process (gpus: 1).
    tensor_parallel_size: int = 1


@dataclass(frozen=True)
class TrainConfig:
    model_path: str
    output_dir: str
    env_url: str
    data: DataConfig
    total_steps: int
    seed: int = 0
    algorithm: str = "grpo"
    # CodeGrep App. A.4: 64 prompts per step x 8 rollouts per prompt.
    batch_size: int = 64
    group_size: int = 8
    # CodeGrep §3.2: at most 4 turns (3 exploration + 1 answer). The server
    # enforces the limit; the trainer stops there too in case it does not.
    max_turns: int = 4
    # CodeGrep App. A.4: 4096 generated tokens per rollout (all turns together).
    max_new_tokens: int = 4096
    # Optional cap on one turn's generation (defaults to the rollout budget).
    max_new_tokens_per_turn: Optional[int] = None
    # Prompt + observations + generations; a rollout that would outgrow it ends.
    max_seq_len: int = 32768
    # CodeGrep App. A.4 sampling: temperature 1.0, top-p 0.9, top-k 50.
    temperature: float = 1.0
    top_p: float = 0.9
    top_k: int = 50
    # CodeGrep App. A.4: peak lr 5e-6, cosine decay, 5% linear warmup.
    lr: float = 5e-6
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    # Optimizer updates per rollout batch (1 = on-policy, as in the papers'
    # synchronous runs; >1 makes the importance ratio and its clipping matter).
    mini_batches_per_step: int = 1
    # Overrides of the algorithm's defaults in loss.py (None = the default).
    kl_beta: Optional[float] = None
    clip_low: Optional[float] = None
    clip_high: Optional[float] = None
    normalize_advantage_std: Optional[bool] = None
    # CodeScout §3.4: mask the loss of rollouts that hit the turn limit
    # without answering.
    mask_unanswered_at_turn_limit: bool = False
    # Compute KL-to-reference for the log even when kl_beta is 0 (one extra
    # forward pass with the adapter disabled).
    track_kl: bool = True
    lora: LoraConfig = field(default_factory=LoraConfig)
    checkpoint_every: int = 10
    keep_checkpoints: int = 3
    # Training forward/backward runs in micro-batches of at most this many
    # (padded) tokens; gradients accumulate to one update.
    micro_batch_tokens: int = 16384
    gradient_checkpointing: bool = True
    generator: str = "auto"
    # HF engine (generate_hf.py): padded KV-cache tokens per generate call,
    # rows x (longest prompt + new tokens); null = from free GPU memory.
    hf_generation_tokens: Optional[int] = None
    dtype: str = "auto"
    # Extra keyword arguments for the chat template, e.g. {"enable_thinking": false}.
    chat_template_kwargs: dict = field(default_factory=dict)
    vllm: VllmConfig = field(default_factory=VllmConfig)
    env_timeout_s: float = 600.0


def _fail(key: str, problem: str) -> None:
    raise ConfigError(f"config key '{key}': {problem}")


def _build(cls, raw: Any, prefix: str):
    """Instantiate dataclass `cls` from dict `raw`, checking keys and types."""
    if not isinstance(raw, dict):
        _fail(prefix or "<root>", f"expected an object, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        _fail(f"{prefix}{unknown[0]}", f"unknown key (known: {', '.join(sorted(fields))})")
    values = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if name not in raw:
            if required:
                _fail(key, "is required")
            continue
        value = raw[name]
        nested = {"lora": LoraConfig, "data": DataConfig, "vllm": VllmConfig}.get(name)
        if nested is not None:
            value = _build(nested, value, f"{key}.")
        else:
            value = _check_type(key, value, f.type)
        values[name] = value
    return cls(**values)


def _check_type(key: str, value: Any, annotation: str) -> Any:
    """Check a JSON value against a dataclass field annotation (as a string)."""
    optional = annotation.startswith("Optional[")
    base = annotation[len("Optional["):-1] if optional else annotation
    if value is None:
        if optional:
            return None
        _fail(key, "must not be null")
    if base == "Any":
        return value
    if base == "bool":
        if not isinstance(value, bool):
            _fail(key, f"expected true/false, got {value!r}")
        return value
    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(key, f"expected an integer, got {value!r}")
        return value
    if base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _fail(key, f"expected a finite number, got {value!r}")
        return float(value)
    if base == "str":
        if not isinstance(value, str) or not value:
            _fail(key, f"expected a non-empty string, got {value!r}")
        return value
    if base == "list":
        if not isinstance(value, list):
            _fail(key, f"expected a list, got {value!r}")
        return value
    if base == "dict":
        if not isinstance(value, dict):
            _fail(key, f"expected an object, got {value!r}")
        return value
    raise AssertionError(f"unhandled annotation {annotation} for {key}")


def _check_ranges(c: TrainConfig) -> None:
    positive = ["total_steps", "batch_size", "max_turns", "max_new_tokens", "max_seq_len",
                "top_k", "checkpoint_every", "keep_checkpoints", "micro_batch_tokens",
                "mini_batches_per_step"]
    for name in positive:
        if getattr(c, name) < 1:
            _fail(name, f"must be >= 1, got {getattr(c, name)}")
    if c.group_size < 2:
        _fail("group_size", f"must be >= 2 (group-relative advantages need a group), got {c.group_size}")
    if c.hf_generation_tokens is not None and c.hf_generation_tokens < c.max_seq_len:
        _fail("hf_generation_tokens", f"must be >= max_seq_len ({c.max_seq_len}) so one rollout fits a generate call, "
                                      f"got {c.hf_generation_tokens}")
    if c.vllm.tensor_parallel_size < 1:
        _fail("vllm.tensor_parallel_size", f"must be >= 1, got {c.vllm.tensor_parallel_size}")
    if c.max_new_tokens_per_turn is not None and c.max_new_tokens_per_turn < 1:
        _fail("max_new_tokens_per_turn", f"must be >= 1, got {c.max_new_tokens_per_turn}")
    if c.algorithm not in ALGORITHMS:
        _fail("algorithm", f"must be one of {', '.join(ALGORITHMS)}, got {c.algorithm!r}")
    if c.generator not in GENERATORS:
        _fail("generator", f"must be one of {', '.join(GENERATORS)}, got {c.generator!r}")
    if c.dtype not in DTYPES:
        _fail("dtype", f"must be one of {', '.join(DTYPES)}, got {c.dtype!r}")
    if not c.temperature > 0:
        _fail("temperature", f"must be > 0, got {c.temperature}")
    if not 0 < c.top_p <= 1:
        _fail("top_p", f"must be in (0, 1], got {c.top_p}")
    if not c.lr > 0:
        _fail("lr", f"must be > 0, got {c.lr}")
    if not 0 <= c.warmup_ratio < 1:
        _fail("warmup_ratio", f"must be in [0, 1), got {c.warmup_ratio}")
    if not c.max_grad_norm > 0:
        _fail("max_grad_norm", f"must be > 0, got {c.max_grad_norm}")
    for name in ("kl_beta", "clip_low", "clip_high"):
        value = getattr(c, name)
        if value is not None and value < 0:
            _fail(name, f"must be >= 0, got {value}")
    if c.lora.r < 1 or c.lora.alpha <= 0:
        _fail("lora", f"r must be >= 1 and alpha > 0, got r={c.lora.r} alpha={c.lora.alpha}")
    tm = c.lora.target_modules
    if not ((isinstance(tm, str) and tm) or (isinstance(tm, list) and tm and all(isinstance(m, str) and m for m in tm))):
        _fail("lora.target_modules", f"must be \"all-linear\" or a non-empty list of module names, got {tm!r}")
    if not 0 <= c.lora.dropout < 1:
        _fail("lora.dropout", f"must be in [0, 1), got {c.lora.dropout}")
    if not 0 < c.vllm.gpu_memory_utilization < 1:
        _fail("vllm.gpu_memory_utilization", f"must be in (0, 1), got {c.vllm.gpu_memory_utilization}")
    if (c.data.instance_ids is None) == (c.data.path is None):
        _fail("data", "give exactly one of 'instance_ids' (a list) or 'path' (a .jsonl/.parquet file)")
    if c.data.instance_ids is not None:
        if not c.data.instance_ids or not all(isinstance(i, str) and i for i in c.data.instance_ids):
            _fail("data.instance_ids", "must be a non-empty list of non-empty strings")
    if not c.env_url.startswith(("http://", "https://")):
        _fail("env_url", f"must be an http(s) URL, got {c.env_url!r}")


def parse_config(raw: Any) -> TrainConfig:
    """Validate a decoded JSON object and return the typed config."""
    config = _build(TrainConfig, raw, "")
    _check_ranges(config)
    return config


def load_config(path: str) -> TrainConfig:
    """Read and validate the JSON config at `path`."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path!r} is not valid JSON: {e}") from e
    return parse_config(raw)


def config_to_dict(config: TrainConfig) -> dict:
    return dataclasses.asdict(config)

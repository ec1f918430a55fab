"""The trainer's one JSON config: defaults, validation and clear errors.

The recipe's values (algorithm, KL coefficient, clip range, std normalisation,
lr and its schedule, sampling, turn and token limits, masking) come from the
`recipe` preset in lib/recipes/presets.json (trainer/recipes.py), each with its
paper section; keys given in the config override them. The other defaults are
here, next to the section they come from.

Unknown keys are an error, so a typo never silently falls back to a default.
Every config is also checked against trainer/config.schema.json, the contract
the TypeScript side writes to (generated from its zod schema), so the two
cannot drift apart unnoticed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .json_schema import check_schema_keywords, first_violation
from .recipes import resolve_recipe

# The config's contract with the training activity, generated from the TypeScript side's zod schema
# (schemas/training/trainer-config.ts; regenerate with `npx tsx scripts/write-trainer-config-schema.ts`).
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.schema.json")


class ConfigError(ValueError):
    """A config value is missing, of the wrong type or out of range."""


ALGORITHMS = ("grpo", "gspo", "dr_grpo")
GENERATORS = ("auto", "hf", "vllm")
DTYPES = ("auto", "bfloat16", "float32")
LR_SCHEDULES = ("cosine", "constant")
MODES = ("sync", "async")
FINETUNES = ("lora", "full")

# The value of a field the recipe preset always fills (lib/recipes/presets.json);
# never used as such: parse_config applies the preset before building.
FROM_RECIPE: Any = None


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
    # The recipe preset (lib/recipes/presets.json): codegrep-v1/v2/v3 or codescout.
    recipe: str = "codegrep-v3"
    # A paper's training setup for one model size (presets.json `setups`, e.g. "codescout-4b",
    # CodeScout §4.1): batch x group, turns, context, mode and fine-tuning; it also picks the recipe.
    paper_setup: Optional[str] = None
    # "lora" (CodeGrep App. A.4: rank 32 on all linear layers, base frozen) or "full" (every
    # weight trained, kept in fp32; CodeScout §4.1 trains its models without LoRA).
    finetune: str = "lora"
    # A checkpoint directory (trainer/checkpoint.py layout, e.g. an RFT warm start written by trainer.sft) whose
    # policy weights (LoRA adapter or full weights, matching `finetune`) the run starts from, with a fresh
    # optimizer and schedule at step 0 (CodeScout §4.1: RL from the RFT checkpoint). Ignored on resume.
    init_from: Optional[str] = None
    # --- filled from the recipe preset unless given (see presets.json for the sources)
    algorithm: str = FROM_RECIPE
    max_turns: int = FROM_RECIPE        # the server enforces it; the trainer stops there too
    max_new_tokens: int = FROM_RECIPE   # generated tokens per rollout, all turns together
    temperature: float = FROM_RECIPE
    top_p: float = FROM_RECIPE
    top_k: int = FROM_RECIPE            # 0 = no top-k truncation
    lr: float = FROM_RECIPE
    lr_schedule: str = FROM_RECIPE      # "cosine" (after linear warmup) or "constant"
    warmup_ratio: float = FROM_RECIPE
    kl_beta: float = FROM_RECIPE
    clip_low: float = FROM_RECIPE       # from the recipe's algorithm
    clip_high: float = FROM_RECIPE      # from the recipe's algorithm
    normalize_advantage_std: bool = FROM_RECIPE  # from the recipe's algorithm
    # Mask the loss of rollouts that hit the turn limit without answering (CodeScout §3.4).
    mask_unanswered_at_turn_limit: bool = FROM_RECIPE
    # Compute KL-to-reference for the log even when kl_beta is 0 (one extra
    # forward pass with the adapter disabled); off and kl_beta 0 = no reference forward.
    track_kl: bool = FROM_RECIPE
    # ---
    # CodeGrep App. A.4: 64 prompts per step x 8 rollouts per prompt.
    batch_size: int = 64
    group_size: int = 8
    # Optional cap on one turn's generation (defaults to the rollout budget).
    max_new_tokens_per_turn: Optional[int] = None
    # Prompt + observations + generations; a rollout that would outgrow it ends.
    max_seq_len: int = 32768
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    # Optimizer updates per rollout batch (1 = on-policy, as in the papers'
    # synchronous runs; >1 makes the importance ratio and its clipping matter).
    mini_batches_per_step: int = 1
    # "sync": each step learns from rollouts of its own weights. "async": CodeScout §3.4
    # (SkyRL's asynchronous training): a step may learn from rollouts sampled up to
    # `max_staleness` steps earlier (CodeScout: 4), with pi_old = the sampling policy, so the
    # importance ratio and the clip act on the stale samples (trainer/pipeline.py).
    mode: str = "sync"
    max_staleness: int = 4
    # Truncated importance sampling (Yao et al. 2025, "Your efficient RL
    # framework secretly brings you off-policy RL training"): weight each
    # token's policy-gradient term by min(pi_train_old / pi_sampler, cap) to
    # correct sampler/trainer mismatch (vLLM kernels, bf16). null = off. Needs
    # the sampler's log-probs (HF always; vLLM at temperature 1).
    importance_sampling_cap: Optional[float] = None
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
    # A Jinja chat template file that replaces the model's own (e.g. a
    # prefix-preserving one, CodeScout §4.1). Logged at start; null = the model's.
    chat_template: Optional[str] = None
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


# Annotations whose JSON value is taken as it is once its type is right: (type, how an error names it).
_PLAIN_TYPES = {"bool": (bool, "true/false"), "list": (list, "a list"), "dict": (dict, "an object")}


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
    if base in _PLAIN_TYPES:
        kind, expected = _PLAIN_TYPES[base]
        if not isinstance(value, kind):
            _fail(key, f"expected {expected}, got {value!r}")
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
    raise AssertionError(f"unhandled annotation {annotation} for {key}")


def _check_optimizer(c) -> None:
    """The keys the GRPO and SFT configs share: learning rate, warmup, gradient clip."""
    if not c.lr > 0:
        _fail("lr", f"must be > 0, got {c.lr}")
    if not 0 <= c.warmup_ratio < 1:
        _fail("warmup_ratio", f"must be in [0, 1), got {c.warmup_ratio}")
    if not c.max_grad_norm > 0:
        _fail("max_grad_norm", f"must be > 0, got {c.max_grad_norm}")


def _check_ranges(c: TrainConfig) -> None:
    positive = ["total_steps", "batch_size", "max_turns", "max_new_tokens", "max_seq_len",
                "checkpoint_every", "keep_checkpoints", "micro_batch_tokens",
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
    if c.top_k < 0:
        _fail("top_k", f"must be >= 0 (0 = off), got {c.top_k}")
    if c.finetune not in FINETUNES:
        _fail("finetune", f"must be one of {', '.join(FINETUNES)}, got {c.finetune!r}")
    if c.finetune == "full" and (c.kl_beta > 0 or c.track_kl):
        # The reference policy is the adapter-off network (policy.py); a full fine-tune has no adapter to turn off.
        _fail("finetune", "full fine-tuning has no frozen reference policy: set kl_beta to 0 and track_kl to false "
                          "(as CodeScout §3.4 does), or use finetune: lora")
    if c.mode not in MODES:
        _fail("mode", f"must be one of {', '.join(MODES)}, got {c.mode!r}")
    if c.max_staleness < 1:
        _fail("max_staleness", f"must be >= 1, got {c.max_staleness}")
    if c.lr_schedule not in LR_SCHEDULES:
        _fail("lr_schedule", f"must be one of {', '.join(LR_SCHEDULES)}, got {c.lr_schedule!r}")
    if c.importance_sampling_cap is not None and not c.importance_sampling_cap >= 1:
        _fail("importance_sampling_cap", f"must be >= 1 (or null = off), got {c.importance_sampling_cap}")
    if c.init_from is not None and not os.path.isfile(os.path.join(c.init_from, "COMPLETE")):
        _fail("init_from", f"{c.init_from!r} is not a complete checkpoint directory (no COMPLETE marker)")
    if c.chat_template is not None and not os.path.isfile(c.chat_template):
        _fail("chat_template", f"file {c.chat_template!r} does not exist")
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
    _check_optimizer(c)
    for name in ("kl_beta", "clip_low", "clip_high"):
        value = getattr(c, name)
        if value < 0:
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


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    check_schema_keywords(schema)  # a keyword trainer/json_schema.py lacks fails here, not silently
    return schema


def _check_schema(raw: dict) -> None:
    """Check the config as given against trainer/config.schema.json. It runs after
    this file's own checks, whose messages say more; what it adds is the shared
    contract (a key or type the TypeScript side would never write). The check is
    trainer/json_schema.py's, not the jsonschema package's: the bare GPU image
    has only torch, transformers, peft and accelerate (trainer/README.md)."""
    violation = first_violation(raw, _schema())
    if violation is not None:
        key = ".".join(str(part) for part in violation.path) or "<root>"
        _fail(key, f"{violation.message} (trainer/config.schema.json)")


def parse_config(raw: Any) -> TrainConfig:
    """Validate a decoded JSON object and return the typed config (recipe preset applied)."""
    return parse_config_with_recipe(raw)[0]


def _build_with_recipe(cls, raw: Any, resolve) -> tuple:
    """(dataclass `cls` built from `raw` once `resolve` applied its preset, effective recipe);
    a bad preset name is a ConfigError."""
    if not isinstance(raw, dict):
        _fail("<root>", f"expected an object, got {type(raw).__name__}")
    try:
        merged, effective = resolve(raw)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    return _build(cls, merged, ""), effective


def parse_config_with_recipe(raw: Any) -> tuple:
    """(config, effective recipe): the effective recipe maps each recipe key to
    {value, source}, source = the paper section or "config" (trainer/recipes.py)."""
    config, effective = _build_with_recipe(TrainConfig, raw, resolve_recipe)
    _check_ranges(config)
    _check_schema(raw)
    return config, effective


def load_config(path: str) -> TrainConfig:
    """Read and validate the JSON config at `path`."""
    return load_config_with_recipe(path)[0]


def load_config_with_recipe(path: str) -> tuple:
    """(config, effective recipe) from the JSON config at `path`."""
    return parse_config_with_recipe(read_config_file(path))


def read_config_file(path: str) -> Any:
    """The decoded JSON of a config file; a missing or malformed file is a ConfigError."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path!r} is not valid JSON: {e}") from e


def config_to_dict(config) -> dict:
    """A config (TrainConfig or trainer.sft's SftConfig) as the JSON object written beside a run."""
    return dataclasses.asdict(config)

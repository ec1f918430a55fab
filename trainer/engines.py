"""Which rollout engine runs, and why: the answer goes into the `start` line.

`generator: auto` takes colocated vLLM (CodeGrep App. A.4) on a GPU when it
imports, and the HF engine otherwise; the `start` line names the engine and
the reason (e.g. "auto: vLLM is not installed (ModuleNotFoundError: ...)"),
so a run never falls back quietly. `generator: vllm` without a working vLLM
is an error, not a fallback.
"""

from __future__ import annotations

import os

from .generate_hf import HFGenerator
from .generate_vllm import VllmGenerator, vllm_available


def choose_engine(requested: str, device_type: str, available=vllm_available, finetune: str = "lora") -> tuple:
    """(engine name, reason) for the config's `generator` on this device."""
    if requested == "hf":
        return "hf", "generator: hf (configured)"
    if finetune == "full":
        # generate_vllm.py hands vLLM a new LoRA adapter per step; pushing a whole model's
        # weights into the engine each step is not implemented.
        if requested == "vllm":
            raise RuntimeError("generator: vllm serves LoRA adapters only; with finetune: full set generator: hf")
        return "hf", "auto: finetune: full, and the vLLM engine serves LoRA adapters only"
    ok, detail = available()
    if requested == "vllm":
        if not ok:
            raise RuntimeError(f"generator: vllm, but vLLM does not import ({detail}); install "
                               "trainer/requirements-gpu.txt on a CUDA machine, or set generator: hf")
        if device_type != "cuda":
            raise RuntimeError("generator: vllm needs a CUDA device; this process has none (set generator: hf)")
        return "vllm", f"generator: vllm (configured; vLLM {detail})"
    if device_type != "cuda":
        return "hf", f"auto: no CUDA device ({device_type}), so vLLM cannot run"
    if not ok:
        return "hf", f"auto: vLLM is not installed ({detail})"
    return "vllm", f"auto: CUDA device and vLLM {detail}"


def make_generator(cfg, model, tokenizer, stops: list, device, sampling, world_size: int = 1, ranks=None):
    """(generator, reason) for this run; `ranks` (distributed.Ranks) under torchrun."""
    name, reason = choose_engine(cfg.generator, device.type, finetune=getattr(cfg, "finetune", "lora"))
    if name == "vllm":
        from .distributed import Ranks, tensor_parallel_group

        ranks = ranks or Ranks(world_size=1)
        group = tensor_parallel_group(ranks, cfg.vllm.tensor_parallel_size)
        return VllmGenerator(cfg.model_path, model, cfg.lora.r, stops, sampling, cfg.max_seq_len, cfg.seed,
                             cfg.vllm, os.path.join(cfg.output_dir, "vllm-adapters"), ranks.world_size,
                             rank=ranks.rank, group=group), reason
    budget = getattr(cfg, "hf_generation_tokens", None)
    generator = HFGenerator(model, tokenizer.pad_token_id, stops, sampling, device, token_budget=budget)
    if generator.token_budget < cfg.max_seq_len:
        raise ValueError(f"hf_generation_tokens {generator.token_budget} is below max_seq_len {cfg.max_seq_len}: "
                         "one rollout's KV cache would not fit a generate call")
    return generator, reason

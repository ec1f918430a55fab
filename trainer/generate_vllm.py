"""The vLLM rollout engine, colocated with training (CodeGrep App. A.4: vLLM
shares the GPUs with the trainer at 35 % of their memory, prefix caching on).

vLLM is optional (trainer/requirements-gpu.txt, installed by
scripts/setup-python.sh only where `nvidia-smi` works) and is imported only
inside this file's functions, so the trainer imports and runs without it.

Per step: `sync_weights` saves the current LoRA adapter and hands vLLM a new
LoRARequest (a fresh id, so no stale adapter is served), then wakes the engine
if it sleeps; `before_update` puts it to sleep (level 1: weights offloaded to
CPU, KV cache dropped) so the update gets the memory back. `generate` returns
Completions: token ids and, at temperature 1, vLLM's log-probs of them (vLLM
reports the raw logits' log-softmax, the trainer's quantity only at T = 1).

This path has not been run in this repository's CI (no GPU, no vLLM there);
tests cover the engine choice (engines.py) only.
"""

from __future__ import annotations

import os
import shutil

import torch

from .generate_hf import cut_at_stop
from .rollout import Completion


def vllm_available() -> tuple:
    """(True, version) when vLLM imports, else (False, the import error)."""
    try:
        import vllm
    except Exception as e:  # ImportError, or a CUDA / torch mismatch raised at import
        return False, f"{type(e).__name__}: {e}"
    return True, getattr(vllm, "__version__", "unknown")


class VllmGenerator:
    name = "vllm"

    def __init__(self, model_path: str, policy, lora_rank: int, stop_ids: list, sampling, max_seq_len: int,
                 seed: int, settings, adapter_dir: str, world_size: int = 1):
        from vllm import LLM

        tensor_parallel = int(getattr(settings, "tensor_parallel_size", 1) or 1)
        if tensor_parallel > 1 and world_size > 1:
            raise ValueError("vllm.tensor_parallel_size > 1 needs a single trainer process (gpus: 1); with torchrun "
                             "each rank runs its own vLLM engine on its own GPU")
        self.policy = policy
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        self.adapter_dir = adapter_dir
        self.lora_request = None
        self.sleep_mode = bool(getattr(settings, "sleep_mode", True))
        self.asleep = False
        self.settings = {"gpu_memory_utilization": settings.gpu_memory_utilization,
                         "enable_prefix_caching": settings.enable_prefix_caching,
                         "tensor_parallel_size": tensor_parallel, "sleep_mode": self.sleep_mode}
        engine = dict(model=model_path, enable_lora=True, max_lora_rank=lora_rank, max_loras=1,
                      gpu_memory_utilization=settings.gpu_memory_utilization, max_model_len=max_seq_len,
                      enable_prefix_caching=settings.enable_prefix_caching, seed=seed, dtype="bfloat16",
                      tensor_parallel_size=tensor_parallel, enable_sleep_mode=self.sleep_mode)
        try:
            # "vllm": ignore the model's generation_config.json (its repetition
            # penalty, top-k, ...); only the trainer's SamplingParams apply.
            self.llm = LLM(**engine, generation_config="vllm")
        except TypeError:  # a vLLM without the option never reads the model's defaults
            self.llm = LLM(**engine)

    def describe(self) -> dict:
        return {"engine": self.name, **self.settings}

    def sync_weights(self, step: int) -> None:
        from vllm.lora.request import LoRARequest

        if self.asleep:
            self.llm.wake_up()
            self.asleep = False
        path = os.path.join(self.adapter_dir, f"step-{step}")
        self.policy.save_pretrained(path)
        previous, self.lora_request = self.lora_request, LoRARequest(f"policy-step-{step}", step + 1, path)
        # A fresh id per step: vLLM never serves a stale cached adapter, and
        # with max_loras=1 it evicts the previous one on first use of the new.
        if previous is not None:
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    def before_update(self) -> None:
        """Free the GPU memory vLLM holds while the policy trains."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def generate(self, prompts: list, budgets: list, keys=None) -> list:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from .generate_hf import row_seed

        # Seeds from the rollouts' keys (as generate_hf.py) so a resumed or
        # resharded step asks for the same samples (vLLM's kernels may still differ).
        seeds = ([row_seed(k) % (2**31 - 1) for k in keys] if keys is not None
                 else torch.randint(0, 2**31 - 1, (len(prompts),)).tolist())
        want_logprobs = self.sampling.temperature == 1.0
        params = [SamplingParams(temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                 top_k=self.sampling.top_k if self.sampling.top_k > 0 else -1,
                                 repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                                 min_p=0.0, max_tokens=budget, seed=seed, logprobs=0 if want_logprobs else None,
                                 stop_token_ids=self.stop_ids, skip_special_tokens=False)
                  for budget, seed in zip(budgets, seeds)]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=self.lora_request, use_tqdm=False)
        stops = set(self.stop_ids)
        completions = []
        for o, budget in zip(outputs, budgets):
            sample = o.outputs[0]
            tokens = cut_at_stop(list(sample.token_ids), budget, stops)
            logprobs = None
            if want_logprobs and sample.logprobs:
                logprobs = [float(step[t].logprob) for step, t in zip(sample.logprobs, tokens)]
            completions.append(Completion(tokens=tokens, logprobs=logprobs))
        return completions

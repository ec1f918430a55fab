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

Under torchrun (trainer/distributed.py) every rank builds its own engine with
`distributed_executor_backend="external_launcher"`: vLLM then joins the
trainer's process group and puts the engine on the rank's LOCAL_RANK GPU
(vllm/v1/executor/uniproc_executor.py ExecutorWithExternalLauncher), instead
of the uniproc executor's cuda:0 on every rank. `vllm.tensor_parallel_size` k
> 1 makes vLLM split the torchrun world into tensor-parallel groups of k
consecutive ranks (the colocated layout of verl and ms-swift; CodeGrep App.
A.4 runs TP 8 on one 8-GPU node): the ranks of a group must ask for the same
generations, so each turn they gather their prompts, generate the union and
keep their own rows, and they play turns in lockstep (rollout.py).

The adapter is written per rank (its own directory), so no two processes write
one path. vLLM accepts only some LoRA ranks as `max_lora_rank`; the adapter's
rank is rounded up to the next one (a rank-r adapter loads into any larger slot).

This path has not been run on a GPU in this repository's CI (no GPU, no vLLM
there); trainer/tests/test_generate_vllm.py checks it against stand-ins with
the pinned vLLM's signatures (trainer/requirements-gpu.txt).
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
    except (ImportError, OSError, RuntimeError) as e:  # not installed, or a CUDA / torch build mismatch
        return False, f"{type(e).__name__}: {e}"
    return True, getattr(vllm, "__version__", "unknown")


# vllm/config/lora.py MaxLoRARanks at the pinned vLLM (trainer/requirements-gpu.txt).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_max_lora_rank(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds a rank-`rank` adapter."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"lora.r = {rank} is above the largest LoRA rank vLLM serves ({VLLM_LORA_RANKS[-1]}); "
                     "choose a smaller lora.r or set generator: hf")


def engine_kwargs(model_path: str, lora_rank: int, settings, max_seq_len: int, seed: int, world_size: int) -> dict:
    """LLM(...) keyword arguments (vllm/entrypoints/llm.py and vllm/engine/arg_utils.py EngineArgs)."""
    tensor_parallel = int(getattr(settings, "tensor_parallel_size", 1) or 1)
    if world_size > 1 and world_size % tensor_parallel:
        raise ValueError(f"vllm.tensor_parallel_size {tensor_parallel} does not divide the {world_size} trainer "
                         "processes: the tensor-parallel groups are consecutive ranks of the torchrun world")
    kwargs = dict(model=model_path, enable_lora=True, max_lora_rank=vllm_max_lora_rank(lora_rank), max_loras=1,
                  gpu_memory_utilization=settings.gpu_memory_utilization, max_model_len=max_seq_len,
                  enable_prefix_caching=settings.enable_prefix_caching, seed=seed, dtype="bfloat16",
                  tensor_parallel_size=tensor_parallel, enable_sleep_mode=bool(getattr(settings, "sleep_mode", True)),
                  # "vllm": ignore the model's generation_config.json (its repetition
                  # penalty, top-k, ...); only the trainer's SamplingParams apply.
                  generation_config="vllm")
    if world_size > 1:
        # One engine per torchrun rank, on that rank's GPU, inside the trainer's process group.
        kwargs["distributed_executor_backend"] = "external_launcher"
    return kwargs


class VllmGenerator:
    name = "vllm"

    def __init__(self, model_path: str, policy, lora_rank: int, stop_ids: list, sampling, max_seq_len: int,
                 seed: int, settings, adapter_dir: str, world_size: int = 1, rank: int = 0, group=None):
        """`group` (distributed.RankGroup): this rank's tensor-parallel group when
        vllm.tensor_parallel_size > 1 under torchrun; None = this process alone."""
        from vllm import LLM

        engine = engine_kwargs(model_path, lora_rank, settings, max_seq_len, seed, world_size)
        if world_size > 1 and engine["tensor_parallel_size"] > 1 and (group is None or group.size != engine["tensor_parallel_size"]):
            raise ValueError("vllm.tensor_parallel_size > 1 under torchrun needs the rank's tensor-parallel group "
                             "(distributed.tensor_parallel_group)")
        self.policy = policy
        self.stop_ids = list(stop_ids)
        self.sampling = sampling
        # Per rank: every rank saves its (identical) adapter where no other rank writes.
        self.adapter_dir = os.path.join(adapter_dir, f"rank-{rank}") if world_size > 1 else adapter_dir
        self.lora_request = None
        self.sleep_mode = engine["enable_sleep_mode"]
        self.asleep = False
        self.group = group if group is not None and group.size > 1 else None
        self.settings = {"gpu_memory_utilization": settings.gpu_memory_utilization,
                         "enable_prefix_caching": settings.enable_prefix_caching,
                         "tensor_parallel_size": engine["tensor_parallel_size"], "sleep_mode": self.sleep_mode,
                         "max_lora_rank": engine["max_lora_rank"],
                         "distributed_executor_backend": engine.get("distributed_executor_backend")}
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
        if self.group is None:
            return self._generate(prompts, budgets, keys)
        # The tensor-parallel group generates the union of its ranks' rows (one
        # engine spread over them); each rank keeps its own.
        if keys is None:
            raise ValueError("generate under tensor parallelism needs the rollouts' keys (seeds must agree)")
        parts = self.group.gather((list(prompts), list(budgets), list(keys)))
        everyone = [row for part in parts for row in zip(*part)] if any(p[0] for p in parts) else []
        if not everyone:
            return []
        outputs = self._generate([r[0] for r in everyone], [r[1] for r in everyone], [r[2] for r in everyone])
        offset = sum(len(p[0]) for p in parts[:self.group.index])
        return outputs[offset:offset + len(prompts)]

    def lockstep(self, active: bool, stopping: bool) -> tuple:
        """(any rank of the group still playing, any rank stopping): the group's ranks
        take every turn together, since each turn is one generation over all of them."""
        if self.group is None:
            return active, stopping
        return self.group.any((active, stopping))

    def _generate(self, prompts: list, budgets: list, keys=None) -> list:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from .generate_hf import row_seed

        # Seeds from the rollouts' keys (as generate_hf.py) so a resumed or
        # resharded step asks for the same samples (vLLM's kernels may still differ).
        seeds = ([row_seed(k) % (2**31 - 1) for k in keys] if keys is not None
                 else torch.randint(0, 2**31 - 1, (len(prompts),)).tolist())
        want_logprobs = self.sampling.temperature == 1.0
        params = [SamplingParams(temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                 top_k=self.sampling.top_k,  # 0 = off (vllm/sampling_params.py)
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

"""The vLLM engine (generate_vllm.py) against stand-ins for vLLM's classes.

No GPU and no vLLM in CI, so `vllm` is replaced by a module whose LLM,
SamplingParams, LoRARequest and TokensPrompt accept exactly the keywords of
the pinned release (trainer/requirements-gpu.txt: vllm 0.33.0; names read from
its wheel's vllm/entrypoints/llm.py, vllm/engine/arg_utils.py EngineArgs,
vllm/config/lora.py, vllm/sampling_params.py, vllm/lora/request.py) and
refuse any other, as the real ones do.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from trainer.distributed import RankGroup
from trainer.generate_vllm import VLLM_LORA_RANKS, VllmGenerator, engine_kwargs, vllm_max_lora_rank
from trainer.rollout import Sampling

# LLM(model, *, ...) keyword-only parameters plus the EngineArgs fields reached through **kwargs
# that the trainer uses (the whole EngineArgs has ~300; these are the ones a typo would hit).
LLM_KEYWORDS = {"tensor_parallel_size", "dtype", "seed", "gpu_memory_utilization", "enforce_eager",
                "enable_lora", "max_lora_rank", "max_loras", "max_model_len", "enable_prefix_caching",
                "enable_sleep_mode", "generation_config", "distributed_executor_backend", "disable_log_stats"}
EXECUTOR_BACKENDS = {"ray", "mp", "uni", "external_launcher", None}  # vllm/config/parallel.py
SAMPLING_KEYWORDS = {"n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
                     "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens",
                     "logprobs", "prompt_logprobs", "detokenize", "skip_special_tokens"}


class FakeLLM:
    instances: list = []

    def __init__(self, model, **kwargs):
        unknown = set(kwargs) - LLM_KEYWORDS
        if unknown:
            raise TypeError(f"LLM got unexpected keyword arguments {sorted(unknown)}")
        if kwargs.get("max_lora_rank", 16) not in VLLM_LORA_RANKS:
            raise ValueError(f"max_lora_rank {kwargs['max_lora_rank']} is not one of {VLLM_LORA_RANKS}")
        if kwargs.get("distributed_executor_backend") not in EXECUTOR_BACKENDS:
            raise ValueError("bad distributed_executor_backend")
        self.model, self.kwargs = model, kwargs
        self.calls = []
        FakeLLM.instances.append(self)

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None):
        self.calls.append([p["prompt_token_ids"] for p in prompts])
        outputs = []
        for params in sampling_params:
            # Deterministic per seed, as vLLM with a request seed: the same request gives the same tokens.
            tokens = [(params.seed + k) % 50 + 10 for k in range(params.max_tokens - 1)] + [params.stop_token_ids[0]]
            logprobs = [{t: types.SimpleNamespace(logprob=-0.5)} for t in tokens]
            outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=tokens, logprobs=logprobs)]))
        return outputs

    def sleep(self, level=1):
        pass

    def wake_up(self, tags=None):
        return True


class FakeSamplingParams:
    def __init__(self, **kwargs):
        unknown = set(kwargs) - SAMPLING_KEYWORDS
        if unknown:
            raise TypeError(f"SamplingParams got unexpected keyword arguments {sorted(unknown)}")
        if kwargs.get("top_k", 0) < -1:
            raise ValueError("top_k must be 0 (disable), or at least 1")
        self.__dict__.update(kwargs)


@dataclass
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str = ""


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.33.0"
    vllm.LLM, vllm.SamplingParams = FakeLLM, FakeSamplingParams
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = FakeLoRARequest
    for name, module in (("vllm", vllm), ("vllm.inputs", inputs), ("vllm.lora", lora), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, module)
    FakeLLM.instances = []
    return vllm


@dataclass
class Settings:
    gpu_memory_utilization: float = 0.35
    enable_prefix_caching: bool = True
    sleep_mode: bool = True
    tensor_parallel_size: int = 1


class SavingPolicy:
    def __init__(self):
        self.saved = []

    def save_pretrained(self, path):
        import os
        os.makedirs(path, exist_ok=True)
        self.saved.append(path)


SAMPLING = Sampling(1.0, 1.0, 0)


def make(tmp_path, *, world_size=1, rank=0, group=None, settings=None, lora_rank=32):
    return VllmGenerator("/models/m", SavingPolicy(), lora_rank, [2], SAMPLING, 4096, 7, settings or Settings(),
                         str(tmp_path / "adapters"), world_size, rank=rank, group=group)


@pytest.mark.parametrize("rank, expected", [(1, 1), (2, 8), (8, 8), (9, 16), (32, 32), (33, 64), (100, 128),
                                            (300, 320), (512, 512)])
def test_max_lora_rank_is_rounded_up_to_a_rank_vllm_serves(rank, expected):
    assert vllm_max_lora_rank(rank) == expected


def test_a_lora_rank_above_what_vllm_serves_is_refused():
    with pytest.raises(ValueError, match="lora.r = 600"):
        vllm_max_lora_rank(600)


def test_one_process_builds_a_plain_engine_with_only_known_keywords(fake_vllm, tmp_path):
    make(tmp_path, lora_rank=24)
    kwargs = FakeLLM.instances[0].kwargs
    assert kwargs["max_lora_rank"] == 32
    assert kwargs["generation_config"] == "vllm"
    assert "distributed_executor_backend" not in kwargs  # one process: vLLM's own executor


def test_an_engine_error_is_not_swallowed_into_a_second_engine(fake_vllm, tmp_path, monkeypatch):
    def broken(self, model, **kwargs):
        FakeLLM.instances.append(self)
        raise TypeError("an error inside vLLM")
    monkeypatch.setattr(FakeLLM, "__init__", broken)
    with pytest.raises(TypeError, match="an error inside vLLM"):
        make(tmp_path)
    assert len(FakeLLM.instances) == 1


def test_under_torchrun_every_rank_gets_an_engine_on_its_own_gpu(fake_vllm, tmp_path):
    for rank in range(4):
        make(tmp_path, world_size=4, rank=rank)
    for engine in FakeLLM.instances:
        # external_launcher: vLLM joins torchrun's group and takes the LOCAL_RANK GPU.
        assert engine.kwargs["distributed_executor_backend"] == "external_launcher"
        assert engine.kwargs["tensor_parallel_size"] == 1


def test_adapters_are_written_per_rank(fake_vllm, tmp_path):
    generators = [make(tmp_path, world_size=2, rank=r) for r in range(2)]
    for g in generators:
        g.sync_weights(3)
    paths = [g.policy.saved[0] for g in generators]
    assert len(set(paths)) == 2 and all(p.endswith("step-3") for p in paths)
    assert [g.lora_request.lora_path for g in generators] == paths


def test_tensor_parallel_size_must_divide_the_world():
    with pytest.raises(ValueError, match="does not divide the 6 trainer processes"):
        engine_kwargs("/m", 32, Settings(tensor_parallel_size=4), 4096, 0, 6)


class LocalGroup:
    """One rank of a two-rank tensor-parallel group, simulated in one process: the
    other rank's contributions to the group's successive gathers are given up front."""

    members, size = (0, 1), 2

    def __init__(self, index, other_calls):
        self.index, self.other_calls, self.calls = index, list(other_calls), 0

    def gather(self, obj):
        other = self.other_calls[self.calls]
        self.calls += 1
        return [obj, other] if self.index == 0 else [other, obj]

    def any(self, flags):
        return tuple(bool(f) for f in flags)


def test_a_tensor_parallel_group_generates_the_union_and_each_rank_keeps_its_rows(fake_vllm, tmp_path):
    settings = Settings(tensor_parallel_size=2)
    g0 = make(tmp_path, world_size=2, rank=0, group=LocalGroup(0, [([[5, 6, 7]], [3], [(1, 2, 0)])]),
              settings=settings)
    assert FakeLLM.instances[0].kwargs["tensor_parallel_size"] == 2
    assert FakeLLM.instances[0].kwargs["distributed_executor_backend"] == "external_launcher"
    out0 = g0.generate([[1, 2], [3]], [4, 2], [(1, 0, 0), (1, 1, 0)])
    # The engine saw all three prompts (rank 0's, then rank 1's) in one generate call.
    assert FakeLLM.instances[0].calls == [[[1, 2], [3], [5, 6, 7]]]
    assert [len(c.tokens) for c in out0] == [4, 2]
    # Rank 1, given the same gathered rows, keeps its own and gets the same tokens a lone engine would.
    g1 = make(tmp_path, world_size=2, rank=1, group=LocalGroup(1, [([[1, 2], [3]], [4, 2], [(1, 0, 0), (1, 1, 0)])]),
              settings=settings)
    out1 = g1.generate([[5, 6, 7]], [3], [(1, 2, 0)])
    alone = make(tmp_path)
    assert [c.tokens for c in out1] == [c.tokens for c in alone.generate([[5, 6, 7]], [3], [(1, 2, 0)])]


def test_tensor_parallel_under_torchrun_needs_its_group(fake_vllm, tmp_path):
    with pytest.raises(ValueError, match="tensor-parallel group"):
        make(tmp_path, world_size=2, rank=0, group=None, settings=Settings(tensor_parallel_size=2))


def test_a_rank_with_no_rows_left_still_takes_the_groups_turn(fake_vllm, tmp_path):
    g0 = make(tmp_path, world_size=2, rank=0, group=LocalGroup(0, [([[5, 6]], [2], [(1, 3, 1)])]),
              settings=Settings(tensor_parallel_size=2))
    assert g0.generate([], [], []) == []
    assert FakeLLM.instances[0].calls == [[[5, 6]]]


def test_rollouts_play_in_lockstep_while_any_rank_of_the_group_is_playing():
    from trainer import rollout

    group = RankGroup((0,), 0)
    assert group.any((True, False)) == (True, False)
    # A generator with `lockstep` keeps run_rollouts turning while the group plays, with no rows here.
    calls = []

    class Finished:
        stop_ids = [2]

        def __init__(self):
            self.turns = 0

        def lockstep(self, active, stopping):
            self.turns += 1
            return self.turns <= 2, stopping  # the other rank plays two more turns

        def generate(self, prompts, budgets, keys):
            calls.append(len(prompts))
            return []

    class Client:
        def open(self, ids, group_size, seed):
            return []

        def step(self, steps):
            raise AssertionError("no environment call for a turn without rows")

        def close(self, ids):
            return {}

        def close_quietly(self, ids):
            return {}

    limits = rollout.RolloutLimits(4, 16, 8, 64)
    assert rollout.run_rollouts(Client(), Finished(), None, ["a"], 2, 0, limits, lambda: False) == []
    assert calls == [0, 0]

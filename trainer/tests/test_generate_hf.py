"""The HF engine's memory-bounded sub-batches, its per-rollout sampling, and the engine choice."""

import json

import pytest
import torch

from trainer import train
from trainer.config import LoraConfig
from trainer.engines import choose_engine
from trainer.generate_hf import HFGenerator, kv_bytes_per_token, plan_sub_batches
from trainer.policy import load_policy, pick_device_and_dtype
from trainer.rollout import Sampling, stop_token_ids

from .conftest import tiny_config, write_config


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    return model, tokenizer, device


def _prompts(tokenizer, n=7):
    texts = [f"Issue {i}: the parser fails on empty input" + " again" * i for i in range(n)]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def _generator(policy, **kwargs):
    model, tokenizer, device = policy
    return HFGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer), Sampling(1.0, 0.9, 50), device,
                       **kwargs)


def test_sub_batches_respect_the_token_budget_and_match_one_batch_greedy(policy):
    _, tokenizer, _ = policy
    prompts = _prompts(tokenizer)
    budgets = [6, 3, 8, 5, 8, 2, 7]
    one = _generator(policy, token_budget=100_000, greedy=True)
    whole = [c.tokens for c in one.generate(prompts, budgets)]
    assert len(one.generate_calls) == 1
    budget = 2 * (max(len(p) for p in prompts) + max(budgets))  # about two rows per call
    split = _generator(policy, token_budget=budget, greedy=True)
    assert [c.tokens for c in split.generate(prompts, budgets)] == whole
    assert len(split.generate_calls) >= 3
    assert all(call.kv_tokens <= budget for call in split.generate_calls)
    assert sum(call.rows for call in split.generate_calls) == len(prompts)
    assert all(len(t) <= b for t, b in zip(whole, budgets))


def test_sampling_follows_the_rollout_key_not_the_batch(policy):
    _, tokenizer, _ = policy
    prompts = _prompts(tokenizer, 4) * 2  # rows 4..7 repeat rows 0..3
    budgets = [8] * len(prompts)
    keys = [(11, i, 0) for i in range(len(prompts))]
    tokens = lambda completions: [c.tokens for c in completions]  # noqa: E731
    together = tokens(_generator(policy, token_budget=100_000).generate(prompts, budgets, keys))
    alone = [tokens(_generator(policy, token_budget=100_000).generate([p], [b], [k]))[0]
             for p, b, k in zip(prompts, budgets, keys)]
    assert together == alone
    # Same prompt, different key: different samples (so a group is not G copies).
    assert together[:4] != together[4:]
    again = tokens(_generator(policy, token_budget=100_000).generate(prompts, budgets, keys))
    assert again == together


def test_sampler_log_probs_are_the_trainers_log_probs(policy):
    from trainer.policy import token_logprobs

    model, tokenizer, device = policy
    generator = _generator(policy)
    prompts = _prompts(tokenizer, 3)
    completions = generator.generate(prompts, [5, 5, 5], [(1, i, 0) for i in range(3)])
    assert [len(c.logprobs) for c in completions] == [len(c.tokens) for c in completions]
    model.eval()
    with torch.no_grad():
        for prompt, sampled, sampler in ((p, c.tokens, c.logprobs) for p, c in zip(prompts, completions)):
            ids = torch.tensor([prompt + sampled])
            mask = torch.tensor([[0] * len(prompt) + [1] * len(sampled)], dtype=torch.float32)
            trainer = token_logprobs(model, ids, torch.ones_like(ids), mask)[0, len(prompt):]
            assert torch.allclose(trainer, torch.tensor(sampler), atol=1e-4), (trainer, sampler)
    model.train()


def test_a_row_larger_than_the_budget_is_refused_with_the_numbers():
    assert plan_sub_batches([10, 20, 30], [5, 5, 5], 40) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="needs 45 KV tokens .* budget 40"):
        plan_sub_batches([10, 40], [5, 5], 40)


def test_kv_bytes_per_token_of_qwen3_0_6b():
    from transformers import Qwen3Config

    config = Qwen3Config(num_hidden_layers=28, num_key_value_heads=8, head_dim=128, hidden_size=1024,
                         num_attention_heads=16)
    # 2 (K, V) x 28 layers x 8 heads x 128 dims x 2 bytes (bf16).
    assert kv_bytes_per_token(config, torch.bfloat16) == 114_688


def test_auto_names_the_engine_and_why():
    assert choose_engine("auto", "cpu", lambda: (False, "ModuleNotFoundError: No module named 'vllm'")) == \
        ("hf", "auto: no CUDA device (cpu), so vLLM cannot run")
    name, reason = choose_engine("auto", "cuda", lambda: (False, "ModuleNotFoundError: No module named 'vllm'"))
    assert name == "hf" and "vLLM is not installed" in reason and "No module named 'vllm'" in reason
    assert choose_engine("auto", "cuda", lambda: (True, "0.33.0")) == ("vllm", "auto: CUDA device and vLLM 0.33.0")
    with pytest.raises(RuntimeError, match="generator: vllm, but vLLM does not import"):
        choose_engine("vllm", "cuda", lambda: (False, "ModuleNotFoundError"))
    assert choose_engine("hf", "cuda", lambda: (True, "0.33.0"))[0] == "hf"


def test_first_json_line_names_the_engine(tmp_path, tiny_model_dir, env_server, capsys):
    _, url = env_server
    config = tiny_config(tmp_path, url, tiny_model_dir, total_steps=1, generator="auto", hf_generation_tokens=2048)
    assert train.main(["--config", write_config(tmp_path, config)]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["event"] == "start" and first["generator"] == "hf"
    assert first["generator_reason"] == "auto: no CUDA device (cpu), so vLLM cannot run"
    assert first["engine"] == {"engine": "hf", "token_budget": 2048, "greedy": False}
    assert first["world_size"] == 1

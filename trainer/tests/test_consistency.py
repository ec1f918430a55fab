"""Sampler / trainer consistency: temperature in the
training log-probs, only the configured sampling settings, the sampler's own
log-probs recorded and compared, truncated importance sampling, and clipping
that acts once the batch is off-policy."""

import pytest
import torch
from transformers import GenerationConfig

from trainer import train
from trainer.config import LoraConfig
from trainer.env_client import EnvClient
from trainer.loss import loss_settings, policy_loss, truncated_is_weights
from trainer.policy import load_policy, pick_device_and_dtype, token_logprobs
from trainer.generate_hf import HFGenerator
from trainer.rollout import RolloutLimits, Sampling, run_rollouts, stop_token_ids
from trainer.tokens import ChatTokens
from trainer.update import collate, policy_update


@pytest.fixture(scope="module")
def policy(qwen3_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(qwen3_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    return model, tokenizer, device


def _sample(policy, url, sampling, seed=0, limits=RolloutLimits(3, 60, 20, 4096), group=4):
    model, tokenizer, device = policy
    generator = HFGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer), sampling, device)
    torch.manual_seed(seed)
    rollouts = run_rollouts(EnvClient(url), generator, ChatTokens(tokenizer, {"enable_thinking": False}),
                            ["repo__a-1"], group, 0, limits, lambda: False)
    return rollouts, generator


def _batch(policy, rollouts):
    _, tokenizer, device = policy
    _, items = train.training_items(rollouts, len(rollouts), False, False)
    return items, collate(items, list(range(len(items))), tokenizer.pad_token_id, device)


def test_training_log_probs_use_the_sampling_temperature(policy, env_server):
    model, _, _ = policy
    _, url = env_server
    rollouts, _ = _sample(policy, url, Sampling(0.6, 1.0, 0))
    items, (ids, attn, lmask, _) = _batch(policy, rollouts)
    sampler = torch.zeros_like(lmask)
    for _r, row in zip(rollouts, range(len(items))):
        sampler[row, :len(items[row].ids)] = torch.tensor(items[row].sampler_logprobs)
    with torch.no_grad():
        at_t = token_logprobs(model, ids, attn, lmask, temperature=0.6)
        at_1 = token_logprobs(model, ids, attn, lmask)
    trained = lmask == 1
    # What the sampler drew from is softmax(logits / 0.6): the trainer scores that.
    assert torch.allclose(at_t[trained], sampler[trained], atol=1e-4)
    assert (at_1[trained] - sampler[trained]).abs().mean() > 1e-2


def test_the_models_generation_config_cannot_change_sampling(policy, env_server):
    model, _, _ = policy
    _, url = env_server
    sampling = Sampling(1.0, 0.9, 50)
    clean, _ = _sample(policy, url, sampling, seed=4)
    # A checkpoint's generation_config.json with penalties and its own sampling.
    model.get_base_model().generation_config = GenerationConfig(
        repetition_penalty=50.0, no_repeat_ngram_size=1, top_k=2, temperature=0.05, do_sample=True)
    penalised, generator = _sample(policy, url, sampling, seed=4)
    assert generator.ignored_generation_config["repetition_penalty"] == 50.0
    assert generator.ignored_generation_config["no_repeat_ngram_size"] == 1
    assert [r.sequence.ids for r in penalised] == [r.sequence.ids for r in clean]


def test_truncated_importance_sampling_weights():
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    sampler = torch.log(torch.tensor([[0.25, 0.4, 0.09]]))
    mask = torch.tensor([[1.0, 1.0, 1.0]])
    weights = truncated_is_weights(old, sampler, mask, cap=2.0, per_sequence=False)
    assert torch.allclose(weights, torch.tensor([[2.0, 0.5, 2.0]]))  # 2, 0.5, 10 -> capped at 2
    sequence = truncated_is_weights(old, sampler, mask, cap=5.0, per_sequence=True)
    assert sequence.item() == pytest.approx((2.0 * 0.5 * 10.0) ** (1 / 3), rel=1e-5)
    # The weight multiplies each token's policy-gradient term (not the KL).
    logps = old.clone().requires_grad_(True)
    settings = loss_settings("grpo", 10, kl_beta=0.0)
    plain = policy_loss(logps, old, None, mask, torch.tensor([1.0]), settings)
    weighted = policy_loss(logps, old, None, mask, torch.tensor([1.0]), settings, weights)
    assert plain.per_sequence.item() == pytest.approx(-1.0)
    assert weighted.per_sequence.item() == pytest.approx(-(2.0 + 0.5 + 2.0) / 3)


def _update(policy, items, settings, **kwargs):
    model, tokenizer, device = policy
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=kwargs.pop("lr", 0.05))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0)
    common = dict(pad_id=tokenizer.pad_token_id, device=device, micro_batch_tokens=4096, max_grad_norm=1.0,
                  track_kl=False, mini_batches=1)
    common.update(kwargs)
    return policy_update(model, optimizer, scheduler, items, settings, **common)


def test_step_reports_sampler_mismatch_and_applies_is_correction(policy, env_server):
    _, url = env_server
    rollouts, _ = _sample(policy, url, Sampling(1.0, 1.0, 0), seed=2)
    items, _ = _batch(policy, rollouts)
    settings = loss_settings("grpo", 60, kl_beta=0.0)
    stats = _update(policy, items, settings, lr=1e-9)
    assert stats["sampler_logprob_diff"] < 1e-4 and stats["is_weight_mean"] is None
    # A sampler that was 0.3 nats less likely on every token than the trainer:
    # the report shows the gap and TIS weights are exp(0.3), capped at 1.2.
    for it in items:
        it.sampler_logprobs = [lp - 0.3 if m else 0.0 for lp, m in zip(it.sampler_logprobs, it.mask)]
    stats = _update(policy, items, settings, lr=1e-9, importance_sampling_cap=1.2)
    assert stats["sampler_logprob_diff"] == pytest.approx(0.3, abs=1e-3)
    assert stats["is_weight_mean"] == pytest.approx(1.2, abs=1e-6)


@pytest.mark.parametrize("algorithm", ["grpo", "gspo"])
def test_the_papers_clip_ranges_act_once_a_mini_batch_is_off_policy(policy, env_server, algorithm):
    """GRPO's 0.2 and GSPO's 3e-4/4e-4 (the recipes' own ranges) never act with
    one update per batch (pi_old = pi); with 2 mini-batches the second is
    scored against pi_old from before the first update, and they do."""
    _, url = env_server
    from dataclasses import replace

    rollouts, _ = _sample(policy, url, Sampling(1.0, 1.0, 0), seed=6, group=4)
    items, _ = _batch(policy, rollouts)
    for it, adv in zip(items, [1.0, -1.0, 1.0, -1.0]):
        it.advantage = adv
    # The second mini-batch repeats the first: the first update moves exactly
    # these sequences the way their advantages ask, so their ratios leave the range.
    items = items + [replace(it) for it in items]
    settings = loss_settings(algorithm, 60)
    assert _update(policy, items, settings, lr=0.01)["clip_ratio"] == 0.0
    assert _update(policy, items, settings, lr=0.01, mini_batches=2)["clip_ratio"] > 0.0


def test_no_reference_forward_when_beta_is_zero_and_kl_is_not_tracked(policy, env_server, monkeypatch):
    model, _, _ = policy
    _, url = env_server
    rollouts, _ = _sample(policy, url, Sampling(1.0, 1.0, 0), seed=1)
    items, _ = _batch(policy, rollouts)
    calls = []
    original = model.disable_adapter
    monkeypatch.setattr(model, "disable_adapter", lambda: calls.append(1) or original())
    stats = _update(policy, items, loss_settings("gspo", 60), lr=1e-9)
    assert calls == [] and stats["reference_forward"] is False and stats["kl"] is None
    stats = _update(policy, items, loss_settings("gspo", 60), lr=1e-9, track_kl=True)
    assert len(calls) >= 1 and stats["kl"] is not None

"""Advantages and losses against values computed by hand on tiny tensors."""

import math

import pytest
import torch

from trainer.loss import DEFAULTS, group_advantages, kl_k3, loss_settings, policy_loss


def test_grpo_advantages_are_std_normalised_per_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.2, 0.4, 0.6, 0.8]])
    adv = group_advantages(rewards, normalize_std=True)
    # Group 1: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735.
    s1 = math.sqrt(1.0 / 3.0) + 1e-4
    # Group 2: mean 0.5, sample std sqrt((0.09 + 0.01 + 0.01 + 0.09) / 3) = 0.258199.
    s2 = math.sqrt(0.2 / 3.0) + 1e-4
    expected = torch.tensor([[0.5 / s1, -0.5 / s1, -0.5 / s1, 0.5 / s1],
                             [-0.3 / s2, -0.1 / s2, 0.1 / s2, 0.3 / s2]])
    assert torch.allclose(adv, expected, atol=1e-6)


def test_gspo_and_dr_grpo_advantages_are_mean_centred_only():
    rewards = torch.tensor([[3.0, 1.0, 2.0, 2.0]])
    adv = group_advantages(rewards, normalize_std=False)
    assert adv.tolist() == [[1.0, -1.0, 0.0, 0.0]]


def test_equal_rewards_give_zero_advantage_not_nan():
    adv = group_advantages(torch.tensor([[0.7, 0.7, 0.7]]), normalize_std=True)
    assert adv.tolist() == [[0.0, 0.0, 0.0]]


def test_advantage_scale_multiplies_after_normalisation():
    # CodeGrep Eq. 6-7: A_i * s(c̄_i); s(1) = sqrt(1/4) = 0.5, s(8) = 1, s(0) = 0.
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    scales = torch.tensor([[0.5, 1.0, 0.0, 1.0]])
    plain = group_advantages(rewards, normalize_std=True)
    scaled = group_advantages(rewards, normalize_std=True, scales=scales)
    s = math.sqrt(1.0 / 3.0) + 1e-4
    assert torch.allclose(scaled, torch.tensor([[0.25 / s, -0.5 / s, 0.0, 0.5 / s]]), atol=1e-6)
    # The scale does not leak into the group statistics: unscaled members keep their advantage.
    assert scaled[0, 1] == plain[0, 1] and scaled[0, 3] == plain[0, 3]


def test_advantages_reject_bad_shapes():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.tensor([[1.0]]), normalize_std=True)
    with pytest.raises(ValueError, match="scales shape"):
        group_advantages(torch.tensor([[1.0, 0.0]]), True, scales=torch.tensor([[1.0]]))


def test_algorithm_defaults_match_the_papers():
    # beta is a recipe's value (lib/recipes/presets.json), not an algorithm's: 0 here.
    assert DEFAULTS["grpo"] == dict(clip_low=0.2, clip_high=0.2, kl_beta=0.0, normalize_advantage_std=True)
    assert DEFAULTS["gspo"] == dict(clip_low=3e-4, clip_high=4e-4, kl_beta=0.0, normalize_advantage_std=False)
    assert DEFAULTS["dr_grpo"]["normalize_advantage_std"] is False and DEFAULTS["dr_grpo"]["kl_beta"] == 0.0
    overridden = loss_settings("gspo", 4096, normalize_advantage_std=True, kl_beta=0.01)
    assert overridden.normalize_advantage_std and overridden.kl_beta == 0.01 and overridden.clip_high == 4e-4
    with pytest.raises(ValueError, match="unknown algorithm"):
        loss_settings("ppo", 10)


def _tokens(ratios, advantages, mask=None, base=-1.0):
    """logps/old_logps with the given per-token ratios pi/pi_old."""
    ratios = torch.tensor(ratios, dtype=torch.float32)
    old = torch.full_like(ratios, base)
    logps = old + torch.log(ratios)
    mask = torch.ones_like(ratios) if mask is None else torch.tensor(mask, dtype=torch.float32)
    return logps, old, mask, torch.tensor(advantages, dtype=torch.float32)


def test_grpo_token_clip_and_sequence_mean():
    # Row 0, A=+1: ratios 1.5 -> min(1.5, 1.2) = 1.2 (clipped); 0.5 -> min(0.5, 0.8) = 0.5.
    #   loss = -(1.2 + 0.5) / 2 = -0.85, one of two tokens clipped.
    # Row 1, A=-1: 1.5 -> min(-1.5, -1.2) = -1.5; 0.5 -> min(-0.5, -0.8) = -0.8 (clipped).
    #   loss = (1.5 + 0.8) / 2 = 1.15.
    logps, old, mask, adv = _tokens([[1.5, 0.5], [1.5, 0.5]], [1.0, -1.0])
    out = policy_loss(logps, old, None, mask, adv, loss_settings("grpo", 100, kl_beta=0.0))
    assert torch.allclose(out.per_sequence, torch.tensor([-0.85, 1.15]), atol=1e-6)
    assert out.clipped.tolist() == [1.0, 1.0] and out.clip_units.tolist() == [2.0, 2.0]


def test_grpo_kl_term_is_k3_to_the_reference():
    # pi = 0.5, ref = 0.25 -> exp(ln 0.5) - (-ln 2) - 1 = 0.5 + ln 2 - 1 = 0.193147 per token.
    logps = torch.full((1, 3), math.log(0.5))
    ref = torch.full((1, 3), math.log(0.25))
    k3 = kl_k3(logps, ref)
    assert torch.allclose(k3, torch.full((1, 3), 0.5 + math.log(2) - 1), atol=1e-6)
    settings = loss_settings("grpo", 100, kl_beta=0.02)  # CodeGrep App. A.4 beta
    out = policy_loss(logps, logps.detach(), ref, torch.ones(1, 3), torch.tensor([2.0]), settings)
    # ratio 1: policy term -A = -2 per token; plus 0.02 * 0.193147; mean over 3 tokens.
    assert out.per_sequence.item() == pytest.approx(-2.0 + 0.02 * (0.5 + math.log(2) - 1), abs=1e-6)
    assert out.kl_sum.item() == pytest.approx(3 * (0.5 + math.log(2) - 1), abs=1e-5)


def test_gspo_sequence_ratio_and_tight_clip():
    settings = loss_settings("gspo", 100)
    # Log-ratios 0.001, 0.003 -> s = exp(0.002) = 1.002002 > 1 + 4e-4.
    old = torch.zeros(2, 2)
    logps = torch.tensor([[0.001, 0.003], [0.001, 0.003]])
    out = policy_loss(logps, old, None, torch.ones(2, 2), torch.tensor([1.0, -1.0]), settings)
    s = math.exp(0.002)
    # A=+1: -min(s, 1.0004) = -1.0004 (clipped). A=-1: -min(-s, -1.0004) = s (not clipped).
    assert out.per_sequence.tolist() == pytest.approx([-1.0004, s], abs=1e-6)
    assert out.clipped.tolist() == [1.0, 0.0] and out.clip_units.tolist() == [1.0, 1.0]
    # Low side: mean log-ratio -0.001 -> s = 0.9990005 < 1 - 3e-4; A=-1 -> -min(-s, -0.9997) = 0.9997.
    low = policy_loss(torch.tensor([[-0.002, 0.0]]), torch.zeros(1, 2), None, torch.ones(1, 2),
                      torch.tensor([-1.0]), settings)
    assert low.per_sequence.item() == pytest.approx(0.9997, abs=1e-6) and low.clipped.item() == 1.0


def test_gspo_ratio_is_length_normalised_over_masked_tokens_only():
    settings = loss_settings("gspo", 100)
    # Mask hides the third token's large log-ratio; s = exp((0.0001 + 0.0001) / 2).
    logps = torch.tensor([[0.0001, 0.0001, 5.0]])
    out = policy_loss(logps, torch.zeros(1, 3), None, torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([1.0]), settings)
    assert out.per_sequence.item() == pytest.approx(-math.exp(0.0001), abs=1e-7)
    assert out.clipped.item() == 0.0


def test_dr_grpo_divides_token_sum_by_constant_budget():
    # Ratio 1, A = 2: token terms -2; three tokens -> sum -6; / budget 10 = -0.6.
    # GRPO's per-sequence mean would give -2 regardless of length.
    logps = torch.zeros(2, 4)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    dr = policy_loss(logps, logps, None, mask, torch.tensor([2.0, 2.0]), loss_settings("dr_grpo", 10))
    assert dr.per_sequence.tolist() == pytest.approx([-0.6, -0.2])
    grpo = policy_loss(logps, logps, None, mask, torch.tensor([2.0, 2.0]), loss_settings("grpo", 10, kl_beta=0.0))
    assert grpo.per_sequence.tolist() == pytest.approx([-2.0, -2.0])


@pytest.mark.parametrize("algorithm", ["grpo", "gspo", "dr_grpo"])
def test_masked_positions_get_exactly_zero_gradient(algorithm):
    torch.manual_seed(0)
    logps = (torch.randn(2, 6) * 0.1 - 2.0).requires_grad_(True)
    ref = logps.detach() + 0.05 * torch.randn(2, 6)
    mask = torch.tensor([[0, 0, 1, 1, 0, 1], [0, 1, 1, 0, 0, 0]], dtype=torch.float32)
    out = policy_loss(logps, logps.detach(), ref, mask, torch.tensor([0.7, -1.3]),
                      loss_settings(algorithm, 16, kl_beta=0.02))
    out.per_sequence.sum().backward()
    assert torch.all(logps.grad[mask == 0] == 0)
    assert torch.all(logps.grad[mask == 1] != 0)


def test_on_policy_gradient_is_the_policy_gradient():
    # With pi_old = sg(pi) the ratio is 1 and d loss / d logp_t = -A / |y| (GRPO, no KL).
    logps = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    out = policy_loss(logps, logps.detach(), None, torch.ones(1, 3), torch.tensor([1.5]),
                      loss_settings("grpo", 10, kl_beta=0.0))
    out.per_sequence.sum().backward()
    assert torch.allclose(logps.grad, torch.full((1, 3), -1.5 / 3))

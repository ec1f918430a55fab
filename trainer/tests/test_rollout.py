"""Multi-turn rollouts: batching, the token/mask layout, zero loss on observations."""

import pytest
import torch

from trainer.env_client import EnvClient
from trainer.loss import loss_settings, policy_loss
from trainer.policy import load_policy, pick_device_and_dtype, token_logprobs
from trainer.config import LoraConfig
from trainer.rollout import HFGenerator, RolloutLimits, Sampling, StepAborted, run_rollouts, stop_token_ids
from trainer.tokens import ChatTokens, TemplateError
from trainer.update import collate, TrainItem


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    return model, tokenizer, device


class CountingGenerator(HFGenerator):
    """HFGenerator that records the batch size of every generate call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def generate(self, prompts, budgets):
        self.calls.append(len(prompts))
        return super().generate(prompts, budgets)


def _rollouts(policy, env_url, limits, should_stop=lambda: False, instances=("repo__a-1", "repo__b-2")):
    model, tokenizer, device = policy
    chat = ChatTokens(tokenizer)
    generator = CountingGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer),
                                  Sampling(1.0, 0.9, 50), device)
    torch.manual_seed(0)
    rollouts = run_rollouts(EnvClient(env_url), generator, chat, list(instances), 3, 11, limits, should_stop)
    return rollouts, generator, chat


def test_all_rollouts_advance_in_one_batched_generation_per_turn(policy, env_server):
    env, url = env_server
    rollouts, generator, _ = _rollouts(policy, url, RolloutLimits(3, 40, 8, 2048))
    assert len(rollouts) == 6
    # One generate call per turn over exactly the episodes still running.
    turns = max(r.turns for r in rollouts)
    assert generator.calls == [sum(r.turns > k for r in rollouts) for k in range(turns)]
    assert turns >= 2 and generator.calls[0] == 6
    assert all(r.outcome is not None and r.outcome.turns == r.turns for r in rollouts)
    assert [path for path, _ in env.requests] == (["/episodes/open"] + ["/episodes/step"] * turns
                                                  + ["/episodes/close"])
    assert env.requests[0][1] == {"instanceIds": ["repo__a-1", "repo__b-2"], "groupSize": 3, "seed": 11}


def test_mask_covers_exactly_the_sampled_tokens(policy, env_server):
    env, url = env_server
    rollouts, _, chat = _rollouts(policy, url, RolloutLimits(3, 40, 8, 2048))
    tokenizer = chat.tokenizer
    steps = [body for path, body in env.requests if path == "/episodes/step"]
    for r in rollouts:
        ids, mask = r.sequence.ids, r.sequence.mask
        assert len(ids) == len(mask) and sum(mask) == r.generated_tokens
        # Maximal runs of mask-1 tokens are the turns; each decodes to the text
        # the server received for that turn (+ the <|im_end|> that ended it).
        runs, current = [], []
        for token, m in zip(ids, mask):
            if m:
                current.append(token)
            elif current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        sent = [s["assistantText"] for body in steps for s in body["steps"] if s["episodeId"] == r.episode.episode_id]
        decoded = [tokenizer.decode(run[:-1] if run[-1] == chat.end_of_turn_id else run, skip_special_tokens=False)
                   for run in runs]
        assert decoded == sent == r.assistant_texts and len(runs) == r.turns
        # Everything with mask 0 is template or environment text: the prompt
        # and the tool observations the server sent back.
        context = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
        assert context.startswith("<|im_start|>system\nFind the files.")
        assert context.count("<tool_response>") == 2 * (r.turns - 1)  # 2 tool results per continued turn
        assert context.endswith("<|im_start|>assistant\n")


def test_observation_block_follows_the_chat_template(policy):
    _, tokenizer, _ = policy
    chat = ChatTokens(tokenizer)
    history = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    obs = [{"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}]
    block = chat.observation_block(obs)
    assert tokenizer.decode(block, skip_special_tokens=False) == (
        "\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\n")
    # prompt + assistant turn + block is exactly this (prefix-stable) template's
    # rendering of the whole conversation.
    full = chat.prompt(history, None) + chat.encode("call") + [chat.end_of_turn_id] + block
    rendered = chat.render(history + [{"role": "assistant", "content": "call"}] + obs, None, True)
    assert tokenizer.decode(full, skip_special_tokens=False) == rendered
    chat.check_template()


def test_template_that_rewrites_history_is_refused_at_start_up(policy):
    _, tokenizer, _ = policy

    class Rewriting(ChatTokens):
        def render(self, messages, tools, generation_prompt):
            return ("X" if len(messages) > 6 else "") + super().render(messages, tools, generation_prompt)

    with pytest.raises(TemplateError, match="model /m: the chat template renders a multi-turn conversation"):
        Rewriting(tokenizer, source="model /m").check_template()


def test_stop_between_turns_aborts_and_closes_every_episode(policy, env_server):
    env, url = env_server
    calls = []

    def stop_after_first_turn():
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(StepAborted):
        _rollouts(policy, url, RolloutLimits(3, 40, 6, 2048), should_stop=stop_after_first_turn)
    assert env.requests[-1][0] == "/episodes/close"
    assert len(env.requests[-1][1]["episodeIds"]) == 6 and env.episodes == {}


def test_observation_tokens_get_zero_gradient_through_the_model(policy, env_server):
    """Gradient check on a real rollout: the loss does not depend on the
    log-probs of any prompt or observation token."""
    model, _, device = policy
    _, url = env_server
    rollouts, _, _ = _rollouts(policy, url, RolloutLimits(3, 40, 6, 2048))
    items = [TrainItem(r.sequence.ids, r.sequence.mask, advantage=a, weight=1.0)
             for r, a in zip(rollouts, [1.0, -0.5, 0.3, -1.2, 0.8, -0.4])]
    ids, attn, lmask, adv = collate(items, list(range(len(items))), 0, device)
    # Full-vocabulary log-probs of every position, as a leaf to differentiate against.
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn).logits.float()
    all_logps = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    all_logps = torch.cat([torch.zeros(len(items), 1), all_logps], 1).requires_grad_(True)
    out = policy_loss(all_logps, all_logps.detach(), None, lmask, adv, loss_settings("grpo", 40, kl_beta=0.0))
    out.per_sequence.sum().backward()
    grad = all_logps.grad
    assert torch.all(grad[lmask == 0] == 0)
    assert torch.all(grad[(lmask == 1) & (adv[:, None] != 0)] != 0)
    # The trainer's selective log-prob computation agrees with the full one
    # where it matters and is zero elsewhere.
    with torch.no_grad():
        selective = token_logprobs(model, ids, attn, lmask)
    assert torch.allclose(selective[lmask == 1], all_logps.detach()[lmask == 1], atol=1e-5)
    assert torch.all(selective[lmask == 0] == 0)

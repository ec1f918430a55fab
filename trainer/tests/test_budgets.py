"""Generation-budget edge cases: no zero-budget
generation, no empty turn, turns counted as the papers count them, cut turns
flagged `truncated`. A scripted generator plays exact token counts against the
scripted server, with the stock Qwen3 tokenizer."""

import pytest

from trainer.env_client import EnvClient
from trainer.generate_hf import HFGenerator
from trainer.rollout import Completion, RolloutLimits, run_rollouts
from trainer.tests.scripted_env import ScriptedEnv, serve
from trainer.tokens import ChatTokens


class ScriptedGenerator:
    """Returns, per call, the scripted number of tokens per row (ending in
    <|im_end|> when `end` says so), never more than the budget."""

    name = "scripted"

    def __init__(self, chat, turns):
        self.stop_ids = [chat.end_of_turn_id]
        self.filler = chat.encode(" grep")[0]
        self.turns = list(turns)  # [(length, ends_with_stop)] per turn
        self.budgets = []

    def generate(self, prompts, budgets, keys=None):
        assert min(budgets) >= 1, f"asked to generate 0 tokens: {budgets}"
        self.budgets.append(list(budgets))
        length, end = self.turns[len(self.budgets) - 1]
        out = []
        for budget in budgets:
            n = min(length, budget)
            tokens = [self.filler] * (n - 1) + [self.stop_ids[0] if end else self.filler]
            out.append(Completion(tokens=tokens, logprobs=[-1.0] * n))
        return out


@pytest.fixture
def served():
    env = ScriptedEnv(max_turns=4, tool_calls_per_turn=2, observation_chars=20)
    server = serve(env)
    yield env, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _play(served, chat, turns, limits):
    env, url = served
    generator = ScriptedGenerator(chat, turns)
    rollouts = run_rollouts(EnvClient(url), generator, chat, ["repo__a-1"], 2, 0, limits, lambda: False)
    steps = [s for path, body in env.requests if path == "/episodes/step" for s in body["steps"]]
    return rollouts, generator, steps


def test_budget_spent_exactly_on_a_stop_token_ends_the_rollout_without_a_zero_budget_turn(served, qwen3_tokenizer):
    chat = ChatTokens(qwen3_tokenizer, {"enable_thinking": False})
    # Turn 1: 6 tokens ending in <|im_end|>, turn 2: exactly the 4 left, ending in <|im_end|>.
    rollouts, generator, steps = _play(served, chat, [(6, True), (4, True), (4, True)], RolloutLimits(4, 10, 10, 4096))
    assert generator.budgets == [[10, 10], [4, 4]]  # never a turn with budget 0
    assert [r.turns for r in rollouts] == [2, 2] and [r.outcome.turns for r in rollouts] == [2, 2]
    # The turn that spent the last token is complete but no turn can follow it:
    # truncated, so the server ends the episode and runs no tools.
    assert [s["truncated"] for s in steps] == [False, False, True, True]
    assert all(r.budget_exhausted for r in rollouts)


def test_a_turn_cut_by_the_per_turn_cap_is_truncated_and_ends_the_rollout(served, qwen3_tokenizer):
    chat = ChatTokens(qwen3_tokenizer, {})
    # The per-turn cap (5) is below the rollout budget (100): the turn is cut mid-way.
    rollouts, generator, steps = _play(served, chat, [(5, False), (5, True)], RolloutLimits(4, 100, 5, 4096))
    assert generator.budgets == [[5, 5]]
    assert [s["truncated"] for s in steps] == [True, True]  # half-written tool calls are not run
    assert [r.outcome.turns for r in rollouts] == [1, 1]
    assert all(r.sequence.ids[-1] != chat.end_of_turn_id for r in rollouts)  # nothing appended after the cut


def test_no_empty_turn_when_the_context_is_full(served, qwen3_tokenizer):
    chat = ChatTokens(qwen3_tokenizer, {})
    env, url = served
    probe = env.open({"instanceIds": ["repo__a-1"], "groupSize": 1})["episodes"][0]
    prompt = len(chat.prompt(probe["messages"], probe["tools"]))
    env.requests.clear()
    env.episodes.clear()
    # Room for the first turn, but its observations fill the context: the
    # rollout goes straight to close, no turn with budget 0 and no empty turn.
    rollouts, generator, steps = _play(served, chat, [(3, True), (3, True)], RolloutLimits(4, 100, 10, prompt + 20))
    assert generator.budgets == [[10, 10]]
    assert len(steps) == 2 and all(s["assistantText"] for s in steps)
    assert [r.outcome.turns for r in rollouts] == [1, 1] and all(r.budget_exhausted for r in rollouts)
    # c-bar = calls / T with T = the policy's real turns (CodeGrep Eq. 3).
    assert all(r.outcome.tool_calls_per_turn == 2.0 for r in rollouts)


def test_generators_refuse_a_zero_budget(qwen3_tokenizer):
    generator = HFGenerator.__new__(HFGenerator)  # no model needed to check the guard
    with pytest.raises(ValueError, match="budgets >= 1"):
        HFGenerator.generate(generator, [[1, 2]], [0])

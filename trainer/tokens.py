"""One rollout as one training sequence: token ids plus a loss mask.

The sequence is built by APPENDING token blocks, exactly as the policy saw them:

    [prompt: system + user + tools + assistant header, rendered once]   mask 0
    [assistant turn 1: the token ids the policy sampled, verbatim]      mask 1
    [observations + next assistant header, rendered once]               mask 0
    [assistant turn 2 ...]                                              mask 1
    ...

Only the policy's own tokens carry loss (CodeGrep App. A.1: tool responses are
appended "with a loss mask of zero"; CodeScout §4.1 also masks the system and
user prompts). Sampled ids are never re-tokenized from their decoded text and
earlier turns are never re-rendered, so training scores exactly what was
sampled, with the context it was sampled in.

Why not re-render the conversation each turn: the stock Qwen3 template is not
prefix-stable. It renders the LAST assistant turn with a `<think>` block
(empty with `enable_thinking: false`) and drops it once anything follows, and
it drops the reasoning of every assistant turn before the last user message
(so the environment's "1 turn left" reminder erases earlier thinking). A
sequence built by re-rendering would either differ from what was sampled or
not be one sequence at all. CodeScout §4.1 solved the same problem with a
template that keeps earlier `<think>` blocks; appending blocks gives the same
sequence without touching the model's template.

An observation block is rendered by the model's own template once, in a fixed
two-message anchor conversation (user, assistant), and cut right after the
anchor assistant's end-of-turn token: whatever the template does to the anchor
turn (think blocks) stays on the anchor's side of the cut.

Documented differences to the stock template's rendering of the whole
conversation (trainer/README.md "Chat templates"): reasoning blocks of earlier
turns are kept as sampled (the template drops them, or with thinking off drops
the empty `<think>\\n\\n</think>\\n\\n` its own generation prompt inserted), and
the text inside a `<think>` block keeps the whitespace the policy sampled (the
template strips it). `check_template` verifies at start-up that these are the
ONLY differences for the given tokenizer, and fails naming the model directory
otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional


class TemplateError(RuntimeError):
    """The chat template cannot be used to build prefix-stable training sequences."""


@dataclass
class Sequence:
    ids: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    # log pi_sampler(token) for sampled tokens (0.0 elsewhere); None when the
    # sampler does not report log-probs.
    sampler_logprobs: Optional[list] = field(default_factory=list)

    def extend(self, ids: list, trainable: bool, logprobs: Optional[list] = None) -> None:
        self.ids.extend(ids)
        self.mask.extend([1 if trainable else 0] * len(ids))
        if self.sampler_logprobs is None:
            return
        if trainable and logprobs is None:
            self.sampler_logprobs = None  # one turn without them: the rollout has none
            return
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"{len(logprobs)} sampler log-probs for {len(ids)} tokens")
        self.sampler_logprobs.extend(list(logprobs) if trainable else [0.0] * len(ids))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def trainable_tokens(self) -> int:
        return sum(self.mask)


# Text that no real conversation contains: the anchor turns around which an
# observation block is rendered and cut.
_ANCHOR_USER = "\u2063anchor-user\u2063"
_ANCHOR_ASSISTANT = "\u2063anchor-assistant\u2063"
# A reasoning block and the newlines after it (Qwen3: "<think>\n...\n</think>\n\n"; its
# template also strips leading newlines, not spaces, from the content after it).
_REASONING = re.compile(r"<think>.*?</think>\n*", re.DOTALL)


def without_reasoning(text: str) -> str:
    """`text` with every `<think>…</think>` block (and the newlines after it) removed:
    the documented difference between a block-built sequence and a full rendering."""
    return _REASONING.sub("", text)


class ChatTokens:
    """Renders the prompt and observation blocks with one tokenizer's chat template."""

    def __init__(self, tokenizer, template_kwargs: Optional[dict] = None, source: str = "the tokenizer"):
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        self.source = source  # named in every template error (the model directory)
        if tokenizer.chat_template is None:
            raise TemplateError(f"{source}: the tokenizer has no chat_template; the trainer needs one to render turns")
        self.end_of_turn_id = end_of_turn_token_id(tokenizer)
        self.end_of_turn_text = tokenizer.convert_ids_to_tokens(self.end_of_turn_id)

    def render(self, messages: list, tools: Optional[list], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False,
            add_generation_prompt=generation_prompt, **self.template_kwargs)

    def encode(self, text: str) -> list:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, messages: list, tools: Optional[list]) -> list:
        """Token ids of the opening messages followed by the assistant generation prompt."""
        return self.encode(self.render(messages, tools, generation_prompt=True))

    def observation_text(self, observations: list) -> str:
        """The text that follows an assistant turn's end-of-turn token: e.g. "\\n" +
        the tool-response block + any user note + the next assistant header."""
        anchor = [{"role": "user", "content": _ANCHOR_USER}, {"role": "assistant", "content": _ANCHOR_ASSISTANT}]
        rendered = self.render(anchor + list(observations), None, generation_prompt=True)
        at = rendered.find(_ANCHOR_ASSISTANT)
        if at < 0:
            raise TemplateError(f"{self.source}: the chat template does not render an assistant turn's content "
                                "verbatim, so observation blocks cannot be appended after it")
        cut = rendered.find(self.end_of_turn_text, at + len(_ANCHOR_ASSISTANT))
        if cut < 0:
            raise TemplateError(f"{self.source}: the chat template does not close an assistant turn with "
                                f"{self.end_of_turn_text!r}")
        return rendered[cut + len(self.end_of_turn_text):]

    def observation_block(self, observations: list) -> list:
        """Token ids of `observation_text` (mask 0 in the sequence). Earlier
        turns are not involved: they are never re-rendered."""
        text = self.observation_text(observations)
        return self.encode(text)

    def check_template(self) -> None:
        """Start-up check: block-built sequences of a probe conversation (tools,
        parallel tool results, a user reminder, three assistant turns with and
        without reasoning) must equal the template's own rendering of that
        conversation up to the documented differences (reasoning blocks).
        Raises TemplateError naming `source` otherwise."""
        tools = [{"type": "function", "function": {"name": "grep", "description": "search",
                                                   "parameters": {"type": "object", "properties": {}}}}]
        opening = [{"role": "system", "content": "probe system"}, {"role": "user", "content": "probe issue"}]
        call = '<tool_call>\n{"name": "grep", "arguments": {"pattern": "x"}}\n</tool_call>'
        turns = [f"<think>\nprobe reasoning 1\n</think>\n\n{call}\n{call}", f"{call}",
                 '<think>\nprobe reasoning 3\n</think>\n\n<answer>{"files": []}</answer>']
        observations = [[{"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}],
                        [{"role": "tool", "content": "r3"}, {"role": "user", "content": "1 turn left: answer now."}]]
        text = self.render(opening, tools, generation_prompt=True)
        if not text.startswith(self.render(opening, tools, generation_prompt=False)):
            raise TemplateError(f"{self.source}: the chat template's generation prompt is not appended to the "
                                "conversation, so sampled turns cannot follow it")
        conversation = list(opening)
        for k, turn in enumerate(turns):
            text += turn + self.end_of_turn_text
            conversation.append({"role": "assistant", "content": turn})
            if k < len(observations):
                text += self.observation_text(observations[k])
                conversation.extend(observations[k])
        full = self.render(conversation, tools, generation_prompt=False)
        # The template closes the last turn with end-of-turn + maybe a newline; the
        # sequence ends at the end-of-turn token the policy sampled.
        ours, theirs = without_reasoning(text), without_reasoning(full).rstrip("\n")
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            raise TemplateError(
                f"{self.source}: the chat template renders a multi-turn conversation differently from the "
                f"appended turns beyond reasoning blocks (at character {at}: appended {ours[at:at + 60]!r}, "
                f"template {theirs[at:at + 60]!r}); use a prefix-preserving template (CodeScout §4.1), e.g. "
                "through the config's chat_template override")
        probe = self.encode(self.render(opening, tools, generation_prompt=True))
        if self.encode(text)[:len(probe)] != probe:
            raise TemplateError(f"{self.source}: the prompt's tokens change when turns are appended after it")


def end_of_turn_token_id(tokenizer) -> int:
    """The token that closes an assistant turn: <|im_end|> for Qwen, else EOS."""
    vocab = tokenizer.get_vocab()
    if "<|im_end|>" in vocab:
        return vocab["<|im_end|>"]
    if tokenizer.eos_token_id is None:
        raise TemplateError("the tokenizer has neither <|im_end|> nor an eos token")
    return tokenizer.eos_token_id


def normalise_messages(messages: Any, what: str) -> list:
    """Check the server's message list has the shape the chat template expects."""
    if not isinstance(messages, list):
        raise ValueError(f"{what}: expected a list of messages, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"{what}[{i}]: expected {{role: str, content: str}}, got {m!r}")
        out.append(dict(m))
    return out

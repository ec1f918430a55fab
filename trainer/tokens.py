"""One rollout as one training sequence: token ids plus a loss mask.

The sequence is built incrementally, exactly as the policy saw it:

    [prompt: system + user + tools, rendered by the chat template]   mask 0
    [assistant turn 1: the tokens the policy sampled]                 mask 1
    [observations: tool responses / user notes + next gen. prompt]    mask 0
    [assistant turn 2 ...]                                            mask 1
    ...

Only the policy's own tokens carry loss (CodeGrep App. A.1: tool responses
are appended "with a loss mask of zero"; CodeScout §4.1 also masks the system
and user prompts). Sampled tokens are kept verbatim, never re-tokenized from
their decoded text, so training scores exactly what was sampled.

The observation block comes from the tokenizer's own chat template: we render
the conversation with and without the new observations and keep the
difference. Rendering the whole conversation (rather than a dummy one) keeps
templates that treat consecutive tool messages as one block, or that rewrite
earlier turns (Qwen3 drops old <think> blocks), correct: both renderings share
the same rewritten history, so their difference is only the new part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


class TemplateError(RuntimeError):
    """The chat template does not render observations as an appendable suffix."""


@dataclass
class Sequence:
    ids: list = field(default_factory=list)
    mask: list = field(default_factory=list)

    def extend(self, ids: list, trainable: bool) -> None:
        self.ids.extend(ids)
        self.mask.extend([1 if trainable else 0] * len(ids))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def trainable_tokens(self) -> int:
        return sum(self.mask)


class ChatTokens:
    """Renders prompts and observation blocks with one tokenizer's chat template."""

    def __init__(self, tokenizer, template_kwargs: Optional[dict] = None):
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        if tokenizer.chat_template is None:
            raise TemplateError("the tokenizer has no chat_template; the trainer needs one to render turns")
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

    def observation_block(self, history: list, tools: Optional[list], assistant_text: str,
                          observations: list) -> list:
        """Token ids that follow an assistant turn: its closing glue, the
        observations, and the next assistant generation prompt.

        `history` is the conversation up to (excluding) this assistant turn.
        """
        turn = history + [{"role": "assistant", "content": assistant_text}]
        before = self.render(turn, tools, generation_prompt=False)
        after = self.render(turn + list(observations), tools, generation_prompt=True)
        if not after.startswith(before):
            raise TemplateError(
                "chat template re-renders earlier turns when observations are appended; "
                "use a template whose renderings extend each other (see CodeScout §4.1)")
        cut = before.rfind(self.end_of_turn_text)
        if cut < 0:
            raise TemplateError(f"chat template does not close an assistant turn with {self.end_of_turn_text!r}")
        # Everything after the end-of-turn token: e.g. "\n" + the tool block +
        # "<|im_start|>assistant\n". The end-of-turn token itself is the policy's.
        return self.encode(after[cut + len(self.end_of_turn_text):])


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

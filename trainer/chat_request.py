"""A Chat Completions request as the token ids the policy saw in training.

The served policy (trainer/serve.py) must see a conversation exactly as the
trainer built it (tokens.py): the opening messages rendered once with the
generation prompt, each assistant turn's text followed by the end-of-turn
token, and each run of observations (tool results, a user reminder) rendered
once as an observation block that ends with the next assistant header. Earlier
turns are never re-rendered, so the stock Qwen3 template's habit of dropping
earlier reasoning does not change what the policy is asked.

What the OpenAI-side client sends back for an assistant turn is not always
the raw text the policy sampled: lib/agent's episode splits a reply into its
reasoning (`reasoning_content`), its visible content and its tool calls. The
turn is put back together the way Qwen3 writes it: `<think>` block, content,
then one `<tool_call>` block per call (trainer/README.md "Serving a
checkpoint" names this as the one place a served conversation can differ
from a training one: the whitespace the policy sampled around those parts).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .tokens import ChatTokens, Sequence, normalise_messages


class RequestError(ValueError):
    """The request cannot be rendered (HTTP 400, with this message)."""


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    # OpenAI's content parts: [{type: text, text: ...}]
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    raise RequestError(f"{what}: content must be a string or text parts, got {type(value).__name__}")


def assistant_text(message: dict, index: int) -> str:
    """The assistant turn as the policy writes it (Qwen3: think block, content, tool-call blocks)."""
    parts = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        parts.append(f"<think>\n{reasoning.strip()}\n</think>\n\n")
    content = _text(message.get("content"), f"messages[{index}]")
    parts.append(content)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RequestError(f"messages[{index}].tool_calls must be a list")
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f"messages[{index}].tool_calls[{k}] must be {{function: {{name, arguments}}}}")
        raw_args = function.get("arguments", "{}")
        try:
            arguments = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
        except json.JSONDecodeError:
            arguments = raw_args  # what the policy wrote, unreadable as it was
        block = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
        parts.append(("\n" if parts[-1] and not parts[-1].endswith("\n") else "") + f"<tool_call>\n{block}\n</tool_call>")
    return "".join(parts)


def _plain(message: dict, index: int) -> dict:
    role = message.get("role")
    if role not in ("system", "user", "tool"):
        raise RequestError(f"messages[{index}]: unknown role {role!r}")
    out = {k: v for k, v in message.items() if k in ("role", "name", "tool_call_id")}
    out["content"] = _text(message.get("content"), f"messages[{index}]")
    return out


def prompt_ids(chat: ChatTokens, messages: Any, tools: Optional[list]) -> list:
    """Token ids of the conversation so far, ending with the assistant header the next turn follows."""
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict) \
            and messages[-1].get("role") == "assistant":
        raise RequestError("the last message is the assistant's: nothing to answer")
    return conversation_sequence(chat, messages, tools).ids


def conversation_sequence(chat: ChatTokens, messages: Any, tools: Optional[list]) -> Sequence:
    """The conversation as a training sequence (tokens.py): the opening messages rendered once with the
    generation prompt (mask 0), each assistant turn's text and the end-of-turn token (mask 1: the policy's
    own tokens), each run of tool results / user notes rendered once as an observation block that ends with
    the next assistant header (mask 0). A conversation that ends with an assistant turn (a kept trajectory,
    trainer/sft.py) ends with that turn's end-of-turn token."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    if not all(isinstance(m, dict) for m in messages):
        raise RequestError("every message must be an object")
    first_assistant = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    opening = normalise_messages([_plain(m, i) for i, m in enumerate(messages[:first_assistant])], "messages")
    if not opening:
        raise RequestError("the conversation must open with a system or user message")
    sequence = Sequence(sampler_logprobs=None)
    sequence.extend(chat.prompt(opening, tools), trainable=False)
    i = first_assistant
    while i < len(messages):
        sequence.extend(chat.encode(assistant_text(messages[i], i)) + [chat.end_of_turn_id], trainable=True)
        j = i + 1
        while j < len(messages) and messages[j].get("role") != "assistant":
            j += 1
        observations = [_plain(m, k) for k, m in enumerate(messages[i + 1 : j], start=i + 1)]
        if not observations:
            if j == len(messages):
                break  # the conversation ends with this assistant turn
            raise RequestError(f"messages[{i}] and messages[{j}]: two assistant turns with nothing between them")
        sequence.extend(chat.observation_block(normalise_messages(observations, "messages")), trainable=False)
        i = j
    return sequence

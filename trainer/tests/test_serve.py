"""The policy server: one checkpoint behind an OpenAI-compatible endpoint, on the trainer's own code."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import pytest
import torch

from trainer.chat_request import RequestError, assistant_text, prompt_ids
from trainer.config import parse_config_with_recipe
from trainer.rollout import Sampling
from trainer.serve import ServedPolicy, adapter_sha256, make_handler
from trainer.tokens import ChatTokens

TOOLS = [{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {"type": "object", "properties": {}}}}]


def write_checkpoint(model_dir: str, out: str, step: int, scale: float) -> str:
    """A LoRA checkpoint as trainer/checkpoint.py lays it out, with non-zero B matrices (a trained adapter)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(step)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, scale)
    path = os.path.join(out, f"step-{step:08d}")
    model.save_pretrained(path)
    with open(os.path.join(path, "trainer_state.json"), "w", encoding="utf-8") as f:
        json.dump({"step": step}, f)
    open(os.path.join(path, "COMPLETE"), "w").close()
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("serve")
    checkpoint = write_checkpoint(tiny_model_dir, str(root), 3, 0.5)
    cfg, _ = parse_config_with_recipe(
        {
            "model_path": tiny_model_dir,
            "output_dir": str(root / "run"),
            "env_url": "http://127.0.0.1:1",
            "data": {"instance_ids": ["a"]},
            "total_steps": 1,
            "seed": 1,
            "max_turns": 4,
            "max_new_tokens": 12,
            "max_new_tokens_per_turn": 6,
            "max_seq_len": 1024,
        }
    )
    policy = ServedPolicy(cfg, checkpoint, "run-x/step-00000003", Sampling(1.0, 0.9, 50))
    log = str(root / "requests.jsonl")
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(policy, log))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield policy, f"http://127.0.0.1:{server.server_address[1]}", log, checkpoint
    server.shutdown()
    server.server_close()


def call(url: str, body=None):
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_health_names_the_checkpoint_that_answers(served):
    policy, url, _log, checkpoint = served
    status, body = call(f"{url}/health")
    assert status == 200
    assert body["model"] == "run-x/step-00000003"
    assert body["step"] == 3
    assert body["adapterSha256"] == adapter_sha256(checkpoint) and len(body["adapterSha256"]) == 64
    status, models = call(f"{url}/v1/models")
    assert [m["id"] for m in models["data"]] == ["run-x/step-00000003"]


def test_a_completion_is_the_raw_turn_and_is_logged(served):
    policy, url, log, _ = served
    messages = [{"role": "system", "content": "find files"}, {"role": "user", "content": "Issue: the parser fails"}]
    status, body = call(
        f"{url}/v1/chat/completions", {"model": "run-x/step-00000003", "messages": messages, "tools": TOOLS, "temperature": 0}
    )
    assert status == 200, body
    assert body["model"] == "run-x/step-00000003"
    choice = body["choices"][0]
    assert choice["finish_reason"] in ("stop", "length")
    assert 1 <= body["usage"]["completion_tokens"] <= 6
    # Greedy on the same prompt: the same tokens as the trainer's generator on the same model.
    ids = prompt_ids(policy.chat, messages, TOOLS)
    assert body["usage"]["prompt_tokens"] == len(ids)
    again = call(f"{url}/v1/chat/completions", {"model": "run-x/step-00000003", "messages": messages, "tools": TOOLS, "temperature": 0})[1]
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]
    with open(log, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) >= 2
    assert lines[-1]["model"] == "run-x/step-00000003" and lines[-1]["step"] == 3
    assert lines[-1]["adapterSha256"] == policy.adapter_sha256


def test_the_adapter_changes_the_model(served):
    policy, *_ = served
    ids = torch.tensor([prompt_ids(policy.chat, [{"role": "user", "content": "Issue"}], None)])
    with torch.no_grad():
        tuned = policy.model(input_ids=ids).logits
        with policy.model.disable_adapter():
            base = policy.model(input_ids=ids).logits
    assert float((tuned - base).abs().max()) > 1e-3


def test_another_model_name_is_not_found(served):
    _policy, url, *_ = served
    status, body = call(f"{url}/v1/chat/completions", {"model": "other", "messages": [{"role": "user", "content": "x"}]})
    assert status == 404
    assert "run-x/step-00000003" in body["error"]["message"]


def test_a_conversation_is_the_training_sequence(served):
    """Prompt + assistant text + end-of-turn + observation block, as trainer/rollout.py appends them."""
    policy, *_ = served
    chat: ChatTokens = policy.chat
    opening = [{"role": "system", "content": "find files"}, {"role": "user", "content": "Issue: x"}]
    turn = '<tool_call>\n{"name": "grep", "arguments": {"pattern": "def parse"}}\n</tool_call>'
    observations = [
        {"role": "tool", "tool_call_id": "call_1_0", "name": "grep", "content": "src/a.py:1: def parse"},
        {"role": "user", "content": "1 turn left: answer now."},
    ]
    expected = chat.prompt(opening, TOOLS) + chat.encode(turn) + [chat.end_of_turn_id] + chat.observation_block(observations)
    # What lib/agent sends back: the calls parsed out of the text, the content empty.
    sent = opening + [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1_0", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "def parse"}'}}],
        }
    ]
    assert prompt_ids(chat, sent + observations, TOOLS) == expected


def test_assistant_text_puts_reasoning_content_and_calls_back_in_qwen3_order():
    text = assistant_text(
        {
            "role": "assistant",
            "content": "look",
            "reasoning_content": "think",
            "tool_calls": [{"function": {"name": "read", "arguments": '{"path": "a.py"}'}}],
        },
        2,
    )
    assert text == '<think>\nthink\n</think>\n\nlook\n<tool_call>\n{"name": "read", "arguments": {"path": "a.py"}}\n</tool_call>'


def test_bad_conversations_are_refused_by_name(served):
    policy, *_ = served
    with pytest.raises(RequestError, match="last message is the assistant"):
        prompt_ids(policy.chat, [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], None)
    with pytest.raises(RequestError, match="unknown role"):
        prompt_ids(policy.chat, [{"role": "wizard", "content": "x"}], None)


def test_a_full_finetune_checkpoint_is_served_with_its_own_weights(tmp_path, tiny_model_dir):
    """`finetune: full` checkpoints hold the whole model, no adapter: the server loads those weights (not the base
    model's) and names them by the weights file's sha256; a directory with neither is refused by name."""
    from transformers import AutoModelForCausalLM

    from trainer.serve import weights_file

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.norm.weight.mul_(3.0)  # a visibly different model than the base
    checkpoint = str(tmp_path / "step-00000005")
    model.save_pretrained(checkpoint)
    with open(os.path.join(checkpoint, "trainer_state.json"), "w", encoding="utf-8") as f:
        json.dump({"step": 5}, f)
    cfg, _ = parse_config_with_recipe(
        {
            "model_path": tiny_model_dir,
            "output_dir": str(tmp_path / "run"),
            "env_url": "http://127.0.0.1:1",
            "data": {"instance_ids": ["a"]},
            "total_steps": 1,
            "finetune": "full",
            "kl_beta": 0.0,
            "track_kl": False,
            "max_new_tokens": 12,
            "max_seq_len": 1024,
        }
    )
    policy = ServedPolicy(cfg, checkpoint, "run-full/step-00000005", Sampling(1.0, 1.0, 0))
    assert weights_file(checkpoint) == os.path.join(checkpoint, "model.safetensors")
    assert policy.adapter_sha256 == adapter_sha256(checkpoint) and policy.step == 5
    served_norm = policy.model.model.norm.weight.detach()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert torch.allclose(served_norm, base.model.norm.weight.detach() * 3.0)
    assert not torch.allclose(served_norm, base.model.norm.weight.detach())
    reply = policy.complete({"messages": [{"role": "user", "content": "find the parser"}], "max_tokens": 4, "temperature": 0})
    assert reply["usage"]["completion_tokens"] >= 1

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="neither adapter_model.safetensors nor model.safetensors"):
        ServedPolicy(cfg, str(empty), "x/step-00000001", Sampling(1.0, 1.0, 0))

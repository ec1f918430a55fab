"""trainer.sft: masking, tokens_out, resume equivalence, config errors, init_from (tiny model, CPU)."""

import json
import os

import pytest
import torch
from safetensors.torch import load_file

from trainer import sft
from trainer.chat_request import assistant_text, conversation_sequence
from trainer.checkpoint import complete_checkpoints, read_state
from trainer.config import ConfigError, LoraConfig
from trainer.policy import load_policy, pick_device_and_dtype, token_logprobs
from trainer.sft_config import parse_sft_config_with_recipe
from trainer.tokens import ChatTokens
from trainer.train import StopRequest
from trainer.update import TrainItem

from .conftest import write_config

TOOLS = [{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {"type": "object", "properties": {}}}}]


def example(k: int, trailing_tool: str = None) -> dict:
    messages = [
        {"role": "system", "content": "Find the files."},
        {"role": "user", "content": f"Issue {k}: the parser fails on empty input."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "def parse"}'}}],
        },
        {"role": "tool", "tool_call_id": "c0", "content": f"src/mod_parser.py:{k}: def handler():"},
        {"role": "assistant", "content": f'<answer>{{"files": ["src/mod_parser.py"], "k": {k}}}</answer>'},
    ]
    if trailing_tool is not None:
        messages.append({"role": "tool", "tool_call_id": "c1", "content": trailing_tool})
    return {"instance_id": f"repo__x-{k}", "messages": messages, "tools": TOOLS}


def write_examples(path, rows) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


def sft_config(tmp_path, model_dir, **overrides) -> dict:
    config = {
        "model_dir": model_dir,
        "output_dir": str(tmp_path / "sft"),
        "examples_path": write_examples(tmp_path / "examples.jsonl", [example(k) for k in range(6)]),
        "lr": 1e-2,
        "global_batch_size": 2,
        "epochs": 2,
        "seed": 3,
        "save_every": 1,
        "keep_checkpoints": 20,
        "micro_batch_tokens": 200,
        "lora": {"r": 4, "alpha": 8},
    }
    config.update(overrides)
    return config


def events(stdout: str) -> list:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_the_loss_counts_exactly_the_assistant_tokens(tiny_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    chat = ChatTokens(tokenizer)
    row = example(1)
    seq = conversation_sequence(chat, row["messages"], row["tools"])
    # The mask is 1 exactly on each assistant turn's tokens and its end-of-turn token.
    turns = [chat.encode(assistant_text(m, i)) + [chat.end_of_turn_id] for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
    policy = [t for t, m in zip(seq.ids, seq.mask) if m]
    assert policy == turns[0] + turns[1]
    first = seq.mask.index(1)
    assert seq.ids[:first] == chat.prompt(row["messages"][:2], TOOLS)
    # The SFT loss equals Hugging Face's own causal-LM loss with every non-assistant label ignored (-100).
    ids = torch.tensor([seq.ids])
    labels = torch.tensor([[t if m else -100 for t, m in zip(seq.ids, seq.mask)]])
    with torch.no_grad():
        reference = float(model(input_ids=ids, labels=labels).loss)
        logps = token_logprobs(model, ids, torch.ones_like(ids), torch.tensor([seq.mask], dtype=torch.float32))
    ours = float(-(logps.sum()) / sum(seq.mask))
    assert ours == pytest.approx(reference, rel=1e-5)


def _loss(model, tokenizer, chat, row) -> float:
    seq = conversation_sequence(chat, row["messages"], row["tools"])
    item = TrainItem(ids=seq.ids, mask=seq.mask, advantage=0.0, weight=1.0)
    model.zero_grad(set_to_none=True)
    out = sft.sft_step(
        model, [item], [0], pad_id=tokenizer.pad_token_id, device=torch.device("cpu"), micro_batch_tokens=4096, should_stop=lambda: False
    )
    return out["loss"]


def test_a_changed_observation_token_does_not_change_the_loss(tiny_model_dir):
    device, dtype = pick_device_and_dtype("auto")
    model, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), dtype, device, False)
    chat = ChatTokens(tokenizer)
    # An observation after the last assistant turn: nothing the policy says depends on it, so only a loss
    # that (wrongly) trained on observation tokens could change with it.
    base = _loss(model, tokenizer, chat, example(1, trailing_tool="src/a.py:1: x"))
    # (Equal up to float noise: the longer sequence may take other kernel paths.)
    assert _loss(model, tokenizer, chat, example(1, trailing_tool="tests/zzz.py:9: yy")) == pytest.approx(base, abs=1e-6)
    # The check can fail: a changed assistant token does change it.
    changed = example(1, trailing_tool="src/a.py:1: x")
    changed["messages"][4]["content"] = changed["messages"][4]["content"].replace("mod_parser", "mod_render")
    assert abs(_loss(model, tokenizer, chat, changed) - base) > 1e-3


def test_tokens_out_holds_each_example_as_a_rollout_would_be_tokenized(tmp_path, tiny_model_dir, capsys):
    config = sft_config(tmp_path, tiny_model_dir, epochs=1, tokens_out=str(tmp_path / "tok" / "tokens.jsonl"))
    assert sft.main(["--config", write_config(tmp_path, config)]) == 0
    lines = events(capsys.readouterr().out)
    assert [e["event"] for e in lines][:1] == ["start"] and lines[-1] == {"event": "done", "step": 3}
    start = lines[0]
    assert (start["total_steps"], start["examples"], start["kind"]) == (3, 6, "sft")
    assert start["recipe"]["lr"] == {"value": 1e-2, "source": "config"}
    assert start["recipe"]["warmup_ratio"]["source"].startswith("CodeScout §4.1")
    with open(config["tokens_out"]) as f:
        rows = [json.loads(line) for line in f]
    assert [r["instance_id"] for r in rows] == [f"repo__x-{k}" for k in range(6)]
    _, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), torch.float32, torch.device("cpu"), False)
    chat = ChatTokens(tokenizer)
    for k, r in enumerate(rows):
        seq = conversation_sequence(chat, example(k)["messages"], TOOLS)
        assert (r["input_ids"], r["policy_mask"]) == (seq.ids, seq.mask)
    steps = [e for e in lines if e["event"] == "step"]
    assert [s["step"] for s in steps] == [1, 2, 3] and all(s["examples"] == 2 for s in steps)
    assert all(s["loss"] > 0 and s["grad_norm"] > 0 for s in steps)
    # Every step checkpoints (save_every 1), in checkpoint.py's layout.
    assert [s for s, _ in complete_checkpoints(config["output_dir"])] == [1, 2, 3]
    assert read_state(complete_checkpoints(config["output_dir"])[-1][1])["kind"] == "sft"


class StopAfter(StopRequest):
    """A SIGTERM stand-in: `requested` turns true at its n-th poll (polled before each micro-batch and step)."""

    def __init__(self, polls: int):
        super().__init__()
        self.polls, self.signal_name = polls, "SIGTERM"

    @property
    def requested(self):
        self.polls -= 1
        return self.polls < 0

    @requested.setter
    def requested(self, _value):
        pass


def _final_adapter(output_dir: str) -> dict:
    return load_file(os.path.join(complete_checkpoints(output_dir)[-1][1], "adapter_model.safetensors"))


@pytest.mark.parametrize("polls", [3, 4, 7])  # between steps; inside step 2; inside step 3
def test_stop_then_resume_matches_an_uninterrupted_run(tmp_path, tiny_model_dir, capsys, polls):
    (tmp_path / "a").mkdir()
    straight = sft_config(tmp_path / "a", tiny_model_dir)
    cfg, recipe = parse_sft_config_with_recipe(straight)
    assert sft.finetune(cfg, None, lambda *a, **k: None, StopAfter(10**6), recipe) == 0
    reference = _final_adapter(straight["output_dir"])

    (tmp_path / "b").mkdir()
    interrupted = sft_config(tmp_path / "b", tiny_model_dir)
    cfg, recipe = parse_sft_config_with_recipe(interrupted)
    seen = []
    emit = lambda event, **f: seen.append({"event": event, **f})  # noqa: E731
    assert sft.finetune(cfg, None, emit, StopAfter(polls), recipe) == 0
    stopped = [e for e in seen if e["event"] == "stopped"]
    assert len(stopped) == 1 and 0 < stopped[0]["step"] < 6
    assert sft.finetune(cfg, "latest", emit, StopAfter(10**6), recipe) == 0
    steps = [e["step"] for e in seen if e["event"] == "step"]
    assert steps == [1, 2, 3, 4, 5, 6], "a step was done twice or skipped"
    assert [e["event"] for e in seen].count("resumed") == 1 and seen[-1] == {"event": "done", "step": 6}
    resumed = _final_adapter(interrupted["output_dir"])
    assert reference.keys() == resumed.keys()
    for key in reference:
        torch.testing.assert_close(resumed[key], reference[key], rtol=1e-5, atol=1e-6)


def test_config_and_example_errors_name_what_is_wrong(tmp_path, tiny_model_dir):
    good = sft_config(tmp_path, tiny_model_dir)
    with pytest.raises(ConfigError, match="config key 'lerning_rate': unknown key"):
        parse_sft_config_with_recipe({**good, "lerning_rate": 1})
    with pytest.raises(ConfigError, match="config key 'recipe': must be one of the RFT presets codescout"):
        parse_sft_config_with_recipe({**good, "recipe": "codegrep-v3"})
    with pytest.raises(ConfigError, match="config key 'examples_path': file .* does not exist"):
        parse_sft_config_with_recipe({**good, "examples_path": str(tmp_path / "nope.jsonl")})
    with pytest.raises(ConfigError, match="config key 'global_batch_size': must be >= 1"):
        parse_sft_config_with_recipe({**good, "global_batch_size": 0})
    with pytest.raises(ConfigError, match="config key 'model_dir': is required"):
        parse_sft_config_with_recipe({k: v for k, v in good.items() if k != "model_dir"})
    # The paper's RFT values fill what the config leaves out (CodeScout §4.1).
    c, recipe = parse_sft_config_with_recipe({k: v for k, v in good.items() if k not in ("lr", "global_batch_size", "epochs")})
    assert (c.lr, c.lr_schedule, c.warmup_ratio, c.global_batch_size, c.epochs) == (5e-5, "cosine", 0.1, 8, 1)
    assert recipe["lr"]["source"] == "CodeScout §4.1: learning rate 5e-5"

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(example(0)) + "\n" + "{not json\n")
    with pytest.raises(sft.ExampleError, match=r"bad.jsonl line 2: not valid JSON"):
        sft.read_examples(str(bad))
    bad.write_text(json.dumps({"instance_id": "", "messages": []}) + "\n")
    with pytest.raises(sft.ExampleError, match="line 1: instance_id must be a non-empty string"):
        sft.read_examples(str(bad))
    _, tokenizer = load_policy(tiny_model_dir, LoraConfig(r=4, alpha=8), torch.float32, torch.device("cpu"), False)
    chat = ChatTokens(tokenizer)
    no_answer = {"instance_id": "i-9", "messages": example(0)["messages"][:2], "tools": TOOLS}
    with pytest.raises(sft.ExampleError, match=r"example 0 \(i-9\): no assistant turn"):
        sft.tokenize_examples(chat, sft.read_examples(write_examples(bad, [no_answer])), 4096, str(bad))
    with pytest.raises(sft.ExampleError, match=r"example 0 \(repo__x-0\): \d+ tokens, more than max_seq_len 20"):
        sft.tokenize_examples(chat, sft.read_examples(write_examples(bad, [example(0)])), 20, str(bad))


def test_grpo_init_from_starts_from_the_sft_checkpoints_weights(tmp_path, tiny_model_dir, env_server, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from trainer import train
    from trainer.config import parse_config

    from .conftest import tiny_config

    config = sft_config(tmp_path, tiny_model_dir, epochs=1)
    assert sft.main(["--config", write_config(tmp_path, config, "sft.json")]) == 0
    checkpoint = complete_checkpoints(config["output_dir"])[-1][1]

    captured = []
    original = train.run_rollouts
    monkeypatch.setattr(train, "run_rollouts", lambda *a, **k: captured.append(original(*a, **k)) or captured[-1])
    _, url = env_server
    grpo = tiny_config(tmp_path, url, tiny_model_dir, total_steps=1, init_from=checkpoint, top_p=1.0, top_k=0, kl_beta=0.0, track_kl=False)
    assert train.main(["--config", write_config(tmp_path, grpo, "grpo.json")]) == 0
    rollouts = captured[0]
    assert rollouts and all(r.sequence.sampler_logprobs is not None for r in rollouts)

    def logprobs(model, r):
        ids = torch.tensor([r.sequence.ids])
        mask = torch.tensor([r.sequence.mask], dtype=torch.float32)
        with torch.no_grad():
            return token_logprobs(model, ids, torch.ones_like(ids), mask)[0][mask[0] > 0]

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    sft_policy = PeftModel.from_pretrained(base, checkpoint)  # loaded by peft itself, not by the trainer's code
    sft_policy.eval()
    for r in rollouts:
        sampled = torch.tensor(r.sequence.sampler_logprobs)[torch.tensor(r.sequence.mask) > 0]
        torch.testing.assert_close(sampled, logprobs(sft_policy, r), rtol=1e-4, atol=1e-4)
    # The check can fail: the base model (no SFT) gives other log-probs for the same tokens.
    with sft_policy.disable_adapter():
        assert (
            max(
                float((logprobs(sft_policy, r) - torch.tensor(r.sequence.sampler_logprobs)[torch.tensor(r.sequence.mask) > 0]).abs().max())
                for r in rollouts
            )
            > 1e-2
        )
    # Fresh optimizer and schedule at step 0; a bad path is a config error naming the key.
    with open(os.path.join(grpo["output_dir"], "metrics.jsonl")) as f:
        first = json.loads(f.readline())
    assert first["step"] == 1 and first["lr"] == grpo["lr"]
    with pytest.raises(ConfigError, match="config key 'init_from': .* is not a complete checkpoint"):
        parse_config({**grpo, "init_from": str(tmp_path)})


def test_a_real_sigterm_checkpoints_and_resume_finishes_without_a_step_twice(tmp_path, tiny_model_dir):
    import signal
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    config = sft_config(tmp_path, tiny_model_dir, epochs=5, save_every=1000)  # 15 steps
    path = write_config(tmp_path, config)
    env = dict(os.environ, PYTHONPATH=repo, OMP_NUM_THREADS="1")
    child = subprocess.Popen([sys.executable, "-m", "trainer.sft", "--config", path], stdout=subprocess.PIPE, text=True, env=env, cwd=repo)
    lines = []
    for line in child.stdout:
        lines.append(json.loads(line))
        if lines[-1]["event"] == "step" and lines[-1]["step"] == 2:
            child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 0
    stopped = lines[-1]
    assert stopped["event"] == "stopped" and stopped["signal"] == "SIGTERM" and stopped["checkpoint"]
    first = [e["step"] for e in lines if e["event"] == "step"]
    assert stopped["step"] == first[-1] < 15
    resumed = subprocess.run(
        [sys.executable, "-m", "trainer.sft", "--config", path, "--resume", "latest"],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert after[0] == {"event": "resumed", "step": stopped["step"], "checkpoint": stopped["checkpoint"]}
    assert first + [e["step"] for e in after if e["event"] == "step"] == list(range(1, 16))
    assert after[-1] == {"event": "done", "step": 15}

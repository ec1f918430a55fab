"""The training benchmark's serving figure: the run's last checkpoint served by
`python -m trainer.serve` (the transformers server lib/policy-server starts
where vLLM is not installed; trainer/README.md "Serving a checkpoint"), its
generated tokens/s over a few Chat Completions requests, set against the plain
batched `generate` of the same weights that bench_train.py measures.

The server answers one request at a time (serve.py holds one lock around its
generation), so the ratio is what serving one request after another costs
against one batched call: a floor for a policy server under load, not a
ceiling. Only the standard library talks to it, so the dry run still needs
nothing beyond the device image's packages (trainer/tests/test_device_image.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from .checkpoint import checkpoints_root

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_TIMEOUT_S = 600  # loading a 4B base model and its adapter from local disk


def last_checkpoint(output_dir: str) -> str:
    root = checkpoints_root(output_dir)
    steps = sorted(name for name in os.listdir(root) if name.startswith("step-") and os.path.isfile(os.path.join(root, name, "COMPLETE")))
    if not steps:
        raise RuntimeError(f"no complete checkpoint under {root}: nothing to serve")
    return os.path.join(root, steps[-1])


def _post(url: str, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read().decode("utf-8"))


def bench_served_checkpoint(
    config_dict: dict, output_dir: str, work: str, conversations: list, max_tokens: int, plain_tokens_per_s: float
) -> dict:
    """Serves the newest checkpoint of `output_dir` and sends each conversation (messages, tools) once, after
    one untimed warm-up request; the server's own `usage.completion_tokens` counts the generated tokens."""
    if not conversations:
        raise ValueError("bench_served_checkpoint: no conversations to send")
    checkpoint = last_checkpoint(output_dir)
    config_path = os.path.join(work, "serve-config.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config_dict, f)
    name = f"bench/{os.path.basename(checkpoint)}"
    command = [
        sys.executable,
        "-m",
        "trainer.serve",
        "--trainer-config",
        config_path,
        "--adapter",
        checkpoint,
        "--served-model-name",
        name,
        "--port",
        "0",
        "--threads",
        str(max(1, os.cpu_count() or 1)),
    ]
    started = time.perf_counter()
    # stderr to a file: a pipe nobody reads would block a chatty server (transformers' warnings) mid-bench.
    stderr_path = os.path.join(work, "serve.stderr")
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        server = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = server.stdout.readline()  # serve.py prints its listening line once the socket is bound
        if not line:
            server.wait(timeout=30)
            with open(stderr_path, encoding="utf-8") as f:
                raise RuntimeError(f"trainer.serve exited {server.returncode} before listening: {f.read()[-2000:]}")
        listening = json.loads(line)
        load_s = time.perf_counter() - started
        url = f"http://{listening['host']}:{listening['port']}/v1/chat/completions"

        def ask(messages, tools):
            body = {"model": name, "messages": messages, "max_tokens": max_tokens, **({"tools": tools} if tools else {})}
            return _post(url, body, timeout=START_TIMEOUT_S)

        ask(*conversations[0])  # warm-up: first-call allocations and kernel choices stay out of the figure
        tokens, seconds = [], []
        for messages, tools in conversations:
            sent = time.perf_counter()
            reply = ask(messages, tools)
            seconds.append(time.perf_counter() - sent)
            tokens.append(int(reply["usage"]["completion_tokens"]))
            if reply["model"] != name or reply["codegrep"]["step"] != listening["step"]:
                raise RuntimeError(f"trainer.serve answered for {reply['model']} step {reply['codegrep']['step']}, not {name}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()
    served_tps = sum(tokens) / sum(seconds) if sum(seconds) > 0 else 0.0
    return {
        "checkpoint_step": listening["step"],
        "requests": len(tokens),
        "tokens": sum(tokens),
        "seconds": sum(seconds),
        "load_s": load_s,
        "tokens_per_s": served_tps,
        "vs_plain_generate": served_tps / plain_tokens_per_s if plain_tokens_per_s else None,
    }

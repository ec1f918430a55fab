"""Serve one checkpoint (a LoRA adapter, or a `finetune: full` model) as an OpenAI-compatible Chat Completions endpoint.

    python -m trainer.serve --trainer-config CFG.json --adapter CHECKPOINT_DIR \\
        --served-model-name RUN/step-00000042 [--host 127.0.0.1] [--port 0] [--request-log FILE]

Where vLLM is not installed (a CPU node, the demo, the tests) this is the
policy server lib/policy-server starts: the base model of the run's trainer
config (`model_path`, `dtype`, `chat_template`, `chat_template_kwargs`,
`max_seq_len`, `max_new_tokens_per_turn`, the recipe's sampling) with the
checkpoint's adapter (or, for a fully fine-tuned checkpoint, the checkpoint's
own weights with the base model's tokenizer), on the trainer's own code: the prompt is built as in
training (chat_request.py on tokens.py's ChatTokens), generation is
generate_hf.py's HFGenerator with the trainer's stop tokens, and the reply is
the raw decoded turn (special tokens kept, without the closing end-of-turn
token), exactly the `assistantText` the environment server parses in
training; lib/agent's episode parses its `<tool_call>` and `<answer>` blocks
with the same code. No tool-call parsing happens here.

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions. A request
for another model name is answered 404 (lib/llm: an unknown model, not
retried). One generation runs at a time (the HTTP server is threaded so
/health answers meanwhile). Every completion is one JSON line in
`--request-log`: the served name, the step, the weights' sha256, token counts.

Stdout carries one JSON line once the socket listens:
`{"event": "listening", "host": ..., "port": ..., "model": ..., "step": ..., "adapterSha256": ...}`.
SIGTERM ends the process (lib/process stops its whole group).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

ADAPTER_WEIGHTS = "adapter_model.safetensors"
# What `save_pretrained` of a fully fine-tuned model writes (one file; a sharded model has the index instead).
FULL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")


def weights_file(checkpoint_dir: str) -> Optional[str]:
    """The file whose sha256 names the checkpoint: the LoRA adapter, or a full fine-tune's weights (or their
    shard index); None when the directory holds neither. lib/policy-server's `checkpointWeightsFile` twins it."""
    for name in (ADAPTER_WEIGHTS, *FULL_WEIGHTS):
        if os.path.isfile(os.path.join(checkpoint_dir, name)):
            return os.path.join(checkpoint_dir, name)
    return None


def adapter_sha256(checkpoint_dir: str) -> str:
    """sha256 of the checkpoint's weights file (`weights_file`): the name lib/policy-server records for it."""
    digest = hashlib.sha256()
    with open(weights_file(checkpoint_dir), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_step(checkpoint_dir: str) -> Optional[int]:
    path = os.path.join(checkpoint_dir, "trainer_state.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return int(json.load(f)["step"])


class ServedPolicy:
    """The base model with one adapter (or a fully fine-tuned model), its chat tokens and its generator."""

    def __init__(self, cfg, checkpoint_dir: str, served_name: str, sampling):
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .generate_hf import HFGenerator
        from .policy import pick_device_and_dtype
        from .rollout import stop_token_ids
        from .train import load_chat

        weights = weights_file(checkpoint_dir)
        if weights is None:
            raise FileNotFoundError(
                f"--adapter {checkpoint_dir!r} holds neither {ADAPTER_WEIGHTS} nor {' / '.join(FULL_WEIGHTS)}: not a checkpoint"
            )
        if not os.path.isdir(cfg.model_path):
            raise FileNotFoundError(f"model_path {cfg.model_path!r} (the trainer config's base model) is not a local directory")
        self.served_name = served_name
        self.checkpoint_dir = checkpoint_dir
        self.step = checkpoint_step(checkpoint_dir)
        self.adapter_sha256 = adapter_sha256(checkpoint_dir)
        self.base_model = cfg.model_path
        device, dtype = pick_device_and_dtype(cfg.dtype)
        tokenizer = AutoTokenizer.from_pretrained(cfg.model_path)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if os.path.basename(weights) == ADAPTER_WEIGHTS:
            base = AutoModelForCausalLM.from_pretrained(cfg.model_path, dtype=dtype).to(device)
            self.model = PeftModel.from_pretrained(base, checkpoint_dir).to(device)
        else:  # finetune: full saved the whole model (policy.FullFineTune.save_pretrained); the tokenizer is the base's
            base = AutoModelForCausalLM.from_pretrained(checkpoint_dir, dtype=dtype).to(device)
            self.model = base
        self.model.eval()
        self.chat = load_chat(cfg, tokenizer)
        self.stop_ids = stop_token_ids(tokenizer, getattr(base, "generation_config", None))
        self.max_seq_len = cfg.max_seq_len
        self.max_new_tokens_per_turn = cfg.max_new_tokens_per_turn or cfg.max_new_tokens
        self.sampling = sampling
        self._generators = {}
        self._device = device
        self._token_budget = cfg.hf_generation_tokens
        self._make_generator = lambda s, greedy: HFGenerator(
            self.model, tokenizer.pad_token_id, self.stop_ids, s, device, token_budget=self._token_budget, greedy=greedy
        )
        self.lock = threading.Lock()
        torch.manual_seed(0)

    def describe(self) -> dict:
        return {
            "model": self.served_name,
            "step": self.step,
            "adapterSha256": self.adapter_sha256,
            "baseModel": self.base_model,
            "checkpoint": self.checkpoint_dir,
        }

    def complete(self, body: dict) -> dict:
        from .chat_request import RequestError, prompt_ids
        from .rollout import Sampling

        tools = body.get("tools") or None
        if tools is not None and not isinstance(tools, list):
            raise RequestError("tools must be a list of function tools")
        ids = prompt_ids(self.chat, body.get("messages"), tools)
        room = self.max_seq_len - len(ids)
        if room < 1:
            raise RequestError(f"the conversation is {len(ids)} tokens, not below max_seq_len {self.max_seq_len}")
        asked = body.get("max_tokens") or body.get("max_completion_tokens") or self.max_new_tokens_per_turn
        if not isinstance(asked, int) or asked < 1:
            raise RequestError(f"max_tokens must be a positive integer, got {asked!r}")
        budget = min(asked, self.max_new_tokens_per_turn, room)
        temperature = body.get("temperature", self.sampling.temperature)
        greedy = temperature is not None and float(temperature) == 0.0
        sampling = Sampling(
            temperature=float(temperature) if not greedy else 1.0,
            top_p=float(body.get("top_p", self.sampling.top_p)),
            top_k=int(body.get("top_k", self.sampling.top_k)),
        )
        # The row key makes sampling depend on the request alone (generate_hf.py: per-row seeded uniforms).
        seed = body.get("seed")
        key = (int(seed) if isinstance(seed, int) else int(hashlib.sha256(bytes(str(ids), "utf-8")).hexdigest()[:15], 16),)
        with self.lock:
            generator = self._make_generator(sampling, greedy)
            completion = generator.generate([ids], [budget], [key])[0]
        tokens = completion.tokens
        ended = bool(tokens) and tokens[-1] in set(self.stop_ids)
        text = self.chat.tokenizer.decode(tokens[:-1] if ended else tokens, skip_special_tokens=False)
        return {
            "id": f"chatcmpl-{hashlib.sha256((str(key) + text).encode('utf-8')).hexdigest()[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop" if ended else "length"}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(tokens), "total_tokens": len(ids) + len(tokens)},
            # Which checkpoint answered, beside the served name (lib/policy-server checks it).
            "codegrep": {"step": self.step, "adapterSha256": self.adapter_sha256, "baseModel": self.base_model},
        }


def request_logger(request_log: Optional[str]):
    """log(entry): one JSON line per answered request appended to `request_log` (none when None)."""
    log_lock = threading.Lock()

    def log_request(entry: dict) -> None:
        if request_log is None:
            return
        line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **entry}) + "\n"
        with log_lock, open(request_log, "a", encoding="utf-8") as f:
            f.write(line)

    return log_request


def completion_log_entry(policy: ServedPolicy, reply: dict, started: float) -> dict:
    """The request log's record of one completion: who answered, tokens, how long it took."""
    usage = reply["usage"]
    return {
        "model": policy.served_name,
        "step": policy.step,
        "adapterSha256": policy.adapter_sha256,
        "promptTokens": usage["prompt_tokens"],
        "completionTokens": usage["completion_tokens"],
        "finishReason": reply["choices"][0]["finish_reason"],
        "ms": round((time.monotonic() - started) * 1000, 1),
    }


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 JSON replies and OpenAI-style errors."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # the request log (request_logger) is the record

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})


def make_handler(policy: ServedPolicy, request_log: Optional[str]):
    from .chat_request import RequestError

    log_request = request_logger(request_log)

    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            path = self.path.split("?")[0].rstrip("/")
            if path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", **policy.describe()})
            elif path == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": policy.served_name, "object": "model", "owned_by": "codegrep", **policy.describe()}],
                    },
                )
            else:
                self._error(404, f"no route GET {path}", "not_found")

        def do_POST(self):  # noqa: N802
            path = self.path.split("?")[0].rstrip("/")
            if path != "/v1/chat/completions":
                self._error(404, f"no route POST {path}", "not_found")
                return
            started = time.monotonic()
            body = self._chat_body()
            if body is None:
                return
            try:
                reply = policy.complete(body)
            except RequestError as error:
                self._error(400, str(error), "invalid_request_error")
                return
            log_request(completion_log_entry(policy, reply, started))
            self._send(200, reply)

        def _chat_body(self) -> Optional[dict]:
            """The request's JSON object when it is one for this server's model; else None, its error sent."""
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, json.JSONDecodeError) as error:
                self._error(400, f"the body is not JSON: {error}", "invalid_request_error")
                return None
            if not isinstance(body, dict):
                self._error(400, "the body must be a JSON object", "invalid_request_error")
                return None
            if body.get("model") != policy.served_name:
                self._error(
                    404, f"the model {body.get('model')!r} does not exist: this server serves {policy.served_name!r}", "model_not_found"
                )
                return None
            if body.get("stream"):
                self._error(400, "stream is not supported by this server", "invalid_request_error")
                return None
            return body

    return Handler


def main(argv=None) -> int:
    from .config import load_config_with_recipe
    from .rollout import Sampling

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainer-config", required=True, help="the run's trainer config JSON (an attempt's config)")
    parser.add_argument("--adapter", required=True, help="the checkpoint directory (step-NNNNNNNN)")
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (named in the listening line)")
    parser.add_argument("--request-log", default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(max(1, args.threads))
    cfg, _recipe = load_config_with_recipe(args.trainer_config)
    policy = ServedPolicy(
        cfg, os.path.abspath(args.adapter), args.served_model_name, Sampling(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k)
    )
    server = ThreadingHTTPServer((args.host, args.port), make_handler(policy, args.request_log))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    host, port = server.server_address[:2]
    print(json.dumps({"event": "listening", "host": host, "port": port, **policy.describe()}), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A scripted environment server speaking the trainer's protocol (ENV_PROTOCOL.md).

For the trainer's tests and the GPU benchmark only: it runs no tools and
parses nothing. Observations and rewards are deterministic functions of the
policy's text, so two runs that sample the same text get the same episode,
which is what makes resume-equivalence testable. Loopback only.

    python -m trainer.tests.scripted_env --port 0 --tool-calls-per-turn 8
prints {"url": "http://127.0.0.1:PORT"} on stdout, then serves until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name} inside the repository",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}
    for name in ("grep", "glob", "read")]


def _unit(text: str) -> float:
    """A deterministic number in [0, 1) from text."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") / 2**32


class ScriptedEnv:
    """Episode bookkeeping with scripted observations and rewards."""

    def __init__(self, max_turns: int = 4, tool_calls_per_turn: int = 2, observation_chars: int = 60,
                 advantage_scale: float = 1.0, step_delay_s: float = 0.0, system_prompt: str = "Find the files.",
                 last_turn_reminder: str = None):
        self.max_turns = max_turns
        self.tool_calls_per_turn = tool_calls_per_turn
        self.observation_chars = observation_chars
        self.advantage_scale = advantage_scale
        self.step_delay_s = step_delay_s
        self.system_prompt = system_prompt
        # A user message after the tool results before the last turn, like the
        # real environment's "1 turn left" note (it moves Qwen3's "last user query").
        self.last_turn_reminder = last_turn_reminder
        self.episodes = {}
        self.requests = []  # (path, body) of every request, for tests
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def open(self, body: dict) -> dict:
        episodes = []
        for instance in body["instanceIds"]:
            for _k in range(body["groupSize"]):
                with self._lock:
                    episode_id = f"ep-{next(self._ids)}"
                    self.episodes[episode_id] = {"instance": instance, "texts": [], "done": False}
                episodes.append({"episodeId": episode_id, "instanceId": instance, "tools": TOOLS, "messages": [
                    {"role": "system", "content": self.system_prompt},
                    {"role": "user", "content": f"Issue {instance}: the parser fails on empty input."}]})
        return {"episodes": episodes}

    def step(self, body: dict) -> dict:
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        results = []
        for s in body["steps"]:
            ep = self.episodes[s["episodeId"]]
            if ep["done"]:
                raise ValueError(f"episode {s['episodeId']} is already done")
            ep["texts"].append(s["assistantText"])
            answered = "<answer>" in s["assistantText"]
            ep["done"] = answered or s.get("truncated", False) or len(ep["texts"]) >= self.max_turns
            observations = [] if ep["done"] else [
                {"role": "tool", "name": "grep", "tool_call_id": f"call-{i}",
                 "content": self._observation(s["assistantText"], i)}
                for i in range(self.tool_calls_per_turn)]
            if observations and self.last_turn_reminder and len(ep["texts"]) == self.max_turns - 1:
                observations.append({"role": "user", "content": self.last_turn_reminder})
            results.append({"episodeId": s["episodeId"], "observations": observations, "done": ep["done"]})
        return {"results": results}

    def _observation(self, text: str, i: int) -> str:
        seed = hashlib.sha256(f"{i}:{text}".encode("utf-8")).hexdigest()
        line = f"src/mod_{seed[:6]}.py:{int(seed[6:10], 16) % 500}: def handler():"
        return (line + "\n") * max(1, self.observation_chars // (len(line) + 1))

    def close(self, body: dict) -> dict:
        results = []
        for episode_id in body["episodeIds"]:
            ep = self.episodes.pop(episode_id)
            transcript = "\x00".join(ep["texts"])
            file_score, line_score = _unit("file" + transcript), _unit("lr" + transcript)
            turns = len(ep["texts"])
            answered = bool(ep["texts"]) and "<answer>" in ep["texts"][-1]
            results.append({"episodeId": episode_id, "reward": 0.5 * (file_score + line_score),
                            "components": {"file_fbeta": file_score, "line_fbeta": line_score},
                            "toolCallsPerTurn": float(self.tool_calls_per_turn) if turns else 0.0,
                            "advantageScale": self.advantage_scale, "turns": turns, "answered": answered,
                            "hitTurnLimit": turns >= self.max_turns and not answered})
        return {"results": results}


def serve(env: ScriptedEnv, port: int = 0) -> ThreadingHTTPServer:
    """Start serving `env` on 127.0.0.1 in a daemon thread; returns the server."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length))
                env.requests.append((self.path, body))
                route = {"/episodes/open": env.open, "/episodes/step": env.step,
                         "/episodes/close": env.close}.get(self.path)
                if route is None:
                    self._reply(404, {"error": f"no route {self.path}"})
                    return
                self._reply(200, route(body))
            except Exception as e:  # a scripted server: report, never crash
                self._reply(400, {"error": f"{type(e).__name__}: {e}"})

        def _reply(self, code: int, payload: dict) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="scripted environment server for trainer tests and benchmarks")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--tool-calls-per-turn", type=int, default=8)
    parser.add_argument("--observation-chars", type=int, default=400)
    parser.add_argument("--advantage-scale", type=float, default=1.0)
    parser.add_argument("--last-turn-reminder", default=None,
                        help="a user message sent with the tool results before the last turn")
    args = parser.parse_args(argv)
    server = serve(ScriptedEnv(args.max_turns, args.tool_calls_per_turn, args.observation_chars,
                               args.advantage_scale, last_turn_reminder=args.last_turn_reminder), args.port)
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}"}), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

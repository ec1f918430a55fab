"""The learnable "component repos" task (/work/wt/LEARN_TASK.md) for the trainer's learning tests.

A seeded generator makes small synthetic Python repositories with the same 8 component files
`src/<component>.py` plus distractors (README.md, src/utils.py, tests/), with seeded function names. An
instance is one repo and one function of one component; its issue names the component and the function, and
its gold file is `src/<component>.py`. A competent policy greps for the function and answers the path it
finds; it can also learn the component word -> path mapping.

`ComponentEnv` serves trainer/ENV_PROTOCOL.md over loopback: real grep over the repo's (in-memory) files,
and the policy's text judged by the project's own code through test/python/component-task-oracle.ts
(lib/agent's Qwen3 tool-call and `<answer>` parsing, lib/metrics' file-level Fβ as the reward, CodeGrep §3.5
Eq. 8's file term). `teacher_examples` plays the scripted teacher (grep the function named in the issue, answer
the path in the tool result) through the same server and returns the kept trajectories in trainer.sft's
example format. `paired_test` is lib/stats' sign-flip test. Test helpers only: nothing here is product code.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMPONENTS = ("parser", "render", "cache", "config", "network", "storage", "schedule", "auth")
VERBS = ("refresh", "load", "merge", "check", "build", "flush", "parse", "update")
NOUNS = ("bucket", "entry", "token", "frame", "record", "queue", "index", "table")
SYMPTOMS = ("returns a stale value", "raises on empty input", "loses the last item", "is called twice")
SYSTEM_PROMPT = 'Find the file to change. Call grep, then reply <answer>{"files": [path]}</answer>.'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "grep",
            "description": "search the repository",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
        },
    }
]
MAX_TURNS = 2

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE = os.path.join(REPO_ROOT, "test", "python", "component-task-oracle.ts")
TSX = os.path.join(REPO_ROOT, "node_modules", ".bin", "tsx")


def gold_path(component: str) -> str:
    return f"src/{component}.py"


def make_repo(seed: int) -> dict:
    """{path: text} of repo `seed`: 8 component files of 3 functions each, and distractors."""
    rng = random.Random(f"repo:{seed}")
    names = [f"{v}_{n}_{k}" for v in VERBS for n in NOUNS for k in range(10)]
    rng.shuffle(names)
    files, used = {}, iter(names)
    for component in COMPONENTS:
        body = [f'"""The {component} component."""', ""]
        for _ in range(3):
            name = next(used)
            body += [f"def {name}(value):", f"    return value + {rng.randint(1, 99)}", ""]
        files[gold_path(component)] = "\n".join(body)
    files["src/utils.py"] = "def identity(value):\n    return value\n"
    files["README.md"] = f"# repo {seed}\n\nComponents: {', '.join(COMPONENTS)}.\n"
    files["tests/test_basic.py"] = "def test_nothing():\n    assert True\n"
    return files


def functions_of(text: str) -> list:
    return re.findall(r"^def (\w+)\(", text, flags=re.MULTILINE)


def instance_id(seed: int, component: str) -> str:
    return f"repo{seed}__{component}"


# How often each component is the broken one: `cache` in 9 of 16 issues. A tiny model on two CPU cores does not
# learn the per-issue lookup (component word or grep hit -> path) in the test's budget (measured: SFT's loss
# plateaus and 24 GRPO steps leave held-out reward at chance), but it does learn this prior: the teacher's
# trajectories teach probability matching (~56% cache), and RL can move the policy to the reward-maximising answer.
COMPONENT_WEIGHTS = {c: (9 if c == "cache" else 1) for c in COMPONENTS}
ISSUES_PER_REPO = 8


def make_instances(seeds) -> dict:
    """{instance_id: {seed, files, component, function, issue}}: ISSUES_PER_REPO issues per repo seed, each about
    a component drawn by COMPONENT_WEIGHTS and one of its functions."""
    out = {}
    for seed in seeds:
        files = make_repo(seed)
        rng = random.Random(f"issue:{seed}")
        for k in range(ISSUES_PER_REPO):
            component = rng.choices(COMPONENTS, weights=[COMPONENT_WEIGHTS[c] for c in COMPONENTS])[0]
            function = rng.choice(functions_of(files[gold_path(component)]))
            issue = f"The {component} component is broken: `{function}` {rng.choice(SYMPTOMS)}."
            out[instance_id(seed, f"{k}-{component}")] = {
                "seed": seed,
                "files": files,
                "component": component,
                "function": function,
                "issue": issue,
            }
    return out


def grep(files: dict, pattern: str) -> str:
    """`grep -rn` over the repo's files (a regex; a bad one is matched literally)."""
    try:
        rx = re.compile(pattern)
    except re.error:
        rx = re.compile(re.escape(pattern))
    hits = [
        f"{path}:{n}:{line}"
        for path in sorted(files)
        for n, line in enumerate(files[path].splitlines(), start=1)
        if pattern and rx.search(line)
    ]
    return "\n".join(hits[:20]) if hits else "no matches"


class Oracle:
    """A long-lived test/python/component-task-oracle.ts process (one request line, one reply line)."""

    def __init__(self):
        self._proc = subprocess.Popen([TSX, ORACLE], cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lock = threading.Lock()

    def ask(self, **request) -> dict:
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{ORACLE} exited (code {self._proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{ORACLE}: {reply['error']}")
        return reply

    def close(self):
        self._proc.stdin.close()
        self._proc.wait(timeout=10)


class ComponentEnv:
    """trainer/ENV_PROTOCOL.md over the component repos; reward = lib's file-level Fβ of the answer."""

    def __init__(self, instances: dict, oracle: Oracle):
        self.instances = instances
        self.oracle = oracle
        self.episodes = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def open(self, body: dict) -> dict:
        episodes = []
        for iid in body["instanceIds"]:
            inst = self.instances[iid]  # KeyError -> HTTP 400 naming it
            for _ in range(body["groupSize"]):
                with self._lock:
                    eid = f"ep-{next(self._ids)}"
                    self.episodes[eid] = {"instance": iid, "turns": 0, "calls": 0, "files": None, "done": False}
                episodes.append(
                    {
                        "episodeId": eid,
                        "instanceId": iid,
                        "tools": TOOLS,
                        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": inst["issue"]}],
                    }
                )
        return {"episodes": episodes}

    def step(self, body: dict) -> dict:
        results = []
        for s in body["steps"]:
            ep = self.episodes[s["episodeId"]]
            if ep["done"]:
                raise ValueError(f"episode {s['episodeId']} is already done")
            ep["turns"] += 1
            parsed = self.oracle.ask(op="parse", text=s["assistantText"])
            observations = []
            if parsed["files"] is not None:
                ep["files"] = parsed["files"]
                ep["done"] = True
            elif s.get("truncated") or not parsed["toolCalls"] or ep["turns"] >= MAX_TURNS:
                ep["done"] = True
            else:
                files = self.instances[ep["instance"]]["files"]
                for k, call in enumerate(parsed["toolCalls"][:8]):
                    ep["calls"] += 1
                    try:
                        pattern = json.loads(call["arguments"]).get("pattern", "")
                    except (ValueError, AttributeError):
                        pattern = ""
                    content = grep(files, str(pattern)) if call["name"] == "grep" else f"unknown tool {call['name']}"
                    observations.append({"role": "tool", "name": call["name"], "tool_call_id": f"call-{k}", "content": content})
            results.append({"episodeId": s["episodeId"], "done": ep["done"], "observations": observations})
        return {"results": results}

    def close(self, body: dict) -> dict:
        results = []
        for eid in body["episodeIds"]:
            ep = self.episodes.pop(eid)
            gold = [gold_path(self.instances[ep["instance"]]["component"])]
            score = self.oracle.ask(op="file_reward", predicted=ep["files"] or [], gold=gold)
            turns = ep["turns"]
            results.append(
                {
                    "episodeId": eid,
                    "reward": score["f"],
                    "components": {"file_fbeta": score["f"]},
                    "toolCallsPerTurn": ep["calls"] / turns if turns else 0.0,
                    "advantageScale": 1.0,
                    "turns": turns,
                    "answered": ep["files"] is not None,
                    "hitTurnLimit": turns >= MAX_TURNS and ep["files"] is None,
                }
            )
        return {"results": results}


def serve(env: ComponentEnv) -> ThreadingHTTPServer:
    """Serve `env` on 127.0.0.1 (a free port) in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                route = {"/episodes/open": env.open, "/episodes/step": env.step, "/episodes/close": env.close}.get(self.path)
                code, payload = (404, {"error": f"no route {self.path}"}) if route is None else (200, route(body))
            except Exception as e:  # a test server: report, never crash
                code, payload = 400, {"error": f"{type(e).__name__}: {e}"}
            data = json.dumps(payload).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def teacher_turn(messages: list) -> dict:
    """The scripted teacher: grep for the function the issue names, then answer the path of its definition."""
    if messages[-1]["role"] == "user":
        function = re.search(r"`(\w+)`", messages[-1]["content"]).group(1)
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call-0", "type": "function", "function": {"name": "grep", "arguments": json.dumps({"pattern": f"def {function}"})}}
            ],
        }
    found = re.search(r"^(\S+\.py):\d+:def ", messages[-1]["content"], flags=re.MULTILINE)
    files = [found.group(1)] if found else []
    return {"role": "assistant", "content": f"<answer>{json.dumps({'files': files})}</answer>"}


def teacher_examples(env: ComponentEnv, instance_ids: list) -> list:
    """Play the teacher on `instance_ids` through `env` and keep the trajectories with reward 1 (rejection
    sampling, CodeScout §4.1), in trainer.sft's example format."""
    from trainer.chat_request import assistant_text

    opened = env.open({"instanceIds": instance_ids, "groupSize": 1})["episodes"]
    kept = []
    for episode in opened:
        messages, done = list(episode["messages"]), False
        while not done:
            turn = teacher_turn(messages)
            messages.append(turn)
            result = env.step(
                {
                    "steps": [
                        {"episodeId": episode["episodeId"], "truncated": False, "assistantText": assistant_text(turn, len(messages) - 1)}
                    ]
                }
            )["results"][0]
            done = result["done"]
            messages.extend(result["observations"])
        outcome = env.close({"episodeIds": [episode["episodeId"]]})["results"][0]
        if outcome["reward"] == 1.0:
            kept.append({"instance_id": episode["instanceId"], "messages": messages, "tools": episode["tools"]})
    return kept


def write_task_tokenizer(out_dir: str, instances: dict):
    """A byte-level BPE trained on the task's own text (prompts, tool calls, grep output, answers), with the
    Qwen-like chat template of trainer/random_model.py and the component paths as single tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trainer.random_model import MARKUP_TOKENS, QWEN_LIKE_CHAT_TEMPLATE, SPECIAL_TOKENS

    corpus = [SYSTEM_PROMPT, json.dumps(TOOLS)]
    for inst in instances.values():
        corpus += [
            inst["issue"],
            grep(inst["files"], f"def {inst['function']}"),
            json.dumps({"name": "grep", "arguments": {"pattern": f"def {inst['function']}"}}),
            json.dumps({"files": [gold_path(inst["component"])]}),
        ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>"]
    )
    fast.add_tokens(MARKUP_TOKENS + [gold_path(c) for c in COMPONENTS])
    fast.chat_template = QWEN_LIKE_CHAT_TEMPLATE
    os.makedirs(out_dir, exist_ok=True)
    fast.save_pretrained(out_dir)
    return out_dir


def paired_test(oracle: Oracle, before: list, after: list) -> dict:
    """lib/stats/paired-test.ts pairedSignFlipTest (one-sided, H1: after > before)."""
    return oracle.ask(op="paired", before=before, after=after)

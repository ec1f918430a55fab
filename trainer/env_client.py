"""HTTP client for the environment server (contract: trainer/ENV_PROTOCOL.md).

The server owns everything task-specific: prompts, tools, parsing of the
policy's tool calls and answers, tool execution in the worktrees, rewards and
the advantage scale s(c̄). The trainer only sends text and receives text.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional


class EnvError(RuntimeError):
    """The environment server answered with an error or an unexpected body."""


@dataclass
class Episode:
    episode_id: str
    instance_id: str
    messages: list
    tools: list
    # Where the episode sits in its /episodes/open answer, and that call's seed:
    # together a name for the rollout that does not depend on which process
    # plays it (trainer/distributed.py shards episodes by rank) or on the
    # server's episode ids (trainer/generate_hf.py seeds its sampling with it).
    index: int = 0
    open_seed: int = 0


@dataclass
class StepResult:
    episode_id: str
    observations: list
    done: bool


@dataclass
class EpisodeOutcome:
    episode_id: str
    reward: float
    components: dict
    tool_calls_per_turn: float
    advantage_scale: float
    turns: int
    answered: bool
    hit_turn_limit: bool


class EnvClient:
    def __init__(self, base_url: str, timeout_s: float = 600.0, connect_retries: int = 20):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.connect_retries = connect_retries

    def _post(self, path: str, body: dict) -> dict:
        data = json.dumps(body).encode("utf-8")
        url = self.base_url + path
        for attempt in range(self.connect_retries + 1):
            request = urllib.request.Request(url, data=data, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:2000]
                raise EnvError(f"POST {url} -> HTTP {e.code}: {detail}") from e
            except urllib.error.URLError as e:
                # Only a refused connection is retried: the request never reached
                # the server (e.g. it is still starting), so a retry cannot
                # apply a step twice.
                refused = isinstance(e.reason, ConnectionRefusedError)
                if not refused or attempt == self.connect_retries:
                    raise EnvError(f"POST {url} failed: {e.reason}") from e
                time.sleep(min(0.1 * 2 ** attempt, 2.0))
            except json.JSONDecodeError as e:
                raise EnvError(f"POST {url} returned invalid JSON: {e}") from e
        raise AssertionError("unreachable")

    def open(self, instance_ids: list, group_size: int, seed: int) -> list:
        body = self._post("/episodes/open", {"instanceIds": list(instance_ids),
                                              "groupSize": group_size, "seed": seed})
        episodes = [Episode(episode_id=_field(e, "episodeId", str, "open"),
                            instance_id=_field(e, "instanceId", str, "open"),
                            messages=_field(e, "messages", list, "open"),
                            tools=e.get("tools") or [], index=k, open_seed=seed)
                    for k, e in enumerate(_field(body, "episodes", list, "open"))]
        expected = len(instance_ids) * group_size
        if len(episodes) != expected:
            raise EnvError(f"/episodes/open returned {len(episodes)} episodes, expected {expected}")
        return episodes

    def step(self, steps: list) -> dict:
        """steps: [{episodeId, assistantText, truncated?}] -> {episodeId: StepResult}."""
        body = self._post("/episodes/step", {"steps": steps})
        results = {}
        for r in _field(body, "results", list, "step"):
            result = StepResult(episode_id=_field(r, "episodeId", str, "step"),
                                observations=_field(r, "observations", list, "step"),
                                done=_field(r, "done", bool, "step"))
            results[result.episode_id] = result
        missing = [s["episodeId"] for s in steps if s["episodeId"] not in results]
        if missing:
            raise EnvError(f"/episodes/step returned no result for episodes {missing[:5]}")
        return results

    def close(self, episode_ids: list) -> dict:
        body = self._post("/episodes/close", {"episodeIds": list(episode_ids)})
        outcomes = {}
        for r in _field(body, "results", list, "close"):
            o = EpisodeOutcome(
                episode_id=_field(r, "episodeId", str, "close"),
                reward=float(_field(r, "reward", (int, float), "close")),
                components={k: float(v) for k, v in (r.get("components") or {}).items()},
                tool_calls_per_turn=float(_field(r, "toolCallsPerTurn", (int, float), "close")),
                advantage_scale=float(r.get("advantageScale", 1.0)),
                turns=int(_field(r, "turns", int, "close")),
                answered=bool(_field(r, "answered", bool, "close")),
                hit_turn_limit=bool(_field(r, "hitTurnLimit", bool, "close")))
            outcomes[o.episode_id] = o
        missing = [e for e in episode_ids if e not in outcomes]
        if missing:
            raise EnvError(f"/episodes/close returned no result for episodes {missing[:5]}")
        return outcomes

    def close_quietly(self, episode_ids: list) -> Optional[str]:
        """Close episodes on an abort path; returns the error text instead of raising."""
        try:
            self.close(episode_ids)
            return None
        except Exception as e:  # the step is being abandoned anyway
            return str(e)


def _field(obj, key: str, kind, endpoint: str):
    if not isinstance(obj, dict) or key not in obj:
        raise EnvError(f"/episodes/{endpoint}: response is missing '{key}' in {str(obj)[:300]}")
    value = obj[key]
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or (kind in (int, (int, float)) and isinstance(value, bool)):
        raise EnvError(f"/episodes/{endpoint}: '{key}' has the wrong type: {value!r}")
    return value

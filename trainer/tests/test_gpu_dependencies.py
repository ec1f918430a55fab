"""One GPU dependency set (trainer/constraints.txt): vLLM installs beside the trainer's
pins instead of replacing them. The second test asks PyPI for the pinned vLLM's
metadata (pip's own client, metadata only: a few seconds)."""

import json
import os
import re
import subprocess
import sys

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

TRAINER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lines(name: str) -> list:
    with open(os.path.join(TRAINER, name), encoding="utf-8") as f:
        return [line.split("#", 1)[0].strip() for line in f if line.split("#", 1)[0].strip()]


def _pins(name: str) -> dict:
    """{canonical name: Requirement} of a requirements file's package lines."""
    out = {}
    for line in _lines(name):
        if line.startswith("-"):
            continue
        requirement = Requirement(line)
        key = canonicalize_name(requirement.name)
        assert key not in out, f"{name}: {requirement.name} is listed twice"
        out[key] = requirement
    return out


def _pinned_version(requirement: Requirement):
    exact = [s.version for s in requirement.specifier if s.operator == "=="]
    return exact[0] if exact else None


def test_both_requirement_files_take_the_shared_versions_from_one_constraints_file():
    for name in ("requirements.txt", "requirements-gpu.txt"):
        assert "-c constraints.txt" in _lines(name), name
    constraints, trainer, gpu = _pins("constraints.txt"), _pins("requirements.txt"), _pins("requirements-gpu.txt")
    assert all(_pinned_version(r) for r in constraints.values()), "constraints.txt pins exact versions"
    for key in constraints:
        if key in trainer:
            # Named without a version, so the one pin is the constraint's (no second pin to drift).
            assert not trainer[key].specifier, f"requirements.txt pins {key} again; its version is constraints.txt's"
    assert {"torch", "transformers"} <= set(constraints) & set(trainer)
    assert list(gpu) == ["vllm"] and _pinned_version(gpu["vllm"])
    # The rest of the trainer's closure is pinned exactly (installed with --no-deps).
    for key, requirement in trainer.items():
        assert key in constraints or _pinned_version(requirement), key


def _environments() -> list:
    """Linux x86_64 with this Python and with the device image's 3.12."""
    base = dict(default_environment(), sys_platform="linux", platform_system="Linux", platform_machine="x86_64")
    return [dict(base, python_version=v, python_full_version=f"{v}.0") for v in (base["python_version"], "3.12")]


def test_the_pinned_vllm_accepts_the_trainers_pins(tmp_path):
    vllm = _pinned_version(_pins("requirements-gpu.txt")["vllm"])
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                           "--disable-pip-version-check", "--quiet", "--report", str(report), f"vllm=={vllm}"],
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        if re.search(r"(?i)connection|network|resolve host|timed out|NewConnectionError|No matching distribution",
                     done.stderr) and not report.exists():
            pytest.skip(f"PyPI unreachable from here, vLLM {vllm}'s requirements not checked: {done.stderr[-300:]}")
        raise AssertionError(done.stderr[-2000:])
    metadata = json.loads(report.read_text())["install"][0]["metadata"]
    assert metadata["version"] == vllm
    pins = {k: _pinned_version(r) for k, r in {**_pins("requirements.txt"), **_pins("constraints.txt")}.items()
            if _pinned_version(r)}
    checked, conflicts = [], []
    for line in metadata.get("requires_dist", []):
        requirement = Requirement(line)
        key = canonicalize_name(requirement.name)
        if key not in pins:
            continue
        for env in _environments():
            if requirement.marker is not None and not requirement.marker.evaluate(dict(env, extra="")):
                continue
            checked.append(key)
            if not requirement.specifier.contains(pins[key], prereleases=True):
                conflicts.append(f"vllm {vllm} requires {line!r} (Python {env['python_version']}), "
                                 f"we pin {key}=={pins[key]}")
    assert {"torch", "transformers"} <= set(checked), checked
    assert not conflicts, "\n".join(sorted(set(conflicts)))

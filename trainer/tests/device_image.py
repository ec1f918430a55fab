"""A Python environment holding only what the bare GPU image has (bench/gpu-train.sh
--device-image: torch, transformers, peft, accelerate and their own dependencies),
built from the repository's .venv without downloading anything.

How: a fresh `python -m venv --without-pip` whose site-packages holds one .pth
file naming a directory of symlinks, one per top-level entry (package,
module, .dist-info, shared-library folder) of each distribution in the
dependency closure of the four packages, as installed in .venv. Nothing else
of .venv is visible (jsonschema, pyarrow, pytest, ... import as missing), and
nothing is copied or fetched: torch's CUDA wheel with its nvidia libraries is
~4.5 GB, which CI must not download twice.

An import guard, loaded by the same .pth, records (1) every import a trainer/
module attempts that no installed module satisfies, and (2) at exit, every
loaded module whose file lies outside the standard library, the closure
directory and the repository's trainer/ package. trainer/tests/test_device_image.py
fails on either.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
import sysconfig

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DEVICE_IMAGE_PACKAGES = ("torch", "transformers", "peft", "accelerate")
# Imports the trainer makes on purpose to learn whether an optional package is
# there (engines.py: vLLM, reported in the start line's generator_reason).
OPTIONAL_PROBES = ("vllm",)

GUARD = r'''
import atexit, json, os, sys, sysconfig

_LOG = os.environ.get("CODEGREP_IMPORT_LOG")
_TRAINER = os.path.abspath(os.environ.get("CODEGREP_TRAINER_DIR", "/nonexistent"))
# Not resolved through symlinks: the closure's entries are links into .venv, and a module
# reached through them (its __file__ under the closure directory) is allowed.
_ALLOWED_ROOTS = [os.path.abspath(p) for p in
                  (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"],
                   os.environ.get("CODEGREP_CLOSURE_DIR", "/nonexistent"), _TRAINER)]
_missing = []


class _RecordMissing:
    """Last on sys.meta_path: reached only when no other finder has the module."""

    def find_spec(self, name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back
        importer = frame.f_code.co_filename if frame is not None else "?"
        if os.path.abspath(importer).startswith(_TRAINER + os.sep):
            _missing.append({"module": name, "importer": importer})
        return None


sys.meta_path.append(_RecordMissing())


def _report():
    outside = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        # torch.ops and torch.classes are synthetic modules with a bare file name: no file was loaded.
        if where and os.path.isabs(where) and not any(os.path.abspath(where).startswith(root + os.sep) for root in _ALLOWED_ROOTS):
            outside.append({"module": name, "file": where})
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"pid": os.getpid(), "missing": _missing, "outside": outside}) + "\n")


atexit.register(_report)
'''


def dependency_closure(roots=DEVICE_IMAGE_PACKAGES) -> dict:
    """{canonical distribution name: Distribution} of `roots` and everything they
    require (with the extras they ask for; markers evaluated for this interpreter)."""
    seen, todo = {}, [(name, frozenset()) for name in roots]
    extras_done = set()
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if (key, extras) in extras_done:
            continue
        extras_done.add((key, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a marker-less optional dependency that is not installed
        seen[key] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": e} for e in extras] or [{"extra": ""}]
            if requirement.marker is not None and not any(requirement.marker.evaluate(env) for env in environments):
                continue
            todo.append((requirement.name, frozenset(requirement.extras)))
    return seen


def top_level_entries(dist) -> set:
    """The names at site-packages' top level that `dist` installed."""
    names = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith(".pth"):
            continue
        names.add(first)
    return names


def build(root: str) -> dict:
    """Create the environment under `root`; return {python, closure_dir, distributions}."""
    site = sysconfig.get_paths()["purelib"]
    closure_dir = os.path.join(root, "closure")
    os.makedirs(closure_dir)
    distributions = dependency_closure()
    for dist in distributions.values():
        base = str(dist.locate_file(""))
        for name in top_level_entries(dist):
            source = os.path.join(base, name)
            target = os.path.join(closure_dir, name)
            if os.path.exists(source) and not os.path.lexists(target):
                os.symlink(source, target)
    with open(os.path.join(closure_dir, "codegrep_import_guard.py"), "w", encoding="utf-8") as f:
        f.write(GUARD)
    venv = os.path.join(root, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    venv_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(venv_site, "codegrep-device-image.pth"), "w", encoding="utf-8") as f:
        f.write(closure_dir + "\nimport codegrep_import_guard\n")
    assert os.path.realpath(venv_site) != os.path.realpath(site)
    return {"python": python, "closure_dir": closure_dir, "distributions": sorted(distributions)}

"""bench/gpu-train.sh --cpu-dry-run where only the bare GPU image's packages exist
(torch, transformers, peft, accelerate and their dependencies; trainer/tests/device_image.py)."""

import json
import os
import subprocess

import pytest

from .device_image import DEVICE_IMAGE_PACKAGES, OPTIONAL_PROBES, build

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def device_image(tmp_path_factory):
    root = tmp_path_factory.mktemp("device-image")
    image = build(str(root))
    log = str(root / "imports.jsonl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(CODEGREP_IMPORT_LOG=log, CODEGREP_CLOSURE_DIR=image["closure_dir"],
               CODEGREP_TRAINER_DIR=os.path.join(REPO_ROOT, "trainer"), PYTHONNOUSERSITE="1")
    return {**image, "env": env, "log": log}


def _reports(log: str) -> list:
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_environment_hides_everything_else_of_the_venv(device_image):
    # The negative control: packages the repository's .venv has (and the trainer once needed) are missing here.
    for missing in ("jsonschema", "pyarrow", "pytest", "rank_bm25", "onnx"):
        done = subprocess.run([device_image["python"], "-c", f"import {missing}"], capture_output=True, text=True,
                              env=device_image["env"], cwd=REPO_ROOT, timeout=120)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, missing
    done = subprocess.run([device_image["python"], "-c", "import " + ", ".join(DEVICE_IMAGE_PACKAGES)],
                          capture_output=True, text=True, env=device_image["env"], cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"torch", "transformers", "peft", "accelerate"} <= set(device_image["distributions"])


def test_the_cpu_dry_run_bench_runs_on_the_device_images_packages_alone(device_image):
    open(device_image["log"], "w").close()
    env = dict(device_image["env"], BENCH_PYTHON=device_image["python"], BENCH_STEPS="2")
    done = subprocess.run(["bash", os.path.join(REPO_ROOT, "bench", "gpu-train.sh"), "--cpu-dry-run"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "train" and result["steps"] == 2, result
    assert result["generator"] == "hf" and result["timed_steps"] >= 1
    # trainer.serve ran in its own process on the same packages (the guard below watches it too).
    assert result["served"]["requests"] >= 1 and result["served_tokens_per_s"] > 0, result["served"]
    reports = _reports(device_image["log"])
    assert reports, "the import guard reported nothing: it did not run"
    missing = [m for r in reports for m in r["missing"] if m["module"].split(".")[0] not in OPTIONAL_PROBES]
    outside = [o for r in reports for o in r["outside"]]
    assert not missing, f"trainer/ imported packages the device image lacks: {missing}"
    assert not outside, f"modules loaded from outside the allowed closure: {outside[:10]}"


def test_the_guard_reports_a_guarded_import_of_a_missing_package(device_image, tmp_path):
    # The positive control of the guard: code under the watched directory that tries an import and
    # survives its failure (as trainer/config.py once did with jsonschema) is still reported.
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "probe.py").write_text("try:\n    import jsonschema\nexcept ImportError:\n    pass\n")
    log = str(tmp_path / "imports.jsonl")
    env = dict(device_image["env"], CODEGREP_IMPORT_LOG=log, CODEGREP_TRAINER_DIR=str(watched))
    done = subprocess.run([device_image["python"], "-c", f"import sys; sys.path.insert(0, {str(watched)!r}); "
                           "import probe"], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [m["module"] for r in _reports(log) for m in r["missing"]] == ["jsonschema"]

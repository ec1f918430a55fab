"""Supervised fine-tuning on kept trajectories: the RFT warm start (CodeScout §4.1).

    python -m trainer.sft --config CONFIG.json [--resume latest|<checkpoint dir>]

CodeScout warm-starts Qwen3-1.7B by rejection-sampling fine-tuning: rollouts of a stronger policy, kept only
where they localise perfectly, then one epoch of SFT (lr 5e-5, cosine, warmup 0.1, global batch 8, AdamW;
the values live in lib/recipes/presets.json `rft`). This is that SFT.

Each example (one JSONL line: instance_id, OpenAI chat messages, tools) is tokenized exactly as the same
episode is in GRPO (tokens.py, chat_request.conversation_sequence): the opening messages rendered once with
the generation prompt, each assistant turn's text plus its end-of-turn token, each run of tool results
rendered once as an observation block. The loss is the mean negative log-likelihood of the policy's own
tokens (assistant turns) over the global batch; prompt and observations carry no loss, as in GRPO
(CodeGrep App. A.1, CodeScout §4.1). Log-probs come from policy.token_logprobs, the function GRPO trains with,
so both stages score the same positions.

One optimizer step = `global_batch_size` examples (the last step of an epoch may have fewer), reached by
gradient accumulation over micro-batches of at most `micro_batch_tokens` padded tokens. The example order is
shuffled per epoch from `seed` alone (data.epoch_order).

stdout: JSON lines, as the GRPO trainer (trainer/README.md "Output"): `start`, `resumed`, `step` (one per
optimizer step: loss, lr, grad_norm, tokens), `checkpoint`, `stopped`, `done`; step lines also go to
<output_dir>/metrics.jsonl. Checkpoints use checkpoint.py's layout (adapter or full weights, optimizer,
scheduler, RNG, data position, COMPLETE marker); the GRPO trainer starts from one with `init_from`.
SIGTERM / SIGINT: a stop between micro-batches abandons the step and checkpoints the state from its start;
the process exits 0 and `--resume latest` continues with no step done twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from .chat_request import RequestError, conversation_sequence
from .checkpoint import DataPosition, capture_rng_state, load_checkpoint, resolve_resume, restore_rng_state, save_checkpoint
from .data import epoch_order
from .config import config_to_dict
from .policy import count_parameters, load_policy, pick_device_and_dtype, token_logprobs, trainable_parameters
from .sft_config import SftConfig, load_sft_config
from .train import Emitter, StopRequest, finish, load_chat, log, make_optimizer, seed_everything, write_run_files
from .update import TrainItem, clip_and_step, collate, micro_batches


class ExampleError(ValueError):
    """A line of the examples file cannot be trained on."""


def read_examples(path: str) -> list:
    """[(instance_id, messages, tools)] from the JSONL file at `path`; errors name the line."""
    examples = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ExampleError(f"{where}: not valid JSON: {e}") from e
            if not isinstance(row, dict):
                raise ExampleError(f"{where}: expected an object, got {type(row).__name__}")
            instance = row.get("instance_id")
            if not isinstance(instance, str) or not instance:
                raise ExampleError(f"{where}: instance_id must be a non-empty string, got {instance!r}")
            messages, tools = row.get("messages"), row.get("tools", [])
            if not isinstance(messages, list) or not messages:
                raise ExampleError(f"{where} ({instance}): messages must be a non-empty list")
            if tools is not None and not isinstance(tools, list):
                raise ExampleError(f"{where} ({instance}): tools must be a list of OpenAI tool specs")
            examples.append((instance, messages, tools or []))
    if not examples:
        raise ExampleError(f"{path}: no examples")
    return examples


def tokenize_examples(chat, examples: list, max_seq_len: int, path: str) -> list:
    """One training sequence per example (ids + policy mask), as a GRPO rollout of the episode would be."""
    sequences = []
    for k, (instance, messages, tools) in enumerate(examples):
        if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
            raise ExampleError(f"{path} example {k} ({instance}): no assistant turn, nothing to learn")
        try:
            sequence = conversation_sequence(chat, messages, tools)
        except (RequestError, ValueError) as e:
            raise ExampleError(f"{path} example {k} ({instance}): {e}") from e
        if len(sequence) > max_seq_len:
            raise ExampleError(f"{path} example {k} ({instance}): {len(sequence)} tokens, more than max_seq_len {max_seq_len}")
        sequences.append(sequence)
    return sequences


def write_tokens(path: str, examples: list, sequences: list) -> None:
    """tokens_out: one line per example {instance_id, input_ids, policy_mask}, written atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for (instance, _, _), s in zip(examples, sequences):
            f.write(json.dumps({"instance_id": instance, "input_ids": s.ids, "policy_mask": s.mask}) + "\n")
    os.replace(tmp, path)


def fingerprint(sequences: list, cfg: SftConfig) -> str:
    """What a resume must match: the tokenized examples and everything that fixes the batch order."""
    h = hashlib.sha256(f"{cfg.seed}:{cfg.global_batch_size}:{cfg.epochs}".encode())
    for s in sequences:
        h.update(b"\0" + ",".join(map(str, s.ids)).encode() + b"|" + bytes(s.mask))
    return h.hexdigest()[:16]


def steps_per_epoch(examples: int, global_batch_size: int) -> int:
    return math.ceil(examples / global_batch_size)


def batch_at(count: int, seed: int, global_batch_size: int, position: DataPosition) -> tuple:
    """(example indices of the step at `position`, position after it). Batches stay inside an epoch."""
    order = epoch_order(list(range(count)), seed, position.epoch)
    rows = order[position.index : position.index + global_batch_size]
    index = position.index + len(rows)
    after = DataPosition(position.epoch, index) if index < count else DataPosition(position.epoch + 1, 0)
    return rows, after


def sft_step(model, items: list, rows: list, *, pad_id: int, device, micro_batch_tokens: int, should_stop) -> dict:
    """Accumulate the gradient of the batch's mean policy-token NLL; None if a stop came between micro-batches."""
    policy_tokens = sum(sum(items[i].mask) for i in rows)
    loss_total, tokens = 0.0, 0
    for micro in micro_batches([len(it.ids) for it in items], rows, micro_batch_tokens):
        if should_stop():
            return None
        ids, attn, mask, _ = collate(items, micro, pad_id, device)
        logps = token_logprobs(model, ids, attn, mask)
        loss = -(logps * mask).sum() / policy_tokens
        loss.backward()
        loss_total += float(loss.detach())
        tokens += int(attn.sum())
    return {"loss": loss_total, "policy_tokens": policy_tokens, "tokens": tokens}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m trainer.sft", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="path to the JSON SFT config (see trainer/README.md)")
    parser.add_argument(
        "--resume",
        default=None,
        help="'latest' = newest complete checkpoint in output_dir (start fresh if none), or a checkpoint directory",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg, recipe = load_sft_config(args.config)
    os.makedirs(cfg.output_dir, exist_ok=True)
    stop = StopRequest().install()
    try:
        return finetune(cfg, args.resume, Emitter(cfg.output_dir), stop, recipe)
    finally:
        stop.uninstall()


def finetune(cfg: SftConfig, resume, emit, stop, recipe: dict) -> int:
    seed_everything(cfg.seed)
    device, dtype = pick_device_and_dtype(cfg.dtype)
    examples = read_examples(cfg.examples_path)
    model, tokenizer = load_policy(
        cfg.model_dir, cfg.lora, dtype, device, cfg.gradient_checkpointing and device.type == "cuda", cfg.finetune
    )
    chat = load_chat(
        SimpleNamespace(model_path=cfg.model_dir, chat_template=cfg.chat_template, chat_template_kwargs=cfg.chat_template_kwargs), tokenizer
    )
    sequences = tokenize_examples(chat, examples, cfg.max_seq_len, cfg.examples_path)
    tokens_out = cfg.tokens_out or os.path.join(cfg.output_dir, "tokens.jsonl")
    write_tokens(tokens_out, examples, sequences)
    items = [TrainItem(ids=s.ids, mask=s.mask, advantage=0.0, weight=1.0) for s in sequences]

    total_steps = steps_per_epoch(len(items), cfg.global_batch_size) * cfg.epochs
    optimizer, scheduler = make_optimizer(cfg, model, total_steps)
    run = SftRun(cfg, emit, stop, device, model, tokenizer, optimizer, scheduler, items,
                 fingerprint(sequences, cfg), total_steps)
    checkpoint, step, position = resume_sft(run, resume)
    announce_sft(run, step, dtype, tokens_out, recipe)

    last_saved = step if checkpoint is not None else None
    params = trainable_parameters(model)
    model.train()
    while step < total_steps and not stop.requested:
        done = sft_train_step(run, params, step, position, last_saved)
        if done is None:
            return 0  # the step was abandoned: stopped
        step, position, saved = done
        if saved:
            last_saved = step
    return finish(emit, stop, step, stop.requested,
                  lambda: save(run, step, capture_rng_state(), position) if last_saved != step else None)


@dataclass
class SftRun:
    """What the parts of one fine-tuning run share."""
    cfg: SftConfig
    emit: Any
    stop: Any
    device: torch.device
    model: Any
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    items: list  # TrainItem per example
    fingerprint: str
    total_steps: int


def resume_sft(run: SftRun, resume) -> tuple:
    """(checkpoint resumed or None, step, data position): the state of `--resume`, or step 0."""
    cfg = run.cfg
    step, position = 0, DataPosition()
    checkpoint = resolve_resume(cfg.output_dir, resume)
    if checkpoint is not None:
        state, rng_state = load_checkpoint(checkpoint, model=run.model, optimizer=run.optimizer, scheduler=run.scheduler)
        if state.get("data_fingerprint") != run.fingerprint:
            raise RuntimeError(
                f"checkpoint {checkpoint} was trained on other examples or another batch order "
                f"(fingerprint {state.get('data_fingerprint')} != {run.fingerprint}); refusing to resume"
            )
        step, position = state["step"], DataPosition(state["data_epoch"], state["data_index"])
        restore_rng_state(rng_state)
        run.emit("resumed", step=step, checkpoint=checkpoint)
    elif resume is not None:
        log(f"--resume {resume}: no complete checkpoint in {cfg.output_dir}; starting from step 0")
    return checkpoint, step, position


def announce_sft(run: SftRun, step: int, dtype, tokens_out: str, recipe: dict) -> None:
    """The "start" line, and the run's config.json and recipe.json."""
    cfg, items = run.cfg, run.items
    total, trainable = count_parameters(run.model)
    run.emit(
        "start",
        step=step,
        total_steps=run.total_steps,
        kind="sft",
        device=str(run.device),
        dtype=str(dtype).replace("torch.", ""),
        generator="none",
        finetune=cfg.finetune,
        parameters=total,
        trainable_parameters=trainable,
        instances=len(items),
        examples=len(items),
        policy_tokens=sum(sum(it.mask) for it in items),
        tokens_out=tokens_out,
        recipe=recipe,
    )
    write_run_files(cfg.output_dir, config_to_dict(cfg), recipe)


def save(run: SftRun, at_step: int, rng_state: dict, at_position: DataPosition) -> str:
    path = save_checkpoint(
        run.cfg.output_dir,
        at_step,
        model=run.model,
        optimizer=run.optimizer,
        scheduler=run.scheduler,
        rng_state=rng_state,
        data_position=at_position,
        extra_state={"data_fingerprint": run.fingerprint, "kind": "sft", "total_steps": run.total_steps},
        keep=run.cfg.keep_checkpoints,
    )
    run.emit("checkpoint", step=at_step, path=path)
    return path


def sft_train_step(run: SftRun, params: list, step: int, position: DataPosition, last_saved):
    """One optimizer step on the next global batch, its "step" line and a checkpoint when due.
    Returns (step, data position, whether it checkpointed) after it, or None when a stop abandoned it."""
    cfg, optimizer, stop = run.cfg, run.optimizer, run.stop
    started = time.perf_counter()
    rng_at_start, position_at_start = capture_rng_state(), position
    rows, next_position = batch_at(len(run.items), cfg.seed, cfg.global_batch_size, position)
    optimizer.zero_grad(set_to_none=True)
    out = sft_step(
        run.model,
        run.items,
        rows,
        pad_id=run.tokenizer.pad_token_id,
        device=run.device,
        micro_batch_tokens=cfg.micro_batch_tokens,
        should_stop=lambda: stop.requested,
    )
    if out is None:
        # Nothing was learnt from this step: checkpoint its starting state.
        optimizer.zero_grad(set_to_none=True)
        path = save(run, step, rng_at_start, position_at_start) if last_saved != step else None
        run.emit("stopped", step=step, signal=stop.signal_name, checkpoint=path, aborted_step=step + 1)
        return None
    grad_norm, lr = clip_and_step(params, optimizer, run.scheduler, cfg.max_grad_norm)
    optimizer.zero_grad(set_to_none=True)
    step, position = step + 1, next_position
    metrics = {
        "step": step,
        "epoch": position_at_start.epoch,
        "loss": out["loss"],
        "lr": lr,
        "grad_norm": grad_norm,
        "examples": len(rows),
        "policy_tokens": out["policy_tokens"],
        "train_tokens": out["tokens"],
        "step_time_s": time.perf_counter() - started,
    }
    path = None
    due = step % cfg.save_every == 0 or step == run.total_steps or stop.requested
    if due:
        path = save(run, step, capture_rng_state(), position)
    run.emit("step", **metrics, checkpoint=path)
    return step, position, due


if __name__ == "__main__":
    sys.exit(main())

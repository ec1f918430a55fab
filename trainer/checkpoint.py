"""Atomic, resumable checkpoints.

A checkpoint is a directory `<output_dir>/checkpoints/step-00000042/` with:

    adapter_model.safetensors, adapter_config.json   the LoRA weights (peft layout,
                                                     loadable by PEFT and vLLM)
    optimizer.pt, scheduler.pt                       AdamW and lr-schedule state
    rng.pt                                           python, numpy, torch CPU and CUDA RNG
    trainer_state.json                               step, data position, data fingerprint
    COMPLETE                                         written last: the marker of a whole checkpoint

It is written into a hidden temp directory next to its final place, flushed,
then renamed: a crash leaves either no checkpoint or a whole one. `latest`
only ever considers directories that hold the COMPLETE marker; half-written
temp directories from a killed run are deleted by the next save.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

COMPLETE_MARKER = "COMPLETE"
STATE_FILE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class DataPosition:
    """Where the next batch starts: epoch number and index into that epoch's order."""
    epoch: int = 0
    index: int = 0


def checkpoints_root(output_dir: str) -> str:
    return os.path.join(output_dir, "checkpoints")


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def capture_rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: str) -> None:
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(path)


def save_checkpoint(output_dir: str, step: int, *, model, optimizer, scheduler, rng_state: dict,
                    data_position: DataPosition, extra_state: dict, keep: int, extra_files: dict = None) -> str:
    """Write the checkpoint for `step` atomically and prune to the newest `keep`.

    `rng_state` is passed in (not captured here) so that a run stopped in the
    middle of a step can save the RNG state from that step's start.
    """
    root = checkpoints_root(output_dir)
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, step_dir_name(step))
    tmp = os.path.join(root, f".tmp-{step_dir_name(step)}-{os.getpid()}-{time.time_ns()}")
    os.makedirs(tmp)
    model.save_pretrained(tmp)  # peft: adapter weights + adapter_config.json only
    torch.save(optimizer.state_dict(), os.path.join(tmp, "optimizer.pt"))
    torch.save(scheduler.state_dict(), os.path.join(tmp, "scheduler.pt"))
    torch.save(rng_state, os.path.join(tmp, "rng.pt"))
    for name, value in (extra_files or {}).items():  # e.g. the async pipeline's pending rollouts (pipeline.py)
        torch.save(value, os.path.join(tmp, name))
    state = dict(extra_state)
    state.update({"step": step, "data_epoch": data_position.epoch, "data_index": data_position.index,
                  "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    with open(os.path.join(tmp, STATE_FILE), "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
    with open(os.path.join(tmp, COMPLETE_MARKER), "w", encoding="utf-8") as f:
        f.write(f"step {step}\n")
    _fsync_tree(tmp)
    if os.path.exists(final):
        # Re-saving a step (a stop right after a scheduled save, or a rerun):
        # move the old one aside first, since rename cannot replace a directory.
        trash = os.path.join(root, f".old-{step_dir_name(step)}-{time.time_ns()}")
        os.rename(final, trash)
        os.rename(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, final)
    _fsync_dir(root)
    prune_checkpoints(output_dir, keep, newest_step=step)
    return final


def complete_checkpoints(output_dir: str) -> list:
    """(step, path) of every complete checkpoint, oldest first."""
    root = checkpoints_root(output_dir)
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        match = _STEP_DIR.match(name)
        path = os.path.join(root, name)
        if match and os.path.isfile(os.path.join(path, COMPLETE_MARKER)):
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(output_dir: str) -> Optional[str]:
    found = complete_checkpoints(output_dir)
    return found[-1][1] if found else None


def prune_checkpoints(output_dir: str, keep: int, newest_step: int) -> None:
    """Keep the newest `keep` complete checkpoints up to `newest_step`; drop older
    ones, incomplete step directories, leftover temp directories from killed
    runs, and checkpoints *after* `newest_step`: those belong to a timeline that
    was abandoned by resuming from an earlier checkpoint, and `latest` must
    never jump back onto it."""
    root = checkpoints_root(output_dir)
    current = [(s, path) for s, path in complete_checkpoints(output_dir) if s <= newest_step]
    keep_paths = {path for _, path in current[-keep:]}
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if path not in keep_paths and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)


def resolve_resume(output_dir: str, resume: Optional[str]) -> Optional[str]:
    """Map the --resume argument to a checkpoint directory (or None to start fresh)."""
    if resume is None:
        return None
    if resume == "latest":
        return latest_checkpoint(output_dir)
    if not os.path.isfile(os.path.join(resume, COMPLETE_MARKER)):
        raise FileNotFoundError(f"--resume {resume!r} is not a complete checkpoint (no {COMPLETE_MARKER} marker)")
    return resume


def load_extra_file(checkpoint: str, name: str):
    """An `extra_files` entry of save_checkpoint, or None when the checkpoint has none."""
    path = os.path.join(checkpoint, name)
    return torch.load(path, weights_only=False) if os.path.isfile(path) else None


def read_state(checkpoint: str) -> dict:
    with open(os.path.join(checkpoint, STATE_FILE), encoding="utf-8") as f:
        return json.load(f)


def load_weights(checkpoint: str, model) -> None:
    """Load a checkpoint's policy weights into `model` in place: a LoRA adapter into a peft model, or a fully
    fine-tuned model's weights into policy.FullFineTune. A mismatch (adapter vs full, missing or extra keys)
    raises naming the checkpoint."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    adapter = os.path.join(checkpoint, "adapter_model.safetensors")
    if os.path.isfile(adapter):
        if not hasattr(model, "peft_config"):
            raise RuntimeError(f"checkpoint {checkpoint} holds a LoRA adapter; this run has finetune: full")
        result = set_peft_model_state_dict(model, load_file(adapter))
        unexpected = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise RuntimeError(f"checkpoint {checkpoint}: adapter has keys the model lacks: {unexpected[:5]}")
        return
    # finetune: full (policy.FullFineTune): the whole model, possibly in shards.
    if hasattr(model, "peft_config"):
        raise RuntimeError(f"checkpoint {checkpoint} holds a fully fine-tuned model; this run has finetune: lora")
    weights = {}
    for name in sorted(os.listdir(checkpoint)):
        if name.endswith(".safetensors"):
            weights.update(load_file(os.path.join(checkpoint, name)))
    if not weights:
        raise RuntimeError(f"checkpoint {checkpoint} has neither an adapter nor model weights")
    base = model.get_base_model()
    result = base.load_state_dict(weights, strict=False)
    tied = {k for k in result.missing_keys if k.endswith("lm_head.weight")}  # tied to the embeddings
    if result.unexpected_keys or set(result.missing_keys) - tied:
        raise RuntimeError(f"checkpoint {checkpoint}: weights do not match the model (missing "
                           f"{sorted(set(result.missing_keys) - tied)[:5]}, unexpected {result.unexpected_keys[:5]})")


def load_checkpoint(checkpoint: str, *, model, optimizer, scheduler) -> tuple:
    """Load weights, optimizer and scheduler in place; return (state, rng_state)."""
    load_weights(checkpoint, model)
    optimizer.load_state_dict(torch.load(os.path.join(checkpoint, "optimizer.pt"), weights_only=False))
    scheduler.load_state_dict(torch.load(os.path.join(checkpoint, "scheduler.pt"), weights_only=False))
    rng_state = torch.load(os.path.join(checkpoint, "rng.pt"), weights_only=False)
    return read_state(checkpoint), rng_state

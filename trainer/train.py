"""GRPO / GSPO / Dr.GRPO training of a LoRA code-retrieval policy.

    python -m trainer.train --config cfg.json [--resume latest|<checkpoint dir>]

One step: draw B instance ids (seeded per-epoch order) -> open G episodes per
instance on the environment server -> play all B x G rollouts turn by turn in
batched generations -> rewards, group advantages (x s(c̄) when the environment
sends it) -> one policy update (loss.py) -> print one JSON line -> every N
steps an atomic checkpoint.

stdout carries only JSON lines, each with an "event": "start", "resumed",
"step" (one per training step), "checkpoint", "stopped" or "done". Anything
else (library warnings, progress notes) goes to stderr.

SIGTERM / SIGINT: a stop between two rollout turns abandons the step (its
episodes are closed, nothing was learnt from it) and checkpoints the state
from the step's start; a stop during the update lets the update finish and
checkpoints after it. Either way the process exits 0 and `--resume latest`
continues with the same data order and RNG streams.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .checkpoint import (DataPosition, capture_rng_state, load_checkpoint, load_extra_file, load_weights,
                         resolve_resume, restore_rng_state, save_checkpoint)
from .config import TrainConfig, config_to_dict, load_config_with_recipe
from .data import data_fingerprint, load_instance_ids
from . import distributed
from .engines import make_generator
from .env_client import EnvClient
from .loss import group_advantages, loss_settings
from .pipeline import PENDING_FILE, restore_pipeline
from .policy import count_parameters, load_policy, pick_device_and_dtype, trainable_parameters
from .rollout import RolloutLimits, Sampling, StepAborted, run_rollouts, stop_token_ids
from .schedule import lr_multiplier
from .tokens import ChatTokens
from .update import TrainItem, policy_update


class StopRequest:
    """Set by SIGTERM / SIGINT; polled at safe points of the loop."""

    def __init__(self):
        self.requested = False
        self.signal_name = None
        self._previous = {}

    def _handle(self, signum, _frame):
        self.requested = True
        self.signal_name = signal.Signals(signum).name
        log(f"received {self.signal_name}: stopping at the next safe point")

    def install(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def log(message: str) -> None:
    print(f"[trainer] {message}", file=sys.stderr, flush=True)


class Emitter:
    """JSON lines to stdout; step lines are also appended to <output_dir>/metrics.jsonl."""

    def __init__(self, output_dir: str):
        self.metrics_path = os.path.join(output_dir, "metrics.jsonl")

    def __call__(self, event: str, **fields) -> None:
        line = json.dumps({"event": event, **fields}, sort_keys=False)
        print(line, flush=True)
        if event == "step":
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def env_seed(seed: int, step: int) -> int:
    """The seed sent to /episodes/open: fixed per (run seed, step), so a
    resumed step asks the server for the same episodes."""
    return (seed * 1_000_003 + step) % 2**31


def training_items(rollouts: list, group_size: int, normalize_std: bool, mask_unanswered: bool,
                   everyone: list = None) -> tuple:
    """Group rollouts by instance, compute advantages; return (rollouts in group order, items).

    An instance drawn twice in one batch (the batch crossed an epoch boundary)
    has 2G episodes: they form two groups, since episodes of one instance are
    interchangeable. `everyone` is the step's rollouts of all processes
    (distributed.gather_rollouts) when this one holds only its share: the
    groups, and so the advantages, are formed over all of them, and the
    items returned are this process's.
    """
    everyone = rollouts if everyone is None else everyone
    by_instance = OrderedDict()
    for r in everyone:
        by_instance.setdefault(r.episode.instance_id, []).append(r)
    groups = []
    for instance, members in by_instance.items():
        if len(members) % group_size:
            raise RuntimeError(f"instance {instance}: {len(members)} rollouts, not a multiple of group_size {group_size}")
        groups.extend(members[k:k + group_size] for k in range(0, len(members), group_size))
    rewards = torch.tensor([[r.outcome.reward for r in m] for m in groups])
    scales = torch.tensor([[r.outcome.advantage_scale for r in m] for m in groups])
    advantages = group_advantages(rewards, normalize_std, scales).flatten().tolist()
    # Own rollouts are matched by identity, other processes' summaries by episode id.
    key = (lambda r: id(r)) if everyone is rollouts else (lambda r: r.episode.episode_id)
    mine = {key(r): r for r in rollouts}
    ordered, items = [], []
    for position, (g, adv) in enumerate(zip((g for members in groups for g in members), advantages)):
        r = mine.get(key(g))
        if r is None:
            continue  # another process's rollout
        ordered.append(r)
        items.append(TrainItem(ids=r.sequence.ids, mask=r.sequence.mask, advantage=adv,
                               weight=0.0 if is_masked(r, mask_unanswered) else 1.0,
                               sampler_logprobs=getattr(r.sequence, "sampler_logprobs", None),
                               global_index=position))
    return ordered, items


def is_masked(rollout, mask_unanswered: bool) -> bool:
    """CodeScout §3.4: no loss for a rollout that used every turn without answering."""
    return mask_unanswered and rollout.outcome.hit_turn_limit and not rollout.outcome.answered


def rollout_metrics(rollouts: list, mask_unanswered: bool) -> dict:
    rewards = np.array([r.outcome.reward for r in rollouts], dtype=np.float64)
    keys = sorted({k for r in rollouts for k in r.outcome.components})
    components = {k: float(np.mean([r.outcome.components.get(k, 0.0) for r in rollouts])) for k in keys}
    mean = lambda xs: float(np.mean(xs)) if len(xs) else 0.0  # noqa: E731
    return {
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
        "reward_components": components,
        "turns_mean": mean([r.outcome.turns for r in rollouts]),
        "tool_calls_per_turn_mean": mean([r.outcome.tool_calls_per_turn for r in rollouts]),
        "advantage_scale_mean": mean([r.outcome.advantage_scale for r in rollouts]),
        "answered_ratio": mean([r.outcome.answered for r in rollouts]),
        "hit_turn_limit_ratio": mean([r.outcome.hit_turn_limit for r in rollouts]),
        "masked_ratio": mean([is_masked(r, mask_unanswered) for r in rollouts]),
        "completion_len_mean": mean([r.generated_tokens for r in rollouts]),
        "truncated_ratio": mean([r.budget_exhausted for r in rollouts]),
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m trainer.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="path to the JSON config (see trainer/README.md)")
    parser.add_argument("--resume", default=None,
                        help="'latest' = newest complete checkpoint in output_dir (start fresh if none), "
                             "or a checkpoint directory")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg, recipe = load_config_with_recipe(args.config)
    os.makedirs(cfg.output_dir, exist_ok=True)
    emit = Emitter(cfg.output_dir)
    stop = StopRequest().install()
    try:
        return train(cfg, args.resume, emit, stop, recipe)
    finally:
        stop.uninstall()


def load_chat(cfg: TrainConfig, tokenizer) -> ChatTokens:
    """The chat template (the model's, or the config's override file), checked
    at start-up: a template that cannot give prefix-stable sequences fails
    here, naming the model directory, not in the middle of a run."""
    source = f"model {cfg.model_path}"
    if cfg.chat_template is not None:
        with open(cfg.chat_template, encoding="utf-8") as f:
            tokenizer.chat_template = f.read()
        source = f"chat template {cfg.chat_template} (for model {cfg.model_path})"
        log(f"chat template replaced by {cfg.chat_template} (config key chat_template)")
    chat = ChatTokens(tokenizer, cfg.chat_template_kwargs, source=source)
    chat.check_template()
    return chat


def train(cfg: TrainConfig, resume, emit, stop: StopRequest, recipe: dict = None) -> int:
    ranks = distributed.init_ranks()
    try:
        return _train(cfg, resume, emit if ranks.is_main else (lambda *_a, **_k: None), stop, ranks, recipe)
    finally:
        distributed.shutdown(ranks)


def _train(cfg: TrainConfig, resume, emit, stop: StopRequest, ranks, recipe: dict = None) -> int:
    check_launch(cfg, ranks)
    seed_everything(cfg.seed)
    device, dtype = pick_device_and_dtype(cfg.dtype)
    instance_ids = load_instance_ids(cfg.data.instance_ids, cfg.data.path, cfg.data.column)
    fingerprint = data_fingerprint(instance_ids, cfg.seed)

    model, tokenizer = load_policy(cfg.model_path, cfg.lora, dtype, device,
                                   cfg.gradient_checkpointing and device.type == "cuda", cfg.finetune)
    chat = load_chat(cfg, tokenizer)
    stops = stop_token_ids(tokenizer, getattr(model, "generation_config", None))
    optimizer, scheduler = make_optimizer(cfg, model, cfg.total_steps * cfg.mini_batches_per_step)
    settings = loss_settings(cfg.algorithm, cfg.max_new_tokens, clip_low=cfg.clip_low, clip_high=cfg.clip_high,
                             kl_beta=cfg.kl_beta, normalize_advantage_std=cfg.normalize_advantage_std)
    limits = RolloutLimits(cfg.max_turns, cfg.max_new_tokens,
                           cfg.max_new_tokens_per_turn or cfg.max_new_tokens, cfg.max_seq_len)
    run = Run(cfg, ranks, emit, stop, device, model, tokenizer, optimizer, scheduler, settings, fingerprint)

    checkpoint, step, position, pipeline_state, pending = resume_or_start(run, resume)
    # Identical adapters on every rank, fresh or resumed.
    distributed.broadcast_parameters(ranks, trainable_parameters(model))
    parameters = count_parameters(model)
    run.generator, generator_reason, ignored = start_generator(run, stops)
    announce_start(run, step, dtype, parameters, len(instance_ids), recipe,
                   generator_reason=generator_reason, ignored=ignored)
    run.client = distributed.ShardedEnvClient(EnvClient(cfg.env_url, cfg.env_timeout_s), ranks)
    last_saved = step if checkpoint is not None else None
    # Which batch each step learns from (lag 0 = sync; pipeline.py).
    run.pipeline = restore_pipeline(cfg.max_staleness if cfg.mode == "async" else 0, cfg.total_steps, step, position,
                                    pipeline_state, pending)

    def play(batch_ids: list, batch_step: int) -> list:
        return run_rollouts(run.client, run.generator, chat, batch_ids, cfg.group_size,
                            env_seed(cfg.seed, batch_step), limits, lambda: stop.requested)

    while step < cfg.total_steps:
        if distributed.any_rank(ranks, stop.requested):
            break
        done = train_step(run, step, position, instance_ids, play, last_saved)
        if done is None:
            return 0  # the step was abandoned: stopped
        step, position, saved = done
        if saved:
            last_saved = step

    return finish(emit, stop, step, distributed.any_rank(ranks, stop.requested),
                  lambda: save(run, step, capture_rng_state(), position) if last_saved != step else None)


@dataclass
class Run:
    """What the parts of one training run share: the config, the process's place, the
    policy and its optimizer; the generator, environment client and batch pipeline once
    they exist."""
    cfg: TrainConfig
    ranks: distributed.Ranks
    emit: Any
    stop: StopRequest
    device: torch.device
    model: Any
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    settings: Any
    fingerprint: str
    generator: Any = None
    client: Any = None
    pipeline: Any = None


def check_launch(cfg: TrainConfig, ranks) -> None:
    """Fail before loading anything when the processes cannot run this config."""
    distributed.check_divisible(ranks, cfg.batch_size * cfg.group_size)
    if cfg.mode == "async" and ranks.enabled:
        # Each rank's pending rollouts would have to be checkpointed too (rank 0 writes alone).
        raise ValueError("mode: async runs on one trainer process for now (gpus: 1); use mode: sync under torchrun")


def make_optimizer(cfg, model, updates: int) -> tuple:
    """AdamW over the trainable parameters and its learning-rate schedule over `updates` optimizer steps."""
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(cfg.lr_schedule, updates, cfg.warmup_ratio))
    return optimizer, scheduler


def resume_or_start(run: Run, resume) -> tuple:
    """(checkpoint resumed or None, step, data position, pipeline state, pending batches):
    the state of `--resume`, or a fresh start (from `init_from`'s weights when given)."""
    cfg = run.cfg
    step, position = 0, DataPosition()
    pipeline_state, pending = None, None
    checkpoint = resolve_resume(cfg.output_dir, resume)
    if checkpoint is not None:
        state, rng_state = load_checkpoint(checkpoint, model=run.model, optimizer=run.optimizer,
                                           scheduler=run.scheduler)
        if state.get("data_fingerprint") != run.fingerprint:
            raise RuntimeError(f"checkpoint {checkpoint} was trained on a different data order "
                               f"(fingerprint {state.get('data_fingerprint')} != {run.fingerprint}: "
                               "samples or seed changed); refusing to resume")
        step, position = state["step"], DataPosition(state["data_epoch"], state["data_index"])
        pipeline_state, pending = state, load_extra_file(checkpoint, PENDING_FILE)
        restore_rng_state(rng_state)
        run.emit("resumed", step=step, checkpoint=checkpoint)
    elif resume is not None:
        log(f"--resume {resume}: no complete checkpoint in {cfg.output_dir}; starting from step 0")
    if checkpoint is None and cfg.init_from is not None:
        # A warm start (e.g. trainer.sft's RFT checkpoint): its weights only; optimizer and schedule start fresh.
        load_weights(cfg.init_from, run.model)
        log(f"policy weights from {cfg.init_from} (init_from); optimizer and schedule start at step 0")
    return checkpoint, step, position, pipeline_state, pending


def start_generator(run: Run, stops: list) -> tuple:
    """(the rollout engine of engines.py, why it was picked, the model's generation_config
    settings it ignores)."""
    cfg = run.cfg
    generator, reason = make_generator(cfg, run.model, run.tokenizer, stops, run.device,
                                       Sampling(cfg.temperature, cfg.top_p, cfg.top_k), run.ranks.world_size,
                                       ranks=run.ranks)
    ignored = getattr(generator, "ignored_generation_config", None) or {}
    if ignored:
        log(f"ignoring the model's generation_config settings {ignored}: only the config's sampling applies")
    return generator, reason, ignored


def announce_start(run: Run, step: int, dtype, parameters: tuple, instances: int, recipe: dict, *,
                   generator_reason: str, ignored: dict) -> None:
    """The "start" line, and the run's config.json and recipe.json beside its checkpoints."""
    cfg, generator = run.cfg, run.generator
    if recipe is None:
        from .config import parse_config_with_recipe
        recipe = parse_config_with_recipe(config_to_dict(cfg))[1]
    total, trainable = parameters
    run.emit("start", step=step, total_steps=cfg.total_steps, algorithm=cfg.algorithm, device=str(run.device),
             dtype=str(dtype).replace("torch.", ""), generator=generator.name, generator_reason=generator_reason,
             engine=generator.describe(), world_size=run.ranks.world_size, backend=run.ranks.backend,
             parameters=total, trainable_parameters=trainable, instances=instances, init_from=cfg.init_from,
             recipe=recipe, loss=run.settings.__dict__, ignored_generation_config=ignored)
    if run.ranks.is_main:
        write_run_files(cfg.output_dir, config_to_dict(cfg), recipe)


def write_run_files(output_dir: str, config: dict, recipe: dict) -> None:
    """config.json (the config as run) and recipe.json (the effective recipe, for the run
    report: activities/training-report.ts) in the run's output directory."""
    with open(os.path.join(output_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(output_dir, "recipe.json"), "w", encoding="utf-8") as f:
        json.dump(recipe, f, indent=2)


def save(run: Run, at_step: int, rng_state: dict, at_position: DataPosition):
    """Rank 0 writes (every rank holds the same state); the others wait for it."""
    cfg, pipeline = run.cfg, run.pipeline
    path = None
    if run.ranks.is_main:
        path = save_checkpoint(cfg.output_dir, at_step, model=run.model, optimizer=run.optimizer,
                               scheduler=run.scheduler, rng_state=rng_state, data_position=at_position,
                               extra_state={"data_fingerprint": run.fingerprint, "algorithm": cfg.algorithm,
                                            "total_steps": cfg.total_steps, "world_size": run.ranks.world_size,
                                            "mode": cfg.mode, **pipeline.checkpoint_state()},
                               keep=cfg.keep_checkpoints,
                               extra_files={PENDING_FILE: pipeline.checkpoint_pending()} if pipeline.pending
                               else None)
        run.emit("checkpoint", step=at_step, path=path)
    distributed.barrier(run.ranks)
    return path


def train_step(run: Run, step: int, position: DataPosition, instance_ids: list, play, last_saved):
    """One training step: roll out, update, report, checkpoint when due. Returns (step,
    data position, whether it checkpointed) after it, or None when a stop abandoned it."""
    cfg, ranks, pipeline = run.cfg, run.ranks, run.pipeline
    rng_at_start, position_at_start = capture_rng_state(), position
    pipeline_at_start = pipeline.snapshot()
    if run.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    run.generator.sync_weights(step)
    aborted = False
    generated_before = sum(r.generated_tokens for b in pipeline.pending for r in b.rollouts)
    try:
        pipeline.fill(step, instance_ids, cfg.seed, cfg.batch_size, play)
    except StepAborted:
        aborted = True
    if distributed.any_rank(ranks, aborted):
        # Nothing was learnt from this step: checkpoint its starting state (with the
        # batches pending then; the ones generated since are played again on resume).
        pipeline.restore(pipeline_at_start)
        path = save(run, step, rng_at_start, position_at_start) if last_saved != step else None
        run.emit("stopped", step=step, signal=run.stop.signal_name, checkpoint=path, aborted_step=step + 1)
        return None
    rolled = time.perf_counter()
    generated_now = sum(r.generated_tokens for b in pipeline.pending for r in b.rollouts) - generated_before
    batch = pipeline.take(step)
    everyone, update = learn(run, batch)
    updated = time.perf_counter()
    staleness = step - batch.policy_version
    step, position = step + 1, batch.position_after

    timing = {"started": started, "rolled": rolled, "updated": updated, "generated_now": generated_now}
    metrics = step_metrics(run, step, position_at_start.epoch, batch.policy_version, staleness, everyone, update,
                           timing)
    checkpoint_path = None
    stopping = distributed.any_rank(ranks, run.stop.requested)
    due = step % cfg.checkpoint_every == 0 or step == cfg.total_steps or stopping
    if due:
        saving = time.perf_counter()
        checkpoint_path = save(run, step, capture_rng_state(), position)
        metrics["checkpoint_time_s"] = time.perf_counter() - saving
    run.emit("step", **metrics, checkpoint=checkpoint_path)
    return step, position, due


def learn(run: Run, batch) -> tuple:
    """(the step's rollouts of all processes, the update's stats): one policy update on the batch."""
    cfg = run.cfg
    everyone = distributed.gather_rollouts(run.ranks, batch.rollouts)
    _, items = training_items(batch.rollouts, cfg.group_size, run.settings.normalize_advantage_std,
                              cfg.mask_unanswered_at_turn_limit, everyone)
    if hasattr(run.generator, "before_update"):
        run.generator.before_update()  # vLLM sleeps: the update gets its memory
    update = policy_update(run.model, run.optimizer, run.scheduler, items, run.settings,
                           pad_id=run.tokenizer.pad_token_id, device=run.device,
                           micro_batch_tokens=cfg.micro_batch_tokens, mini_batches=cfg.mini_batches_per_step,
                           max_grad_norm=cfg.max_grad_norm, track_kl=cfg.track_kl, temperature=cfg.temperature,
                           importance_sampling_cap=cfg.importance_sampling_cap,
                           before_step=lambda ps: distributed.average_gradients(run.ranks, ps),
                           global_index=[it.global_index for it in items], global_count=len(everyone),
                           gradient_ranks=run.ranks.world_size, behaviour_old=cfg.mode == "async")
    return everyone, distributed.reduce_update_stats(run.ranks, update)


def step_metrics(run: Run, step: int, epoch: int, policy_version: int, staleness: int, everyone: list,
                 update: dict, timing: dict) -> dict:
    """The "step" line's numbers (also appended to metrics.jsonl)."""
    cfg = run.cfg
    started, rolled, updated = timing["started"], timing["rolled"], timing["updated"]
    rollout_tokens = sum(r.generated_tokens for r in everyone)
    metrics = {"step": step, "epoch": epoch,
               "policy_version": policy_version, "staleness": staleness,
               **rollout_metrics(everyone, cfg.mask_unanswered_at_turn_limit),
               "kl": update["kl"], "loss": update["loss"], "clip_ratio": update["clip_ratio"],
               "grad_norm": update["grad_norm"], "lr": update["lr"],
               "sampler_logprob_diff": update["sampler_logprob_diff"],
               "is_weight_mean": update["is_weight_mean"],
               "step_time_s": updated - started, "rollout_time_s": rolled - started,
               "env_time_s": run.client.take_seconds(),
               "update_time_s": updated - rolled, "rollout_tokens": rollout_tokens,
               "train_tokens": update["train_tokens"],
               # tokens generated during this step (in async mode: for a later step's batch)
               "rollout_tokens_per_s": ((rollout_tokens if cfg.mode == "sync" else timing["generated_now"])
                                        / max(rolled - started, 1e-9)),
               "train_tokens_per_s": update["train_tokens"] / max(updated - rolled, 1e-9)}
    if run.device.type == "cuda":
        metrics["peak_gpu_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return metrics


def finish(emit, stop: StopRequest, step: int, stopped: bool, save_unsaved) -> int:
    """The run's last line: "stopped" when a stop came (on any process), with the checkpoint
    `save_unsaved` writes (None when this step's is already written); else "done"."""
    if stopped:
        emit("stopped", step=step, signal=stop.signal_name, checkpoint=save_unsaved())
        return 0
    emit("done", step=step)
    return 0


if __name__ == "__main__":
    sys.exit(main())

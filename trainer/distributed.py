"""Several trainer processes with PyTorch's own distributed runtime.

    python -m torch.distributed.run --standalone --nproc-per-node N -m trainer.train --config cfg.json

torchrun starts N ranks and sets RANK / WORLD_SIZE / LOCAL_RANK; each rank
joins the default process group (NCCL on GPUs, one GPU per rank; gloo on
CPU). Without torchrun (WORLD_SIZE unset) everything here is a no-op and the
trainer is one process, as before. One step on N ranks:

- Rank 0 opens the step's B x G episodes (one /episodes/open, so the server
  sees one batch) and broadcasts them; each rank plays a contiguous 1/N of
  them with its own copy of the policy (B x G must divide by N).
- Each rank closes its own episodes; the outcomes (rewards, s(c̄)) are
  all-gathered, so a group's advantages are normalised over the whole group
  even when its rollouts were played on different ranks.
- Each rank computes the gradient of its rollouts' mean loss; before the one
  optimizer step the LoRA gradients are all-reduced and averaged (what DDP's
  reducer does, in one flat bucket: the adapter is a few MB, so overlapping
  the communication with the backward would gain nothing; the trainer's
  forward skips the LM head on prompt tokens, policy.token_logprobs, which
  DDP's module wrapper cannot see). With equal shards the average of the
  ranks' means is the global mean, so N ranks take the step one rank would.
- Every rank holds the same weights, optimizer state and RNG state after
  the step, so only rank 0 writes checkpoints and step lines, and a
  checkpoint resumes on any number of ranks.
- A stop (SIGTERM) is agreed on by all ranks at fixed points of the step, so
  no rank waits in a collective that another rank has left. A rank that dies
  makes the others' next collective fail: every rank exits non-zero and
  torchrun with it; the run resumes from the newest complete checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

# How long a collective may wait for the other ranks. A dead peer is usually
# noticed at once (its sockets close); this bounds a hung one.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = "none"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def device(self) -> torch.device:
        """Where collective tensors live: the rank's GPU under NCCL, else CPU."""
        return torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")


def init_ranks() -> Ranks:
    """Join torchrun's process group when launched by torchrun; one process otherwise."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Ranks()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)  # "cuda" below then means this rank's GPU
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
    return Ranks(rank, world_size, local_rank, backend)


def shutdown(ranks: Ranks) -> None:
    if ranks.enabled and dist.is_initialized():
        dist.destroy_process_group()


def check_divisible(ranks: Ranks, rollouts_per_step: int) -> None:
    if rollouts_per_step % ranks.world_size:
        raise ValueError(f"batch_size x group_size = {rollouts_per_step} rollouts per step do not split evenly "
                         f"over {ranks.world_size} processes; choose a world size that divides it")


def any_rank(ranks: Ranks, flag: bool) -> bool:
    """True on every rank when `flag` is true on any rank (a collective: all ranks must call it)."""
    if not ranks.enabled:
        return bool(flag)
    value = torch.tensor([1 if flag else 0], dtype=torch.int64, device=ranks.device())
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def gather(ranks: Ranks, obj) -> list:
    """`obj` of every rank, in rank order."""
    if not ranks.enabled:
        return [obj]
    out = [None] * ranks.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ranks: Ranks) -> None:
    if ranks.enabled:
        dist.barrier()


def broadcast_parameters(ranks: Ranks, params: list) -> None:
    """Rank 0's values of `params` on every rank (the adapter starts identical everywhere)."""
    if not ranks.enabled:
        return
    for p in params:
        buffer = p.data.to(ranks.device())
        dist.broadcast(buffer, src=0)
        p.data.copy_(buffer.to(p.device))


def average_gradients(ranks: Ranks, params: list) -> None:
    """Replace each parameter's gradient by its mean over the ranks (one flat all-reduce).

    A parameter without a gradient (a rank whose rollouts were all loss-masked)
    contributes zeros, so every rank still takes part in the collective.
    """
    if not ranks.enabled:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads]).to(ranks.device())
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= ranks.world_size
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).to(device=p.device, dtype=p.dtype)
        offset += n


def reduce_update_stats(ranks: Ranks, stats: dict) -> dict:
    """The update's stats over all ranks. Ratios (clip ratio, KL per token,
    sampler log-prob difference, IS weight) are recomputed from the ranks'
    summed numerators and counts, so each rank weighs by its tokens (or
    sequences), not equally; token counts are summed; the loss, whose per-rank
    terms are already scaled to the global mini-batch (update.py), and the
    grad norm and lr, equal on all ranks after the all-reduce, are averaged."""
    if not ranks.enabled:
        return stats
    from .update import ratio_stats

    everyone = gather(ranks, stats)
    out = dict(stats)
    totals = {k: sum(s["totals"][k] for s in everyone) for k in stats["totals"]}
    out["totals"] = totals
    out.update(ratio_stats(totals))
    for key in ("loss", "grad_norm"):
        out[key] = sum(s[key] for s in everyone) / len(everyone)
    out["train_tokens"] = sum(s["train_tokens"] for s in everyone)
    return out


@dataclass
class RankGroup:
    """A set of consecutive ranks that act together (a vLLM tensor-parallel
    group, generate_vllm.py), with the two collectives the rollout needs."""
    members: tuple
    index: int          # this rank's position in `members`
    handle: object = None  # the torch ProcessGroup; None for a group of one

    @property
    def size(self) -> int:
        return len(self.members)

    def gather(self, obj) -> list:
        if self.size == 1:
            return [obj]
        out = [None] * self.size
        dist.all_gather_object(out, obj, group=self.handle)
        return out

    def any(self, flags: tuple) -> tuple:
        """Each flag true on every member when it is true on any."""
        if self.size == 1:
            return tuple(bool(f) for f in flags)
        return tuple(any(column) for column in zip(*self.gather(tuple(bool(f) for f in flags))))


def tensor_parallel_group(ranks: Ranks, size: int) -> RankGroup:
    """This rank's group of `size` consecutive ranks: vLLM's layout under
    external_launcher (vllm/distributed/parallel_state.py initialize_model_parallel
    puts tensor parallelism on the innermost, consecutive ranks). Every rank
    creates every group, in the same order, as torch.distributed.new_group requires."""
    if size <= 1 or not ranks.enabled:
        return RankGroup((ranks.rank,), 0)
    if ranks.world_size % size:
        raise ValueError(f"vllm.tensor_parallel_size {size} does not divide the {ranks.world_size} processes")
    mine = None
    for start in range(0, ranks.world_size, size):
        members = tuple(range(start, start + size))
        handle = dist.new_group(list(members))
        if ranks.rank in members:
            mine = RankGroup(members, members.index(ranks.rank), handle)
    return mine


@dataclass
class RolloutSummary:
    """What the other ranks need of a rollout: its episode (without the
    prompt), its outcome and its lengths."""
    episode: object
    outcome: object
    generated_tokens: int
    budget_exhausted: bool
    turns: int


def gather_rollouts(ranks: Ranks, rollouts: list) -> list:
    """Summaries of every rank's rollouts, in the global (rank-major) order."""
    if not ranks.enabled:
        return rollouts
    mine = [RolloutSummary(dataclasses.replace(r.episode, messages=[], tools=[]), r.outcome, r.generated_tokens,
                           r.budget_exhausted, r.turns) for r in rollouts]
    return [s for part in gather(ranks, mine) for s in part]


class ShardedEnvClient:
    """An EnvClient for one rank: /episodes/open runs on rank 0 only and each
    rank gets its contiguous share; step and close go straight to the server."""

    def __init__(self, client, ranks: Ranks):
        self.client = client
        self.ranks = ranks
        self.seconds = 0.0  # time in environment-server calls (this rank), for the step line

    def take_seconds(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    def _timed(self, call, *args):
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.seconds += time.perf_counter() - started

    def open(self, instance_ids: list, group_size: int, seed: int) -> list:
        if not self.ranks.enabled:
            return self._timed(self.client.open, instance_ids, group_size, seed)
        payload = [None]
        if self.ranks.is_main:
            try:
                payload[0] = ("ok", self._timed(self.client.open, instance_ids, group_size, seed))
            except Exception as e:  # tell the other ranks instead of leaving them waiting
                payload[0] = ("error", f"{type(e).__name__}: {e}")
        dist.broadcast_object_list(payload, src=0)
        status, value = payload[0]
        if status != "ok":
            raise RuntimeError(f"rank 0 could not open the step's episodes: {value}")
        share = len(value) // self.ranks.world_size
        return value[self.ranks.rank * share:(self.ranks.rank + 1) * share]

    def step(self, steps: list) -> dict:
        return self._timed(self.client.step, steps)

    def close(self, episode_ids: list) -> dict:
        return self._timed(self.client.close, episode_ids)

    def close_quietly(self, episode_ids: list):
        return self._timed(self.client.close_quietly, episode_ids)

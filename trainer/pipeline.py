"""The rollout pipeline: which batch each step learns from, and how stale it may be.

`mode: sync` (lag 0): step t generates its batch with the weights after t
steps and learns from it at once (on-policy; the papers' synchronous runs,
CodeGrep §3.6).

`mode: async` (lag k = `max_staleness`): CodeScout §3.4 trains with SkyRL's
asynchronous mode, where trajectories used at step n may come from
checkpoints at most t = 4 steps stale. Here, before step t updates, the
batches for steps up to t + k are generated with the weights after t steps,
so the batch step t learns from was sampled by the policy of step
max(0, t - k): its staleness t - version is at most k. Every rollout records
the policy version that sampled it, and its sampler log-probs are the
behaviour policy's (update.py uses them as pi_old, so the importance ratio and
the clip act on the stale samples). Generation and update take turns on the
same device (colocated, as CodeGrep App. A.4); the off-policy semantics are
CodeScout's, the overlap of the two on separate GPUs is not implemented.

The pending batches are part of a checkpoint (checkpoint.py `pending_rollouts.pt`),
so a resumed run learns from exactly the batches, with exactly the versions,
an uninterrupted one would, and no step is done twice.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .checkpoint import DataPosition
from .data import next_batch

PENDING_FILE = "pending_rollouts.pt"
MODES = ("sync", "async")


@dataclass
class PendingBatch:
    step: int                  # the training step (0-based) that learns from it
    policy_version: int        # optimizer steps taken by the weights that sampled it
    rollouts: list
    position_after: DataPosition  # data position once this batch is consumed


@dataclass
class RolloutPipeline:
    lag: int
    total_steps: int
    next_step: int             # the next batch to generate is for this step
    next_position: DataPosition
    pending: list = field(default_factory=list)

    def snapshot(self) -> "RolloutPipeline":
        return RolloutPipeline(self.lag, self.total_steps, self.next_step, self.next_position, list(self.pending))

    def restore(self, snapshot: "RolloutPipeline") -> None:
        self.next_step, self.next_position, self.pending = (snapshot.next_step, snapshot.next_position,
                                                            list(snapshot.pending))

    def fill(self, step: int, ids: list, seed: int, batch_size: int, generate) -> int:
        """Generate, with the current weights (version `step`), every batch up to
        step + lag; `generate(instance_ids, batch_step)` returns the rollouts or
        raises (rollout.StepAborted). Returns the number of batches generated."""
        made = 0
        while self.next_step <= min(step + self.lag, self.total_steps - 1):
            batch_ids, after = next_batch(ids, seed, self.next_position, batch_size)
            rollouts = generate(batch_ids, self.next_step)
            for r in rollouts:
                r.policy_version = step
            self.pending.append(PendingBatch(self.next_step, step, rollouts, after))
            self.next_step, self.next_position = self.next_step + 1, after
            made += 1
        return made

    def take(self, step: int) -> PendingBatch:
        if not self.pending or self.pending[0].step != step:
            have = [b.step for b in self.pending]
            raise RuntimeError(f"the rollout pipeline has no batch for step {step} (pending: {have})")
        batch = self.pending.pop(0)
        if step - batch.policy_version > self.lag:
            raise RuntimeError(f"step {step} would learn from policy version {batch.policy_version}, "
                               f"more than max_staleness {self.lag} steps stale")
        return batch

    def checkpoint_state(self) -> dict:
        return {"generated_through": self.next_step, "generation_epoch": self.next_position.epoch,
                "generation_index": self.next_position.index}

    def checkpoint_pending(self) -> list:
        """What the checkpoint stores of the pending batches (rollouts as played, with
        their outcomes, sequences, sampler log-probs and versions)."""
        return [copy.copy(b) for b in self.pending]


def restore_pipeline(lag: int, total_steps: int, step: int, position: DataPosition, state: dict = None,
                     pending: list = None) -> RolloutPipeline:
    """The pipeline of a fresh run (state None) or of a checkpoint."""
    if not state or "generated_through" not in state:
        return RolloutPipeline(lag, total_steps, step, position)
    next_position = DataPosition(state["generation_epoch"], state["generation_index"])
    return RolloutPipeline(lag, total_steps, state["generated_through"], next_position, list(pending or []))

"""distributed.tensor_parallel_group on a real gloo process group: 4 ranks in groups of 2
consecutive ranks (vLLM's tensor-parallel layout under external_launcher)."""

import ast
import os

import torch.distributed as dist
import torch.multiprocessing as mp

from trainer import distributed


def _rank_main(rank: int, world: int, init_file: str, out_dir: str):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        group = distributed.tensor_parallel_group(distributed.Ranks(rank, world, rank, "gloo"), 2)
        gathered = group.gather(f"rank-{rank}")
        playing, stopping = group.any((rank == 1, rank == 3))
        with open(os.path.join(out_dir, f"{rank}.txt"), "w") as f:
            f.write(repr((group.members, group.index, gathered, playing, stopping)))
    finally:
        dist.destroy_process_group()


def test_groups_are_consecutive_ranks_and_their_collectives_stay_inside(tmp_path):
    world = 4
    mp.spawn(_rank_main, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=True)
    results = {r: ast.literal_eval((tmp_path / f"{r}.txt").read_text()) for r in range(world)}
    assert results[0] == ((0, 1), 0, ["rank-0", "rank-1"], True, False)
    assert results[1] == ((0, 1), 1, ["rank-0", "rank-1"], True, False)
    assert results[2] == ((2, 3), 0, ["rank-2", "rank-3"], False, True)
    assert results[3] == ((2, 3), 1, ["rank-2", "rank-3"], False, True)


def test_a_group_of_one_needs_no_process_group():
    group = distributed.tensor_parallel_group(distributed.Ranks(), 1)
    assert (group.members, group.size, group.gather("x"), group.any((True, False))) == ((0,), 1, ["x"], (True, False))

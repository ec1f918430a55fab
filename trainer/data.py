"""The training data order: instance ids, shuffled per epoch with the seed.

The order is a pure function of (instance ids, seed, epoch), and the trainer
records only its position (epoch, index). A resumed run therefore replays
exactly the batches the interrupted run would have drawn, and a fingerprint of
ids + seed stored in each checkpoint refuses a resume onto different data.
"""

from __future__ import annotations

import hashlib
import json
import os
import random

from .checkpoint import DataPosition


class DataError(ValueError):
    """The samples list is missing, empty or malformed."""


def load_instance_ids(instance_ids=None, path=None, column: str = "instance_id") -> list:
    """Instance ids from the config: an inline list, a .jsonl file or a .parquet file."""
    if instance_ids is not None:
        ids = list(instance_ids)
    elif path is None:
        raise DataError("no data given: set data.instance_ids or data.path")
    elif not os.path.isfile(path):
        raise DataError(f"data.path {path!r} does not exist")
    elif path.endswith(".parquet"):
        ids = _read_parquet(path, column)
    elif path.endswith((".jsonl", ".json")):
        ids = _read_jsonl(path, column)
    else:
        raise DataError(f"data.path {path!r}: expected a .jsonl or .parquet file")
    if not ids:
        raise DataError(f"no instance ids found in {path or 'data.instance_ids'}")
    duplicates = _duplicates(ids)
    if duplicates:
        raise DataError(f"duplicate instance ids in {path or 'data.instance_ids'}: {sorted(duplicates)[:5]}")
    return ids


def _duplicates(ids: list) -> set:
    seen, dup = set(), set()
    for i in ids:
        (dup if i in seen else seen).add(i)
    return dup


def _read_jsonl(path: str, column: str) -> list:
    ids = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{line_no}: invalid JSON: {e}") from e
            value = row if isinstance(row, str) else row.get(column) if isinstance(row, dict) else None
            if not isinstance(value, str) or not value:
                raise DataError(f"{path}:{line_no}: no string field {column!r}")
            ids.append(value)
    return ids


def _read_parquet(path: str, column: str) -> list:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - pyarrow is in requirements.txt
        raise DataError(f"reading {path} needs pyarrow (pip install -r trainer/requirements.txt)") from e
    table = pq.read_table(path)
    if column not in table.column_names:
        raise DataError(f"{path}: no column {column!r} (columns: {', '.join(table.column_names)})")
    values = table.column(column).to_pylist()
    bad = [i for i, v in enumerate(values) if not isinstance(v, str) or not v]
    if bad:
        raise DataError(f"{path}: column {column!r} row {bad[0]} is not a non-empty string")
    return values


def data_fingerprint(ids: list, seed: int) -> str:
    h = hashlib.sha256()
    h.update(str(seed).encode())
    for i in ids:
        h.update(b"\0" + i.encode("utf-8"))
    return h.hexdigest()[:16]


def epoch_order(ids: list, seed: int, epoch: int) -> list:
    """The order of `ids` in `epoch`: a shuffle seeded by (seed, epoch) only."""
    order = list(ids)
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return order


def next_batch(ids: list, seed: int, position: DataPosition, batch_size: int) -> tuple:
    """The next `batch_size` ids from `position` (crossing epochs as needed)
    and the position after them."""
    batch, epoch, index = [], position.epoch, position.index
    order = epoch_order(ids, seed, epoch)
    while len(batch) < batch_size:
        if index >= len(order):
            epoch, index = epoch + 1, 0
            order = epoch_order(ids, seed, epoch)
        take = min(batch_size - len(batch), len(order) - index)
        batch.extend(order[index:index + take])
        index += take
    return batch, DataPosition(epoch=epoch, index=index)

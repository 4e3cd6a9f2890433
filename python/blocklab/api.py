"""The Python API: thin wrappers that call the Rust engine and shape results."""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence

from blocklab import _core


def _paths(path: str | os.PathLike) -> str:
    return os.fspath(path)


def read_trace(path, format: str = "auto", *, skip_bad: bool = False, blkparse_event: str = "Q", limit: int | None = None):
    """Read a trace into a pandas DataFrame (columns time, op, offset, len, tenant).

    This loads the trace (up to ``limit`` requests) into memory; the engine
    itself always streams.
    """
    import pandas as pd

    cols = _core.read_trace(_paths(path), format, skip_bad, blkparse_event, limit)
    return pd.DataFrame(cols)


def simulate_cache(path, policies: str | Sequence[str] = "lru", sizes: str | Sequence = "5%", *, format: str = "auto",
                   block_size: int = 4096, reads_only: bool = False, skip_bad: bool = False, progress=None):
    """Counted cache simulation of every (policy, size) cell in one pass; a pandas DataFrame.

    Columns: policy, cache_blocks, accesses, hits, misses, miss_ratio (one row
    per cell, policy-major). ``progress(accesses_so_far)`` is called after
    every chunk of the trace. The GIL is released while the engine runs.
    """
    import pandas as pd

    out = json.loads(_core.simulate_cache(_paths(path), format, _csv(policies), _csv(sizes), block_size, reads_only,
                                          skip_bad, progress))
    return pd.DataFrame(out["cells"], columns=["policy", "cache_blocks", "accesses", "hits", "misses", "miss_ratio"])


def mrc(path, *, format: str = "auto", method: str = "exact", rate: float | None = None, max_samples: int | None = None,
        sizes: str | Sequence | None = None, block_size: int = 4096, reads_only: bool = False, skip_bad: bool = False):
    """LRU miss-ratio curve (exact, or SHARDS); a pandas DataFrame of cache_blocks, miss_ratio."""
    import pandas as pd

    out = json.loads(_core.mrc(_paths(path), format, method, rate, max_samples, None if sizes is None else _csv(sizes),
                               block_size, reads_only, skip_bad))
    return pd.DataFrame(out["points"], columns=["cache_blocks", "miss_ratio"])


def _csv(v: str | Iterable) -> str:
    if isinstance(v, str):
        return v
    return ",".join(str(x) for x in v)


def _bytes(v: int | str) -> int:
    return v if isinstance(v, int) else _core.parse_bytes(v)


def array_map(raid: str | int, disks: int, blocks: Iterable[int], *, chunk: int | str = "64KiB",
              layout: str | None = None, block_size: int = 4096) -> list[dict]:
    """Where logical blocks live on an MD array: a list of
    ``{"block", "disks", "disk_block", "disk_blocks", "parity"}``."""
    return json.loads(_core.array_map(str(raid), disks, _bytes(chunk), list(blocks), layout=layout,
                                      block_size=block_size))


def array_plan(raid: str | int, disks: int, op: str, block: int, count: int = 1, *, failed: Sequence[int] = (),
               chunk: int | str = "64KiB", layout: str | None = None, block_size: int = 4096) -> dict:
    """The I/O plan of one logical ``op`` ("read" or "write") of ``count`` blocks,
    with the failed disks given; includes ``plan`` (nodes), ``counts`` and ``read_penalty``."""
    return json.loads(_core.array_plan(str(raid), disks, _bytes(chunk), op, block, nblocks=count, failed=list(failed),
                                       layout=layout, block_size=block_size))

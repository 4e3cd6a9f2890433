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

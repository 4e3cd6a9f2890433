"""blocklab: a laboratory for block storage.

The engine is Rust (``blocklab._core``); this package holds the CLI, the
Python API, experiment recipes and plots.
"""

from blocklab._core import BlocklabError, __version__
from blocklab.api import (array_map, array_plan, disk_run, disk_scale, merge_traces, mrc, partition_plan, read_trace,
                          reuse, rgr, run_stack, simulate_cache)
from blocklab.api import load, report, sweep

__all__ = [
    "BlocklabError",
    "__version__",
    "read_trace",
    "simulate_cache",
    "mrc",
    "rgr",
    "array_map",
    "array_plan",
    "disk_run",
    "disk_scale",
    "run_stack",
    "reuse",
    "partition_plan",
    "merge_traces",
    "sweep",
    "load",
    "report",
]

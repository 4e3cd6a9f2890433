"""blocklab: a laboratory for block storage.

The engine is Rust (``blocklab._core``); this package holds the CLI, the
Python API, experiment recipes and plots.

The names below are loaded on first use (PEP 562), so that ``import
blocklab`` (which every ``blocklab`` command pays) loads neither the engine
nor the API until something asks for them; ``blocklab --help`` needs neither.
"""

_CORE = ("BlocklabError", "__version__")
_API = ("read_trace", "simulate_cache", "mrc", "rgr", "array_map", "array_plan", "disk_run", "disk_scale", "run_stack",
        "reuse", "sizing_time", "partition_plan", "merge_traces", "sweep", "load", "report")

__all__ = [*_CORE, *_API]


def __getattr__(name: str):
    if name in _CORE:
        from blocklab import _core

        return getattr(_core, name)
    if name in _API:
        from blocklab import api

        return getattr(api, name)
    raise AttributeError(f"module 'blocklab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

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


def rgr(path, policies: str | Sequence[str] = "lru,vdf-lru,lfu,vdf-lfu", sizes: str | Sequence = "5%", *,
        format: str = "auto", raid: str = "5", disks: int = 5, chunk: str = "64KiB", layout: str | None = None,
        failed: Sequence[int] = (0,), fail_at: str | None = None, reads_only: bool = True, block_size: int = 4096,
        tenant_map: str = "key", miss_trace=None, skip_bad: bool = False, disk_size: str | None = None,
        allow_loss: bool = False):
    """RGR (VDF paper) of every (policy, size) cell over a RAID array with failed disks; a pandas DataFrame.

    Columns: policy, cache_blocks, accesses, misses, surviving_reads, surviving_writes, rgr, miss_ratio,
    unreadable_blocks. More failed disks than the level tolerates are refused unless ``allow_loss``.
    """
    import pandas as pd

    out = json.loads(_core.rgr(_paths(path), format, skip_bad, block_size, reads_only, str(raid), disks, chunk, layout,
                               list(failed), fail_at, _csv(policies), _csv(sizes), tenant_map,
                               None if miss_trace is None else _paths(miss_trace), disk_size=disk_size,
                               allow_loss=allow_loss))
    return pd.DataFrame(out["cells"])


def reuse(path, *, format: str = "auto", per_tenant: bool = True, window: float | None = None, history: str = "all",
          block_size: int = 4096, skip_bad: bool = False):
    """Reuse analysis (``blocklab trace reuse``); a pandas DataFrame, one row per tenant (per window when
    ``window`` is given: columns window, start, end first). Columns: tenant, accesses, the six access
    classes, trd_size, urd_size, trd_p99_size, urd_p99_size, trd_reuses, urd_reuses, write_ratio."""
    import pandas as pd

    out = json.loads(_core.trace_reuse(_paths(path), format, block_size, per_tenant, window, history, skip_bad, "Q"))

    def flat(r, extra=None):
        row = dict(extra or {})
        row.update({k: v for k, v in r.items() if k != "classes"})
        row.update(r["classes"])
        return row

    if out["windows"] is None:
        return pd.DataFrame([flat(r) for r in out["tenants"]])
    return pd.DataFrame([flat(r, {"window": w["window"], "start": w["start"], "end": w["end"]})
                         for w in out["windows"] for r in w["tenants"]])


def sizing_time(path, *, window: float, format: str = "auto", history: str = "all", block_size: int = 4096,
                skip_bad: bool = False):
    """How long the tier's Centaur / ECI sizing analysis takes per tenant and window (ECI-Cache App. B,
    Table 3); a pandas DataFrame: tenant, window, accesses, seconds (this machine's wall clock, not
    deterministic), trd_size, urd_size."""
    import pandas as pd

    rows = json.loads(_core.trace_sizing_time(_paths(path), window, format, block_size, history, skip_bad, "Q"))
    return pd.DataFrame(rows, columns=["tenant", "window", "accesses", "seconds", "trd_size", "urd_size"])


def partition_plan(path, *, format: str = "auto", capacity: int | str | None = None, window: float | None = None,
                   history: str = "all", solver: str = "exact", units: int | None = None, estimator: str = "max",
                   objective: str = "hit-ratio", min_blocks: int = 0, theta: float = 0.5, block_size: int = 4096,
                   skip_bad: bool = False) -> dict:
    """What Centaur and ECI-Cache allocate per window (``blocklab trace partition``): the JSON report as a dict."""
    return json.loads(_core.trace_partition(_paths(path), format, block_size, None if capacity is None else str(capacity),
                                            window, history, solver, units, estimator, objective, min_blocks, theta,
                                            skip_bad, "Q"))


def merge_traces(dst, inputs: Sequence, *, format: str = "auto", tenants: str = "input", align: str = "start",
                 span: float | None = None, skip_bad: bool = False) -> dict:
    """Merge traces (each ``PATH`` or ``PATH:FORMAT``) by time into native CSV (``blocklab trace merge``);
    the summary (with the tenant mapping) as a dict."""
    return json.loads(_core.trace_merge(_paths(dst), [str(i) for i in inputs], format, tenants, align, span, skip_bad,
                                        "Q"))


def _csv(v: str | Iterable) -> str:
    if isinstance(v, str):
        return v
    return ",".join(str(x) for x in v)


def disk_run(model: str, traces, *, format: str = "auto", replay: str = "open", speedup: float = 1.0,
             outstanding: int = 1, think_ms: float = 0.0, infinitely_fast: bool = False, scheduler: str = "auto", queue_depth: int = 0,
             interval_ms: float = 0.0, reference_model: str | None = None, wrap: bool = False,
             raid: str | None = None, disks: int = 4, chunk: str = "64KiB", failed: Sequence[int] = (),
             block_size: int = 4096, layout: str | None = None, disk_size: int | str | None = None,
             rebuild: bool = False, rebuild_at_ms: float = 0.0, rebuild_window: int = 4,
             rebuild_min_kbps: int = 1000, rebuild_max_kbps: int = 200000, rebuild_order: str = "md",
             rebuild_idle: str = "simple", fit: str | None = None, live_frac: float | None = None,
             live_layout: str = "compact", live_map=None, live_unit: int | str | None = None,
             allow_loss: bool = False, synthetic: bool = False, seed: int | None = None) -> dict:
    """Replay traces in simulated time on a drive model (see `blocklab disk run`); the report as a dict.
    With ``synthetic=True`` (and ``traces=[]``) a DiskSim ``.parv``'s own ``disksim_synthio`` workload
    runs instead, seeded by ``seed`` (default: the file's Real Seed); the report's ``synthetic`` entry names it.
    With ``rebuild=True`` the ``failed`` disks are rebuilt onto spares in the background and the
    report has a ``rebuild`` entry; ``rebuild_order`` is ``md``, ``pro``, ``dor`` or ``pro-dor``,
    ``rebuild_idle`` MD's idle test (``simple``, ``md2611``, ``md6``), ``fit`` how trace addresses
    are fitted onto the array (``none``, ``wrap``, ``scale``). ``live_frac`` (with ``live_layout``
    ``compact`` or ``spread``) or ``live_map`` (the JSON of ``dgraid live --json``) copy only live
    blocks (the ``live`` order: RAID-1/10); ``live_unit`` is the spread layout's run length. More ``failed``
    disks than the level tolerates are refused unless ``allow_loss`` (then ``unreadable`` requests are left
    out of the response figures: ``response_covers`` is ``served``)."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    return json.loads(_core.disk_run(
        model, [_paths(t) for t in traces], format=format, replay=replay, speedup=speedup, outstanding=outstanding,
        think_ms=think_ms, infinitely_fast=infinitely_fast, scheduler=scheduler, queue_depth=queue_depth, interval_ms=interval_ms,
        reference_model=reference_model, wrap=wrap, raid=raid, disks=disks, chunk=chunk, failed=list(failed),
        block_size=block_size, layout=layout, disk_size=None if disk_size is None else str(disk_size),
        rebuild=rebuild, rebuild_at_ms=rebuild_at_ms, rebuild_window=rebuild_window,
        rebuild_min_kbps=rebuild_min_kbps, rebuild_max_kbps=rebuild_max_kbps, rebuild_order=rebuild_order,
        rebuild_idle=rebuild_idle, fit=fit, live_frac=live_frac, live_layout=live_layout,
        live_map=None if live_map is None else _paths(live_map), live_unit=None if live_unit is None else str(live_unit),
        allow_loss=allow_loss, synthetic=synthetic, seed=seed))


def run_stack(stack, traces, *, format: str = "auto", executor: str = "timed", sets: Sequence[str] = (),
              skip_bad: bool = False) -> dict:
    """Run a stack file over traces (see `blocklab run` and docs/stack.md); the result as a dict.

    ``sets`` are overrides by dotted key, applied in order: ``KEY=VALUE`` sets
    (``["cache.0.size=10%", "array.failed=[0]"]``), ``-KEY`` removes a key or section
    (``"-array.rebuild"``, as ``--unset``); ``executor`` is ``"timed"`` or ``"count"``."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    return json.loads(_core.run_stack(_paths(stack), [_paths(t) for t in traces], format=format, executor=executor,
                                      sets=list(sets), skip_bad=skip_bad))


def disk_scale(model, years: float, out, *, seek_rate: float | None = None, rpm_rate: float | None = None,
               bpi_rate: float | None = None, tpi_rate: float | None = None) -> dict:
    """Write the native disk spec ``model`` moved ``years`` ahead to ``out`` (see
    ``blocklab disk scale``: seek, RPM, linear and track density at annual rates; None: the
    defaults); the before/after summary as a dict."""
    return json.loads(_core.disk_scale(_paths(model), float(years), _paths(out), seek_rate, rpm_rate, bpi_rate,
                                       tpi_rate))


def _bytes(v: int | str) -> int:
    return v if isinstance(v, int) else _core.parse_bytes(v)


def array_map(raid: str | int, disks: int, blocks: Iterable[int], *, chunk: int | str = "64KiB",
              layout: str | None = None, block_size: int = 4096, disk_size: int | str = 0) -> list[dict]:
    """Where logical blocks live on an MD array: a list of
    ``{"block", "disks", "disk_block", "disk_blocks", "parity"}``. RAID-10 far
    layouts (``layout="f2"``) need ``disk_size``, each member's size."""
    return json.loads(_core.array_map(str(raid), disks, _bytes(chunk), list(blocks), layout=layout,
                                      block_size=block_size, disk_bytes=_bytes(disk_size)))


def array_plan(raid: str | int, disks: int, op: str, block: int, count: int = 1, *, failed: Sequence[int] = (),
               chunk: int | str = "64KiB", layout: str | None = None, block_size: int = 4096,
               disk_size: int | str = 0) -> dict:
    """The I/O plan of one logical ``op`` ("read" or "write") of ``count`` blocks,
    with the failed disks given; includes ``plan`` (nodes), ``counts`` and ``read_penalty``."""
    return json.loads(_core.array_plan(str(raid), disks, _bytes(chunk), op, block, nblocks=count, failed=list(failed),
                                       layout=layout, block_size=block_size, disk_bytes=_bytes(disk_size)))


def sweep(spec=None, out=None, *, jobs: int | None = None, ray: str | None = None, ship: bool = False, batch: bool = True,
          progress=False, **build):
    """Run a sweep into the folder `out` and return its results as a pandas DataFrame (one row per cell;
    see docs/sweeps.md). `spec` is a sweep file or a `blocklab.sweeps.Sweep`; without it, the keywords
    build one (`stack=`, `traces=`, `executor=`, `grid=`, `cases=`, `seeds=`, `skip_bad=`, `name=`).
    Finished cells in `out` are not run again. `ray`: `"local"` or a cluster address (one Ray task per
    cell); `ship`: send the traces to Ray workers instead of their paths. `progress`: True for a bar on
    stderr, or `fn(done, total, failed)`. The folder's meta.json records the `blocklab sweep FILE --out
    DIR ...` command that runs the sweep again (a sweep built from keywords is written to DIR/sweep.toml
    for it)."""
    from blocklab import sweeps

    if out is None:
        raise ValueError("sweep: give the results folder `out`")
    if spec is None:
        spec = sweeps.build(**build)
    elif build:
        raise ValueError(f"sweep: give a sweep or keywords to build one, not both ({', '.join(build)})")
    elif not isinstance(spec, sweeps.Sweep):
        spec = sweeps.load_sweep(spec)
    from blocklab.sweeps.provenance import sweep_command

    return sweeps.run_sweep(spec, out, jobs=jobs, ray=ray, batch=batch, ship=ship, progress=progress,
                            command=sweep_command(spec, out, jobs=jobs, ray=ray, ship=ship, batch=batch))


def load(folder):
    """The results of a sweep folder (or its results.parquet) as a pandas DataFrame."""
    from blocklab.sweeps import load as _load

    return _load(folder)


def report(folder, out=None, *, metrics: Sequence[str] | None = None, title: str | None = None,
           formats: Sequence[str] = ("png",), zoom: bool = False) -> str:
    """Write the HTML report of a sweep folder (default `folder/report.html`); its path. Its figures
    are also written to `<report>-figures/` as PNG and the other `formats` ("svg", "pdf"); `zoom`
    fits y axes to the data (default: ratios, shares and counts from 0)."""
    from blocklab.sweeps import write_report

    return str(write_report(folder, out, metrics=metrics, title=title, formats=formats, zoom=zoom))

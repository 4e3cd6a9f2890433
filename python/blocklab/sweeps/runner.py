"""Running a sweep's cells: in this process (threads: the engine releases the
GIL), or as Ray tasks, one per cell; journaled as they finish, resumable.

Counted cells that share a trace run through `_core.run_stacks_count`: one
pass over the trace feeds a batch of stacks (`stack::batch` keeps each
result exactly what the stack gets alone). Timed cells, recipe tasks and
Ray tasks run one cell per call.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import math
import os
import queue
import socket
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from blocklab.sweeps import results as res
from blocklab.sweeps.provenance import FileHashes, blocklab_version, process_provenance
from blocklab.sweeps.spec import Cell, Sweep, SweepError, TraceRef, cell_key, toml_value

# Largest number of cells fed by one pass over a trace. Sharing a pass saves
# reading the trace, but the stacks' caches then compete for the CPU's caches:
# on the VDF grid (docs/sweeps.md) 4 stacks per pass took 0.85-1.0x the CPU
# time of one by one, 8 up to 1.2x, 16-112 1.2-1.4x.
MAX_BATCH = 4


def _no_inputs(cell: Cell) -> list[str]:
    return []


@dataclass(frozen=True)
class Task:
    """Cells that are not stack runs (a recipe's own unit of work, e.g. one drive
    validated against its measured trace). `run(cell)` returns the cell's result
    (a JSON-able dict); `inputs(cell)` lists the files besides the trace that
    determine it (their digests go into the cell key). Name it in
    `Sweep.task` as `"module:NAME"` so that Ray workers can import it."""

    run: Callable[[Cell], dict]
    inputs: Callable[[Cell], list[str]] = _no_inputs


def load_task(name: str) -> Task:
    mod, _, attr = name.partition(":")
    if not attr:
        raise SweepError(f"task `{name}`: expected module:NAME")
    try:
        t = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise SweepError(f"task `{name}`: {e}") from None
    if not isinstance(t, Task):
        raise SweepError(f"task `{name}` is not a blocklab.sweeps.Task")
    return t


@dataclass(frozen=True)
class Job:
    """A cell as handed to a worker (picklable)."""

    cell: Cell
    key: str
    stack: str | None
    executor: str
    task: str
    skip_bad: bool


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _error_text(e: BaseException) -> str:
    from blocklab import BlocklabError

    return str(e) if isinstance(e, BlocklabError) else f"{type(e).__name__}: {e}"


def _names_nothing(message: str) -> bool:
    """Whether a stack error says a name does not exist: an unknown key, policy,
    order or other name (the engine's `unknown ...` errors), or a device model
    that does not load."""
    return "unknown " in message or any(f"key `{k}`" in message for k in MODEL_KEYS)


def _describe(cell: Cell) -> str:
    """A cell in an error: its case, parameters, trace and seed."""
    parts = [f"case {cell.case}"] if cell.case else []
    parts += [f"{k}={toml_value(v)}" for k, v in cell.params]
    if cell.trace is not None:
        parts.append(f"trace {cell.trace.name}")
    if cell.seed is not None:
        parts.append(f"seed {cell.seed}")
    return ", ".join(parts) or "the stack as it is"


def _record(job: Job, status: str, result: Any, error: str | None, started: str, wall: float) -> dict:
    return {"cell": job.key, "status": status, "error": error, "result": result, "started_at": started,
            "wall_s": wall, **process_provenance()}


def execute(job: Job, trace_path: str | None = None) -> dict:
    """Run one cell here; its journal record (never raises for a failing cell).
    `trace_path`: where the trace is on this worker, when not at its own path."""
    from blocklab import _core

    started, t0 = _now(), time.perf_counter()
    cell = job.cell
    if trace_path is not None and cell.trace is not None:
        cell = dataclasses.replace(cell, trace=dataclasses.replace(cell.trace, path=trace_path))
    try:
        if job.task == "stack":
            out = json.loads(_core.run_stack(job.stack, [cell.trace.path], format=cell.trace.format,
                                             executor=job.executor, sets=cell.sets(), skip_bad=job.skip_bad))
        else:
            out = load_task(job.task).run(cell)
        return _record(job, "ok", out, None, started, time.perf_counter() - t0)
    except Exception as e:  # a failing cell is a result, the sweep goes on
        return _record(job, "error", None, _error_text(e), started, time.perf_counter() - t0)


def execute_batch(jobs: list[Job]) -> list[dict]:
    """Counted stack cells over one trace, in one pass where the engine can."""
    from blocklab import _core

    if len(jobs) == 1:
        return [execute(jobs[0])]
    started, t0 = _now(), time.perf_counter()
    t = jobs[0].cell.trace
    try:
        outs = _core.run_stacks_count([(j.stack, j.cell.sets()) for j in jobs], [t.path], t.format, jobs[0].skip_bad)
    except Exception as e:
        return [_record(j, "error", None, _error_text(e), started, time.perf_counter() - t0) for j in jobs]
    wall = (time.perf_counter() - t0) / len(jobs)  # the pass's time, shared out
    return [_record(j, "ok", json.loads(o), None, started, wall) if o is not None
            else _record(j, "error", None, e, started, wall) for j, (o, e) in zip(jobs, outs)]


def _units(jobs: list[Job], workers: int, batch: bool) -> list[list[Job]]:
    """Work units: batches of counted cells sharing a trace (each trace's cells
    split so that every worker has some), else single cells; largest first."""
    single = [[j] for j in jobs if not (batch and j.task == "stack" and j.executor == "count")]
    groups: dict[tuple, list[Job]] = {}
    for j in jobs:
        if batch and j.task == "stack" and j.executor == "count":
            groups.setdefault((j.cell.trace.path, j.cell.trace.format, j.skip_bad), []).append(j)
    units = []
    for g in groups.values():
        n = max(min(workers, len(g)), math.ceil(len(g) / MAX_BATCH))
        size = math.ceil(len(g) / n)
        units += [g[i:i + size] for i in range(0, len(g), size)]

    def cost(u: list[Job]) -> float:
        t = u[0].cell.trace
        return len(u) * (os.path.getsize(t.path) if t is not None and os.path.exists(t.path) else 1)

    return sorted(units + single, key=cost, reverse=True)


def run_local(jobs: list[Job], workers: int, batch: bool) -> Iterator[dict]:
    """Records as cells finish, `workers` threads. When the caller stops early (Ctrl-C),
    the threads take no new cell; the cells in the engine finish in the background."""
    todo: queue.Queue = queue.Queue()
    done: queue.Queue = queue.Queue()
    stop = threading.Event()
    units = _units(jobs, workers, batch)
    for u in units:
        todo.put(u)

    def work() -> None:
        while not stop.is_set():
            try:
                u = todo.get_nowait()
            except queue.Empty:
                return
            try:
                recs = execute_batch(u) if len(u) > 1 else [execute(u[0])]
            except BaseException as e:  # never lose a unit: report it failed
                recs = [_record(j, "error", None, _error_text(e), _now(), 0.0) for j in u]
            done.put(recs)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(workers, len(units))))]
    for t in threads:
        t.start()
    try:
        for _ in range(len(units)):
            while True:
                try:
                    recs = done.get(timeout=0.2)  # a timeout keeps Ctrl-C responsive
                    break
                except queue.Empty:
                    continue
            yield from recs
    finally:
        stop.set()


def _materialize(data: bytes, sha: str, name: str) -> str:
    """A shipped trace as a file on this worker (once per node and content)."""
    folder = Path(tempfile.gettempdir()) / "blocklab-shipped"
    folder.mkdir(exist_ok=True)
    path = folder / f"{sha[:16]}-{name}"
    if not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return str(path)


def _ray_execute(job: Job, shipped: bytes | None, sha: str | None) -> dict:
    """One cell as a Ray task; its record names the Ray node that ran it (`node`:
    the host name does not tell two nodes of one machine apart)."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    trace = job.cell.trace
    path = None
    if shipped is not None:
        path = _materialize(shipped, sha, Path(trace.path).name)
    elif trace is not None and not os.path.exists(trace.path):
        # Read by path: this node does not see the driver's file system there.
        msg = (f"{trace.path}: no such file on Ray node {node[:12]} ({socket.gethostname()}): traces are read by "
               "path unless shipped; share the folder, or ship it (`ship = true` on the trace, or --ship-traces)")
        return _record(job, "error", None, msg, _now(), 0.0) | {"node": node}
    return execute(job, path) | {"node": node}


def _placements(ray, n: int) -> list:
    """Where each of `n` cells is asked to run: the first cell of each node of the
    cluster that has a CPU on that node (soft: elsewhere if the node is gone), the
    others SPREAD over the nodes. A worker Ray leases takes the next queued cell as
    soon as it is done, so without the first round a sweep of short cells runs
    wholly on the node whose worker is up first; with it every node starts at once."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(nd["NodeID"] for nd in ray.nodes() if nd.get("Alive") and nd.get("Resources", {}).get("CPU", 0) >= 1)
    first = [NodeAffinitySchedulingStrategy(node_id=nd, soft=True) for nd in nodes[:n]]
    return first + ["SPREAD"] * (n - len(first))


def run_ray(jobs: list[Job], address: str, workers: int | None, ship_all: bool,
            trace_sha: dict[str, str]) -> Iterator[dict]:
    """Records as Ray tasks finish: one task per cell, on a cluster (`address`)
    or a local Ray (`"local"`, `workers` CPUs)."""
    try:
        import ray
    except ImportError:
        raise SweepError("--ray needs Ray: pip install 'blocklab[ray]'") from None
    import logging

    started_here = not ray.is_initialized()
    if started_here:
        opts: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        try:
            if address == "local":
                ray.init(num_cpus=workers, **opts)
            else:
                ray.init(address=address, **opts)
        except Exception as e:  # no cluster there, a version mismatch...
            raise SweepError(f"--ray {address}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_execute)
        placements = _placements(ray, len(jobs))
        shipped: dict[str, Any] = {}
        pending: dict[Any, Job] = {}
        for j, how in zip(jobs, placements):
            t = j.cell.trace
            data = None
            if t is not None and (t.ship or ship_all):
                if t.path not in shipped:
                    shipped[t.path] = ray.put(Path(t.path).read_bytes())
                data = shipped[t.path]
            ref = remote.options(scheduling_strategy=how).remote(j, data, trace_sha.get(t.path) if t is not None else None)
            pending[ref] = j
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for r in ready:
                j = pending.pop(r)
                try:
                    yield ray.get(r)
                except Exception as e:  # the worker died, or Ray failed: the cell failed
                    yield _record(j, "error", None, _error_text(e), _now(), 0.0) | {"host": "?", "node": None}
    finally:
        if started_here:
            ray.shutdown()


def _lookup(tree: dict, dotted: str):
    cur: Any = tree
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


MODEL_KEYS = ("device.model", "replay.reference")


def key_fields(sw: Sweep, cell: Cell, hashes: FileHashes, stack_sha: str | None, stack_tree: dict,
               task: Task | None) -> dict:
    """Everything that determines a cell's result (its key is their hash): the
    engine version, the task or stack file (content) and executor, the device
    model files the cell uses (content), the parameters, the trace (content and
    format), skip_bad, the seed. Paths and labels are not part of it."""
    f: dict[str, Any] = {"blocklab_version": blocklab_version(), "task": sw.task, "params": dict(cell.params),
                         "seed": cell.seed, "skip_bad": sw.skip_bad}
    if cell.trace is not None:
        f["trace_sha256"] = hashes(cell.trace.path)
        f["trace_format"] = cell.trace.format
    if task is None:
        f["executor"] = cell.executor or sw.executor
        f["stack_sha256"] = stack_sha
        files = {}
        base = Path(sw.stack).parent
        p = cell.param_dict
        for k in MODEL_KEYS:
            v = p.get(k, _lookup(stack_tree, k))
            if isinstance(v, str) and (base / v).is_file():
                files[k] = hashes(base / v)
        f["files"] = files
    else:
        f["inputs"] = {str(i): hashes(x) for i, x in enumerate(task.inputs(cell))}
    return f


class _Progress:
    """The progress bar: cells done of those to run, failures, time left."""

    def __init__(self, how, total: int, skipped: int, name: str):
        self.how, self.total, self.done, self.failed = how, total, 0, 0
        self.bar = None
        if how is True:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("cells, {task.fields[failed]} failed"), TimeElapsedColumn(),
                                TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True))
            name = name if len(name) <= 24 else name[:23] + "…"
            desc = f"sweep {name}" + (f" ({skipped} done before)" if skipped else "")
            self.task = self.bar.add_task(desc, total=total, failed=0)
            self.bar.start()

    def advance(self, rec: dict) -> None:
        self.done += 1
        self.failed += rec["status"] != "ok"
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed)
        elif callable(self.how):
            self.how(self.done, self.total, self.failed)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run_sweep(sw: Sweep, out: str | os.PathLike, *, jobs: int | None = None, ray: str | None = None,
              batch: bool = True, ship: bool = False, progress=True, command: str | None = None):
    """Run the cells of `sw` not yet finished in `out` and write `out/results.parquet`;
    returns every cell's row as a pandas DataFrame. `jobs`: threads here (default 1),
    or the CPUs of a local Ray (default: all). `progress`: True (a bar on stderr),
    False, or `fn(done, total, failed)`."""
    from blocklab import _core

    if jobs is not None and jobs < 1:
        raise SweepError(f"--jobs must be at least 1, not {jobs}")
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    hashes = FileHashes(outdir / "hashes.json")
    task = None if sw.task == "stack" else load_task(sw.task)
    stack_sha = hashes(sw.stack) if task is None else None
    stack_tree = tomllib.loads(Path(sw.stack).read_text()) if task is None else {}
    cells = sw.cells()
    param_keys: dict[str, None] = {}
    for c in cells:
        for k, _ in c.params:
            param_keys.setdefault(k, None)
    infos: list[dict] = []
    for c in cells:
        kf = key_fields(sw, c, hashes, stack_sha, stack_tree, task)
        infos.append({"key": cell_key(kf), "params": c.param_dict, "case": c.case, "seed": c.seed,
                      "trace": c.trace.path if c.trace else None, "trace_label": c.trace.name if c.trace else None,
                      "trace_format": c.trace.format if c.trace else None, "trace_sha256": kf.get("trace_sha256"),
                      "stack_sha256": stack_sha, "executor": (c.executor or sw.executor) if task is None else sw.task})
    hashes.save()
    meta = {"sweep": sw.to_dict(), "command": command, "varied": sw.varied(), "cells": len(cells),
            "param_keys": list(param_keys), "written_at": _now()}
    (outdir / res.META).write_text(json.dumps(meta, indent=1))

    journal = res.Journal(outdir)
    records = journal.records()
    todo: list[Job] = []
    seen: set[str] = set()
    skipped = 0
    for c, info in zip(cells, infos):
        k = info["key"]
        if k in seen:
            continue
        seen.add(k)
        if records.get(k, {}).get("status") == "ok":
            skipped += 1
            continue
        todo.append(Job(c, k, sw.stack, c.executor or sw.executor, sw.task, sw.skip_bad))

    # Every cell's stack file with its overrides is checked before anything
    # runs. A name that does not exist (a key, a policy, an order, a device
    # model that does not load) is a mistake in the sweep file, found before
    # hours of other cells: the sweep stops. A combination the engine refuses
    # (too many failed disks) is a result of that cell: it is recorded as
    # failed and the others run; unless no cell can run at all.
    bad: dict[str, str] = {}
    if task is None:
        for j in todo:
            try:
                _core.check_stack(j.stack, j.cell.sets())
            except Exception as e:
                msg = _error_text(e)
                if _names_nothing(msg):
                    raise SweepError(f"{sw.source or 'sweep'}: cell {j.cell.index} ({_describe(j.cell)}): {msg}") from None
                bad[j.key] = msg
        if todo and len(bad) == len(todo) and not skipped:
            raise SweepError(f"{sw.source or 'sweep'}: no cell can run: {next(iter(bad.values()))}")

    bar = _Progress(progress, len(todo), skipped, sw.name or (Path(sw.source).stem if sw.source else ""))
    try:
        for j in todo:
            if j.key in bad:
                rec = _record(j, "error", None, bad[j.key], _now(), 0.0)
                journal.append(rec)
                records[j.key] = rec
                bar.advance(rec)
        runnable = [j for j in todo if j.key not in bad]
        if runnable:
            if ray:
                trace_sha = {t.path: hashes(t.path) for t in sw.traces}
                stream = run_ray(runnable, ray, jobs if ray == "local" else None, ship, trace_sha)
            else:
                stream = run_local(runnable, jobs or 1, batch)
            for rec in stream:
                journal.append(rec)
                records[rec["cell"]] = rec
                bar.advance(rec)
    finally:
        bar.close()
        journal.close()
        rows = [res.row(info, records[info["key"]], param_keys) for info in infos if info["key"] in records]
        res.write(outdir, rows, meta)
    return res.load(outdir)

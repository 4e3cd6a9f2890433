"""The sweep file: a stack, an executor, traces, a grid of `--set` keys, cases, seeds.

A sweep expands to *cells*: every trace × every case × every point of the
grid (the cartesian product of its lists, first key outermost) × every seed.
A cell is what `blocklab run STACK --trace T --executor E --set K=V ...`
runs; its key (`cell_key`) is a hash of everything that determines its
result, so that a re-run can skip it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

EXECUTORS = ("count", "timed")
TOP_KEYS = ("name", "stack", "executor", "traces", "grid", "cases", "seeds", "skip_bad", "report")
TRACE_KEYS = ("path", "format", "label", "ship", "params")
REPORT_KEYS = ("metrics", "title")
# Keys of a case that are not stack keys: its name, the one trace it is for, its executor.
CASE_META = ("name", "trace", "executor")
# The parameter that removes keys or sections of the stack file (`--unset`):
# a list of dotted keys, applied before the cell's `--set` values.
UNSET = "unset"
# Version of the cell-key recipe: bump it when what goes into the key changes.
KEY_VERSION = 1


class SweepError(ValueError):
    """Bad sweep file or arguments: one line naming the file and the key (the CLI exits with status 2)."""


@dataclass(frozen=True)
class TraceRef:
    """A trace of a sweep: its file (absolute), format, label in results,
    whether a Ray run ships its bytes to the workers (else they read the path),
    and the parameters its cells take whatever the grid and cases say (values
    that depend on the trace: its replay speed, the disk it fits on), as
    `(dotted key, value)` pairs."""

    path: str
    format: str = "auto"
    label: str = ""
    ship: bool = False
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.label or Path(self.path).name


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its parameters (dotted stack keys → values, in grid
    order), the case it comes from, its trace and seed (None: the stack's own),
    and its executor when its case names one (None: the sweep's)."""

    index: int
    params: tuple[tuple[str, Any], ...]
    trace: TraceRef | None
    seed: int | None = None
    case: str | None = None
    executor: str | None = None

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    def sets(self) -> list[str]:
        """The cell as overrides: `-KEY` for each key it unsets (`--unset KEY`), then
        `KEY=VALUE` for each it sets (`--set`, values written as TOML)."""
        out = [f"-{k}" for p, v in self.params if p == UNSET for k in unset_keys(v)]
        out += [f"{k}={toml_value(v)}" for k, v in self.params if k != UNSET]
        if self.seed is not None:
            out.append(f"seed={self.seed}")
        return out


@dataclass
class Sweep:
    """A sweep. `stack` and trace paths are absolute; `task` is `"stack"` (run
    the stack file) or `"module:NAME"` of a `blocklab.sweeps.Task` (recipes
    whose cells are not stacks, e.g. drive validation)."""

    stack: str | None
    traces: list[TraceRef]
    executor: str = "timed"
    grid: dict[str, list] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[int] | None = None
    skip_bad: bool = False
    name: str = ""
    task: str = "stack"
    source: str | None = None  # the sweep file, when there is one
    report: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        """Every cell, in order: trace, case, grid point (first key outermost), seed. A case
        with a `trace` is combined with that trace only."""
        keys = list(self.grid)
        points = list(itertools.product(*(self.grid[k] for k in keys)))
        cases = self.cases or [{}]
        seeds: list[int | None] = list(self.seeds) if self.seeds else [None]
        traces: list[TraceRef | None] = list(self.traces) or [None]
        out = []
        for t in traces:
            for case in cases:
                if "trace" in case and (t is None or case["trace"] != t.name):
                    continue
                name = case.get("name")
                case_params = [(k, v) for k, v in case.items() if k not in CASE_META]
                trace_params = list(t.params) if t is not None else []
                for p in points:
                    params = tuple(trace_params) + tuple(case_params) + tuple(zip(keys, p))
                    for s in seeds:
                        out.append(Cell(len(out), params, t, s, name, case.get("executor")))
        return out

    def varied(self) -> list[str]:
        """The parameters that take more than one value over the cells: the cases' (`case`
        when they are named), then the grid's in order, then `trace` and `seed` when there
        are several."""
        out = [k for k, vs in self.grid.items() if len({canonical(v) for v in vs}) > 1]
        if len(self.cases) > 1 and all(c.get("name") for c in self.cases):
            out.insert(0, "case")  # named cases: the name stands for the keys they set
        else:
            case_keys: list[str] = []
            for c in self.cases:
                for k in c:
                    if k not in CASE_META and k not in case_keys:
                        case_keys.append(k)
            for k in reversed(case_keys):
                if len({canonical(c.get(k)) for c in self.cases}) > 1 and k not in out:
                    out.insert(0, k)
        if len(self.traces) > 1:
            out.append("trace")
        if self.seeds and len(self.seeds) > 1:
            out.append("seed")
        return out

    def to_dict(self) -> dict:
        return {
            "name": self.name, "stack": self.stack, "executor": self.executor, "task": self.task,
            "traces": [t.__dict__ | {"params": dict(t.params)} for t in self.traces], "grid": self.grid, "cases": self.cases,
            "seeds": self.seeds, "skip_bad": self.skip_bad, "source": self.source, "report": self.report,
        }


def unset_keys(v: Any) -> list[str]:
    """The keys of an `unset` value: one dotted key or a list of them."""
    return [v] if isinstance(v, str) else list(v)


def toml_value(v: Any) -> str:
    """`v` as a TOML value (what `--set` parses)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_toml_str(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    return _toml_str(str(v))


def _toml_str(s: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def canonical(v: Any) -> str:
    """A value as canonical JSON text (type-exact: 5, 5.0 and "5" differ)."""
    return json.dumps(_tagged(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tagged(v: Any):
    # JSON would print 5 and 5.0 alike in some libraries and True as 1 in none; tag floats to be sure.
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return {"f": repr(v)}
    if isinstance(v, (list, tuple)):
        return [_tagged(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _tagged(x) for k, x in v.items()}
    return {"s": str(v)}


def cell_key(fields: Mapping[str, Any]) -> str:
    """The key of a cell: sha256 (first 16 hex digits) of the canonical JSON of
    everything that determines its result (see `Sweep` / `runner.key_fields`).
    Parameters are given as a mapping, so their order does not matter."""
    text = canonical({"key_version": KEY_VERSION, **fields})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _flatten_keys(table: Mapping, prefix: str = "") -> dict[str, Any]:
    """`{"cache": {"0": {"policy": [...]}}}` (unquoted dotted TOML keys) → `{"cache.0.policy": [...]}`."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten_keys(v, key + "."))
        else:
            out[key] = v
    return out


def _where(source: str | None) -> str:
    return source or "sweep"


def from_dict(data: Mapping[str, Any], base: Path, source: str | None = None) -> Sweep:
    """A sweep from the TOML tree of a sweep file; paths are relative to `base`."""
    where = _where(source)

    def err(key: str, msg: str) -> SweepError:
        return SweepError(f"{where}: key `{key}`: {msg}")

    for k in data:
        if k not in TOP_KEYS:
            raise err(k, f"unknown key; valid: {', '.join(TOP_KEYS)}")
    stack = data.get("stack")
    if not isinstance(stack, str) or not stack:
        raise err("stack", "a stack file (path relative to the sweep file) is required")
    stack_path = (base / stack).resolve()
    if not stack_path.is_file():
        raise err("stack", f"{stack_path}: no such file")
    executor = data.get("executor", "timed")
    if executor not in EXECUTORS:
        raise err("executor", f"unknown executor `{executor}`; valid: {', '.join(EXECUTORS)}")
    traces_in = data.get("traces")
    if not isinstance(traces_in, list) or not traces_in:
        raise err("traces", "give one or more [[traces]] tables with `path` (and `format`)")
    traces = []
    for i, t in enumerate(traces_in):
        if not isinstance(t, Mapping):
            raise err(f"traces.{i}", "must be a table with `path` and `format`")
        for k in t:
            if k not in TRACE_KEYS:
                raise err(f"traces.{i}.{k}", f"unknown key; valid: {', '.join(TRACE_KEYS)}")
        p = t.get("path")
        if not isinstance(p, str) or not p:
            raise err(f"traces.{i}.path", "a trace file is required")
        path = (base / p).resolve()
        if not path.is_file():
            raise err(f"traces.{i}.path", f"{path}: no such file")
        fmt = t.get("format", "auto")
        formats = ["auto", *trace_format_names()]
        if not isinstance(fmt, str) or fmt not in formats:
            raise err(f"traces.{i}.format", f"unknown trace format `{fmt}`; valid: {', '.join(formats)}")
        label = t.get("label", "")
        ship = t.get("ship", False)
        if not isinstance(label, str):
            raise err(f"traces.{i}.label", "must be text")
        if not isinstance(ship, bool):
            raise err(f"traces.{i}.ship", "must be true or false")
        tparams = t.get("params", {})
        if not isinstance(tparams, Mapping):
            raise err(f"traces.{i}.params", "must be a table of dotted stack keys to values")
        tparams = _flatten_keys(tparams)
        for k in tparams:
            _check_param_key(k, lambda m, k=k: err(f"traces.{i}.params.{k}", m))
            if k == UNSET:
                _check_unset(tparams[k], lambda m, k=k: err(f"traces.{i}.params.{k}", m))
        traces.append(TraceRef(str(path), fmt, label, ship, tuple(tparams.items())))
    grid_in = data.get("grid", {})
    if not isinstance(grid_in, Mapping):
        raise err("grid", "must be a table of dotted stack keys to lists of values")
    grid = _flatten_keys(grid_in)
    for k, v in grid.items():
        _check_param_key(k, lambda m, k=k: err(f"grid.{k}", m))
        if not isinstance(v, list) or not v:
            raise err(f"grid.{k}", "must be a non-empty list of values")
        if k == UNSET:
            for x in v:
                _check_unset(x, lambda m, k=k: err(f"grid.{k}", m))
    cases_in = data.get("cases", [])
    if not isinstance(cases_in, list):
        raise err("cases", "give [[cases]] tables of dotted stack keys to values")
    cases = []
    for i, c in enumerate(cases_in):
        if not isinstance(c, Mapping):
            raise err(f"cases.{i}", "must be a table of dotted stack keys to values")
        name = c.get("name")
        if name is not None and not isinstance(name, str):
            raise err(f"cases.{i}.name", "must be text")
        meta = {"name": name} if name is not None else {}
        if "trace" in c:
            names = [t.name for t in traces]
            if c["trace"] not in names:
                raise err(f"cases.{i}.trace", f"`{c['trace']}` is not the label of a trace; labels: {', '.join(names)}")
            meta["trace"] = c["trace"]
        if "executor" in c:
            if c["executor"] not in EXECUTORS:
                raise err(f"cases.{i}.executor", f"unknown executor `{c['executor']}`; valid: {', '.join(EXECUTORS)}")
            meta["executor"] = c["executor"]
        flat = _flatten_keys({k: v for k, v in c.items() if k not in CASE_META})
        for k in flat:
            _check_param_key(k, lambda m, k=k: err(f"cases.{i}.{k}", m))
            if k in grid:
                raise err(f"cases.{i}.{k}", "is also a grid key: a key is varied by the grid or by cases, not both")
            if k == UNSET:
                _check_unset(flat[k], lambda m, k=k: err(f"cases.{i}.{k}", m))
        cases.append(meta | flat)
    for i, t in enumerate(traces):
        for k, _ in t.params:
            if k in grid or any(k in c for c in cases):
                raise err(f"traces.{i}.params.{k}", "is also varied by the grid or the cases: a key is set by one of them")
    seeds = data.get("seeds")
    if seeds is not None:
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            seeds = [seeds]
        if not isinstance(seeds, list) or not seeds or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
            raise err("seeds", "must be a non-negative integer or a non-empty list of them")
        if len(set(seeds)) != len(seeds):
            raise err("seeds", "lists a seed twice")
    skip_bad = data.get("skip_bad", False)
    if not isinstance(skip_bad, bool):
        raise err("skip_bad", "must be true or false")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise err("name", "must be text")
    report = data.get("report", {})
    if not isinstance(report, Mapping):
        raise err("report", "must be a table (metrics, title)")
    for k in report:
        if k not in REPORT_KEYS:
            raise err(f"report.{k}", f"unknown key; valid: {', '.join(REPORT_KEYS)}")
    if "metrics" in report and not (isinstance(report["metrics"], list)
                                    and all(isinstance(m, str) for m in report["metrics"])):
        raise err("report.metrics", "must be a list of result columns (e.g. \"array.rgr\")")
    return Sweep(stack=str(stack_path), traces=traces, executor=executor, grid=grid, cases=cases, seeds=seeds,
                 skip_bad=skip_bad, name=name or (Path(source).stem if source else ""), source=source,
                 report=dict(report))


def trace_format_names() -> list[str]:
    """The trace formats the engine reads (`blocklab trace formats`)."""
    from blocklab import _core

    return [name for name, _ in _core.trace_formats()]


def _check_param_key(key: str, err) -> None:
    if key == "seed":
        raise err("the seed is varied by the top-level `seeds` list")
    if not key or any(not part for part in key.split(".")):
        raise err("is not a dotted stack key")


def _check_unset(value: Any, err) -> None:
    """An `unset` value (a case's or trace's), or each value of an `unset` grid list."""
    keys = [value] if isinstance(value, str) else value
    if not isinstance(keys, list) or not all(isinstance(k, str) and k and all(k.split(".")) for k in keys):
        raise err("must be a dotted stack key or a list of them (e.g. [\"array.rebuild\"])")


def load_sweep(path: str | os.PathLike) -> Sweep:
    """Read and check a sweep file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise SweepError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise SweepError(f"{p}: is a folder, not a sweep file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{p}: {e}") from None
    return from_dict(data, p.resolve().parent, str(p))


def build(stack: str | os.PathLike, traces: Iterable, *, executor: str = "timed", grid: Mapping | None = None,
          cases: Sequence[Mapping] = (), seeds: Sequence[int] | None = None, skip_bad: bool = False,
          name: str = "") -> Sweep:
    """A sweep built in code (same checks as a file). `traces`: paths, `(path, format)` pairs,
    `(path, format, label)` triples or `TraceRef`s."""
    tl = []
    for t in traces:
        if isinstance(t, TraceRef):
            tl.append(t.__dict__ | {"params": dict(t.params)})
        elif isinstance(t, (str, os.PathLike)):
            tl.append({"path": os.fspath(t)})
        else:
            t = list(t)
            d = {"path": os.fspath(t[0]), "format": t[1] if len(t) > 1 else "auto"}
            if len(t) > 2:
                d["label"] = t[2]
            tl.append(d)
    data: dict[str, Any] = {"stack": os.fspath(stack), "executor": executor, "traces": tl,
                            "grid": dict(grid or {}), "cases": [dict(c) for c in cases], "skip_bad": skip_bad}
    if seeds is not None:
        data["seeds"] = list(seeds)
    if name:
        data["name"] = name
    return from_dict(data, Path.cwd(), None)

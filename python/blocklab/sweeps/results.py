"""A sweep's results on disk.

* `DIR/cells.jsonl` — the journal: one JSON line per finished cell (its key,
  `ok` or `error`, the stack's JSON result or the error, provenance), appended
  and flushed as each cell finishes. It is what makes a sweep resumable: a
  re-run skips the cells whose key has an `ok` line.
* `DIR/results.parquet` — one row per cell of the sweep (in cell order),
  written from the journal at the end of a run (and when one is interrupted).
* `DIR/meta.json` — the sweep, the command, the varied parameters (for the report).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

JOURNAL = "cells.jsonl"
RESULTS = "results.parquet"
META = "meta.json"

# Columns of every row, before the parameters and the figures.
HEAD = ("cell", "status", "error")
# Provenance columns, after the figures.
PROVENANCE = ("blocklab_version", "git_commit", "stack_sha256", "trace_sha256", "trace_format", "seed",
              "started_at", "wall_s", "host", "node", "cell")
# Columns that differ between two runs of the same cells (time, place).
VOLATILE = ("started_at", "wall_s", "host", "node")
# Lists of records kept whole (as JSON text) instead of one column per element:
# series over time (also any list of records with a `t_ms`).
SERIES = ("timing.timeseries", "rebuild.series", "tier.timeline")


def flatten(obj: Any, prefix: str = "", out: dict | None = None) -> dict[str, Any]:
    """A JSON result as dotted columns: objects and lists of objects are walked
    (`layers.0.miss_ratio`, `array.ops_by_cause.user.reads`); lists of numbers
    stay whole (`array.failed`, `response.cdf_ms`); series over time
    (`timing.timeseries`, `rebuild.series`, `tier.timeline`) are kept as JSON text."""
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}{k}"
            if key in SERIES or (isinstance(v, list) and v and isinstance(v[0], dict) and "t_ms" in v[0]):
                out[key] = json.dumps(v)
            elif isinstance(v, dict) or (isinstance(v, list) and v and all(isinstance(x, dict) for x in v)):
                flatten(v, key + ".", out)
            else:
                out[key] = v
    elif isinstance(obj, list):  # a list of records
        for i, v in enumerate(obj):
            flatten(v, f"{prefix}{i}.", out)
    return out


class Journal:
    """The append-only record of finished cells (see the module doc)."""

    def __init__(self, folder: Path):
        self.path = folder / JOURNAL
        self._f = None

    def records(self) -> dict[str, dict]:
        """The last record of each cell key (a line cut short by a crash is ignored)."""
        out: dict[str, dict] = {}
        if not self.path.exists():
            return out
        with open(self.path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and "cell" in r:
                    out[r["cell"]] = r
        return out

    def append(self, record: dict) -> None:
        if self._f is None:
            # A line cut short by a crash must not swallow the next record.
            if self.path.exists() and self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    torn = f.read(1) != b"\n"
            else:
                torn = False
            self._f = open(self.path, "a")
            if torn:
                self._f.write("\n")
        self._f.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def row(cell_info: dict, record: dict, param_keys: Iterable[str] = ()) -> dict[str, Any]:
    """One Parquet row: the cell's key and status, its parameters under their
    dotted keys, its trace, every figure of its result, then the provenance.
    A figure whose name is also a parameter's (`array.disks`) is kept as
    `result.array.disks` (`param_keys`: every parameter of the sweep)."""
    out: dict[str, Any] = {"cell": record["cell"], "status": record["status"], "error": record.get("error")}
    if cell_info.get("case") is not None:
        out["case"] = cell_info["case"]
    params = cell_info["params"]
    out.update(params)
    out["trace"] = cell_info.get("trace")
    out["trace_label"] = cell_info.get("trace_label")
    out["executor"] = cell_info.get("executor")
    figures = flatten(record.get("result") or {})
    figures.pop("seed", None)  # the provenance column
    figures.pop("executor", None)
    taken = set(out) | set(param_keys) | set(PROVENANCE)
    for k, v in figures.items():
        out[f"result.{k}" if k in taken else k] = v
    seed = cell_info.get("seed")
    if seed is None:
        seed = (record.get("result") or {}).get("seed")
    out.update({
        "blocklab_version": record.get("blocklab_version"), "git_commit": record.get("git_commit"),
        "stack_sha256": cell_info.get("stack_sha256"), "trace_sha256": cell_info.get("trace_sha256"),
        "trace_format": cell_info.get("trace_format"), "seed": seed, "started_at": record.get("started_at"),
        "wall_s": record.get("wall_s"), "host": record.get("host"),
        # Empty, not missing, off Ray: every provenance column is filled in every row.
        "node": record.get("node") or "",
    })
    return out


def _column(values: list):
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        # Mixed types (a grid of 1000 and "10%"): text, lists as JSON.
        return pa.array([None if v is None else v if isinstance(v, str) else json.dumps(v) for v in values],
                        type=pa.string())


def table(rows: Iterable[dict], meta: dict | None = None):
    """Rows (dicts with different keys) as a pyarrow Table: the union of their
    columns in first-seen order, missing values null."""
    import pyarrow as pa

    rows = list(rows)
    cols: dict[str, None] = {}
    for r in rows:
        for k in r:
            cols.setdefault(k, None)
    # Figures before provenance whatever order the rows brought them in.
    names = [c for c in cols if c not in PROVENANCE or c in HEAD] + [c for c in PROVENANCE if c in cols and c not in HEAD]
    arrays = [_column([r.get(c) for r in rows]) for c in names]
    t = pa.table(arrays, names=names) if names else pa.table({})
    if meta is not None:
        t = t.replace_schema_metadata({b"blocklab.sweep": json.dumps(meta).encode()})
    return t


def write(folder: Path, rows: list[dict], meta: dict | None = None) -> Path:
    import pyarrow.parquet as pq

    path = folder / RESULTS
    tmp = folder / (RESULTS + ".tmp")
    pq.write_table(table(rows, meta), tmp)
    tmp.replace(path)
    return path


def load(folder: str | os.PathLike):
    """The results of a sweep (`DIR` or `DIR/results.parquet`) as a pandas DataFrame."""
    import pandas as pd

    p = Path(folder)
    if p.is_dir():
        p = p / RESULTS
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory (no sweep results here)", str(p))
    return pd.read_parquet(p)


def load_meta(folder: str | os.PathLike) -> dict:
    p = Path(folder) / META
    return json.loads(p.read_text()) if p.exists() else {}

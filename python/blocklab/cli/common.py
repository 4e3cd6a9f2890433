"""Shared CLI plumbing: error reporting, progress, JSON output."""

from __future__ import annotations

import json
import sys

from blocklab._core import BlocklabError

EXIT_BAD_INPUT = 2


def fail(message: str) -> None:
    """Report bad input and exit with status 2 (never a traceback)."""
    print(f"blocklab: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def run_guarded(app) -> None:
    try:
        app(standalone_mode=True)
    except BlocklabError as e:
        fail(str(e))
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        fail(f"{e.filename}: {e.strerror}")
    except ValueError as e:
        fail(str(e))


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2))


def footprint_caption(sizes: str, unique, basis: str, extra: str = "") -> str:
    """The footprint `%` sizes were taken of, e.g. `1% of 93,029 unique blocks (reads and writes)`
    (`cache` and `rgr` count the distinct blocks of the stream they simulate)."""
    parts = []
    if unique is not None:
        shares = ", ".join(s.strip() for s in sizes.split(",") if s.strip().endswith("%"))
        parts.append(f"{shares} of {unique:,} unique blocks ({basis})")
    if extra:
        parts.append(extra)
    return "; ".join(parts)


def place_timeseries(out: dict, series, path) -> None:
    """A timed run's per-interval series: to a CSV at `path` (its name goes into `out`),
    or back into `out` when no path is given."""
    if path is not None:
        import csv

        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["t_ms", "issued", "completed", "avg_response_ms", "utilization"])
            w.writeheader()
            w.writerows(series or [])
        out["timeseries_csv"] = str(path)
    elif series is not None:
        out["timeseries"] = series


# Options shared by the commands that read a trace.
import typer  # noqa: E402

FormatOpt = typer.Option("auto", "--format", "-f", help="Trace format (`auto` sniffs it); see `blocklab trace formats`.")
BlockSizeOpt = typer.Option(4096, "--block-size", help="Block size in bytes.")
SkipBadOpt = typer.Option(False, "--skip-bad", help="Skip malformed records (and report how many) instead of stopping.")
ReadsOnlyOpt = typer.Option(False, "--reads-only", help="Drop writes from the access stream.")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
BlkparseEventOpt = typer.Option("Q", "--blkparse-event", help="blkparse: Q (queue, default) or D (dispatch) events.")

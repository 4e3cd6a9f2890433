"""Shared CLI plumbing: error reporting, progress, JSON output."""

from __future__ import annotations

import sys

EXIT_BAD_INPUT = 2


def fail(message: str) -> None:
    """Report bad input and exit with status 2 (never a traceback)."""
    print(f"blocklab: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def run_guarded(app) -> None:
    try:
        app(standalone_mode=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        fail(f"{e.filename}: {e.strerror}")
    except Exception as e:
        if _is_engine_error(e) or isinstance(e, ValueError):
            fail(str(e))
        raise


def _is_engine_error(e: BaseException) -> bool:
    # The engine is not imported by commands that never call it (`--help`);
    # then none of its errors can have been raised.
    core = sys.modules.get("blocklab._core")
    return core is not None and isinstance(e, core.BlocklabError)


def print_json(obj) -> None:
    import json

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


def literal(text: str) -> str:
    """Help text shown as written: the help formatter reads rich markup, which
    would eat TOML section names (`[array]`, `[[cache]]`) as style tags.

    Markup reads `[` as a tag's start when a letter, `#`, `/` or `@` follows it
    and a `]` closes it before any other `[`; a backslash before such a `[`
    makes it plain text. Help texts are built at import, on every run, so
    this inserts those backslashes itself rather than import rich (and its
    colour, style and text modules) into runs that never show help. A text
    with backslashes of its own goes to rich's `escape`, which escapes them
    too. tests/test_cli_startup.py holds the two to the same output."""
    if "\\" in text:
        from rich.markup import escape

        return escape(text)
    import re

    return re.sub(r"\[(?=[a-z#/@][^[]*?\])", r"\\[", text)


# Options shared by the commands that read a trace.
import typer  # noqa: E402

FormatOpt = typer.Option("auto", "--format", "-f", help="Trace format (`auto` sniffs it); see `blocklab trace formats`.")
BlockSizeOpt = typer.Option(4096, "--block-size", help="Block size in bytes.")
SkipBadOpt = typer.Option(False, "--skip-bad", help="Skip malformed records (and report how many) instead of stopping.")
ReadsOnlyOpt = typer.Option(False, "--reads-only", help="Drop writes from the access stream.")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
SortOpt = typer.Option(False, "--sort", help="Put requests whose times go back in time order within --sort-window and report how many moved (default: such a trace is an error naming the line).")
SortWindowOpt = typer.Option(None, "--sort-window", help="Seconds of trace time --sort may move a request (default 1). Implies --sort.")


def sort_window(sort: bool, window) -> float | None:
    """The reorder window of --sort / --sort-window (None: times must not go back)."""
    if window is not None and window < 0:
        fail("--sort-window must be a number of seconds >= 0")
    return float(window) if window is not None else (1.0 if sort else None)


def reordered_line(r: dict | None) -> str | None:
    """What --sort did, as one line."""
    if r is None:
        return None
    return (f"sorted within {r['window_ms'] / 1e3:g} s: {r['moved']:,} requests moved, "
            f"the farthest {r['max_behind_ms']:.3f} ms behind")


BlkparseEventOpt = typer.Option("Q", "--blkparse-event", help="blkparse: Q (queue, default) or D (dispatch) events.")

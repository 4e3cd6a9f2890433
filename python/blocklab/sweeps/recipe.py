"""What a `repro` command calls: run the recipe's sweep into a folder
(resumable, Parquet with provenance) and write its HTML report with the
recipe's own sections (a reduction table, the paper's claims...)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from blocklab.sweeps.report import Section, write_report
from blocklab.sweeps.runner import run_sweep
from blocklab.sweeps.spec import Sweep


def run_recipe(sweep: Sweep, out: str | os.PathLike, *, jobs: int | None = None, ray: str | None = None, ship: bool = False,
               progress=True, command: str | None = None, title: str | None = None,
               sections: Callable[["object"], Sequence[Section]] | None = None,
               metrics: Sequence[str] | None = None):
    """Run `sweep` into `out` (`out/results.parquet`; finished cells are skipped on a
    re-run) and write `out/report.html`: the generic plots of `metrics` (default:
    the headline figures that vary), preceded by `sections(df)`, the recipe's own
    analysis. Returns the results as a pandas DataFrame (one row per cell)."""
    df = run_sweep(sweep, out, jobs=jobs, ray=ray, ship=ship, progress=progress, command=command)
    extra = list(sections(df)) if sections is not None else []
    write_report(Path(out), Path(out) / "report.html", metrics=metrics, title=title, sections=extra, command=command)
    return df

"""Sweeps: grids of stack runs (cells) over traces, run here or on Ray,
kept in Parquet with their provenance, resumable, and reported as one HTML
page. See docs/sweeps.md.

* `spec` — the sweep file and its cells; `runner` — running cells (local
  threads with batched counted passes, or Ray tasks) and the journal;
  `results` — flattening results into columns, Parquet; `report` — the HTML
  page; `recipe` — what a `repro` command calls.
"""

from blocklab.sweeps.recipe import run_recipe
from blocklab.sweeps.report import Section, write_report
from blocklab.sweeps.results import load
from blocklab.sweeps.runner import Task, run_sweep
from blocklab.sweeps.spec import Cell, Sweep, SweepError, TraceRef, build, load_sweep

__all__ = ["Cell", "Section", "Sweep", "SweepError", "Task", "TraceRef", "build", "load", "load_sweep",
           "run_recipe", "run_sweep", "write_report"]

"""The top-level commands, and the group that imports a command's module only
when that command runs.

Every `blocklab` process pays for what it imports before doing anything:
typer, rich and the thirteen command modules (and turning every command's
signature into click parameters) took most of a short run. So the top-level
group knows its commands from the table below, imports the module(s) of the
one command being run, and lists the others from the table's one-line help
(tests/test_cli_startup.py checks that table against the real commands, so it
cannot drift).

To add a command: give its module a `register(app)` that adds it to the typer
app it is handed (`app.command(...)` or `app.add_typer(...)`), and add a row
here: name, the modules whose `register` builds it, and the first paragraph of
its help exactly as the command's docstring (or `help=`) has it.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

# name -> (modules under blocklab.cli whose register() builds it, its one-line help).
# In the order `blocklab --help` lists them (typer lists commands before groups).
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "cache": (("cache_cmd",), "Counted cache simulation: every (policy, size) cell in one pass over the trace."),
    "mrc": (("cache_cmd",), "LRU miss-ratio curve in one pass: exact, or SHARDS (fixed-rate or fixed-size)."),
    "cachesim": (("cachesim_cmd",),
                 "libCacheSim's `cachesim` command line: same arguments, same output lines, blocklab's simulator."),
    "rgr": (("rgr_cmd",), "RGR of each (policy, size) cell over a RAID array with failed disks."),
    "run": (("run_cmd",),
            "Run a stack file over traces; print per-layer hits, array and device work, response times."),
    "sweep": (("sweep_cmd",), "Run every cell of a sweep not yet finished in --out; write --out/results.parquet."),
    "report": (("sweep_cmd",),
               "Write one self-contained HTML page of a sweep: plots of each metric against each varied parameter, "
               "response-time CDFs, a table of cells."),
    "trace": (("trace_cmd",), "Inspect and convert traces."),
    "array": (("array_cmd",), "RAID arrays: MD layouts and I/O plans."),
    "disk": (("disk_cmd", "disk_run_cmd"), "Disk models: validate against real-drive measurements, run traces in time."),
    "repro": (("repro_cmd",), "Reproduce the papers' results on the traces at hand."),
    "fs": (("fs_cmd",), "The ext2 file-system model: mke2fs geometry, trees, annotated traces."),
    "dgraid": (("dgraid_cmd",),
               "D-GRAID: file-aware fault-isolated placement, metadata replication, availability."),
    "real": (("real_cmd",), "Arrays on real member files: create, serve over NBD, fail, replace, rebuild, check, replay."),
}


def build(modules: tuple[str, ...]) -> TyperGroup:
    """A click group of everything the given command modules register (imports them)."""
    app = typer.Typer()
    for m in modules:
        importlib.import_module(f"blocklab.cli.{m}").register(app)
    return typer.main.get_group(app)


def load(name: str):
    """The real click command `name` (imports its module)."""
    return build(COMMANDS[name][0]).commands[name]


class _Listed(typer.core.TyperCommand):
    """A command as `blocklab --help` lists it: its name and one-line help, nothing imported."""


class LazyCommands(dict):
    """The group's `commands`: every name of the table; a command is loaded on first look-up.
    Every name is a key from the start because typer's "did you mean" reads the keys."""

    def __init__(self) -> None:
        super().__init__((name, None) for name in COMMANDS)

    def __getitem__(self, name: str):
        cmd = super().__getitem__(name)
        if cmd is None:
            cmd = load(name)
            super().__setitem__(name, cmd)
        return cmd

    def get(self, name, default=None):
        return self[name] if name in self else default


class LazyGroup(TyperGroup):
    """The top-level group: commands loaded on demand; help lists them from the table."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.commands = LazyCommands()
        self._listing = False

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, name: str):
        if name not in COMMANDS:
            return None
        if self._listing:
            return _Listed(name=name, help=COMMANDS[name][1])
        return self.commands[name]

    def format_help(self, ctx, formatter) -> None:
        # The listing of commands only needs names and one-line help.
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

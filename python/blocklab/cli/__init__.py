"""The `blocklab` command line. Each command group lives in its own module."""

from __future__ import annotations

import typer

from blocklab.cli import (array_cmd, cache_cmd, cachesim_cmd, dgraid_cmd, disk_cmd, disk_run_cmd, fs_cmd, real_cmd,
                          repro_cmd, rgr_cmd, run_cmd, sweep_cmd, trace_cmd)
from blocklab.cli.common import run_guarded

app = typer.Typer(
    name="blocklab",
    help="A laboratory for block storage: replay block traces through caches, arrays and disks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # `-h` as well as `--help`, on every command and group.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from blocklab import __version__

        print(f"blocklab {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """A laboratory for block storage: replay block traces through caches, arrays and disks."""
app.add_typer(trace_cmd.app, name="trace")
cache_cmd.register(app)
cachesim_cmd.register(app)
array_cmd.register(app)
disk_cmd.register(app)
disk_run_cmd.register(app)
repro_cmd.register(app)
rgr_cmd.register(app)
run_cmd.register(app)
fs_cmd.register(app)
dgraid_cmd.register(app)
real_cmd.register(app)
sweep_cmd.register(app)


def main() -> None:
    run_guarded(app)


if __name__ == "__main__":
    main()

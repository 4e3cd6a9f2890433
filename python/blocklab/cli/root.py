"""The top-level `blocklab` typer app: the lazy group of every command
(`commands.py`), `--version`, `-h`. `blocklab.cli.main` runs it."""

from __future__ import annotations

from blocklab.cli import light_help

typer = light_help.typer_quietly()

from blocklab.cli.commands import LazyGroup  # noqa: E402

light_help.install()

app = typer.Typer(
    cls=LazyGroup,
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

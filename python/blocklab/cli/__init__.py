"""The `blocklab` command line. Each command group lives in its own module,
imported only when that command runs (`commands.py` lists them); `root.py`
is the top-level typer app. A help page seen before is written back from
`help_cache.py` without importing typer, click or rich at all."""

from __future__ import annotations

import sys


def main() -> None:
    from blocklab.cli import help_cache

    if help_cache.serve(sys.argv):
        return
    with help_cache.Recording(sys.argv):
        from blocklab.cli.root import app  # first: it imports typer without what typer never uses here
        from blocklab.cli.common import run_guarded

        run_guarded(app)


def __getattr__(name: str):
    # `from blocklab.cli import app`: the typer app, built on first use.
    if name == "app":
        from blocklab.cli.root import app

        return app
    raise AttributeError(f"module 'blocklab.cli' has no attribute {name!r}")


if __name__ == "__main__":
    main()

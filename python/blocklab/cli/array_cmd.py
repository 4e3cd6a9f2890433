"""Commands of this area; `register(app)` adds them to the main CLI."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""

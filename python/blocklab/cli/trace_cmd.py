"""`blocklab trace ...`: trace statistics and conversion."""

import typer

app = typer.Typer(help="Inspect and convert traces.", no_args_is_help=True)

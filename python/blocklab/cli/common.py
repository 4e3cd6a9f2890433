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

"""Where the shared data (traces, drive models, papers) lives, when present."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    # python/blocklab/repro/shared.py -> repo root
    return Path(__file__).resolve().parents[3]


def shared_dir(sub: str = ".", root: Path | None = None) -> Path | None:
    """`sub` of the shared data: $BLOCKLAB_SHARED/sub, else
    <repo>/../shared/sub (a git worktree one level deeper finds
    <repo>/../../shared/sub); None when no candidate has it."""
    root = root or repo_root()
    cands = [Path(os.environ["BLOCKLAB_SHARED"])] if os.environ.get("BLOCKLAB_SHARED") else []
    cands += [root.parent / "shared", root.parent.parent / "shared"]
    for c in cands:
        if (c / sub).is_dir():
            return (c / sub).resolve()
    return None


def set_keys(sets: list[str]) -> dict:
    """`KEY=VALUE` overrides (as `blocklab run --set` takes them) as a sweep case's keys: each
    value read as the engine reads it (TOML, else text); a key given twice keeps the later
    value, as `--set` applies them in order."""
    import tomllib

    out = {}
    for kv in sets:
        k, _, v = kv.partition("=")
        try:
            out[k] = tomllib.loads(f"v = {v}")["v"]
        except tomllib.TOMLDecodeError:
            out[k] = v
    return out

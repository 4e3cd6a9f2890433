"""Where a result comes from: file digests (cached by size and mtime), the
blocklab version and git commit, the host."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import subprocess
from pathlib import Path


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class FileHashes:
    """sha256 of files, remembered in a JSON file by (real path, size, mtime):
    a re-run does not read a multi-gigabyte trace again."""

    def __init__(self, store: Path | None = None):
        self.store = store
        self.known: dict[str, dict] = {}
        if store is not None and store.exists():
            try:
                self.known = json.loads(store.read_text())
            except (OSError, ValueError):
                self.known = {}
        self.dirty = False

    def __call__(self, path: str | os.PathLike) -> str:
        real = os.path.realpath(path)
        st = os.stat(real)
        k = self.known.get(real)
        if k and k["size"] == st.st_size and k["mtime_ns"] == st.st_mtime_ns:
            return k["sha256"]
        digest = sha256_file(real)
        self.known[real] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.store is not None and self.dirty:
            tmp = self.store.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.known, indent=1, sort_keys=True))
            tmp.replace(self.store)
            self.dirty = False


def repo_root() -> Path:
    # python/blocklab/sweeps/provenance.py -> the checkout (when installed editable)
    return Path(__file__).resolve().parents[3]


@functools.cache
def git_commit() -> str:
    """The commit of the blocklab checkout this code runs from, `+dirty` when tracked
    files differ from it; `unknown` outside a git checkout."""
    root = repo_root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def blocklab_version() -> str:
    from blocklab import __version__

    return __version__


@functools.cache
def host() -> str:
    return socket.gethostname()


def process_provenance() -> dict:
    """What a worker records about itself for each cell it runs."""
    return {"blocklab_version": blocklab_version(), "git_commit": git_commit(), "host": host()}

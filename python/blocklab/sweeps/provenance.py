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


def sweep_toml(sw) -> str:
    """A sweep file that loads back as `sw` (a stack sweep; paths absolute)."""
    from blocklab.sweeps.spec import toml_value

    def line(k: str, v) -> str:
        return f"{toml_value(k)} = {toml_value(v)}\n"

    out = "# Written by blocklab.sweep() for a sweep built in code: `blocklab sweep` runs it again.\n"
    if sw.name:
        out += line("name", sw.name)
    out += line("stack", sw.stack) + line("executor", sw.executor)
    if sw.seeds:
        out += line("seeds", list(sw.seeds))
    if sw.skip_bad:
        out += line("skip_bad", True)
    for t in sw.traces:
        out += "\n[[traces]]\n" + line("path", t.path) + line("format", t.format)
        if t.label:
            out += line("label", t.label)
        if t.ship:
            out += line("ship", True)
        if t.params:
            out += line("params", dict(t.params))
    if sw.grid:
        out += "\n[grid]\n" + "".join(line(k, v) for k, v in sw.grid.items())
    for c in sw.cases:
        out += "\n[[cases]]\n" + "".join(line(k, v) for k, v in c.items())
    if sw.report:
        out += "\n[report]\n" + "".join(line(k, v) for k, v in sw.report.items())
    return out


def sweep_command(sw, out: str | os.PathLike, *, jobs: int | None = None, ray: str | None = None,
                  ship: bool = False, batch: bool = True) -> str:
    """The `blocklab sweep` command line that runs `sw` into `out` again, for a sweep
    started from Python. One built in code (no file) is first written to
    `out/sweep.toml`, so that the command has a file to name. A task sweep (a
    recipe's cells that are not stack runs) has no file form: its Python call."""
    import shlex

    if sw.task != "stack":
        return f"blocklab.sweep(<task sweep {sw.task}>, {os.fspath(out)!r}, jobs={jobs})"
    src = sw.source
    if not src:
        Path(out).mkdir(parents=True, exist_ok=True)
        path = Path(out) / "sweep.toml"
        path.write_text(sweep_toml(sw))
        src = os.fspath(path)
    args = ["blocklab", "sweep", os.fspath(src), "--out", os.fspath(out)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if ray:
        args += ["--ray", ray]
    if ship:
        args.append("--ship-traces")
    if not batch:
        args.append("--no-batch")
    return " ".join(shlex.quote(a) for a in args)

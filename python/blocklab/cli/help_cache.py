"""Help served from a cache, before typer, click or rich are imported.

Rendering a `--help` page imports typer, click and rich and builds the
command's parameters: 100-150 ms, against about 20 ms for Python itself. The
page only changes when what renders it does, so the first render is kept
(byte for byte, as it went to stdout) and later runs with the same key write
it back without importing any of them.

The key is everything the page depends on that can differ between two runs:
the arguments (of the program's path, only the file name click shows), the
interpreter and where blocklab lives, whether each standard stream is a
terminal, the terminal width rich would measure, stdout's encoding and the
environment variables rich, typer and click read (RICH_ENV below). The entry also lists every module that was loaded when the page was
rendered, with its size and modification time: an edited blocklab source or
an upgraded typer, click or rich no longer matches, and the page is rendered
afresh (and the entry rewritten).

A page is only kept when it is certainly the help page: a help option was in
the arguments, click formatted exactly one help page, the run exited with
status 0 and wrote nothing to stderr. Entries live in
$XDG_CACHE_HOME/blocklab/help (default ~/.cache/blocklab/help);
BLOCKLAB_HELP_CACHE=0 turns the cache off. A cache that cannot be read or
written is the same as no cache: the page is rendered, never an error.

Serving a page imports nothing beyond what Python loads at start-up but zlib
(for the entry's file name).
"""

from __future__ import annotations

import os
import sys

FORMAT = "blocklab help cache 1"
HELP_OPTIONS = ("-h", "--help")
# The environment variables read by what renders help (rich's Console,
# typer's rich_utils and core, click's gettext lookups); each one can change
# colours, width, box characters or text. tests/test_help_cache.py checks
# this list against the installed rich and typer sources.
RICH_ENV = (
    "COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM",
    "TTY_COMPATIBLE", "TTY_INTERACTIVE", "DATABRICKS_RUNTIME_VERSION",  # rich
    "TERMINAL_WIDTH", "_TYPER_FORCE_DISABLE_TERMINAL", "GITHUB_ACTIONS", "PY_COLORS", "TYPER_USE_RICH",  # typer
    "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LC_CTYPE", "LANG",  # gettext and the locale
)


def enabled() -> bool:
    return os.environ.get("BLOCKLAB_HELP_CACHE", "1") not in ("0", "off", "no", "false")


def asks_for_help(argv: list[str]) -> bool:
    """Whether a help option is among the arguments (before any `--`)."""
    for a in argv[1:]:
        if a == "--":
            return False
        if a in HELP_OPTIONS:
            return True
    return False


def directory() -> str | None:
    """Where entries live; None (no cache) without an absolute place for them: a relative
    XDG_CACHE_HOME is ignored, as the XDG spec says, and an unknown home is no home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "blocklab", "help") if os.path.isabs(base) else None


def _terminal_width() -> int | None:
    # As rich measures it: the first of stdin, stdout and stderr that is a terminal.
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            pass
    return None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def key(argv: list[str]) -> str | None:
    """The key of this run's help page, one line; None when this stdout cannot be served
    (or there is no cache directory)."""
    out = sys.stdout
    if out is None or type(out).__name__ != "TextIOWrapper" or directory() is None:
        return None
    env = {name: os.environ[name] for name in RICH_ENV if name in os.environ}
    # click names the program after argv[0]'s file name, or `python -m PACKAGE...`.
    program = (os.path.basename(argv[0]) if argv else "", getattr(sys.modules.get("__main__"), "__package__", None))
    parts = (FORMAT, sys.executable, sys.version, __file__, program, argv[1:], [_isatty(fd) for fd in (0, 1, 2)],
             _terminal_width(), out.encoding, out.errors, sorted(env.items()))
    return repr(parts)


def _entry_path(k: str) -> str:
    # Two 32-bit checksums name the file; the entry holds the whole key, so a
    # collision is a miss (and an overwrite), never a wrong page.
    import zlib

    b = k.encode("utf-8", "surrogateescape")
    return os.path.join(directory(), f"{zlib.crc32(b):08x}{zlib.adler32(b):08x}")


def _read(path: str, k: str) -> str | None:
    """The page stored at `path` under key `k`, if every module it was rendered with is unchanged."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
            data = f.read()
    except OSError:
        return None
    head, sep, page = data.partition("\n\n")
    lines = head.split("\n")
    if not sep or len(lines) < 2 or lines[0] != FORMAT or lines[1] != k:
        return None
    for line in lines[2:]:
        try:
            mtime, size, module = line.split(" ", 2)
            st = os.stat(module)
            if st.st_mtime_ns != int(mtime) or st.st_size != int(size):
                return None
        except (OSError, ValueError):
            return None
    return page


def serve(argv: list[str]) -> bool:
    """Write the cached help page of `argv` to stdout if there is one (True: done, exit 0)."""
    if not asks_for_help(argv) or not enabled():
        return False
    k = key(argv)
    if k is None:
        return False
    page = _read(_entry_path(k), k)
    if page is None:
        return False
    try:
        sys.stdout.write(page)
        sys.stdout.flush()
    except BrokenPipeError:
        # As click does: a closed pipe (`blocklab --help | head -1`) is exit status 1, no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1)
    return True


class _Tee:
    """A text stream that keeps a copy of what is written through it."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.written: list[str] = []

    def write(self, s):
        n = self._stream.write(s)
        self.written.append(s)
        return n

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _click_context():
    """The click Context class typer formats help with (recent typers carry their own copy of click)."""
    from blocklab.cli import light_help

    light_help.typer_quietly()
    core = sys.modules["typer.core"]
    return (getattr(core, "_click", None) or core.click).Context


class Recording:
    """Around a run that asks for help: keeps the page it prints, if it is one (see above)."""

    def __init__(self, argv: list[str]) -> None:
        self.key = key(argv) if asks_for_help(argv) and enabled() else None
        self.pages = 0

    def __enter__(self):
        if self.key is None:
            return self
        self._context = _click_context()
        self._get_help = self._context.get_help
        recording = self

        def get_help(ctx):
            recording.pages += 1
            return recording._get_help(ctx)

        self._context.get_help = get_help
        self._streams = (sys.stdout, sys.stderr)
        self.out, self.err = _Tee(sys.stdout), _Tee(sys.stderr)
        sys.stdout, sys.stderr = self.out, self.err
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self.key is None:
            return
        self._context.get_help = self._get_help
        sys.stdout, sys.stderr = self._streams
        code = exc.code if isinstance(exc, SystemExit) else (0 if kind is None else 1)
        text = all(isinstance(s, str) for s in self.out.written)
        if code in (0, None) and self.pages == 1 and not any(self.err.written) and text:
            self._keep("".join(self.out.written))

    def _keep(self, page: str) -> None:
        if not page:
            return
        lines = [FORMAT, self.key]
        for m in list(sys.modules.values()):
            f = getattr(m, "__file__", None)
            if not isinstance(f, str):
                continue
            try:
                st = os.stat(f)
            except OSError:
                continue
            if "\n" in f or not os.path.isabs(f):
                return  # a module the entry could not name for certain: keep nothing
            lines.append(f"{st.st_mtime_ns} {st.st_size} {f}")
        path = _entry_path(self.key)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write("\n".join(lines) + "\n\n" + page)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass

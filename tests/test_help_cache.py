"""`--help` written back from the help cache (blocklab/cli/help_cache.py).

Every page served from the cache must be byte for byte the page typer and
rich render live for the same arguments, terminal and environment; a served
page imports none of typer, click, rich or anything heavy; a changed key or a
changed module renders afresh; a cache that cannot be written is no error;
nothing but a help page is ever kept. No timings: the imports are the cause.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from blocklab.cli import commands, help_cache

# What a served page must not import.
NOT_ON_THE_FAST_PATH = ("typer", "click", "rich", "numpy", "pandas", "pyarrow", "matplotlib", "ray", "markdown_it",
                        "pygments", "shellingham")

# Run `blocklab ARGS` as the console script does; dump the modules loaded to $DUMP at exit.
SCRIPT = ("import atexit, json, os, sys\n"
          "dump = os.environ.get('DUMP')\n"
          "if dump:\n"
          "    atexit.register(lambda: open(dump, 'w').write(json.dumps(sorted(sys.modules))))\n"
          "sys.argv = ['blocklab', *sys.argv[1:]]\n"
          "from blocklab.cli import main\n"
          "sys.exit(main())\n")


def every_help_argv() -> list[list[str]]:
    """`--help`, every command's and every subcommand's (walking the real click groups)."""
    group = commands.build(tuple(sorted({m for mods, _ in commands.COMMANDS.values() for m in mods})))
    out = [["--help"]]

    def walk(cmd, path):
        out.append([*path, "--help"])
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    for name in commands.COMMANDS:
        walk(group.commands[name], [name])
    return out


def env_for(cache: Path | None, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in help_cache.RICH_ENV and k != "BLOCKLAB_HELP_CACHE"}
    env.update(LANG="C.UTF-8", COLUMNS="100")
    if cache is None:
        env["BLOCKLAB_HELP_CACHE"] = "0"
    else:
        env["XDG_CACHE_HOME"] = str(cache)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def run(args, env, dump: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(env, **({"DUMP": str(dump)} if dump else {}))
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, env=env, stdin=subprocess.DEVNULL)


def run_on_a_terminal(args, env, columns: int) -> tuple[int, bytes]:
    """`blocklab ARGS` with stdout and stderr on a pseudo-terminal `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, *args], stdin=subprocess.DEVNULL, stdout=follower,
                         stderr=follower, env=env)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return p.wait(), out


def imports(dump: Path) -> set[str]:
    return set(json.loads(dump.read_text()))


def heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in NOT_ON_THE_FAST_PATH
                  or (m.startswith("blocklab.cli.") and m.endswith("_cmd")) or m == "blocklab._core")


def entries(cache: Path) -> list[Path]:
    d = cache / "blocklab" / "help"
    return sorted(d.iterdir()) if d.exists() else []


ALL = every_help_argv()


def test_the_walk_finds_subcommands():
    assert ["real", "serve", "--help"] in ALL and ["trace", "synth", "--help"] in ALL and ["cache", "--help"] in ALL


@pytest.mark.parametrize("args", ALL, ids=" ".join)
def test_every_help_page_from_the_cache_is_the_live_one(args, tmp_path):
    cache = tmp_path / "xdg"
    live = run(args, env_for(None))
    assert live.returncode == 0 and live.stderr == b"" and b"Usage: blocklab" in live.stdout, live.stderr
    first = run(args, env_for(cache), tmp_path / "first.json")
    assert (first.returncode, first.stdout, first.stderr) == (0, live.stdout, b"")
    assert "typer" in imports(tmp_path / "first.json")  # rendered, and kept
    assert len(entries(cache)) == 1
    served = run(args, env_for(cache), tmp_path / "served.json")
    assert (served.returncode, served.stdout, served.stderr) == (0, live.stdout, b"")
    assert heavy(imports(tmp_path / "served.json")) == []


# The ways rich decides colour and width (besides COLUMNS on a pipe, above).
SETUPS = {
    "pipe, forced colour": dict(FORCE_COLOR="1"),
    "pipe, forced colour, NO_COLOR": dict(FORCE_COLOR="1", NO_COLOR="1"),
    "pipe, narrow": dict(COLUMNS="52"),
    "pipe, no COLUMNS": dict(COLUMNS=None),
    "pipe, TERMINAL_WIDTH": dict(TERMINAL_WIDTH="70", COLUMNS=None),
    "pipe, forced colour, 256 colours": dict(FORCE_COLOR="1", TERM="xterm-256color"),
    "pipe, forced colour, truecolor": dict(FORCE_COLOR="1", COLORTERM="truecolor"),
}


@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("args", [["--help"], ["cache", "--help"], ["real", "serve", "-h"]], ids=" ".join)
def test_served_pages_follow_colour_and_width_on_a_pipe(setup, args, tmp_path):
    cache = tmp_path / "xdg"
    live = run(args, env_for(None, **SETUPS[setup]))
    assert live.returncode == 0, live.stderr
    for _ in range(2):  # rendered and kept, then served
        again = run(args, env_for(cache, **SETUPS[setup]), tmp_path / "m.json")
        assert (again.returncode, again.stdout, again.stderr) == (0, live.stdout, b"")
    assert heavy(imports(tmp_path / "m.json")) == []


TERMINALS = {
    "xterm 90": (90, dict(TERM="xterm")),
    "xterm-256color 130": (130, dict(TERM="xterm-256color", COLUMNS=None)),
    "dumb 120": (120, dict(TERM="dumb", COLUMNS=None)),
    "NO_COLOR 75": (75, dict(TERM="xterm", NO_COLOR="1", COLUMNS=None)),
}


@pytest.mark.parametrize("terminal", list(TERMINALS))
@pytest.mark.parametrize("args", [["--help"], ["trace", "synth", "--help"]], ids=" ".join)
def test_served_pages_follow_the_terminal(terminal, args, tmp_path):
    columns, extra = TERMINALS[terminal]
    cache = tmp_path / "xdg"
    code, live = run_on_a_terminal(args, env_for(None, **extra), columns)
    assert code == 0 and b"Usage" in live
    assert run_on_a_terminal(args, env_for(cache, **extra), columns) == (0, live)
    assert len(entries(cache)) == 1
    assert run_on_a_terminal(args, env_for(cache, **extra, DUMP=str(tmp_path / "m.json")), columns) == (0, live)
    assert heavy(imports(tmp_path / "m.json")) == []
    # Another width of the same terminal is another page.
    wider = run_on_a_terminal(args, env_for(cache, **extra), columns + 17)
    assert wider[0] == 0 and len(entries(cache)) == 2


def test_a_changed_key_renders_afresh(tmp_path):
    cache = tmp_path / "xdg"
    run(["cache", "--help"], env_for(cache))
    wide = run(["cache", "--help"], env_for(cache, COLUMNS="160"), tmp_path / "m.json")
    assert "typer" in imports(tmp_path / "m.json")
    assert wide.stdout == run(["cache", "--help"], env_for(None, COLUMNS="160")).stdout
    assert len(entries(cache)) == 2
    # Other arguments are another key too (`-h` is `--help`'s page, but kept apart).
    short = run(["cache", "-h"], env_for(cache), tmp_path / "m.json")
    assert "typer" in imports(tmp_path / "m.json") and len(entries(cache)) == 3
    assert short.stdout == run(["cache", "--help"], env_for(None)).stdout


def test_a_changed_module_renders_afresh_and_replaces_the_entry(tmp_path):
    cache = tmp_path / "xdg"
    page = run(["cache", "--help"], env_for(cache)).stdout
    (entry,) = entries(cache)
    text = entry.read_text(encoding="utf-8", errors="surrogateescape")
    # The entry names the command's own module and typer's formatter among what it was rendered with.
    assert re.search(r"^\d+ \d+ .*blocklab/cli/cache_cmd\.py$", text, re.M)
    assert re.search(r"^\d+ \d+ .*typer/rich_utils\.py$", text, re.M)
    # As if cache_cmd.py had been edited since: its recorded modification time differs.
    stale = re.sub(r"^(\d+)( \d+ .*blocklab/cli/cache_cmd\.py)$", lambda m: f"{int(m[1]) - 1}{m[2]}", text, flags=re.M)
    entry.write_text(stale, encoding="utf-8", errors="surrogateescape")
    again = run(["cache", "--help"], env_for(cache), tmp_path / "m.json")
    assert again.stdout == page and "typer" in imports(tmp_path / "m.json")
    assert entry.read_text(encoding="utf-8", errors="surrogateescape") == text


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    live = run(["rgr", "--help"], env_for(None))
    for _ in range(2):
        r = run(["rgr", "--help"], env_for(blocked))
        assert (r.returncode, r.stdout, r.stderr) == (0, live.stdout, b"")


def test_a_damaged_entry_is_a_miss(tmp_path):
    cache = tmp_path / "xdg"
    page = run(["fs", "--help"], env_for(cache)).stdout
    (entry,) = entries(cache)
    lines = entry.read_bytes().split(b"\n")
    entry.write_bytes(b"\n".join([*lines[:2], b"garbage"]))
    r = run(["fs", "--help"], env_for(cache), tmp_path / "m.json")
    assert (r.returncode, r.stdout) == (0, page) and "typer" in imports(tmp_path / "m.json")


def test_errors_and_suggestions_are_never_kept(tmp_path):
    cache = tmp_path / "xdg"
    for args in (["cachee", "--help"], ["cache", "--bogus", "--help"], ["run", "--", "--help"]):
        for _ in range(2):
            r = run(args, env_for(cache))
            assert r.returncode == 2 and r.stderr, args
        assert entries(cache) == [], args
    r = run(["cachee", "--help"], env_for(cache))
    assert b"No such command" in r.stderr and b"'cache'" in r.stderr


def test_only_a_help_page_is_kept(tmp_path):
    # A run that asks for help in its arguments (here as an option's value,
    # say) but prints something else and exits 0 keeps nothing.
    code = ("import sys\n"
            "from blocklab.cli import help_cache\n"
            "with help_cache.Recording(['blocklab', 'x', '--out', '--help']):\n"
            "    print('not a help page')\n"
            "    sys.exit(0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env_for(tmp_path))
    assert r.returncode == 0 and r.stdout == b"not a help page\n"
    assert entries(tmp_path) == []


def test_version_and_no_arguments_still_work(tmp_path):
    r = run(["--version"], env_for(tmp_path))
    assert r.returncode == 0 and r.stdout.startswith(b"blocklab ")
    r = run([], env_for(tmp_path))
    assert b"Usage: blocklab" in r.stdout + r.stderr
    assert entries(tmp_path) == []


def test_the_key_names_every_environment_variable_rich_and_typer_read():
    import rich.console
    import typer.core
    import typer.rich_utils

    read = set()
    for mod in (rich.console, typer.rich_utils, typer.core):
        src = Path(mod.__file__).read_text()
        read |= set(re.findall(r"""(?:environ\.get|getenv)\(\s*["']([A-Z_]+)["']""", src))
    # Completion and tracebacks do not draw help.
    unrelated = {"TYPER_STANDARD_TRACEBACK", "_TYPER_STANDARD_TRACEBACK", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"}
    assert read - unrelated <= set(help_cache.RICH_ENV)


def test_no_cache_without_an_absolute_place_for_it(tmp_path):
    # A relative XDG_CACHE_HOME is ignored (XDG); with no usable home either, nothing is written anywhere.
    work = tmp_path / "cwd"
    work.mkdir()
    env = env_for(None, BLOCKLAB_HELP_CACHE=None, XDG_CACHE_HOME="rel", HOME="relative-home")
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", SCRIPT, "fs", "--help"], capture_output=True, env=env, cwd=work,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and b"Usage: blocklab fs" in r.stdout
    assert list(work.iterdir()) == []

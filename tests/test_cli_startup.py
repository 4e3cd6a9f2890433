"""Start-up: a command imports its own module and what it needs, nothing else.

`blocklab` loads a command's module only when that command runs and lists the
others from a static table (`blocklab/cli/commands.py`); these tests hold that
table to the real commands and check, in fresh processes, which modules a
`--help` and a one-access run import (no timings: the modules are the cause).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from blocklab.cli import app, commands

# Packages no `cache` run or `--help` may import.
HEAVY = ("pandas", "pyarrow", "matplotlib", "ray", "numpy", "markdown_it", "pygments")


def imported(args: list[str], tmp_path) -> tuple[set[str], subprocess.CompletedProcess]:
    """Modules loaded by `blocklab ARGS` in a fresh interpreter (dumped at exit)."""
    dump = tmp_path / "modules.json"
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(dump)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
            "sys.argv = ['blocklab', *sys.argv[1:]]\n"
            "from blocklab.cli import main\n"
            "main()\n")
    # The live path: a page served from the help cache imports none of this (tests/test_help_cache.py).
    env = dict(os.environ, BLOCKLAB_HELP_CACHE="0")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    return set(json.loads(dump.read_text())), r


def heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


def command_modules(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.startswith("blocklab.cli.") and m.endswith("_cmd"))


def first_paragraph(cmd) -> str:
    return inspect.cleandoc(cmd.short_help or cmd.help or "").split("\n\n")[0].strip()


def test_the_table_lists_every_command_with_its_own_help():
    every = commands.build(tuple(sorted({m for mods, _ in commands.COMMANDS.values() for m in mods})))
    assert set(every.commands) == set(commands.COMMANDS)
    for name, (_, help_line) in commands.COMMANDS.items():
        assert first_paragraph(commands.load(name)) == help_line, name


def test_top_level_help_is_what_the_real_commands_give(monkeypatch):
    lazy = CliRunner().invoke(app, ["--help"])
    assert lazy.exit_code == 0
    # The same help with every command loaded for the listing.
    monkeypatch.setattr(commands.LazyGroup, "format_help", commands.TyperGroup.format_help)
    eager = CliRunner().invoke(app, ["--help"])
    assert eager.exit_code == 0
    assert lazy.output == eager.output
    for name in commands.COMMANDS:
        assert f" {name} " in lazy.output


@pytest.mark.parametrize("name", list(commands.COMMANDS))
def test_every_command_help_through_the_lazy_group(name):
    r = CliRunner().invoke(app, [name, "--help"])
    assert r.exit_code == 0, r.output
    assert f"Usage: blocklab {name}" in " ".join(r.output.split())


def test_unknown_command_still_suggests_and_exits_2():
    r = CliRunner().invoke(app, ["cachee"])
    assert r.exit_code == 2
    assert "No such command" in r.output and "'cache'" in r.output


def test_cache_help_imports_only_the_cache_module(tmp_path):
    mods, r = imported(["cache", "--help"], tmp_path)
    assert r.returncode == 0 and "--policy" in r.stdout
    assert command_modules(mods) == ["blocklab.cli.cache_cmd"]
    assert heavy(mods) == []
    # Help needs neither the engine nor the API.
    assert "blocklab._core" not in mods and "blocklab.api" not in mods
    # typer's formatter was loaded without rich.markdown / rich.traceback.
    assert "typer.rich_utils" in mods
    assert "rich.markdown" not in mods and "rich.traceback" not in mods


def test_help_loads_none_of_typers_unused_standard_modules(tmp_path):
    for args in (["--help"], ["cache", "--help"], ["rgr", "--help"]):
        mods, r = imported(args, tmp_path)
        assert r.returncode == 0
        assert not {"subprocess", "difflib", "pickle"} & mods, args


def test_deferred_standard_modules_are_the_real_ones_when_used(tmp_path):
    # An unknown command takes typer's "did you mean" path (difflib) in a fresh process.
    mods, r = imported(["cachee"], tmp_path)
    assert r.returncode == 2
    assert "No such command" in r.stderr and "'cache'" in r.stderr
    assert "difflib" in mods
    code = ("import sys\n"
            "from blocklab.cli import app\n"
            "import typer.main, subprocess, pickle\n"
            "assert typer.main.subprocess.Popen is subprocess.Popen\n"
            "from rich.style import Style\n"
            "assert Style(meta={'a': 1}).meta == {'a': 1}\n"
            "assert type(sys.modules['subprocess']).__name__ == 'module'\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_top_level_help_imports_no_command_module(tmp_path):
    mods, r = imported(["--help"], tmp_path)
    assert r.returncode == 0 and "cachesim" in r.stdout
    assert command_modules(mods) == []
    assert heavy(mods) == [] and "blocklab._core" not in mods


@pytest.mark.parametrize("json_out", [True, False])
def test_one_access_cache_run_imports_nothing_heavy(tmp_path, json_out):
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0,R,0,4096\n")
    mods, r = imported(["cache", str(t), "--format", "csv", "--size", "1", *(["--json"] if json_out else [])], tmp_path)
    assert r.returncode == 0, r.stderr
    if json_out:
        assert json.loads(r.stdout)[0]["misses"] == 1
        assert not any(m.split(".")[0] == "rich" for m in mods)
    assert command_modules(mods) == ["blocklab.cli.cache_cmd"]
    assert heavy(mods) == []


def test_bad_input_still_exits_2_with_one_line(tmp_path):
    t = tmp_path / "bad.csv"
    t.write_text("timestamp,op,offset,size\nx,R,0,4096\n")
    _, r = imported(["cache", str(t), "--format", "csv", "--size", "1"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("blocklab: error:") and len(r.stderr.strip().splitlines()) == 1
    assert "line 2" in r.stderr


def test_import_blocklab_loads_neither_engine_nor_api_until_asked():
    code = ("import sys, blocklab; a = sorted(m for m in ('blocklab._core', 'blocklab.api') if m in sys.modules); "
            "blocklab.simulate_cache; blocklab.BlocklabError; "
            "b = sorted(m for m in ('blocklab._core', 'blocklab.api') if m in sys.modules); print(a, b)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] ['blocklab._core', 'blocklab.api']"


def test_deferred_rich_classes_are_the_real_ones_when_used():
    code = ("import typer.testing, sys\n"
            "from blocklab.cli import app\n"
            "typer.testing.CliRunner().invoke(app, ['--help'])\n"
            "from typer import rich_utils\n"
            "assert 'rich.markdown' not in sys.modules\n"
            "md = rich_utils.Markdown('*x*')\n"
            "import rich.markdown\n"
            "assert type(md) is rich.markdown.Markdown\n"
            "import rich.traceback\n"
            "assert rich_utils.Traceback.from_exception is not None and rich.traceback.Traceback.__module__ == 'rich.traceback'\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_one_access_table_run_loads_neither_fractions_nor_pickle(tmp_path):
    # rich.style's pickle and rich._ratio's fractions (with decimal) wait for first use.
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0,R,0,4096\n")
    mods, r = imported(["cache", str(t), "--format", "csv", "--size", "1"], tmp_path)
    assert r.returncode == 0 and "miss ratio" in r.stdout, r.stderr
    assert not {"fractions", "decimal", "pickle"} & mods


def test_a_squeezed_table_through_the_deferred_fractions_is_richs_own():
    # Columns with ratios in a narrow console: rich._ratio calls Fraction.
    code = ("import io, sys\n"
            "from blocklab.cli import light_help\n"
            "if sys.argv[1] == 'deferred':\n"
            "    light_help.install()\n"
            "from rich.console import Console\n"
            "from rich.table import Table\n"
            "assert ('fractions' in sys.modules) == (sys.argv[1] == 'plain')\n"
            "t = Table(title='squeezed', expand=True)\n"
            "for i in range(5):\n"
            "    t.add_column(f'column {i}', ratio=i + 1)\n"
            "t.add_row(*[f'cell {i} ' * (i + 2) for i in range(5)])\n"
            "c = Console(file=io.StringIO(), width=47, force_terminal=True, color_system='truecolor')\n"
            "c.print(t)\n"
            "import fractions, rich._ratio\n"
            "print(type(rich._ratio.ratio_reduce(10, [1, 2], [9, 9], [0, 0])[0]).__name__, 'fractions' in sys.modules)\n"
            "print(c.file.getvalue())\n")
    out = {mode: subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True)
           for mode in ("deferred", "plain")}
    for r in out.values():
        assert r.returncode == 0, r.stderr
    assert out["deferred"].stdout == out["plain"].stdout
    assert "column" in out["plain"].stdout and "\x1b[" in out["plain"].stdout


@pytest.mark.parametrize("command", ["disk run", "run"])
def test_a_json_run_of_the_timed_commands_imports_no_rich(tmp_path, command):
    # Their help texts escape TOML section names (`literal`) without rich's markup module.
    t = tmp_path / "one.disksim"
    t.write_text("0.0 0 0 8 1\n")
    where = ["examples/disks/ultrastar-73lzx.toml"] if command == "disk run" else ["examples/stacks/single-disk.toml"]
    root = os.path.join(os.path.dirname(__file__), "..")
    args = [*command.split(), os.path.join(root, where[0]), "--trace", str(t), "--format", "disksim", "--json"]
    mods, r = imported(args, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"] == 1
    assert sorted(m for m in mods if m.split(".")[0] == "rich") == []
    assert heavy(mods) == []


def test_literal_help_text_is_escaped_as_rich_escapes_it():
    from rich.markup import escape

    from blocklab.cli import common

    # Every help text the commands pass through `literal`, as written in their sources.
    texts = []
    for name in ("disk_cmd", "run_cmd", "sweep_cmd"):
        source = inspect.getsource(__import__(f"blocklab.cli.{name}", fromlist=["x"]))
        texts += [eval(m) for m in re.findall(r'literal\(("(?:[^"\\]|\\.)*")\)', source)]
    assert len(texts) >= 5 and any("[[cache]]" in t for t in texts)
    # And seeded strings of markup's own characters, backslashes and line ends included.
    rng = random.Random(26)
    alphabet = ["[", "]", "[[", "]]", "a", "Z", "#", "/", "@", "=", " ", ".", "\\", "\n", "x y", "[/]", "[b]"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)]
    for t in texts:
        assert common.literal(t) == escape(t), repr(t)

"""What a user expects of the command line (issue 27): `--version`, `-h`, help texts that
show TOML section names, `trace convert` taking `--to` from the output's name, and a
format error that says which formats would read the file."""

from __future__ import annotations

import subprocess
import sys

import pytest

import blocklab


def blocklab_cli(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_version():
    for flag in ("--version", "-V"):
        r = blocklab_cli(flag)
        assert r.returncode == 0 and r.stdout.strip() == f"blocklab {blocklab.__version__}", (r.stdout, r.stderr)


@pytest.mark.parametrize("args", [(), ("run",), ("sweep",), ("trace", "convert"), ("disk", "run")])
def test_dash_h_is_help(args):
    r = blocklab_cli(*args, "-h")
    assert r.returncode == 0 and "Usage:" in r.stdout, r.stderr
    assert r.stdout == blocklab_cli(*args, "--help").stdout


def test_help_shows_the_toml_section_names():
    # The help formatter reads rich markup: unescaped, `[array]` was eaten as a style tag.
    run = blocklab_cli("run", "--help").stdout
    for name in ("[replay]", "[[cache]]", "[array]", "[array.rebuild]", "[device]"):
        assert name in run, run
    assert "--unset" in run and "--sort" in run
    sweep = blocklab_cli("sweep", "--help").stdout
    for name in ("[[traces]]", "[grid]", "[[cases]]"):
        assert name in sweep, sweep


def test_convert_takes_the_output_format_from_the_name(tmp_path):
    src = tmp_path / "x.csv"
    src.write_text("timestamp,op,offset,size,tenant\n0.5,R,4096,8192,3\n1.25,W,0,512,0\n")
    r = blocklab_cli("trace", "convert", src, tmp_path / "out.spc", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert "(spc)" in r.stdout
    assert (tmp_path / "out.spc").read_text() == "3,8,8192,r,0.5\n0,0,512,w,1.25\n"
    r = blocklab_cli("trace", "convert", src, tmp_path / "out.oracleGeneral.zst", "--format", "csv")
    assert r.returncode == 0 and "(oracle" in r.stdout, r.stderr
    r = blocklab_cli("trace", "convert", src, tmp_path / "out.bin", "--format", "csv")
    assert r.returncode == 2 and "cannot tell the output format from the name" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_format_error_says_which_formats_read_the_file(tmp_path):
    spc = tmp_path / "t.txt"
    spc.write_text("0,20941264,8192,W,0.551706\n0,20939840,8192,W,0.554041\n")
    r = blocklab_cli("trace", "stats", spc, "--format", "csv")
    assert r.returncode == 2, r.stderr
    assert "the file reads as spc: try --format spc" in r.stderr and len(r.stderr.strip().splitlines()) == 1

"""A trace streamed through a pipe: `blocklab trace synth -` writes it to
standard output as it draws it, `blocklab cache -` reads it from standard
input once; the cells are those of the same trace as a file. What needs a
second pass over a pipe is refused with one line and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

CLI = [sys.executable, "-c", "from blocklab.cli import main; main()"]
SYNTH = ["trace", "synth", "--accesses", "30000", "--universe", "2000", "--alpha", "0.9", "--seed", "9"]


def synth_args(dst: str) -> list[str]:
    return [*CLI, *SYNTH[:2], dst, *SYNTH[2:]]


def test_synth_to_a_pipe_into_cache_equals_the_file(tmp_path):
    f = tmp_path / "z.csv"
    r = subprocess.run(synth_args(str(f)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cache = ["cache", "--format", "csv", "--policy", "lru,arc,s3fifo", "--size", "100,1MiB", "--json"]
    want = subprocess.run([*CLI, cache[0], str(f), *cache[1:]], capture_output=True, text=True)
    assert want.returncode == 0, want.stderr
    # The generator's stdout is the trace, byte for byte; its summary goes to stderr.
    piped = subprocess.run(synth_args("-"), capture_output=True)
    assert piped.returncode == 0 and piped.stdout == f.read_bytes()
    assert b"30,000 accesses" in piped.stderr
    synth = subprocess.Popen(synth_args("-"), stdout=subprocess.PIPE)
    got = subprocess.run([*CLI, cache[0], "-", *cache[1:]], stdin=synth.stdout, capture_output=True, text=True)
    synth.stdout.close()
    assert synth.wait() == 0
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(want.stdout)
    assert json.loads(got.stdout)[0]["accesses"] == 30000


def test_what_a_pipe_cannot_give_twice_is_refused(tmp_path):
    for extra, says in ((["--format", "csv", "--size", "5%"], "a `%` size needs a counting pass"),
                        (["--format", "csv", "--policy", "opt", "--size", "100"], "policy `opt` needs a pass"),
                        (["--size", "100"], "its format cannot be detected")):
        r = subprocess.run([*CLI, "cache", "-", *extra], input="timestamp,op,offset,size\n0,R,0,4096\n",
                           capture_output=True, text=True)
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "/dev/stdin" in lines[0] and says in lines[0], (extra, r.stderr)
    r = subprocess.run([*CLI, *SYNTH[:2], "-", "--to", "oracle", "--accesses", "10"], capture_output=True, text=True)
    assert r.returncode == 2 and "--to oracle cannot write to standard output" in r.stderr
    assert r.stdout == ""

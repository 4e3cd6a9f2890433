"""`blocklab trace synth`: seeded, reproducible synthetic traces that every reader accepts."""

import subprocess
import sys
from pathlib import Path

BLOCKLAB = str(Path(sys.executable).with_name("blocklab"))


def run(*args):
    return subprocess.run([BLOCKLAB, *map(str, args)], capture_output=True, text=True)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    for path, seed in ((a, 7), (b, 7), (c, 8)):
        assert run("trace", "synth", path, "--accesses", 5000, "--universe", 300, "--seed", seed).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_synthetic_csv_and_oracle_read_back_with_their_counts(tmp_path):
    import json

    csv, oracle = tmp_path / "z.csv", tmp_path / "z.oracleGeneral"
    assert run("trace", "synth", csv, "--accesses", 4000, "--universe", 100).returncode == 0
    assert run("trace", "synth", oracle, "--accesses", 4000, "--universe", 100, "--to", "oracle").returncode == 0
    s_csv = json.loads(run("trace", "stats", csv, "--format", "csv", "--json").stdout)
    s_orc = json.loads(run("trace", "stats", oracle, "--format", "oracle", "--json").stdout)
    for s in (s_csv, s_orc):
        assert s["requests"] == 4000 and s["reads"] + s["writes"] == 4000
        assert s["block_accesses"] == 4000
    assert s_orc["writes"] == 0 and 0 < s_csv["writes"] < s_csv["reads"]
        assert 1 <= s["unique_blocks"] <= 100


def test_bad_target_format_is_exit_2(tmp_path):
    r = run("trace", "synth", tmp_path / "x", "--to", "parquet")
    assert r.returncode == 2
    assert "valid: csv, oracle" in r.stderr

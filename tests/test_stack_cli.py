"""`blocklab run`: a stack file, counted and timed, against the commands it composes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "wsrch-small.trace"
DISK = ROOT / "examples" / "disks" / "ultrastar-73lzx.toml"
SHARED = ROOT.parent / "shared" / "traces"


def blocklab(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def ok_json(*args):
    r = blocklab(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    p = tmp_path_factory.mktemp("z") / "zipf.csv"
    r = blocklab("trace", "synth", p, "--accesses", "20000", "--universe", "4000", "--alpha", "0.9", "--seed", "3")
    assert r.returncode == 0, r.stderr
    return p


def traces(zipf):
    out = [(SAMPLE, "mqsim"), (zipf, "csv")]
    for name, fmt in [("tencent_cbs/tencent.cut.per_50k.most_size_thpt.222.trace", "tencent-cut"),
                      ("msr_cambridge/msr.cut.per_10k.1.trace", "msr-cut")]:
        if (SHARED / name).exists():
            out.append((SHARED / name, fmt))
    return out


RGR_STACK = """\
tenant_map = "key"
[replay]
reads_only = true
[[cache]]
policy = "lru"
size = 100
merge_misses = false
[array]
raid = 5
disks = 5
failed = [0]
[device]
model = "const:1"
"""


def write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_counted_layer_equals_cache_and_rgr(tmp_path, zipf):
    stack = write(tmp_path, RGR_STACK)
    for trace, fmt in traces(zipf):
        for size in (50, 1000, 8000):
            r = ok_json("run", stack, "--trace", trace, "--format", fmt, "--executor", "count",
                        "--set", f"cache.0.size={size}", "--json")
            (layer,) = r["layers"]
            (c,) = ok_json("cache", trace, "--format", fmt, "--policy", "lru", "--size", size, "--reads-only", "--json")
            assert (layer["accesses"], layer["misses"]) == (c["accesses"], c["misses"]), (trace, size)
            (g,) = ok_json("rgr", trace, "--format", fmt, "--raid", "5", "--disks", "5", "--failed", "0",
                           "--policy", "lru", "--size", size, "--reads-only", "--json")
            assert r["array"]["surviving_reads"] == g["surviving_reads"], (trace, size)
            assert r["array"]["rgr"] == pytest.approx(g["rgr"])


def test_merged_misses_never_cost_more_than_per_block_misses(tmp_path, zipf):
    # One operation per contiguous run of misses reads each stripe row once;
    # one per block reads a row again for every block of it. On the sample
    # (two 1.1 MB requests span rows twice) merging saves blocks; on one-block
    # requests (the Zipf trace) it changes nothing.
    stack = write(tmp_path, RGR_STACK)
    for trace, fmt, same in [(SAMPLE, "mqsim", False), (zipf, "csv", True)]:
        base = ["run", stack, "--trace", trace, "--format", fmt, "--executor", "count", "--json"]
        per_block = ok_json(*base)
        merged = ok_json(*base, "--set", "cache.0.merge_misses=true")
        a, b = per_block["array"]["surviving_reads"], merged["array"]["surviving_reads"]
        assert (a == b) if same else (b < a), (trace, a, b)
        ops = lambda r: sum(d["ops"] for d in r["devices"])
        assert (ops(merged) == ops(per_block)) if same else (ops(merged) < ops(per_block))


def test_timed_layers_equal_counted_layers(tmp_path):
    stack = write(tmp_path, f"""\
tenant_map = "concat"
[[cache]]
policy = "vdf-lfu"
size = "2%"
write = "back"
hit_ms = 0.05
[[cache]]
policy = "arc"
size = "5%"
write = "through"
[array]
raid = 5
disks = 5
failed = [1]
[device]
model = "{DISK}"
""")
    c = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "count", "--json")
    t = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "timed", "--json")
    assert c["layers"] == t["layers"]
    assert c["array"]["surviving_reads"] == t["array"]["surviving_reads"]
    assert "response" in t and "response" not in c
    assert t["response"]["reads"]["requests"] + t["response"]["writes"]["requests"] == t["requests"]


def test_no_cache_stack_is_disk_run(tmp_path):
    stack = write(tmp_path, f"""\
tenant_map = "ignore"
[array]
raid = "raid5"
disks = 6
failed = [0]
[device]
model = "{DISK}"
""")
    s = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--json")
    d = ok_json("disk", "run", DISK, "--trace", SAMPLE, "--format", "mqsim", "--raid", "5", "--disks", "6",
                "--failed", "0", "--json")
    r = s["response"]
    assert (r["avg_ms"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"]) == (
        d["avg_response_ms"], d["p50_ms"], d["p95_ms"], d["p99_ms"], d["max_response_ms"])
    assert [x["busy_ms"] for x in s["devices"]] == [x["busy_ms"] for x in d["devices"]]
    assert [x["ops"] for x in s["devices"]] == [x["ops"] for x in d["devices"]]
    assert s["timing"]["sim_time_ms"] == d["sim_time_ms"]


def test_rebuild_section_is_disk_run_rebuild(tmp_path):
    stack = write(tmp_path, f"""\
tenant_map = "ignore"
[array]
raid = 5
disks = 5
failed = [1]
disk_size = "64MiB"
wrap = true
[array.rebuild]
at = 0
window = 4
[device]
model = "{DISK}"
""")
    s = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--json")
    d = ok_json("disk", "run", DISK, "--trace", SAMPLE, "--format", "mqsim", "--raid", "5", "--disks", "5",
                "--failed", "1", "--disk-size", "64MiB", "--wrap", "--rebuild", "--json")
    assert s["rebuild"] == d["rebuild"]
    assert s["rebuild"]["finished"]
    assert s["array"]["ops_by_cause"]["rebuild"]["reads"] == d["rebuild"]["rebuild_reads"]


def test_deterministic_output(tmp_path):
    stack = ROOT / "examples" / "stacks" / "vdf-rebuild.toml"
    a = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--json")
    b = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout


@pytest.mark.parametrize("example", ["host-lru-raid5", "vdf-rebuild", "single-disk", "eci-tier"])
def test_examples_run(example):
    stack = ROOT / "examples" / "stacks" / f"{example}.toml"
    for executor in ("count", "timed"):
        r = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", executor, "--json")
        assert r["requests"] == 24783 and r["executor"] == executor


def test_text_output_and_set(tmp_path):
    stack = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--set", "cache.0.policy=arc")
    assert r.returncode == 0, r.stderr
    assert "arc" in r.stdout and "response time" in r.stdout


GOOD = f"""\
[[cache]]
policy = "lru"
size = 100
[array]
raid = 5
disks = 5
failed = [0]
[device]
model = "{DISK}"
"""


@pytest.mark.parametrize("edit,key", [
    (("size = 100", "size = 100\npolcy = \"lru\""), "cache.0.polcy"),
    (("disks = 5", "disks = \"five\""), "array.disks"),
    ((str(DISK), "/nonexistent/disk.toml"), "device.model"),
    (("size = 100", "size = \"100TiB\""), "cache.0.size"),
    (("disks = 5", "disks = 0"), "array.disks"),
    (("failed = [0]", "failed = [9]"), "array.failed"),
    (("failed = [0]", "failed = [0, 1]"), "array.failed"),
    (("policy = \"lru\"", "policy = \"lru3\""), "cache.0.policy"),
    (("raid = 5", "raid = \"raid7\""), "array.raid"),
])
def test_bad_stack_files_name_file_and_key(tmp_path, edit, key):
    stack = write(tmp_path, GOOD.replace(*edit))
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--json")
    assert r.returncode == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"blocklab: error: {stack}: key `{key}`:"), lines[0]
    assert "Traceback" not in r.stderr


def test_bad_set_and_executor(tmp_path):
    stack = write(tmp_path, GOOD)
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--set", "cache.0.size")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--set", "array.failed=[7]")
    assert r.returncode == 2 and "key `array.failed`" in r.stderr
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "fast")
    assert r.returncode == 2 and "count, timed" in r.stderr
    r = blocklab("run", tmp_path / "none.toml", "--trace", SAMPLE)
    assert r.returncode == 2 and "none.toml" in r.stderr


def test_api(tmp_path):
    import blocklab

    stack = write(tmp_path, GOOD)
    r = blocklab.run_stack(stack, SAMPLE, format="mqsim", executor="count", sets=["cache.0.size=5%"])
    assert r["layers"][0]["cache_blocks"] == round(0.05 * r["unique_blocks"])
    assert r["array"]["failed"] == [0]


def test_timeseries_csv(tmp_path):
    ts = tmp_path / "ts.csv"
    stack = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    r = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--timeseries", ts, "--json")
    rows = ts.read_text().splitlines()
    assert rows[0] == "t_ms,issued,completed,avg_response_ms,utilization"
    # 1 s intervals over the sample's 60 s: every request issued in some interval.
    assert 60 <= len(rows) - 1 <= 62
    assert sum(int(x.split(",")[1]) for x in rows[1:]) == r["requests"]
    assert r["timing"]["timeseries_csv"] == str(ts)


REBUILT = """\
tenant_map = "ignore"
[array]
raid = 5
disks = 4
failed = [1]
disk_size = "2MiB"
[array.rebuild]
at = 0.0
[device]
model = "const:2"
"""


@pytest.mark.parametrize("executor", ["count", "timed"])
def test_finished_rebuild_is_not_failed_none(tmp_path, executor):
    # Issue 27 case 7: a failed disk rebuilt by the end of the run used to print "failed none".
    stack = write(tmp_path, REBUILT)
    t = tmp_path / "t.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,0,4096\n0.001,R,65536,4096\n")
    r = blocklab("run", stack, "--trace", t, "--format", "csv", "--executor", executor)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("array:")][0]
    assert "failed none" not in line and "disk(s) 1 failed, rebuilt onto a spare" in line
    j = ok_json("run", stack, "--trace", t, "--format", "csv", "--executor", executor, "--json")
    assert (j["array"]["failed"], j["array"]["rebuilt"]) == ([], [1])


@pytest.mark.parametrize("sets,tenant_map,fit", [([], "ignore", "none"),
                                                 (["tenant_map=concat", "array.wrap=true"], "concat", "wrap"),
                                                 (["tenant_map=key"], "key", "none")])
def test_summary_and_json_state_tenant_map_and_fit(tmp_path, sets, tenant_map, fit):
    # Issue 27 case 8: the layout defaults move results; every run states them.
    stack = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    over = [a for s in sets for a in ("--set", s)]
    j = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "count", *over, "--json")
    assert (j["tenant_map"], j["fit"]) == (tenant_map, fit)
    r = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "count", *over)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == f"layout: tenant map {tenant_map}, fit {fit}"
    pct = blocklab("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "count", *over,
                   "--set", "cache.0.size=1%")
    assert pct.returncode == 0, pct.stderr
    unique = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--executor", "count", *over,
                     "--set", "cache.0.size=1%", "--json")["unique_blocks"]
    assert pct.stdout.splitlines()[1] == (f"layout: tenant map {tenant_map}, fit {fit}; footprint {unique:,} "
                                          "unique stack blocks (what `%` sizes are shares of)")


def test_allowed_loss_is_shown_beside_the_response(tmp_path):
    # Issue 27 case 1 for `run`: with allow_loss the summary says what was not served.
    stack = write(tmp_path, """\
tenant_map = "ignore"
[array]
raid = 5
disks = 6
failed = [0, 1]
allow_loss = true
[device]
model = "const:10"
""")
    t = tmp_path / "t.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,0,4096\n0.1,R,131072,4096\n")
    j = ok_json("run", stack, "--trace", t, "--format", "csv", "--json")
    assert j["response"]["covers"] == "served" and j["timing"]["unreadable"] == 1
    r = blocklab("run", stack, "--trace", t, "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert "served requests only: 1 unreadable requests (1 blocks) left out" in r.stdout
    assert "unreadable 1 blocks" in r.stdout


def test_host_cache_example_compares_like_with_like_with_disk_run():
    # Issue 27 case 8: the example stack used tenant_map = "concat" where disk run uses ignore
    # (50.3 against 18.9 ms with disk 0 failed). Without its cache it is now disk run exactly.
    stack = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    s = ok_json("run", stack, "--trace", SAMPLE, "--format", "mqsim", "--set", "cache=[]", "--set", "array.failed=[0]",
                "--json")
    d = ok_json("disk", "run", DISK, "--trace", SAMPLE, "--format", "mqsim", "--raid", "5", "--disks", "6",
                "--failed", "0", "--json")
    assert (s["tenant_map"], s["fit"]) == (d["tenant_map"], d["fit"]) == ("ignore", "none")
    assert s["response"]["avg_ms"] == d["avg_response_ms"]
    assert s["response"]["p99_ms"] == d["p99_ms"]

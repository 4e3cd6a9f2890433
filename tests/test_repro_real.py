"""The papers' prototype experiments on real bytes, end to end and small: `repro vdf --real` (a VDF host
cache and its base policy over a degraded RAID-5 of member files, served, the trace replayed through the
server while it rebuilds) and `repro pro --real` (MD's and PRO's rebuild orders under the same replay).
What must hold whatever the machine's speed: every rebuild finished and `real check` found the rebuilt
member consistent with the others, every part replayed all its requests without an error, the policies
(orders) replayed the very same requests, and the report says where its figures come from. No timing
assertions.
"""

from __future__ import annotations

import csv
from pathlib import Path

from realkit import Server, cache, js, run, stack_file


def rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_vdf_real_small_run_end_to_end(tmp_path):
    out = tmp_path / "vdf"
    p = run("repro", "vdf", "--real", "--builtin", "--disks", "5", "--policies", "lru,vdf-lru",
            "--outstanding", "4", "--repeat", "1", "--part", "300", "--load", "closed", "--out", out)
    runs = rows(out / "vdf-real-runs.csv")
    assert sorted(r["policy"] for r in runs) == ["lru", "vdf-lru"]
    for r in runs:
        assert r["rebuild_finished"] == "True" and r["rebuild_rows"] == r["rows_total"], r
        # The rebuilt member agrees with the others on every stripe, and none was skipped as degraded.
        assert (r["check_mismatches"], r["check_degraded_skipped"]) == ("0", "0"), r
        assert int(r["check_stripes"]) == int(r["rows_total"]), r
        assert r["errors"] == "0", r
        # Every part replayed all its requests, and the stack saw one access per 4 KiB read.
        assert (r["requests_4"], r["requests_rebuild_part"]) == ("300", "300"), r
        assert (r["accesses_4"], r["accesses_rebuild_part"]) == ("300", "300"), r
        assert r["load_covered"] in ("True", "False")
    # Base and VDF replayed the same requests: the same figures of what was asked.
    a, b = runs
    assert all(a[k] == b[k] for k in ("requests_4", "accesses_4", "requests_rebuild_part", "rows_total"))
    sims = rows(out / "vdf-real-sim.csv")
    assert sorted(r["policy"] for r in sims) == ["lru", "vdf-lru"]
    assert all(r["rebuild_finished"] == "True" for r in sims)
    md = (out / "vdf-real-report.md").read_text()
    assert md == p.stdout.split("wrote ")[0]
    for text in ("one virtual disk", "one request at a time", "| the paper reports | paper | ours | verdict |",
                 "34.6 %", "28.4 %", "simulated, same stack and trace"):
        assert text in md, text


def test_vdf_real_open_load_replays_the_rest_of_the_trace_during_the_rebuild(tmp_path):
    """`--load open` (the default): the rebuild part is every read after the closed parts, issued at the
    trace's times / --speedup; the simulator replays the same file open loop at the same speed-up."""
    out = tmp_path / "vdf"
    p = run("repro", "vdf", "--real", "--builtin", "--disks", "5", "--policies", "lru,vdf-lru",
            "--outstanding", "4", "--repeat", "1", "--part", "300", "--warmup", "1", "--speedup", "25",
            "--load", "open", "--out", out)
    trace = out / "trace-raid5x5.csv"
    reads = sum(1 for _ in open(trace)) - 1
    warm = sum(1 for line in list(open(trace))[1:] if float(line.split(",")[0]) < 1.0)
    rest = reads - warm - 300
    assert rest > 300
    runs = rows(out / "vdf-real-runs.csv")
    for r in runs:
        assert r["rebuild_finished"] == "True" and r["rebuild_rows"] == r["rows_total"], r
        assert (r["check_mismatches"], r["check_degraded_skipped"], r["errors"]) == ("0", "0", "0"), r
        assert (r["requests_4"], r["requests_rebuild_part"]) == ("300", str(rest)), r
        assert r["accesses_rebuild_part"] == str(rest), r
    sims = rows(out / "vdf-real-sim.csv")
    assert all(r["rebuild_finished"] == "True" for r in sims)
    md = (out / "vdf-real-report.md").read_text()
    assert f"open loop, the trace's remaining {rest:,} reads at their times / 25" in md
    assert "rebuild part (open load)" in md and "one virtual disk" in md


def test_a_trace_is_split_at_chunks_and_stretched_over_a_larger_array_chunk_by_chunk(tmp_path):
    from blocklab.repro.real_runs import prepare_trace

    src = tmp_path / "t.csv"
    k = 65536
    # Hand-worked: a span of 4 chunks stretched over 16: chunk c lands on chunk 4c, the offset within
    # the chunk kept; the request across chunks 0 and 1 is split there, each piece placed with its chunk.
    src.write_text(f"timestamp,op,offset,size\n0,R,0,4096\n1,R,{k + 8192},8192\n2,R,{3 * k},{k}\n"
                   f"3,R,{k - 4096},8192\n")
    p = prepare_trace(str(src), "csv", tmp_path / "out.csv", chunk=k, stretch=16 * k)
    lines = (tmp_path / "out.csv").read_text().splitlines()[1:]
    assert [tuple(int(x) for x in line.split(",")[2:]) for line in lines] == [
        (0, 4096), (4 * k + 8192, 8192), (12 * k, k), (k - 4096, 4096), (4 * k, 4096)]
    assert [line.split(",")[0] for line in lines] == ["0.000000", "1.000000", "2.000000", "3.000000", "3.000000"]
    # Every block keeps one place: as many unique blocks as unstretched (2 + 3 + 16).
    flat = prepare_trace(str(src), "csv", tmp_path / "flat.csv", chunk=k)
    assert (p.requests, p.span, p.unique_blocks) == (5, 13 * k, 21) and flat.unique_blocks == 21
    # A span already as large as the target is left where it is.
    same = prepare_trace(str(src), "csv", tmp_path / "same.csv", chunk=k, stretch=4 * k)
    assert same.span == 4 * k


def test_vdf_real_bad_input_is_one_line_exit_2(tmp_path):
    for args, words in ((["--load", "bogus"], "--load"), (["--speedup", "0"], "--speedup"),
                        (["--disks", "4"], "--disks"), (["--policies", "lru,arc"], "--policies"),
                        (["--policies", "lru,lfu"], "VDF variant"), (["--outstanding", "0"], "--outstanding"),
                        (["--member-size", "1MiB", "--builtin", "--disks", "5"], "span"),
                        (["--real", "--timed"], "two recipes")):
        p = run("repro", "vdf", "--real", *args, "--out", tmp_path / "x", check=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        err = p.stderr.strip()
        assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err, (args, err)


def test_pro_real_small_run_end_to_end(tmp_path):
    out = tmp_path / "pro"
    p = run("repro", "pro", "--real", "--cells", "ws:5", "--repeat", "1", "--member-size", "4MiB", "--out", out)
    runs = rows(out / "pro-real-runs.csv")
    assert sorted(r["order"] for r in runs) == ["md", "pro"]
    for r in runs:
        assert r["rebuild_finished"] == "True" and r["rebuild_rows"] == r["rows_total"], r
        assert (r["check_mismatches"], r["check_degraded_skipped"]) == ("0", "0"), r
        assert r["errors"] == "0", r
    # Both orders replayed the whole trace file, the same requests.
    n = sum(1 for _ in open(out / "ws-raid5x5.csv")) - 1
    assert all(int(r["requests"]) == n for r in runs) and runs[0]["reads"] == runs[1]["reads"]
    sims = rows(out / "pro-real-sim.csv")
    assert sorted(r["order"] for r in sims) == ["md", "pro"]
    assert all(int(r["requests"]) == n for r in sims)
    md = (out / "pro-real-report.md").read_text()
    assert md == p.stdout.split("wrote ")[0]
    for text in ("one virtual disk", "| the paper reports | paper | ours | verdict |", "252.98 / 210.67",
                 "simulated, same array and trace"):
        assert text in md, text


def test_pro_real_bad_cells_are_one_line_exit_2(tmp_path):
    for cells in ("ws:2", "xx:5", "ws"):
        p = run("repro", "pro", "--real", "--cells", cells, "--out", tmp_path / "x", check=False)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--cells" in p.stderr, p.stderr


def test_repeated_gains_of_both_signs_are_never_a_match():
    from blocklab.repro.real_runs import judge_repeated, noisy, spread

    # Hand-worked: the median 30 is within 20 % of the paper's 28.4, but one repeat lost.
    assert noisy([30.0, -5.0, 31.0]) and not noisy([30.0, 5.0, 31.0]) and not noisy([-3.0])
    assert judge_repeated(28.4, [30.0, -5.0, 31.0])[0] == "trend"
    assert judge_repeated(28.4, [30.0, 5.0, 31.0]) == ("matched", "")
    assert judge_repeated(28.4, [-30.0, 5.0, -31.0])[0] == "contradicted"
    assert spread([3.0, 1.0, 2.0]) == "2.00 (1.00–3.00)" and spread([1.5]) == "1.50"


def test_a_served_stack_replays_in_phases_through_its_server_with_a_log(tmp_path):
    """`real replay` of a served stack goes through the server (any --outstanding), `--skip` / `--limit`
    cut the trace, and `--log` has one line per request issued, on the Unix clock."""
    import time

    f = stack_file(tmp_path, "s", cache("vdf-lru", 64, "through"))
    d = tmp_path / "arr"
    run("real", "create", d, "--stack", f, "--disk-size", "1MiB")
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,op,offset,size\n" + "".join(f"{i * 0.001:.3f},R,{(i % 50) * 4096},4096\n"
                                                         for i in range(100)))
    srv = Server(d)
    try:
        before = time.time()
        r = js("real", "replay", d, "--trace", trace, "--format", "csv", "--replay", "closed", "--outstanding", "8",
               "--skip", "30", "--limit", "40", "--log", tmp_path / "log.csv")
        after = time.time()
        assert (r["target"], r["requests"], r["errors"]) == ("nbd", 40, 0)
        lines = (tmp_path / "log.csv").read_text().splitlines()
        assert lines[0] == "issued_unix_s,op,offset,bytes,response_ms,ok" and len(lines) == 41
        offs = sorted(int(x.split(",")[2]) // 4096 for x in lines[1:])
        assert offs == sorted(i % 50 for i in range(30, 70))
        assert all(before - 1 <= float(x.split(",")[0]) <= after + 1 for x in lines[1:])
        # The server's stack saw those 40 reads.
        st = js("real", "status", d)
        assert st["stack"]["layers"][0]["accesses"] == 40
    finally:
        srv.ensure_dead()
    p = run("real", "replay", d, "--trace", trace, "--format", "csv", "--skip", "-1", check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--skip" in p.stderr, p.stderr

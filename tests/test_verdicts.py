"""The shared verdict table (blocklab.repro.verdicts) and the VDF recipe's claims."""

import pandas as pd
import pytest

from blocklab.repro import verdicts as v


def test_judge_a_number_against_the_papers():
    assert v.judge(36.2, 32.9) == "matched"  # within 20 % of it
    assert v.judge(36.2, 10.0) == "trend"  # same side of zero
    assert v.judge(36.2, -1.0) == "contradicted"
    assert v.judge(36.2, 0.0) == "contradicted"
    assert v.judge(36.2, None) == "missing" and v.judge(36.2, float("nan")) == "missing"


def test_judge_a_share_of_cases():
    assert [v.judge_share(x) for x in (0.9, 0.75, 0.6, 0.5, 0.1, None)] == [
        "matched", "matched", "trend", "contradicted", "contradicted", "missing"]


def test_a_claim_needs_a_known_verdict_and_a_reason_unless_matched():
    with pytest.raises(ValueError, match="verdict `close`"):
        v.Claim("c", "1", "1", "close")
    with pytest.raises(ValueError, match="needs a reason class"):
        v.Claim("c", "1", "2", "trend")
    with pytest.raises(ValueError, match="reason `luck`"):
        v.Claim("c", "1", "2", "trend", "luck")
    v.Claim("c", "1", "1", "matched")


def test_a_matched_claim_drops_the_reason_given_for_a_gap():
    c = v.Claim("c", "1", "1", "matched", "data", "the paper's trace is not available")
    assert (c.reason, c.why) == ("", "")
    assert v.Claim("c", "1", "2", "trend", "data", "why").why == "why"


def test_markdown_table_has_one_row_per_claim_and_escapes_bars():
    md = v.markdown([v.Claim("a | b", "1 %", "1 %", "matched"), v.Claim("c", "2", "0", "contradicted", "model", "why")])
    lines = md.splitlines()
    assert lines[0] == "| the paper reports | paper | ours | verdict | reason | why |"
    assert lines[2] == "| a \\| b | 1 % | 1 % | matched | – |  |"
    assert lines[3] == "| c | 2 | 0 | contradicted | model | why |"
    assert "<td>contradicted</td>" in v.html([v.Claim("c", "2", "0", "contradicted", "model")])


def test_vdf_claims_from_reductions():
    from blocklab.repro import vdf as rv

    # One trace with reuse, 5 and 8 disks, three sizes: VDF-LRU up to 33 % (matched), VDF-LFU up to
    # 20 % (trend), LFU gains more in 2 of 6 cells, 8 disks beat 5 in every series, the middle size wins.
    rows = []
    for n, k in ((5, 1.0), (8, 1.1)):
        for size, pct, lru, lfu in (("1%", 1, 10, 12), ("5%", 5, 30, 20), ("40%", 40, 5, 4)):
            rows.append({"trace": "t", "disks": n, "size": size, "size_pct": float(pct), "cache_blocks": 10,
                         "red_lru": lru * k, "red_lfu": lfu * k})
    red = pd.DataFrame(rows)
    got = {c.claim: c for c in rv.claims(red)}
    lru = got[rv.PAPER["claims"][0]]
    assert (lru.verdict, lru.ours) == ("matched", "33.0 % (t, 8 disks, 5%)")
    lfu = got[rv.PAPER["claims"][1]]
    assert (lfu.verdict, lfu.reason) == ("trend", "data") and rv.WITH_PAPERS_TRACES in lfu.why
    assert got[rv.PAPER["claims"][2]].verdict == "contradicted"  # LFU ahead in 2 of 6 cells
    assert got[rv.PAPER["claims"][3]].verdict == "matched"
    assert got[rv.PAPER["claims"][4]].verdict == "matched"
    assert got["VDF lowers RGR 'consistently'"].verdict == "matched"


def test_vdf_timed_claims_from_the_summary():
    from blocklab.repro import vdf_timed as vt

    rows = []
    for n, rd in ((5, 30.0), (8, 20.0)):
        for base in ("lru", "lfu"):
            rows.append({"disks": n, "size": "10%", "base": base, "rd_impr": rd, "eq4": rd + 1.0,
                         "rate_20": 20.0, "rate_80": 28.0, "rate_model": 30.0})
    got = {c.claim: c for c in vt.claims(pd.DataFrame(rows))}
    rd = got["VDF-LRU shortens the rebuild at full bandwidth by up to 34.6 %"]
    assert (rd.verdict, rd.ours) == ("matched", "+30.0 % (5 disks, 10%)")
    rate = got["VDF-LFU raises the degraded service rate by up to 46.8 % (8 disks)"]
    assert (rate.verdict, rate.reason) == ("trend", "data")
    assert got[vt.CLAIMS[1]].verdict == "matched"  # smaller with 8 disks in both series
    assert got["Eq. 4 predicts the rebuild speed-up from the utilizations"].verdict == "matched"
    assert got["the service-rate gain grows with the threads toward the simulated (RGR) value"].verdict == "matched"


def test_pro_claims_from_the_tables():
    from blocklab.repro import pro as rp

    # WebSearch only; md 100 ms on RAID-5 (120 on RAID-10) and 50 s at 10,000 KiB/s everywhere.
    # PRO on RAID-5 of 3/5/7/9: 81.26 / 90 / 105 / 92 ms (18.74 / 10 / -5 / 8 %), rebuild unchanged.
    pro_ms = {("raid5", 3): 81.26, ("raid5", 5): 90.0, ("raid5", 7): 105.0, ("raid5", 9): 92.0,
              ("raid10", 4): 120.0, ("raid10", 6): 120.0}
    rows = []
    for (level, n), p in pro_ms.items():
        md = 100.0 if level == "raid5" else 120.0
        for order, resp in (("md", md), ("pro", p)):
            rows.append({"trace": "ws", "level": level, "disks": n, "order": order, "mode": "L", "param": "",
                         "value": "", "resp_during_ms": resp, "rebuild_s": 50.0, "avg_kbps": 10000.0,
                         "share_from_spare": 0.5})
    t3 = rp.tables(pd.DataFrame(rows))
    um = pd.DataFrame([{"trace": "ws", "mode": "U", "resp_impr": 30.0, "rebuild_impr": 2.0}])
    sw = pd.DataFrame([{"trace": "ws", "resp_impr": 5.0}, {"trace": "ws", "resp_impr": -1.0}])
    f3 = pd.DataFrame([{"trace": "ws", "chunk": "16KiB", "resp_impr": 5.0},
                       {"trace": "ws", "chunk": "64KiB", "resp_impr": -2.0}])
    got = {c.claim: c for c in rp.claims(t3, um, pd.DataFrame(), sw, f3)}
    r5 = "Table 3, WebSearch, RAID-5 of {}: PRO lowers the response during recovery"
    assert [got[r5.format(n)].verdict for n in (3, 5, 7, 9)] == ["matched", "trend", "contradicted", "matched"]
    assert got[r5.format(7)].paper == "10.78 % (printed 7.85 %)"  # the paper's own columns, the misprint beside
    assert (got[r5.format(5)].reason, got[r5.format(5)].ours) == ("data", "+10.0 %")
    assert got["Table 3, WebSearch: the gain shrinks as disks are added (3 to 9)"].verdict == "trend"  # 2 of 3 steps
    assert got["Table 4, WebSearch, RAID-5: rebuild time unchanged (MD at its floor)"].verdict == "matched"
    assert got["Table 4, WebSearch: MD rebuilds at its 10 MB/s floor on every array"].verdict == "matched"
    flat = got["Table 3, WebSearch: PR's response about the same on all six arrays"]
    assert (flat.verdict, flat.ours) == ("matched", "100.0 .. 120.0 ms (x 1.20)")
    level = got["Table 3, WebSearch: PR's response level during recovery"]
    assert (level.verdict, level.reason) == ("trend", "model")
    assert got["RAID-10 (ws, 4 and 6 disks): little change in response or rebuild time"].verdict == "matched"
    assert got["Fig. 2 (RAID-5 of 3, limits 100 MB/s): PRO lowers the response by 27.65-47.17 %"].verdict == "matched"
    assert got["Fig. 2: PRO shortens the rebuild by up to 4.44 %"].verdict == "trend"  # 2 %: beyond half of 4.44
    assert got["Fig. 3 (ws, RAID-5 of 3): PRO beats PR in response with 16 KB and 64 KB chunks"].verdict == "trend"
    params = got["PRO's gain does not hinge on its own parameters (ws, RAID-5 of 5)"]
    assert (params.verdict, params.reason) == ("trend", "paper")
    printed = got["Table 4, ws raid5 of 9: rebuild 1.43 % better, as printed"]
    assert (printed.verdict, printed.reason) == ("contradicted", "paper") and "0.14 %" in printed.why
    assert not any("Financial" in c for c in got)  # no Financial runs: no Financial rows


def test_judge_band():
    from blocklab.repro.pro import judge_band

    assert judge_band(-5.03, 13.99, [0.0, 13.0]) == "matched"
    assert judge_band(-5.03, 13.99, [0.0, 44.5]) == "trend"
    assert judge_band(27.65, 47.17, [13.7, -34.0]) == "trend"  # one on the range's side of zero
    assert judge_band(27.65, 47.17, [-13.7]) == "contradicted"
    assert judge_band(-5.03, 13.99, [-40.0]) == "contradicted"  # a range across zero has no side
    assert judge_band(1.0, 2.0, [float("nan")]) == "missing"

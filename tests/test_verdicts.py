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

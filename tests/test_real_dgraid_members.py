"""D-GRAID on real member files with D = 3 and D = 6 members (the other real tests use 4): an ext2 of a
generated namespace written through the export, k of D members failed, every file read back over NBD,
the share of files whole beside `dgraid avail`'s prediction for the same namespace and failure sets
(`repro dgraid --real`'s measurement, `blocklab.repro.dgraid_real.availability`).

Set by set the two differ (the model numbers the listing's inodes itself, the array infers mke2fs's),
but over every failure set of a k both must give exactly (D - k) / D of the files: a file's data sits
on one home site (dgraid0) or one mirror pair (dgraid1), the namespace on every member."""

from __future__ import annotations

import itertools
import os
import shutil

import pytest

from blocklab.repro import dgraid_real as dr

pytestmark = pytest.mark.skipif(shutil.which("nbdcopy") is None or shutil.which("debugfs") is None
                                and not os.path.exists("/usr/sbin/debugfs"), reason="needs nbdcopy and e2fsprogs")


def _share(rows: list[dict], key: str = "files_whole") -> float:
    if key == "files_whole":
        return sum(r["files_whole"] / r["files"] for r in rows) / len(rows)
    return sum(r[key] for r in rows) / len(rows)


@pytest.mark.parametrize("disks", [3, 6])
def test_files_whole_after_k_of_d_failures_as_dgraid_avail_predicts(tmp_path, disks):
    small = dict(disks=disks, dirs=4, files=16, max_file=48 << 10, fills=())
    # dgraid0: every k of 3 (every set); of 6, k = 1 (its 6 sets). dgraid1 (even D only): one failure
    # (one sampled set), and two (one sampled set and every mirror pair).
    plans = [dr.Plan(levels=("dgraid0",), ks=None if disks == 3 else (0, 1), sets_per_k=disks, **small)]
    if disks % 2 == 0:
        plans.append(dr.Plan(levels=("dgraid1",), ks=(1, 2), sets_per_k=1, **small))
    av = []
    for i, plan in enumerate(plans):
        (tmp_path / str(i)).mkdir()
        av += dr.availability(plan, tmp_path / str(i), progress=lambda m: None)
    levels = [lv for p in plans for lv in p.levels]
    assert av and all(r["disks"] == disks for r in av)
    assert all(r["other_bytes"] == 0 for r in av), "a read returned bytes other than the file's"
    for level in levels:
        rows = [r for r in av if r["level"] == level]
        assert all(r["files_whole"] == r["files"] for r in rows if r["k"] == 0)
        for k in range(1, disks):
            at_k = [r for r in rows if r["k"] == k]
            every = {",".join(map(str, s)) for s in itertools.combinations(range(disks), k)}
            if level == "dgraid0" and {r["failed"] for r in at_k} == every:
                # Every failure set of this k was measured: exact symmetry, measured and predicted.
                assert _share(at_k) == pytest.approx((disks - k) / disks, abs=1e-9), (level, k)
                assert _share(at_k, "model_files") == pytest.approx((disks - k) / disks, abs=1e-9), (level, k)
        if level == "dgraid1":
            # One failure loses no file; a whole mirror pair loses that pair's files, as predicted.
            assert all(r["files_whole"] == r["files"] and r["model_files"] == 1 for r in rows if r["k"] == 1)
            pairs = [r for r in rows if r["k"] == 2 and r["failed"] in {f"{2 * p},{2 * p + 1}"
                                                                          for p in range(disks // 2)}]
            assert len(pairs) == disks // 2
            want = (disks // 2 - 1) / (disks // 2)
            assert _share(pairs) == pytest.approx(want, abs=1e-9)
            assert _share(pairs, "model_files") == pytest.approx(want, abs=1e-9)
            (claim,) = [c for c in dr.mirror_claims(av) if "mirror pair" in c.claim]
            assert claim.verdict == "matched", claim

//! The real executor against a reference image: whatever is written must
//! read back, healthy, degraded, after a rebuild, after silent damage to the
//! member files, and after a crash at any member write.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::members::{member_path, sums_path, Faults};
use super::rebuild::RebuildOptions;
use super::*;
use crate::array::{ArrayConfig, Level};

fn rng(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn bytes(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng(seed) as u8).collect()
}

/// 4 KiB blocks, 8 KiB chunks, 64 KiB members.
fn cfg(level: &str, disks: u32, layout: Option<&str>) -> ArrayConfig {
    ArrayConfig::from_names_sized(level, disks, 8192, layout, 4096, 64 * 1024).unwrap()
}

fn make(dir: &Path, c: ArrayConfig, checksums: bool) -> RealArray {
    RealArray::create(dir, c, checksums).unwrap();
    RealArray::open(dir, OpenConfig::default()).unwrap()
}

/// A new array after `count` random writes, and the image they left.
fn scribbled(dir: &Path, c: ArrayConfig, checksums: bool, seed: &mut u64, count: usize) -> (RealArray, Vec<u8>) {
    let a = make(dir, c, checksums);
    let mut image = vec![0u8; a.size_bytes() as usize];
    scribble(&a, &mut image, seed, count);
    (a, image)
}

/// Reopen with buffered I/O and the fault hook (the crash tests; the trim
/// attacks' too).
pub(super) fn open_with_faults(dir: &Path, faults: &Arc<Faults>) -> RealArray {
    RealArray::open(
        dir,
        OpenConfig {
            faults: Some(faults.clone()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Fail every member of `disks`, then put a fresh spare in each.
fn fail_and_replace(a: &RealArray, disks: &[u32]) {
    for &d in disks {
        a.fail(d).unwrap();
    }
    for &d in disks {
        a.replace(d).unwrap();
    }
}

/// One rebuild run to its end (or its error), never stopped.
fn run_rebuild(a: &RealArray, opts: &RebuildOptions) -> Result<rebuild::RebuildReport> {
    a.rebuild(opts, &AtomicBool::new(false))
}

/// The whole array, read into an aligned buffer (as the NBD server does, so
/// that healthy reads take the direct path) and into a plain one.
fn read_all(a: &RealArray) -> std::result::Result<Vec<u8>, ReqError> {
    let mut aligned = crate::exec::buf::AlignedBuf::zeroed(a.size_bytes() as usize);
    a.read(0, &mut aligned)?;
    let mut plain = vec![0u8; a.size_bytes() as usize + 1];
    a.read(0, &mut plain[1..])?;
    assert!(plain[1..] == aligned[..], "aligned and unaligned reads differ");
    Ok(aligned.to_vec())
}

/// Random writes (aligned and not) mirrored into `image`.
fn scribble(a: &RealArray, image: &mut [u8], seed: &mut u64, count: usize) {
    let size = image.len() as u64;
    for _ in 0..count {
        let aligned = !rng(seed).is_multiple_of(3);
        let (off, len) = if aligned {
            let b = rng(seed) % (size / 4096);
            let n = 1 + rng(seed) % (size / 4096 - b).min(24);
            (b * 4096, n * 4096)
        } else {
            let off = rng(seed) % (size - 1);
            let len = 1 + rng(seed) % (size - off).min(20_000);
            (off, len)
        };
        let data = bytes(seed, len as usize);
        a.write(off, &data, rng(seed).is_multiple_of(5)).unwrap();
        image[off as usize..(off + len) as usize].copy_from_slice(&data);
    }
}

fn corrupt(dir: &Path, disk: u32, at: u64, len: usize) {
    let f = OpenOptions::new().write(true).open(member_path(dir, disk)).unwrap();
    f.write_all_at(&vec![0x5au8; len], at).unwrap();
}

#[test]
fn every_level_reads_back_what_it_wrote_healthy_degraded_and_rebuilt() {
    let cases: &[(&str, u32, Option<&str>)] = &[
        ("raid0", 3, None),
        ("raid1", 3, None),
        ("raid10", 4, None),
        ("raid10", 4, Some("f2")),
        ("raid10", 3, Some("o2")),
        ("raid4", 4, None),
        ("raid5", 4, None),
        ("raid5", 5, Some("right-asymmetric")),
        ("raid6", 5, None),
        ("raid6", 6, Some("ddf-n-continue")),
    ];
    for &(level, disks, layout) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut seed = disks as u64 * 77 + level.len() as u64;
        let (a, mut image) = scribbled(dir.path(), cfg(level, disks, layout), false, &mut seed, 60);
        assert_eq!(read_all(&a).unwrap(), image, "{level} {layout:?} healthy");
        let rep = a.check(false).unwrap();
        assert_eq!(rep.mismatches, 0, "{level}: {rep:?}");
        if a.config().level == Level::Raid0 {
            // No redundancy: a failed member makes its blocks errors.
            a.fail(1).unwrap();
            assert!(matches!(read_all(&a), Err(ReqError::Unreadable(_))));
            continue;
        }
        // Degraded: reads reconstruct, writes keep going.
        a.fail(1).unwrap();
        assert_eq!(read_all(&a).unwrap(), image, "{level} degraded");
        scribble(&a, &mut image, &mut seed, 30);
        assert_eq!(read_all(&a).unwrap(), image, "{level} degraded after writes");
        // A fresh spare, rebuilt, then another member lost: still all there.
        a.replace(1).unwrap();
        assert_eq!(read_all(&a).unwrap(), image, "{level} recovering");
        let rep = run_rebuild(&a, &RebuildOptions::default()).unwrap();
        assert!(rep.finished && rep.rows_done == a.member_rows(), "{rep:?}");
        assert_eq!(a.status().health, "healthy");
        assert_eq!(a.check(false).unwrap().mismatches, 0, "{level} after rebuild");
        let other = if level == "raid10" && layout.is_none() { 3 } else { 0 };
        a.fail(other).unwrap();
        assert_eq!(read_all(&a).unwrap(), image, "{level} rebuilt disk serves");
    }
}

#[test]
fn beyond_redundancy_is_an_error_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 5;
    let (a, image) = scribbled(dir.path(), cfg("raid5", 4, None), false, &mut seed, 20);
    a.fail(0).unwrap();
    a.fail(2).unwrap();
    assert_eq!(a.status().health, "failed");
    let mut ok = 0;
    let mut bad = 0;
    for b in 0..a.size_bytes() / 4096 {
        let mut buf = vec![0u8; 4096];
        match a.read(b * 4096, &mut buf) {
            Ok(()) => {
                assert_eq!(
                    buf,
                    &image[(b * 4096) as usize..][..4096],
                    "block {b} returned wrong bytes"
                );
                ok += 1;
            }
            Err(ReqError::Unreadable(_)) => bad += 1,
            Err(e) => panic!("{e}"),
        }
    }
    // Half the data units are on the two lost members.
    assert!(ok > 0 && bad > 0, "{ok} {bad}");
    assert!(a.replace(0).is_err(), "nothing to rebuild from");
}

#[test]
fn checksums_find_and_repair_silent_corruption_on_read_even_on_raid5() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 11;
    let (a, image) = scribbled(dir.path(), cfg("raid5", 4, None), true, &mut seed, 40);
    a.flush().unwrap();
    // Flip bytes in two members, different stripes; zero a whole block.
    corrupt(dir.path(), 0, 4096 * 3 + 17, 9);
    corrupt(dir.path(), 2, 4096 * 9, 4096);
    assert_eq!(read_all(&a).unwrap(), image);
    assert!(a.stats.heals.load(Ordering::Relaxed) > 0);
    // The reads repaired the members: a check finds nothing.
    let rep = a.check(false).unwrap();
    assert_eq!((rep.mismatches, rep.unrecoverable), (0, 0), "{rep:?}");
    // Damage a checksum instead of the data: found by check, repaired.
    let f = OpenOptions::new().write(true).open(sums_path(dir.path(), 1)).unwrap();
    f.write_all_at(&[1, 2, 3, 4], 4 * 5).unwrap();
    let rep = a.check(true).unwrap();
    assert_eq!((rep.mismatches, rep.repaired, rep.unrecoverable), (1, 1, 0), "{rep:?}");
    assert_eq!(a.check(false).unwrap().mismatches, 0);
    assert_eq!(read_all(&a).unwrap(), image);
    // Two bad units in one row of RAID-5: an error, not wrong data.
    corrupt(dir.path(), 0, 0, 100);
    corrupt(dir.path(), 1, 0, 100);
    let mut buf = vec![0u8; 4096];
    let r0 = a.read(0, &mut buf);
    assert!(
        matches!(r0, Err(ReqError::Unreadable(_))) || buf == image[..4096],
        "{r0:?}"
    );
    let rep = a.check(false).unwrap();
    assert!(rep.unrecoverable >= 1, "{rep:?}");
}

#[test]
fn raid6_check_locates_and_repairs_a_wrong_unit_without_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 3;
    let (a, image) = scribbled(dir.path(), cfg("raid6", 5, None), false, &mut seed, 40);
    // Row 0: damage a data unit; row 1: P or Q, wherever disk 4 sits.
    corrupt(dir.path(), 1, 4096 * 2 + 100, 50);
    corrupt(dir.path(), 4, 8192 + 4096, 4096);
    let rep = a.check(false).unwrap();
    assert_eq!((rep.mismatches, rep.repaired, rep.unrecoverable), (2, 0, 0), "{rep:?}");
    let rep = a.check(true).unwrap();
    assert_eq!((rep.mismatches, rep.repaired, rep.unrecoverable), (2, 2, 0), "{rep:?}");
    assert_eq!(a.check(false).unwrap().mismatches, 0);
    assert_eq!(read_all(&a).unwrap(), image);
}

/// Every member image's bytes.
fn member_bytes(dir: &Path, disks: u32) -> Vec<Vec<u8>> {
    (0..disks)
        .map(|d| std::fs::read(member_path(dir, d)).unwrap())
        .collect()
}

#[test]
fn raid6_repair_leaves_a_row_with_two_wrong_data_units_as_it_is_and_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 5;
    let (a, _) = scribbled(dir.path(), cfg("raid6", 5, None), false, &mut seed, 40);
    a.flush().unwrap();
    // Two data units of block row 3 (member block 3, chunk row 1) wrong:
    // P and Q disagree in a way no single unit explains.
    let sm = a.live.read().unwrap().array.stripe_map(1);
    let (d0, d1) = (sm.data_disk(0), sm.data_disk(2));
    corrupt(dir.path(), d0, 4096 * 3 + 10, 20);
    corrupt(dir.path(), d1, 4096 * 3 + 900, 7);
    let before = member_bytes(dir.path(), 5);
    let want = |rep: &ScrubReport| {
        assert_eq!((rep.mismatches, rep.repaired, rep.unrecoverable), (1, 0, 1), "{rep:?}");
        assert_eq!(rep.unrecoverable_at, vec![3], "{rep:?}");
    };
    want(&a.check(false).unwrap());
    want(&a.check(true).unwrap());
    assert!(
        member_bytes(dir.path(), 5) == before,
        "repair rewrote an unrecoverable row"
    );
    want(&a.check(false).unwrap());
}

#[test]
fn raid5_repair_without_checksums_rewrites_parity_as_md() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 8;
    let (a, image) = scribbled(dir.path(), cfg("raid5", 4, None), false, &mut seed, 30);
    // Stripe 0 of left-symmetric 4 disks: parity on disk 3.
    corrupt(dir.path(), 3, 100, 10);
    let rep = a.check(true).unwrap();
    assert_eq!((rep.mismatches, rep.repaired), (1, 1));
    assert_eq!(read_all(&a).unwrap(), image);
    a.fail(0).unwrap();
    assert_eq!(read_all(&a).unwrap(), image, "the repaired parity reconstructs");
}

#[test]
fn a_truncated_member_is_healed_by_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 21;
    let (a, image) = scribbled(dir.path(), cfg("raid6", 4, None), false, &mut seed, 40);
    let f = OpenOptions::new().write(true).open(member_path(dir.path(), 2)).unwrap();
    f.set_len(20_000).unwrap();
    assert_eq!(read_all(&a).unwrap(), image);
    let rep = a.check(true).unwrap();
    assert_eq!(rep.unrecoverable, 0, "{rep:?}");
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    assert_eq!(read_all(&a).unwrap(), image, "disk 2 was rebuilt in place");
}

/// Write `count` random requests, crash at member write `at`, reopen:
/// every block holds its old or its new value, the parity is consistent,
/// and losing a member afterwards loses nothing.
fn crash_round(level: &str, disks: u32, checksums: bool, degraded: Option<u32>, seed0: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut image;
    let mut seed = seed0;
    let faults = Arc::new(Faults::none());
    {
        let (a, written) = scribbled(dir.path(), cfg(level, disks, None), checksums, &mut seed, 20);
        image = written;
        if let Some(d) = degraded {
            a.fail(d).unwrap();
        }
        a.close().unwrap();
    }
    let a = open_with_faults(dir.path(), &faults);
    faults.crash_after(1 + rng(&mut seed) % 60, rng(&mut seed));
    let size = image.len() as u64;
    // Allowed values: old or new per 4 KiB block of the request in flight.
    let mut alt: Vec<Option<Vec<u8>>> = vec![None; (size / 4096) as usize];
    loop {
        let b = rng(&mut seed) % (size / 4096);
        let n = 1 + rng(&mut seed) % (size / 4096 - b).min(12);
        let data = bytes(&mut seed, (n * 4096) as usize);
        let (off, len) = ((b * 4096) as usize, (n * 4096) as usize);
        match a.write(off as u64, &data, false) {
            Ok(()) => image[off..off + len].copy_from_slice(&data),
            Err(_) => {
                for i in 0..n as usize {
                    alt[b as usize + i] = Some(data[i * 4096..(i + 1) * 4096].to_vec());
                }
                break;
            }
        }
    }
    assert!(faults.has_crashed());
    drop(a); // kill -9: nothing more reaches the files
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    let got = read_all(&a).unwrap();
    for (i, alt) in alt.iter().enumerate() {
        let (old, now) = (&image[i * 4096..(i + 1) * 4096], &got[i * 4096..(i + 1) * 4096]);
        match alt {
            Some(new) => assert!(now == old || now == &new[..], "{level} block {i}: neither old nor new"),
            None => assert_eq!(now, old, "{level} block {i} changed"),
        }
    }
    if degraded.is_none() {
        let rep = a.check(false).unwrap();
        assert_eq!(rep.mismatches, 0, "{level}: stale parity after the crash: {rep:?}");
        a.fail(0).unwrap();
    }
    assert_eq!(
        read_all(&a).unwrap(),
        got,
        "{level}: reconstruction after the crash differs"
    );
}

/// A crash at a random member write while four workers write one
/// sequential stream (the gatherer at work): every acknowledged request
/// reads back, the others left old or new bytes per block, and parity is
/// consistent after the restart.
fn crash_round_concurrent(level: &str, disks: u32, seed0: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = seed0;
    let c = ArrayConfig::from_names_sized(level, disks, 8192, None, 4096, 1 << 20).unwrap();
    make(dir.path(), c, false).close().unwrap();
    let faults = Arc::new(Faults::none());
    let a = open_with_faults(dir.path(), &faults);
    let old = read_all(&a).unwrap();
    faults.crash_after(20 + rng(&mut seed) % 200, rng(&mut seed));
    let mut reqs = Vec::new();
    let mut at = (rng(&mut seed) % 5) * 4096;
    while at < old.len() as u64 {
        let len = ((7 + rng(&mut seed) % 13) * 4096).min(old.len() as u64 - at);
        reqs.push((at, bytes(&mut seed, len as usize)));
        at += len;
    }
    let acked = super::integrity::write_from_workers(&a, &reqs, 4);
    assert!(faults.has_crashed());
    drop(a); // kill -9
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    let got = read_all(&a).unwrap();
    for ((off, d), ok) in reqs.iter().zip(acked) {
        let off = *off as usize;
        let now = &got[off..off + d.len()];
        if ok {
            assert!(now == &d[..], "{level}: an acknowledged write at {off} was lost");
        } else {
            for (i, blk) in now.chunks(4096).enumerate() {
                let o = off + i * 4096;
                assert!(
                    blk == &old[o..o + 4096] || blk == &d[i * 4096..(i + 1) * 4096],
                    "{level}: block at {o}"
                );
            }
        }
    }
    assert_eq!(
        a.check(false).unwrap().mismatches,
        0,
        "{level}: stale parity after the crash"
    );
    a.fail(1).unwrap();
    assert_eq!(
        read_all(&a).unwrap(),
        got,
        "{level}: reconstruction after the crash differs"
    );
}

#[test]
fn a_crash_amid_concurrent_sequential_writes_loses_no_acknowledged_byte() {
    for s in 0..6 {
        crash_round_concurrent("raid5", 4, 500 + s);
        crash_round_concurrent("raid6", 5, 600 + s);
    }
}

#[test]
fn a_crash_at_any_write_leaves_no_stale_parity() {
    for s in 0..12 {
        crash_round("raid5", 4, false, None, s);
        crash_round("raid6", 5, s % 2 == 0, None, 100 + s);
        crash_round("raid1", 3, s % 2 == 1, None, 200 + s);
    }
}

#[test]
fn a_crash_while_degraded_loses_nothing_thanks_to_the_journal() {
    for s in 0..12 {
        crash_round("raid5", 4, s % 2 == 0, Some((s % 4) as u32), 300 + s);
        crash_round("raid6", 5, false, Some((s % 5) as u32), 400 + s);
    }
}

#[test]
fn a_crash_mid_rebuild_resumes_from_the_recorded_offset() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::none());
    let image;
    {
        let mut seed = 99;
        let (a, written) = scribbled(dir.path(), cfg("raid6", 5, None), true, &mut seed, 30);
        image = written;
        fail_and_replace(&a, &[2, 4]);
        a.close().unwrap();
    }
    {
        let a = open_with_faults(dir.path(), &faults);
        // Checkpoint every row, crash a few rows in.
        let opts = RebuildOptions {
            checkpoint_ms: 0,
            ..Default::default()
        };
        // One row at a time, so that rows are recorded before the crash
        // (the orders' crash tests below run several in flight).
        let opts = RebuildOptions { window: 1, ..opts };
        faults.crash_after(11, 1);
        assert!(run_rebuild(&a, &opts).is_err());
    }
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    let st = a.status();
    assert_eq!(st.recovering, vec![2, 4]);
    assert!(st.recovered_rows > 0 && st.recovered_rows < st.member_rows, "{st:?}");
    assert_eq!(read_all(&a).unwrap(), image);
    let rep = run_rebuild(&a, &RebuildOptions::default()).unwrap();
    assert_eq!(rep.resumed_from, st.rebuilt_rows);
    assert!(rep.finished);
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    assert_eq!(read_all(&a).unwrap(), image, "the spares hold the data");
}

/// 8 KiB chunks, members of `rows` rows.
fn cfg_rows(level: &str, disks: u32, rows: u64) -> ArrayConfig {
    ArrayConfig::from_names_sized(level, disks, 8192, None, 4096, rows * 8192).unwrap()
}

/// Every order, several steps in flight, `kill -9` (the fault hook) in the
/// middle of the rebuild: the state file records what was rebuilt — for
/// PRO rows out of order, beyond an offset of 0 — and the next rebuild
/// resumes from it, and the spares then hold every byte.
#[test]
fn a_crash_mid_rebuild_resumes_from_the_recorded_map_for_every_order() {
    for (i, order) in crate::rebuild::ORDERS.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(Faults::none());
        let rows = 64;
        let image;
        {
            let mut seed = 7 + i as u64;
            let (a, written) = scribbled(dir.path(), cfg_rows("raid6", 5, rows), i % 2 == 0, &mut seed, 40);
            image = written;
            fail_and_replace(&a, &[1, 3]);
            a.close().unwrap();
        }
        let opts = RebuildOptions {
            order: order.to_string(),
            // Zones of 4 rows; steps recorded at every turn.
            pro_zone_bytes: 4 * 8192,
            checkpoint_ms: 0,
            ..RebuildOptions::unthrottled()
        };
        {
            let a = open_with_faults(dir.path(), &faults);
            // Users read the last zone (rows 60..64: logical blocks of
            // stripes 60..63) while the spares recover: PRO's hot zone.
            let mut buf = vec![0u8; 8192];
            for _ in 0..3 {
                a.read(60 * 3 * 8192, &mut buf).unwrap();
            }
            faults.crash_after(70, 3);
            assert!(run_rebuild(&a, &opts).is_err(), "{order}: the crash stops the rebuild");
        }
        let st = State::load(dir.path()).unwrap();
        let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
        let status = a.status();
        assert_eq!(status.recovering, vec![1, 3]);
        assert!(
            status.rebuilt_rows > 0 && status.rebuilt_rows < rows,
            "{order}: {status:?}"
        );
        let recorded: u64 = st.recovered_rows + st.rebuilt_runs.iter().map(|&(s, e)| e - s).sum::<u64>();
        assert_eq!(recorded, status.rebuilt_rows, "{order}: {st:?}");
        if order.starts_with("pro") {
            // The hot zone first, out of order: no offset to speak of.
            assert_eq!(st.recovered_rows, 0, "{order}: {st:?}");
            assert!(
                st.rebuilt_runs.iter().any(|&(s, e)| s <= 60 && e == rows),
                "{order}: {st:?}"
            );
        }
        if *order == "md" {
            assert!(st.recovered_rows > 0, "{st:?}");
        }
        assert_eq!(read_all(&a).unwrap(), image, "{order}: reads while recovering");
        let rep = run_rebuild(&a, &opts).unwrap();
        assert_eq!(rep.resumed_from, status.rebuilt_rows, "{order}: {rep:?}");
        assert_eq!(rep.rows_done, rows - status.rebuilt_rows, "{order}: {rep:?}");
        // Rows recorded as rebuilt are no work: MD and PRO make one step per
        // row left, DOR a read per survivor (3) and a write.
        let per_row = if order.contains("dor") { 4 } else { 1 };
        assert!(rep.finished, "{order}: {rep:?}");
        assert_eq!(rep.steps, (rows - status.rebuilt_rows) * per_row, "{order}: {rep:?}");
        assert_eq!(a.status().health, "healthy");
        assert_eq!(a.check(false).unwrap().mismatches, 0, "{order}");
        a.fail(0).unwrap();
        a.fail(2).unwrap();
        assert_eq!(read_all(&a).unwrap(), image, "{order}: the spares hold the data");
    }
}

/// Whole-stripe writes (parity computed straight into the member buffer on
/// RAID-4/5): parity agrees with the data, and each member, failed in turn,
/// is reconstructed from it byte for byte.
#[test]
fn whole_stripe_writes_leave_parity_that_reconstructs_every_member() {
    for (level, disks) in [("raid4", 4), ("raid5", 4), ("raid5", 5), ("raid6", 5)] {
        let dir = tempfile::tempdir().unwrap();
        let a = make(dir.path(), cfg(level, disks, None), false);
        let stripe = (a.config().disks - a.config().level.parity_units()) as usize * 8192;
        let mut seed = 5 + disks as u64;
        let image = bytes(&mut seed, a.size_bytes() as usize);
        // Two whole stripes per write.
        for (i, chunk) in image.chunks(2 * stripe).enumerate() {
            a.write((i * 2 * stripe) as u64, chunk, false).unwrap();
        }
        assert_eq!(a.check(false).unwrap().mismatches, 0, "{level}");
        // A clean bitmap: the copies below open without a resync (which
        // would recompute parity from the data).
        a.flush().unwrap();
        assert!(!a.bitmap_dirty());
        for d in 0..a.config().disks {
            let dir2 = tempfile::tempdir().unwrap();
            for m in 0..a.config().disks {
                std::fs::copy(member_path(dir.path(), m), member_path(dir2.path(), m)).unwrap();
            }
            std::fs::copy(dir.path().join("array.json"), dir2.path().join("array.json")).unwrap();
            let b = RealArray::open(dir2.path(), OpenConfig::default()).unwrap();
            b.fail(d).unwrap();
            assert_eq!(read_all(&b).unwrap(), image, "{level}: disk {d} from parity");
        }
    }
}

/// Every order on every redundant level: the spares become byte for byte
/// the member images they replace (and their checksum files, with
/// `--checksums`), and a second rebuild of the same members in the same
/// order makes the same steps and the same bytes (no users: nothing else
/// moves the order).
#[test]
fn every_order_rebuilds_the_lost_members_byte_for_byte() {
    type Case<'a> = (&'a str, u32, Option<&'a str>, &'a [u32]);
    let cases: &[Case] = &[
        ("raid1", 3, None, &[0]),
        ("raid10", 4, None, &[1]),
        ("raid10", 4, Some("f2"), &[2]),
        ("raid4", 4, None, &[3]),
        ("raid5", 4, None, &[2]),
        ("raid5", 5, Some("right-asymmetric"), &[0]),
        ("raid6", 5, None, &[1, 3]),
        ("raid6", 6, Some("ddf-n-continue"), &[0, 5]),
    ];
    let rows = 32;
    for (ci, &(level, disks, layout, lost)) in cases.iter().enumerate() {
        for (oi, order) in crate::rebuild::ORDERS.iter().enumerate() {
            let checksums = (ci + oi) % 2 == 0;
            let dir = tempfile::tempdir().unwrap();
            let c = ArrayConfig::from_names_sized(level, disks, 8192, layout, 4096, rows * 8192).unwrap();
            let mut seed = 1000 + ci as u64 * 10 + oi as u64;
            let (a, image) = scribbled(dir.path(), c, checksums, &mut seed, 80);
            a.flush().unwrap();
            let files = |d: u32| {
                // The data, without the identity block (its events move).
                let mut image = std::fs::read(member_path(dir.path(), d)).unwrap();
                image.truncate((rows * 8192) as usize);
                let mut f = vec![image];
                if checksums {
                    // A sidecar is sparse: an entry never written reads as
                    // 0, the sum of a zero block.
                    let mut sums = std::fs::read(sums_path(dir.path(), d)).unwrap();
                    sums.resize((rows * 2 * 4) as usize, 0);
                    f.push(sums);
                }
                f
            };
            let before: Vec<_> = lost.iter().map(|&d| files(d)).collect();
            let opts = RebuildOptions {
                order: order.to_string(),
                pro_zone_bytes: 4 * 8192,
                ..RebuildOptions::unthrottled()
            };
            let mut steps = Vec::new();
            for run in 0..2 {
                for &d in lost {
                    a.fail(d).unwrap();
                }
                for &d in lost {
                    a.replace(d).unwrap();
                    assert!(files(d)[0].iter().all(|&b| b == 0), "a fresh spare is empty");
                }
                let rep = run_rebuild(&a, &opts).unwrap();
                assert!(rep.finished && rep.rows_done == rows, "{level} {order}: {rep:?}");
                assert_eq!((rep.restarts, rep.unrecoverable_blocks), (0, 0), "{rep:?}");
                a.flush().unwrap();
                let after: Vec<_> = lost.iter().map(|&d| files(d)).collect();
                for (i, (x, y)) in after.iter().zip(&before).enumerate() {
                    for (k, (p, q)) in x.iter().zip(y).enumerate() {
                        let at = p.iter().zip(q.iter()).position(|(u, v)| u != v);
                        assert!(
                            p == q,
                            "{level} {layout:?} {order} run {run}: disk {} file {k} differs from the lost one at byte {at:?} ({} vs {} bytes)",
                            lost[i], p.len(), q.len()
                        );
                    }
                }
                steps.push(rep.steps);
            }
            assert_eq!(steps[0], steps[1], "{level} {order}: the same steps twice");
            assert_eq!(read_all(&a).unwrap(), image, "{level} {order}");
        }
    }
}

/// Every order rebuilding while a writer and a reader keep going: the
/// spares end up right (a write planned before a step's spare write waits
/// for it to be published; DOR's kept reads are dropped when a write locked
/// their row since), parity is consistent, and the spares alone serve it all.
#[test]
fn rebuilds_with_users_writing_lose_nothing() {
    use std::sync::atomic::Ordering;
    for (i, order) in crate::rebuild::ORDERS.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 192;
        let mut seed = 40 + i as u64;
        let (a, image) = scribbled(dir.path(), cfg_rows("raid5", 4, rows), i % 2 == 1, &mut seed, 30);
        let a = Arc::new(a);
        fail_and_replace(&a, &[2]);
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (a, done) = (a.clone(), done.clone());
            let mut image = image.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                // Users with a little think time (a tight loop would keep
                // DOR's low-priority steps waiting on every turn).
                while !done.load(Ordering::SeqCst) || n < 50 {
                    scribble(&a, &mut image, &mut seed, 1);
                    n += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                (image, n)
            })
        };
        let reader = {
            let (a, done) = (a.clone(), done.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 16384];
                let mut k = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let off = (k * 7919 * 4096) % (a.size_bytes() - 16384);
                    a.read(off, &mut buf).unwrap();
                    k += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            })
        };
        let opts = RebuildOptions {
            order: order.to_string(),
            pro_zone_bytes: 8 * 8192,
            ..RebuildOptions::unthrottled()
        };
        let rep = run_rebuild(&a, &opts).unwrap();
        done.store(true, Ordering::SeqCst);
        let (image, writes) = writer.join().unwrap();
        reader.join().unwrap();
        assert!(rep.finished, "{order}: {rep:?}");
        assert!(writes >= 50);
        assert_eq!(
            a.check(false).unwrap().mismatches,
            0,
            "{order}: parity after the rebuild"
        );
        assert_eq!(read_all(&a).unwrap(), image, "{order}");
        a.fail(0).unwrap();
        assert_eq!(read_all(&a).unwrap(), image, "{order}: the spare holds the data");
    }
}

#[test]
fn a_rebuild_past_redundancy_lists_bad_blocks_and_reads_fail() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 4;
    let (a, mut image) = scribbled(dir.path(), cfg("raid5", 4, None), true, &mut seed, 30);
    fail_and_replace(&a, &[1]);
    // A survivor silently damaged in row 0: row 0 of disk 1 cannot be rebuilt.
    corrupt(dir.path(), 0, 0, 4096);
    let rep = run_rebuild(&a, &RebuildOptions::default()).unwrap();
    assert_eq!(rep.unrecoverable_blocks, 1, "{rep:?}");
    assert_eq!(a.status().bad_blocks, 1);
    let got = read_all(&a);
    assert!(
        matches!(got, Err(ReqError::Unreadable(_))),
        "reads of a lost block must fail"
    );
    // Every other block still reads right.
    for b in 0..a.size_bytes() / 4096 {
        let mut buf = vec![0u8; 4096];
        if a.read(b * 4096, &mut buf).is_ok() {
            assert_eq!(buf, image[(b * 4096) as usize..][..4096], "block {b}");
        }
    }
    // The lost block is logical block 2 (disk 1, row 0) and its row also
    // holds the damaged unit of disk 0 (block 0): writing data units 0 and 1
    // of that row (blocks 0..4) lets parity be computed from new data.
    let mut buf = vec![0u8; 4096];
    assert!(
        a.write(8192, &buf, false).is_err(),
        "parity of the row cannot be computed"
    );
    buf.resize(16384, 7);
    a.write(0, &buf, false).unwrap();
    image[..16384].copy_from_slice(&buf);
    assert_eq!(a.status().bad_blocks, 0);
    assert_eq!(read_all(&a).unwrap(), image);
}

#[test]
fn the_array_directory_is_locked_and_state_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let a = make(dir.path(), cfg("raid5", 4, None), false);
    a.fail(3).unwrap();
    assert!(is_open_elsewhere(dir.path()) || RealArray::open(dir.path(), OpenConfig::default()).is_err());
    let e = RealArray::open(dir.path(), OpenConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("open in another process"), "{e}");
    drop(a);
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    assert_eq!(a.status().failed, vec![3]);
    assert_eq!(a.status().health, "degraded");
    let e = RealArray::create(dir.path(), cfg("raid5", 4, None), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already holds an array"), "{e}");
    let mut buf = vec![0u8; 10];
    assert!(matches!(
        a.read(a.size_bytes() - 5, &mut buf),
        Err(ReqError::OutOfRange(_))
    ));
}

#[test]
fn served_array_sees_fail_replace_rebuild_through_the_control_channel() {
    use crate::nbd::client::Client;
    let dir = tempfile::tempdir().unwrap();
    RealArray::create(dir.path(), cfg("raid6", 5, None), true).unwrap();
    let s = control::serve(
        dir.path(),
        &control::ServeOptions {
            listen: "127.0.0.1:0".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut c = Client::connect(&s.info.nbd, "blocklab").unwrap();
    let size = c.size as usize;
    let mut image = vec![0u8; size];
    let mut seed = 1;
    for _ in 0..40 {
        let off = (rng(&mut seed) % (size as u64 - 9000)) as usize;
        let len = 1 + (rng(&mut seed) % 9000) as usize;
        let d = bytes(&mut seed, len);
        c.write(off as u64, &d, false).unwrap();
        image[off..off + d.len()].copy_from_slice(&d);
    }
    // The other commands reach the served array.
    assert_eq!(control::status(dir.path()).unwrap().health, "healthy");
    assert!(RealArray::open(dir.path(), OpenConfig::default()).is_err());
    control::fail(dir.path(), 1).unwrap();
    control::fail(dir.path(), 3).unwrap();
    let mut back = vec![0u8; size];
    c.read(0, &mut back).unwrap();
    assert_eq!(back, image, "served degraded after two failures");
    let d = bytes(&mut seed, 20_000);
    c.write(5000, &d, true).unwrap();
    image[5000..25_000].copy_from_slice(&d);
    control::replace(dir.path(), 1).unwrap();
    control::replace(dir.path(), 3).unwrap();
    let stop = AtomicBool::new(false);
    let rep = control::rebuild(dir.path(), &RebuildOptions::default(), &stop).unwrap();
    assert!(rep.finished, "{rep:?}");
    let chk = control::check(dir.path(), false).unwrap();
    assert_eq!(chk.mismatches, 0);
    c.read(0, &mut back).unwrap();
    assert_eq!(back, image);
    c.flush().unwrap();
    c.disconnect().unwrap();
    s.shutdown().unwrap();
    assert!(!dir.path().join(control::SERVE_FILE).exists());
    // Closed cleanly: nothing to recover, and the local path works again.
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    assert_eq!(a.recovery, Recovery::default());
    assert_eq!(read_all(&a).unwrap(), image);
    drop(a);
    assert_eq!(control::status(dir.path()).unwrap().health, "healthy");
}

#[test]
fn replay_reports_response_times_locally_and_through_a_server() {
    use super::replay::{replay, ReplayOptions};
    let dir = tempfile::tempdir().unwrap();
    RealArray::create(dir.path(), cfg("raid5", 4, None), false).unwrap();
    let tr = dir.path().join("t.csv");
    let mut text = String::from("timestamp,op,offset,size\n");
    let mut seed = 2;
    for i in 0..300 {
        let op = if i % 3 == 0 { "W" } else { "R" };
        let off = (rng(&mut seed) % 40) * 4096;
        text.push_str(&format!("{:.4},{op},{off},{}\n", i as f64 * 0.0005, 4096 * (1 + i % 3)));
    }
    std::fs::write(&tr, text).unwrap();
    let mut o = ReplayOptions {
        traces: vec![tr.display().to_string()],
        format: "csv".into(),
        replay: "closed".into(),
        outstanding: 4,
        ..Default::default()
    };
    let r = replay(dir.path(), &o).unwrap();
    assert_eq!((r.requests, r.reads, r.writes, r.errors), (300, 200, 100, 0));
    assert_eq!(r.target, "local");
    let resp = &r.response;
    assert!(resp.p50_ms > 0.0 && resp.p50_ms <= resp.p95_ms && resp.p95_ms <= resp.p99_ms);
    assert!(resp.p99_ms <= resp.max_ms * 1.001 && resp.reads.max_ms <= resp.max_ms);
    let json = serde_json::to_value(&r).unwrap();
    for k in ["avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"] {
        assert!(
            json["response"][k].is_number()
                && json["response"]["reads"][k].is_number()
                && json["response"]["writes"][k].is_number()
        );
    }
    // Open loop at 10× through a server, with a failed member: still no errors.
    let s = control::serve(
        dir.path(),
        &control::ServeOptions {
            listen: "127.0.0.1:0".into(),
            ..Default::default()
        },
    )
    .unwrap();
    control::fail(dir.path(), 2).unwrap();
    o.replay = "open".into();
    o.speedup = 10.0;
    o.threads = 4;
    let r = replay(dir.path(), &o).unwrap();
    assert_eq!((r.requests, r.errors, r.target.as_str()), (300, 0, "nbd"));
    assert!(r.wall_s >= 0.149 / 10.0 * 0.9, "{}", r.wall_s);
    s.shutdown().unwrap();
    // Offsets past the end are refused unless folded.
    std::fs::write(&tr, "timestamp,op,offset,size\n0,R,999999999,4096\n").unwrap();
    o.replay = "closed".into();
    let e = replay(dir.path(), &o).unwrap_err().to_string();
    assert!(e.contains("past the end") && e.contains("--wrap"), "{e}");
    o.wrap = true;
    assert_eq!(replay(dir.path(), &o).unwrap().requests, 1);
    // A write lands with its offset's pattern.
    std::fs::write(&tr, "timestamp,op,offset,size\n0,W,12288,8192\n").unwrap();
    replay(dir.path(), &o).unwrap();
    let a = RealArray::open(dir.path(), OpenConfig::default()).unwrap();
    let (mut got, mut want) = (vec![0u8; 8192], vec![0u8; 8192]);
    a.read(12288, &mut got).unwrap();
    super::replay::pattern_for_tests(&mut want, 12288);
    assert_eq!(got, want);
}

/// The rebuild report counts the member sectors of the users' requests the
/// speed rule's idle test saw (hand-worked): on a RAID-5 of 4 with member 0
/// rebuilding and nothing rebuilt yet, a read of a block of member 0 is
/// reconstructed from the three others (3 x 8 sectors), a read of a block of
/// member 1 reads it alone (8 sectors).
#[test]
fn the_rebuild_report_counts_the_users_member_sectors_it_saw() {
    let dir = tempfile::tempdir().unwrap();
    let a = make(dir.path(), cfg("raid5", 4, None), false);
    fail_and_replace(&a, &[0]);
    let mut buf = vec![0u8; 4096];
    // Left-symmetric: row 0 holds data chunks on members 0, 1, 2 (8 KiB = 2 blocks each).
    a.read(0, &mut buf).unwrap();
    a.read(8192, &mut buf).unwrap();
    let r = run_rebuild(&a, &RebuildOptions::unthrottled()).unwrap();
    assert!(r.finished);
    assert_eq!((r.user_requests_seen, r.user_member_sectors), (2, 3 * 8 + 8));
}

/// `--skip` / `--limit` cut a stream into phases (a warm-up, then the
/// measured part) and `--log` writes one line per request, on the Unix clock
/// a rebuild report uses: the lines are exactly the requests issued, with
/// their offsets, in both disciplines.
#[test]
fn replay_skips_limits_and_logs_every_request() {
    use super::replay::{replay, ReplayOptions};
    let dir = tempfile::tempdir().unwrap();
    RealArray::create(dir.path(), cfg("raid5", 4, None), false).unwrap();
    let tr = dir.path().join("t.csv");
    let mut text = String::from("timestamp,op,offset,size\n");
    for i in 0..200u64 {
        let op = if i % 4 == 0 { "W" } else { "R" };
        // Block i % 40 (the array holds 48): a write iff i % 4 == 0, so iff the block is.
        text.push_str(&format!("{:.4},{op},{},4096\n", i as f64 * 0.0001, (i % 40) * 4096));
    }
    std::fs::write(&tr, text).unwrap();
    for replay_mode in ["closed", "open"] {
        let log = dir.path().join(format!("{replay_mode}.log"));
        let o = ReplayOptions {
            traces: vec![tr.display().to_string()],
            format: "csv".into(),
            replay: replay_mode.into(),
            outstanding: 3,
            threads: 3,
            speedup: 100.0,
            skip: 50,
            limit: 120,
            log: Some(log.display().to_string()),
            ..Default::default()
        };
        let before = super::rebuild::unix_now_s();
        let r = replay(dir.path(), &o).unwrap();
        let after = super::rebuild::unix_now_s();
        assert_eq!((r.requests, r.errors), (120, 0), "{replay_mode}");
        // Requests 50..170: a write every fourth.
        assert_eq!(r.writes, (50..170).filter(|i| i % 4 == 0).count() as u64);
        let text = std::fs::read_to_string(&log).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(super::replay::LOG_HEADER));
        let mut offsets = Vec::new();
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 6, "{l}");
            let at: f64 = f[0].parse().unwrap();
            assert!(at >= before - 1e-3 && at <= after + 1e-3, "{l}");
            let off: u64 = f[2].parse().unwrap();
            assert_eq!(f[1], if (off / 4096) % 4 == 0 { "W" } else { "R" }, "{l}");
            assert_eq!((f[3], f[5]), ("4096", "1"), "{l}");
            assert!(f[4].parse::<f64>().unwrap() >= 0.0);
            offsets.push(off / 4096);
        }
        offsets.sort();
        let mut want: Vec<u64> = (50..170).map(|i| i % 40).collect();
        want.sort();
        assert_eq!(offsets, want, "{replay_mode}");
    }
}

/// A far RAID-10 truncated to nothing: healing an early row writes the far
/// copies past the end of the image, which must not turn the rows in
/// between into a hole read as zeroes (the tail goes on the bad-block list
/// first).
#[test]
fn a_truncated_member_never_reads_back_as_zeroes() {
    for (victim, cut) in [(0u32, 0u64), (2, 5000), (4, 200_000)] {
        let dir = tempfile::tempdir().unwrap();
        let c = ArrayConfig::from_names_sized("raid10", 5, 16384, Some("f2"), 4096, 360448).unwrap();
        let a = make(dir.path(), c, false);
        let mut seed = 5 + victim as u64;
        let image = bytes(&mut seed, a.size_bytes() as usize);
        a.write(0, &image, false).unwrap();
        let f = OpenOptions::new()
            .write(true)
            .open(member_path(dir.path(), victim))
            .unwrap();
        f.set_len(cut).unwrap();
        assert!(
            read_all(&a).unwrap() == image,
            "victim {victim} cut {cut}: read after truncation"
        );
        a.check(true).unwrap();
        assert_eq!(a.check(false).unwrap().mismatches, 0);
        assert_eq!(a.status().bad_blocks, 0, "every listed block was rewritten");
        for fail in 0..5 {
            if fail != victim {
                a.fail(fail).unwrap();
                assert!(read_all(&a).unwrap() == image, "victim {victim} cut {cut} fail {fail}");
                break;
            }
        }
    }
}

/// Coalesced member writes (adjacent ops of a member as one write) put the
/// same bytes in the same member places as one write per op: the same plans
/// run both ways on two arrays written alike, member files compared.
#[test]
fn coalesced_writes_leave_the_same_member_bytes_as_op_by_op_writes() {
    use super::runner::{do_reads, write_buffers_as, write_ops, Submit, UserData};
    for (level, disks, checksums) in [
        ("raid5", 4, false),
        ("raid6", 5, true),
        ("raid0", 3, false),
        ("raid10", 4, false),
    ] {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let arrays: Vec<RealArray> = dirs
            .iter()
            .map(|d| make(d.path(), cfg(level, disks, None), checksums))
            .collect();
        let size = arrays[0].size_bytes();
        let mut seed = 7u64;
        let base = bytes(&mut seed, size as usize);
        for a in &arrays {
            a.write(0, &base, false).unwrap();
        }
        let mut image = base.clone();
        let total = size / 4096;
        let mut merged_some = false;
        // Whole array, multi-stripe runs (aligned and not to stripes), short ones.
        let mut ranges: Vec<(u64, u64)> = vec![(0, total), (1, total - 2), (3, 9), (2, 1)];
        for _ in 0..20 {
            let b = rng(&mut seed) % total;
            ranges.push((b, 1 + rng(&mut seed) % (total - b)));
        }
        for (first, n) in ranges {
            let data = bytes(&mut seed, (n * 4096) as usize);
            let mut counts = Vec::new();
            for (a, how) in arrays.iter().zip([Submit::PerOp, Submit::Coalesced]) {
                let live = a.live.read().unwrap();
                let plan = live.array.plan_write(first, n);
                let env = a.env(&live, &[]);
                let reads = do_reads(&env, &plan);
                let user = UserData::new(first, n, Some(&data), 4096);
                let bufs = write_buffers_as(&env, &plan, &reads, &user, how).unwrap();
                assert_eq!(bufs.len(), write_ops(&plan, how).len());
                counts.push(bufs.len());
                a.commit_writes(&live, &bufs, false).unwrap();
            }
            assert!(counts[1] <= counts[0]);
            merged_some |= counts[1] < counts[0];
            for d in 0..disks {
                // The data (the identity blocks differ: two arrays).
                let data = |p: std::path::PathBuf, len: u64| {
                    let mut v = std::fs::read(p).unwrap();
                    v.truncate(len as usize);
                    v
                };
                let bytes = arrays[0].config().disk_bytes;
                let (img, sums) = (bytes, identity::sums_id_offset(bytes, 4096));
                let x = data(member_path(dirs[0].path(), d), img);
                let y = data(member_path(dirs[1].path(), d), img);
                assert!(x == y, "{level}: member {d} differs after writing {first}+{n}");
                if checksums {
                    let x = data(sums_path(dirs[0].path(), d), sums);
                    let y = data(sums_path(dirs[1].path(), d), sums);
                    assert!(
                        x == y,
                        "{level}: checksums of member {d} differ after writing {first}+{n}"
                    );
                }
            }
            image[(first * 4096) as usize..((first + n) * 4096) as usize].copy_from_slice(&data);
        }
        // Parity plans put one op per chunk; RAID-0/10 plans already run a member's blocks together.
        if level.starts_with("raid5") || level.starts_with("raid6") {
            assert!(merged_some, "{level}: no plan had adjacent ops to merge");
        }
        for a in &arrays {
            assert!(
                read_all(a).unwrap() == image,
                "{level}: the array does not read back what was written"
            );
        }
    }
}

/// The gatherer as a sequential writer's neighbour sees it: a write that
/// continues a stream leaves its tail stripe part waiting while another
/// request is in flight, and the next request of the stream completes that
/// stripe, which is then written whole (no part written alone).
#[test]
fn the_next_request_of_a_stream_completes_the_tail_stripe_of_the_last() {
    for (level, disks, degraded) in [
        ("raid5", 4, None),
        ("raid6", 5, None),
        ("raid5", 4, Some(1)),
        ("raid6", 5, Some(4)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut a = make(dir.path(), cfg(level, disks, None), false);
        if let Some(d) = degraded {
            a.fail(d).unwrap();
        }
        a.gather_wait = std::time::Duration::from_secs(600);
        let bs = 4096usize;
        // Three data chunks of two blocks.
        let s = a.gather.as_ref().unwrap().stripe_blocks as usize;
        assert_eq!(s, 6);
        let mut seed = 77;
        let mut image = read_all(&a).unwrap();
        let data = bytes(&mut seed, 5 * s * bs);
        image[s * bs..6 * s * bs].copy_from_slice(&data);
        // A request that ended at block s went before (the stream), and
        // another request stays in flight (the company).
        a.gather.as_ref().unwrap().in_stream(0, s as u64);
        a.user_start();
        let (first, second) = data.split_at((2 * s + s / 2) * bs);
        std::thread::scope(|sc| {
            let w = sc.spawn(|| a.write((s * bs) as u64, first, false));
            // Its whole stripe is written, its tail part waits.
            while a.gather.as_ref().unwrap().open_stripes() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            a.write(((3 * s + s / 2) * bs) as u64, second, false).unwrap();
            w.join().unwrap().unwrap();
        });
        a.user_end();
        let g = a.gather.as_ref().unwrap();
        let counts = (g.gathered.load(Ordering::Relaxed), g.alone.load(Ordering::Relaxed));
        assert_eq!(
            counts,
            (1, 0),
            "{level} {degraded:?}: one stripe gathered, nothing alone"
        );
        assert_eq!(g.open_stripes(), 0);
        assert_eq!(read_all(&a).unwrap(), image, "{level} {degraded:?}");
        if degraded.is_none() {
            assert_eq!(
                a.check(false).unwrap().mismatches,
                0,
                "{level}: parity of the gathered stripe"
            );
        }
    }
}

/// Several workers writing one sequential stream of unaligned large
/// requests (as fio's iodepth through the NBD server), healthy and degraded,
/// with and without checksums: every byte reads back, parity is consistent,
/// and each stripe part was written either in a gathered stripe or alone.
#[test]
fn concurrent_sequential_writers_lose_nothing_through_the_gatherer() {
    for (i, (level, disks, degraded, sums)) in [
        ("raid4", 4, None, false),
        ("raid5", 4, None, true),
        ("raid5", 5, Some(2), false),
        ("raid6", 5, None, false),
        ("raid6", 6, Some(0), true),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let c = ArrayConfig::from_names_sized(level, disks, 8192, None, 4096, 1 << 20).unwrap();
        let a = make(dir.path(), c, sums);
        if let Some(d) = degraded {
            a.fail(d).unwrap();
        }
        let size = a.size_bytes() as usize;
        let mut seed = 300 + i as u64;
        let mut image = read_all(&a).unwrap();
        // Requests of 7..=19 blocks: every one crosses a stripe boundary.
        // Two passes, the second shifted by three blocks; the requests of a
        // pass are disjoint (overlapping writes in flight at once may land
        // in either order, on a real disk too).
        for pass in 0..2 {
            let mut reqs = Vec::new();
            let mut at = pass * 4096 * 3;
            while at < size {
                let len = ((7 + rng(&mut seed) % 13) as usize * 4096).min(size - at);
                let d = bytes(&mut seed, len);
                image[at..at + len].copy_from_slice(&d);
                reqs.push((at as u64, d));
                at += len;
            }
            let acked = super::integrity::write_from_workers(&a, &reqs, 4);
            assert!(acked.iter().all(|ok| *ok), "{level}: every write acknowledged");
        }
        let g = a.gather.as_ref().unwrap();
        assert_eq!(g.open_stripes(), 0, "{level}: nothing left waiting");
        assert_eq!(read_all(&a).unwrap(), image, "{level} {degraded:?} sums={sums}");
        if degraded.is_none() {
            assert_eq!(a.check(false).unwrap().mismatches, 0, "{level}: parity");
        }
    }
}

/// Rewrite the state file's body with `edit` and make its checksum valid
/// again (a crafted file, as an attacker or a buggy tool would leave it).
fn craft_state(dir: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let p = dir.join(state::STATE_FILE);
    let text = std::fs::read_to_string(&p).unwrap();
    let body = &text[..text.rfind("\n# crc32 ").unwrap()];
    let mut v: serde_json::Value = serde_json::from_str(body).unwrap();
    edit(&mut v);
    let body = serde_json::to_string_pretty(&v).unwrap();
    let text = format!("{body}\n# crc32 {:08x}\n", crc32fast::hash(body.as_bytes()));
    std::fs::write(&p, text).unwrap();
}

fn member_lens(dir: &Path, disks: u32) -> Vec<u64> {
    (0..disks)
        .map(|d| std::fs::metadata(member_path(dir, d)).unwrap().len())
        .collect()
}

#[test]
fn a_crafted_state_file_is_refused_naming_the_field_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    RealArray::create(d, cfg("raid6", 5, None), true).unwrap();
    let p = d.join(state::STATE_FILE);
    let good = std::fs::read_to_string(&p).unwrap();
    let lens = member_lens(d, 5);
    // 64 KiB members of 8 KiB chunks: 8 rows, 16 blocks.
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        ("bitmap_rows", Box::new(|v| v["bitmap_rows"] = 0.into())),
        ("failed", Box::new(|v| v["failed"] = serde_json::json!([4294967296u64]))),
        ("failed", Box::new(|v| v["failed"] = serde_json::json!([5]))),
        ("failed", Box::new(|v| v["failed"] = serde_json::json!([1, 1]))),
        ("recovering", Box::new(|v| v["recovering"] = serde_json::json!([2]))),
        (
            "recovered_rows",
            Box::new(|v| {
                v["failed"] = serde_json::json!([2]);
                v["recovering"] = serde_json::json!([2]);
                v["recovered_rows"] = 9.into();
            }),
        ),
        (
            "rebuilt_runs",
            Box::new(|v| {
                v["failed"] = serde_json::json!([2]);
                v["recovering"] = serde_json::json!([2]);
                v["rebuilt_runs"] = serde_json::json!([[3, 1u64 << 40]]);
            }),
        ),
        ("bitmap", Box::new(|v| v["bitmap"] = "0".repeat(100_000).into())),
        ("bitmap", Box::new(|v| v["bitmap"] = "z".into())),
        (
            "disk",
            Box::new(|v| v["bad_blocks"] = serde_json::json!([{"disk": 4294967296u64, "block": 0, "blocks": 1}])),
        ),
        (
            "bad_blocks",
            Box::new(|v| v["bad_blocks"] = serde_json::json!([{"disk": 7, "block": 0, "blocks": 1}])),
        ),
        (
            "bad_blocks",
            Box::new(|v| v["bad_blocks"] = serde_json::json!([{"disk": 1, "block": 15, "blocks": u64::MAX}])),
        ),
        ("config.disk_bytes", Box::new(|v| v["config"]["disk_bytes"] = 0.into())),
        (
            "config.disk_bytes",
            Box::new(|v| v["config"]["disk_bytes"] = (1u64 << 62).into()),
        ),
        (
            "config.chunk_bytes",
            Box::new(|v| v["config"]["chunk_bytes"] = (1u64 << 40).into()),
        ),
    ];
    for (field, edit) in &cases {
        std::fs::write(&p, &good).unwrap();
        craft_state(d, edit);
        let e = match RealArray::open(d, OpenConfig::default()) {
            Ok(_) => panic!("crafted `{field}` was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(e.contains(&format!("field `{field}`")), "{field}: {e}");
        assert_eq!(member_lens(d, 5), lens, "{field}");
    }
    std::fs::write(&p, &good).unwrap();
    RealArray::open(d, OpenConfig::default()).unwrap();
}

#[test]
fn a_crafted_journal_record_past_the_member_is_refused_and_grows_nothing() {
    use super::journal::{journal_path, Journal, Place};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    RealArray::create(d, cfg("raid5", 4, None), false).unwrap();
    let lens = member_lens(d, 4);
    let unit = vec![7u8; 4096];
    for (place, field) in [
        (
            Place {
                disk: 0,
                block: 1 << 30,
            },
            "field `block`",
        ),
        (Place { disk: 9, block: 0 }, "field `disk`"),
    ] {
        let j = Journal::open(d, 4096, 64).unwrap();
        j.reset(&Faults::none()).unwrap();
        j.append(&[Place { disk: 1, block: 0 }], &[&unit], &[0], &Faults::none())
            .unwrap();
        j.append(&[place], &[&unit], &[0], &Faults::none()).unwrap();
        drop(j);
        let e = match RealArray::open(d, OpenConfig::default()) {
            Ok(_) => panic!("{place:?} was replayed"),
            Err(e) => e.to_string(),
        };
        let want = format!("{}: record 1: {field}", journal_path(d).display());
        assert!(e.starts_with(&want), "{e}");
        assert_eq!(member_lens(d, 4), lens);
        // Nothing was replayed, not even the good record before it.
        assert!(std::fs::read(member_path(d, 1)).unwrap()[..4096]
            .iter()
            .all(|&b| b == 0));
    }
}

#[test]
fn a_hole_punched_in_a_member_and_its_checksums_is_found_and_rebuilt() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut seed = 17;
    let a = make(d, cfg("raid5", 4, None), true);
    let image = bytes(&mut seed, a.size_bytes() as usize);
    a.write(0, &image, false).unwrap();
    a.flush().unwrap();
    // Blocks 2..5 of member 1 and their sum entries: holes (zeroes).
    for (path, unit) in [(member_path(d, 1), 4096), (sums_path(d, 1), 4)] {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        // SAFETY: fallocate on an open descriptor; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                2 * unit,
                3 * unit,
            )
        };
        if r != 0 {
            f.write_all_at(&vec![0u8; 3 * unit as usize], 2 * unit as u64).unwrap();
        }
    }
    let rep = a.check(false).unwrap();
    assert_eq!((rep.mismatches, rep.unrecoverable), (3, 0), "{rep:?}");
    assert!(read_all(&a).unwrap() == image, "the lost blocks come back");
    // The reads wrote back the data units they met; a repair the parity unit.
    let rep = a.check(true).unwrap();
    assert_eq!((rep.mismatches, rep.repaired), (1, 1), "{rep:?}");
    assert_eq!(a.check(false).unwrap().mismatches, 0);
    a.fail(0).unwrap();
    assert!(read_all(&a).unwrap() == image, "the rewritten units reconstruct");
}

#[test]
fn a_checksum_sidecar_cut_short_or_recreated_verifies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = make(d, cfg("raid1", 2, None), true);
    // Created with every entry written (16 blocks of 4 bytes, none zero),
    // then the sidecar's identity block.
    let sums = std::fs::read(sums_path(d, 0)).unwrap();
    assert!(sums[..64].chunks(4).all(|e| e != [0u8; 4]), "{:?}", &sums[..64]);
    drop(a);
    // Member 0's sidecar cut short: it lost its identity block, so it is
    // refused by name rather than trusted.
    OpenOptions::new()
        .write(true)
        .open(sums_path(d, 0))
        .unwrap()
        .set_len(8)
        .unwrap();
    let e = RealArray::open(d, OpenConfig::default()).err().unwrap().to_string();
    assert!(e.contains("disk-0.sum") && e.contains("identity"), "{e}");
    // Moved away: the sidecar is recreated empty and its blocks (zeroes, as
    // created) no longer verify; check finds and repairs all 16.
    std::fs::remove_file(sums_path(d, 0)).unwrap();
    let a = RealArray::open(d, OpenConfig::default()).unwrap();
    let rep = a.check(false).unwrap();
    assert_eq!(rep.mismatches, 16, "{rep:?}");
    assert_eq!(a.check(true).unwrap().repaired, 16);
    assert_eq!(a.check(false).unwrap().mismatches, 0);
}

/// What `nbdinfo` shows as the export's description: the level, the member
/// count and the chunk in the units people write it in.
#[test]
fn the_export_description_gives_the_chunk_in_human_units() {
    use crate::nbd::Export;
    let dir = tempfile::tempdir().unwrap();
    let a = make(
        dir.path(),
        ArrayConfig::from_names_sized("raid5", 4, 65536, None, 4096, 1 << 20).unwrap(),
        false,
    );
    let d = a.description();
    assert!(d.starts_with("blocklab raid5 of 4, chunk 64 KiB ("), "{d}");
    assert_eq!(control::human_bytes(8192), "8 KiB");
    assert_eq!(control::human_bytes(1 << 20), "1 MiB");
    assert_eq!(control::human_bytes(6144), "6 KiB");
    assert_eq!(control::human_bytes(1000), "1000 B");
}

/// `base:allocation` of the real array: a block is reported a hole only if
/// it was never written (brute force over random writes on every level, and
/// the holes read back as zeroes); on a fresh array one small write leaves
/// everything else a hole; with a member failed, everything is data.
#[test]
fn allocation_reports_holes_only_where_nothing_was_written() {
    let bs = 4096u64;
    for (level, disks, layout) in [
        ("raid0", 3, None),
        ("raid1", 2, None),
        ("raid10", 4, Some("f2")),
        ("raid5", 4, None),
        ("raid6", 5, None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let a = make(dir.path(), cfg(level, disks, layout), false);
        let size = a.size_bytes();
        let fresh = a.allocation(0, size);
        if fresh != [(size, true)] {
            eprintln!("{level}: the file system here keeps no holes ({fresh:?}): nothing to check");
            continue;
        }
        // One block written: that block is data, the rest holes.
        a.write(5 * bs, &[1u8; 4096], false).unwrap();
        assert_eq!(
            a.allocation(0, size),
            [(5 * bs, true), (bs, false), (size - 6 * bs, true)],
            "{level}"
        );
        // Partial ranges are clipped to the request.
        assert_eq!(a.allocation(5 * bs + 100, 10), [(10, false)], "{level}");
        let mut written = vec![false; (size / bs) as usize];
        written[5] = true;
        let mut seed = 11;
        for _ in 0..6 {
            let off = rng(&mut seed) % (size - 20_000);
            let len = 1 + rng(&mut seed) % 20_000;
            a.write(off, &bytes(&mut seed, len as usize), false).unwrap();
            for b in off / bs..(off + len).div_ceil(bs) {
                written[b as usize] = true;
            }
        }
        let mut at = 0u64;
        for (n, hole) in a.allocation(0, size) {
            if hole {
                for b in at / bs..(at + n) / bs {
                    assert!(!written[b as usize], "{level}: block {b} written but reported a hole");
                }
                let mut buf = vec![1u8; n as usize];
                a.read(at, &mut buf).unwrap();
                assert!(buf.iter().all(|&x| x == 0), "{level}");
            }
            at += n;
        }
        assert_eq!(at, size);
        a.fail(0).unwrap();
        assert_eq!(a.allocation(0, size), [(size, false)], "{level}: degraded: all data");
    }
}

#[test]
fn a_hole_punched_in_a_written_block_is_data_to_block_status() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut seed = 23;
    let a = make(d, cfg("raid5", 4, None), true);
    // Array blocks 0 and 1: the first chunk (8 KiB), on member 0's blocks 0
    // and 1 (left-symmetric: the first row's parity is on member 3).
    let data = bytes(&mut seed, 2 * 4096);
    a.write(0, &data, false).unwrap();
    a.flush().unwrap();
    let before = a.allocation(0, 32 * 4096);
    assert_eq!(
        before,
        vec![(2 * 4096, false), (30 * 4096, true)],
        "never-written blocks are holes"
    );
    // Member 0's two blocks punched (its sidecar kept, then punched too):
    // still data, as the reads rebuild them from parity.
    let punch = |path: std::path::PathBuf, n: i64| {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        // SAFETY: fallocate on an open descriptor; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                n,
            )
        };
        assert_eq!(r, 0, "this test needs a file system that punches holes");
    };
    punch(member_path(d, 0), 2 * 4096);
    assert_eq!(a.allocation(0, 32 * 4096), before);
    punch(sums_path(d, 0), 2 * 4);
    assert_eq!(a.allocation(0, 32 * 4096), before);
    assert!(read_all(&a).unwrap()[..2 * 4096] == data[..], "and they read back");
}

/// The disciplines `real replay` gained from the shared code: closed with a
/// think time (one outstanding: the log holds the trace's order), and
/// Hsu–Smith feedback (two passes; the second reported and logged).
#[test]
fn replay_runs_closed_with_think_time_and_feedback() {
    use super::replay::{replay, ReplayOptions};
    let dir = tempfile::tempdir().unwrap();
    RealArray::create(dir.path(), cfg("raid5", 4, None), false).unwrap();
    let tr = dir.path().join("t.csv");
    let mut text = String::from("timestamp,op,offset,size\n");
    // Offsets not in time order: block 7 i mod 40.
    for i in 0..30u64 {
        let op = if i % 3 == 0 { "W" } else { "R" };
        text.push_str(&format!("{:.4},{op},{},4096\n", i as f64 * 0.0002, (7 * i % 40) * 4096));
    }
    std::fs::write(&tr, text).unwrap();
    let log = dir.path().join("closed.log");
    let mut o = ReplayOptions {
        traces: vec![tr.display().to_string()],
        format: "csv".into(),
        replay: "closed".into(),
        think_ms: 0.5,
        log: Some(log.display().to_string()),
        ..Default::default()
    };
    let r = replay(dir.path(), &o).unwrap();
    assert_eq!(
        (r.replay.as_str(), r.requests, r.writes, r.errors),
        ("closed", 30, 10, 0)
    );
    let logged: Vec<u64> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap() / 4096)
        .collect();
    assert_eq!(logged, (0..30).map(|i| 7 * i % 40).collect::<Vec<_>>());
    o.replay = "feedback".into();
    o.speedup = 2.0;
    o.window = 4;
    o.threads = 4;
    let r = replay(dir.path(), &o).unwrap();
    assert_eq!(
        (r.replay.as_str(), r.requests, r.writes, r.errors),
        ("feedback", 30, 10, 0)
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 31);
    o.replay = "bursty".into();
    let e = replay(dir.path(), &o).unwrap_err().to_string();
    assert!(e.contains("bursty") && e.contains("feedback"), "{e}");
}

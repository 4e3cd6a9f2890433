//! TRIM (`trim.rs`) attacked: a kill -9 between the punches of one
//! stripe's members, then a clean reopen or a member missing; a kill -9
//! between the punches of a trim's copies on RAID-0, 1 and 10; TRIM racing
//! a member failure; TRIM during a rebuild; a member put back stale after
//! trims. Every outcome is old bytes or zeroes and a clean parity check,
//! or a refusal — never bytes no one wrote.

use std::fs;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::members::{member_path, sums_path, Faults};
use super::rebuild::RebuildOptions;
use super::tests::open_with_faults;
use super::*;
use crate::array::ArrayConfig;

const BS: u64 = 4096;

fn rng(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 4 KiB blocks, 8 KiB chunks, 256 KiB members.
fn cfg(level: &str, disks: u32) -> ArrayConfig {
    ArrayConfig::from_names_sized(level, disks, 8192, None, 4096, 256 * 1024).unwrap()
}

/// A new array filled with seeded bytes (no zero block), closed; its image.
fn filled(dir: &Path, c: ArrayConfig, seed: &mut u64) -> Vec<u8> {
    RealArray::create(dir, c, false).unwrap();
    let a = RealArray::open(dir, OpenConfig::default()).unwrap();
    let image: Vec<u8> = (0..a.size_bytes()).map(|_| (rng(seed) as u8) | 1).collect();
    a.write(0, &image, false).unwrap();
    a.close().unwrap();
    image
}

fn open(dir: &Path) -> Result<RealArray> {
    RealArray::open(dir, OpenConfig::default())
}

/// The blocks of `a` that read as neither `old` nor zeroes (`zero_ok`
/// says where zeroes are allowed), or that are not zero where `must_zero`.
fn wrong_blocks(a: &RealArray, old: &[u8], zero_ok: &dyn Fn(u64) -> bool, must_zero: &dyn Fn(u64) -> bool) -> Vec<u64> {
    let zero = vec![0u8; BS as usize];
    let mut bad = vec![];
    for b in 0..a.size_bytes() / BS {
        let mut buf = vec![0u8; BS as usize];
        a.read(b * BS, &mut buf).unwrap();
        let was = &old[(b * BS) as usize..][..BS as usize];
        let ok = if must_zero(b) {
            buf == zero
        } else {
            buf == was || (zero_ok(b) && buf == zero)
        };
        if !ok {
            bad.push(b);
        }
    }
    bad
}

fn stripe_blocks(a: &RealArray) -> u64 {
    let live = a.live.read().unwrap();
    live.array.chunk_blocks() * live.array.data_disks_per_stripe() as u64
}

/// kill -9 after the k-th member punch of a whole-stripe TRIM (some
/// members punched, one torn, the rest not): reopened, the resync makes
/// parity agree with the data again, and every trimmed block reads as
/// its old bytes or zeroes. Linux MD does the same for a discard cut
/// short: the stripes are in the write-intent bitmap, resynced at start.
#[test]
fn a_trim_killed_between_member_punches_resyncs_to_old_bytes_or_zeroes() {
    for (level, disks) in [("raid5", 4), ("raid6", 5), ("raid4", 4)] {
        for k in 1..disks as u64 {
            let dir = tempfile::tempdir().unwrap();
            let mut seed = 40 + k;
            let old = filled(dir.path(), cfg(level, disks), &mut seed);
            let faults = Arc::new(Faults::none());
            let a = open_with_faults(dir.path(), &faults);
            let sb = stripe_blocks(&a);
            let (first, n) = (2 * sb, 5 * sb); // stripes 2..7, whole
            faults.crash_after(k, rng(&mut seed));
            assert!(
                a.trim(first * BS, n * BS, false).is_err(),
                "{level} k={k}: the crash landed"
            );
            drop(a); // kill -9
            let a = open(dir.path()).unwrap();
            let trimmed = |b: u64| b >= first && b < first + n;
            let bad = wrong_blocks(&a, &old, &trimmed, &|_| false);
            assert!(
                bad.is_empty(),
                "{level} k={k}: {} wrong blocks, e.g. {:?}",
                bad.len(),
                &bad[..bad.len().min(5)]
            );
            let r = a.check(false).unwrap();
            assert_eq!(r.mismatches, 0, "{level} k={k}: parity left inconsistent");
            // And a TRIM now completes: zeroes throughout.
            a.trim(first * BS, n * BS, false).unwrap();
            assert!(wrong_blocks(&a, &old, &|_| false, &trimmed).is_empty());
            a.close().unwrap();
        }
    }
}

/// Logical blocks `range` whose copies (read raw from the member files,
/// where the array's placement puts them) are not all equal.
fn copies_differ(dir: &Path, array: &crate::array::Array, range: std::ops::Range<u64>) -> Vec<u64> {
    let files: Vec<fs::File> = (0..array.ndisks())
        .map(|d| fs::File::open(member_path(dir, d)).unwrap())
        .collect();
    let read = |d: u32, db: u64| {
        let mut buf = vec![0u8; BS as usize];
        std::os::unix::fs::FileExt::read_exact_at(&files[d as usize], &mut buf, db * BS).unwrap();
        buf
    };
    range
        .filter(|&b| {
            let p = array.map(b);
            let first = read(p.disks[0], p.disk_blocks[0]);
            p.disks.iter().zip(&p.disk_blocks).any(|(&d, &db)| read(d, db) != first)
        })
        .collect()
}

/// Without parity a TRIM punches every copy of each block (RAID-0: the one
/// copy). kill -9 after the k-th member punch (earlier punches done, the
/// k-th torn at a seeded block, the rest not done), for every k: reopened,
/// every trimmed block reads as its old bytes or zeroes, and on mirrors
/// every copy of every block is equal — the unclean start resyncs the
/// marked bitmap regions as MD's resync does (the first in-sync copy is
/// written over the others: old bytes win where the first copy was not
/// punched yet), so `check` finds no mismatch left to report or repair.
#[test]
fn a_trim_killed_between_member_punches_on_raid0_1_10_reads_old_or_zero_and_mirrors_agree() {
    let levels: &[(&str, u32, Option<&str>)] = &[
        ("raid0", 3, None),
        ("raid1", 2, None),
        ("raid1", 3, None),
        ("raid10", 4, Some("n2")),
        ("raid10", 3, Some("n2")),
        ("raid10", 4, Some("f2")),
        ("raid10", 4, Some("o2")),
    ];
    for &(level, disks, layout) in levels {
        let c = || ArrayConfig::from_names_sized(level, disks, 8192, layout, 4096, 256 * 1024).unwrap();
        let punches = {
            let a = crate::array::Array::new(c()).unwrap();
            let cap = a.capacity_blocks().unwrap();
            let (first, n) = (3, cap / 2); // unaligned to chunks on purpose
            (first, n, trim::plan_trim(&a, first, n).punch.len() as u64)
        };
        let (first, n, punches) = punches;
        assert!(punches >= disks as u64, "{level}: {punches} punches");
        let mut torn_mirrors = 0;
        // Every k up to 4, then a spread to the last (offset layouts punch
        // dozens of short runs).
        let step = (punches / 4).max(1);
        for k in (1..=punches).filter(|&k| k <= 4 || k % step == 0 || k == punches) {
            let dir = tempfile::tempdir().unwrap();
            let mut seed = 300 + k * 7 + disks as u64;
            let old = filled(dir.path(), c(), &mut seed);
            let faults = Arc::new(Faults::none());
            let a = open_with_faults(dir.path(), &faults);
            faults.crash_after(k, rng(&mut seed));
            let what = format!("{level} {layout:?} of {disks}, crash at punch {k} of {punches}");
            assert!(a.trim(first * BS, n * BS, false).is_err(), "{what}: the crash landed");
            drop(a); // kill -9
            let array = crate::array::Array::new(c()).unwrap();
            if !copies_differ(dir.path(), &array, first..first + n).is_empty() {
                torn_mirrors += 1;
            }
            let a = open(dir.path()).unwrap();
            let trimmed = |b: u64| b >= first && b < first + n;
            let bad = wrong_blocks(&a, &old, &trimmed, &|_| false);
            assert!(
                bad.is_empty(),
                "{what}: {} wrong blocks, e.g. {:?}",
                bad.len(),
                &bad[..bad.len().min(5)]
            );
            let cap = a.size_bytes() / BS;
            let differ = copies_differ(dir.path(), &array, 0..cap);
            assert!(
                differ.is_empty(),
                "{what}: copies differ after the resync, e.g. {:?}",
                &differ[..differ.len().min(5)]
            );
            let r = a.check(false).unwrap();
            assert_eq!((r.mismatches, r.unrecoverable), (0, 0), "{what}: {r:?}");
            // And a TRIM now completes: zeroes throughout the range, on every copy.
            a.trim(first * BS, n * BS, false).unwrap();
            assert!(wrong_blocks(&a, &old, &|_| false, &trimmed).is_empty(), "{what}");
            a.close().unwrap();
        }
        // The crash left mirrors disagreeing (what the resync had to settle).
        assert!(
            level == "raid0" || torn_mirrors > 0,
            "{level} {layout:?}: no crash tore a mirror"
        );
    }
}

/// The same torn TRIM, and then a member is missing at the next open: the
/// lost units of the torn stripes cannot be rebuilt from parity that no
/// longer matches the data, so the start is refused as MD refuses a dirty
/// degraded array; forced, those units read as errors, never as bytes
/// computed from mismatched parity.
#[test]
fn a_torn_trim_then_a_missing_member_is_refused_or_serves_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 7;
    let old = filled(dir.path(), cfg("raid5", 4), &mut seed);
    let faults = Arc::new(Faults::none());
    let a = open_with_faults(dir.path(), &faults);
    let sb = stripe_blocks(&a);
    let (first, n) = (sb, 4 * sb);
    faults.crash_after(2, 0); // member 0 punched, member 1's punch torn to nothing
    assert!(a.trim(first * BS, n * BS, false).is_err());
    drop(a);
    fs::rename(member_path(dir.path(), 3), dir.path().join("aside.img")).unwrap();
    let e = open(dir.path())
        .err()
        .expect("a dirty degraded start is refused")
        .to_string();
    assert!(e.contains("dirty degraded"), "{e}");
    let a = RealArray::open(
        dir.path(),
        OpenConfig {
            start_dirty_degraded: true,
            ..Default::default()
        },
    )
    .unwrap();
    let zero = vec![0u8; BS as usize];
    for b in 0..a.size_bytes() / BS {
        let mut buf = vec![0u8; BS as usize];
        let was = &old[(b * BS) as usize..][..BS as usize];
        match a.read(b * BS, &mut buf) {
            Ok(()) => assert!(
                buf == was || (b >= first && b < first + n && buf == zero),
                "block {b}: wrong bytes"
            ),
            Err(ReqError::Unreadable(_)) => {}
            Err(e) => panic!("block {b}: {e}"),
        }
    }
}

/// TRIMs racing a member failure: each TRIM either punched (array whole)
/// or wrote zeroes through the degraded plans; after a replace and a
/// rebuild every trimmed block reads zero, the rest old, parity clean.
#[test]
fn trims_racing_a_member_failure_then_a_rebuild_leave_zeroes_and_clean_parity() {
    for victim in [0u32, 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut seed = 90 + victim as u64;
        let old = filled(dir.path(), cfg("raid5", 4), &mut seed);
        let a = Arc::new(open(dir.path()).unwrap());
        let sb = stripe_blocks(&a);
        let stripes = a.size_bytes() / BS / sb;
        let t = {
            let a = a.clone();
            std::thread::spawn(move || {
                // Every other stripe, one at a time, with a partial stripe at each end.
                for s in (0..stripes - 1).step_by(2) {
                    a.trim(s * sb * BS + BS, (sb + 1) * BS, false).unwrap();
                }
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(1));
        a.fail(victim).unwrap();
        t.join().unwrap();
        let set: std::collections::BTreeSet<u64> = (0..stripes - 1)
            .step_by(2)
            .flat_map(|s| s * sb + 1..s * sb + sb + 2)
            .collect();
        let trimmed = |b: u64| set.contains(&b);
        let bad = wrong_blocks(&a, &old, &|_| false, &trimmed);
        assert!(
            bad.is_empty(),
            "degraded, victim {victim}: {:?}",
            &bad[..bad.len().min(5)]
        );
        a.replace(victim).unwrap();
        a.rebuild(&RebuildOptions::unthrottled(), &AtomicBool::new(false))
            .unwrap();
        let bad = wrong_blocks(&a, &old, &|_| false, &trimmed);
        assert!(
            bad.is_empty(),
            "rebuilt, victim {victim}: {:?}",
            &bad[..bad.len().min(5)]
        );
        assert_eq!(a.check(false).unwrap().mismatches, 0);
    }
}

/// TRIM while a rebuild runs (nothing is punched while recovering: zeroes
/// go through the plans on both sides of the recovery offset).
#[test]
fn trims_during_a_rebuild_read_zero_after_it_and_parity_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 5;
    let old = filled(dir.path(), cfg("raid6", 5), &mut seed);
    let a = Arc::new(open(dir.path()).unwrap());
    let sb = stripe_blocks(&a);
    a.fail(1).unwrap();
    a.replace(1).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let r = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let opts = RebuildOptions {
                throttle: Some(true),
                min_kbps: 64,
                max_kbps: 64,
                ..Default::default()
            };
            a.rebuild(&opts, &stop)
        })
    };
    let (first, n) = (sb, 20 * sb);
    a.trim(first * BS, n * BS, false).unwrap();
    r.join().unwrap().unwrap();
    let trimmed = |b: u64| b >= first && b < first + n;
    let bad = wrong_blocks(&a, &old, &|_| false, &trimmed);
    assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
    assert_eq!(a.check(false).unwrap().mismatches, 0);
}

/// A member file put back as it was before the trims (a stale copy): it is
/// not trusted for the trimmed stripes — the array reads zeroes there and
/// parity checks clean, or the member is refused.
#[test]
fn a_stale_member_copy_put_back_after_trims_brings_no_old_bytes_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 21;
    let old = filled(dir.path(), cfg("raid5", 4), &mut seed);
    let stale = fs::read(member_path(dir.path(), 2)).unwrap();
    let a = open(dir.path()).unwrap();
    let sb = stripe_blocks(&a);
    let (first, n) = (0, a.size_bytes() / BS);
    a.trim(first * BS, n * BS, false).unwrap();
    a.close().unwrap();
    let _ = sums_path; // no checksums on this array
    fs::write(member_path(dir.path(), 2), &stale).unwrap();
    match open(dir.path()) {
        Err(e) => assert!(e.to_string().contains("disk-2"), "{e}"),
        Ok(a) => {
            let bad = wrong_blocks(&a, &old, &|_| false, &|_| true);
            assert!(
                bad.is_empty(),
                "{} blocks not zero after a stale member came back, e.g. {:?} (stripe {} blocks)",
                bad.len(),
                &bad[..bad.len().min(5)],
                sb
            );
            if a.status().recovering.is_empty() {
                assert_eq!(a.check(false).unwrap().mismatches, 0);
            }
        }
    }
}

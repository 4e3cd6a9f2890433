//! TRIM as holes: the whole stripes a trim covers are punched out of every
//! member file, so `base:allocation` (`alloc.rs`) reports them as holes and
//! sparse copies skip them; the rest is written as zeroes through the plans.
//!
//! Why whole stripes, on every member: when every data unit of a stripe is
//! zero, so are its P and Q (XOR and the GF(2^8) sums of zeroes) and every
//! mirror copy, so punching all of its units leaves the stripe consistent
//! without computing anything. A partial stripe keeps the zero-write path:
//! punching only its data units would need the parity updated from the old
//! data, which is exactly what the write plans already do.
//!
//! Where a stripe is one chunk row — the same member chunk on every member
//! (RAID-0, RAID-1, MD's RAID-4/5/6 layouts, RAID-10 near with a disk count
//! that is a multiple of the copies) — a whole stripe is a member row. Other
//! RAID-10 layouts (far, offset, near over an odd disk count) keep copies of
//! a chunk in other rows; they write zeroes.
//!
//! When: only while the array is whole (every member present and in service,
//! nothing on the bad-block list). A degraded array writes zeroes through
//! its plans as before: its degraded writes are journaled and a rebuild
//! reads survivors, which the zero writes already keep right. Crash safety
//! is a write's: the rows' bitmap regions are marked before any member is
//! punched (a crash in between leaves some units punched and others not;
//! the resync recomputes parity from the data, and the trimmed blocks read
//! as either their old bytes or zeroes, as a write cut short does), and a
//! journal still covering the rows is checkpointed first so that its replay
//! cannot bring old bytes back. With checksums the punched blocks' entries
//! become the all-zero block's. A stack in front (host caches, a tier) is
//! not punched through: its TRIM goes through the layers as zero writes,
//! so no cache keeps old bytes.

use super::{io_err, RealArray, ReqError};
use crate::array::{Array, Level};

/// Member rows punched at most per step (the rows are locked meanwhile).
const ROWS_PER_STEP: u64 = 64;

/// How a trim of logical blocks is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimPlan {
    /// Logical block ranges (first, count) written as zeroes through the
    /// plans: the partial stripes at either end, or everything.
    pub zero: Vec<(u64, u64)>,
    /// Member chunk rows `[start, end)` punched on every member.
    pub rows: (u64, u64),
}

/// Whether a stripe of `array` is one member chunk row.
pub fn stripes_are_rows(array: &Array) -> bool {
    let cfg = array.config();
    match cfg.level {
        Level::Raid0 | Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6 => true,
        Level::Raid10 => {
            let l = cfg.raid10_layout();
            l.far == 1 && !l.offset && cfg.disks.is_multiple_of(l.near)
        }
    }
}

/// The plan of a trim of logical blocks `first..first + n` (see the module
/// comment): the whole stripes inside it as member rows, the rest zeroes.
pub fn plan_trim(array: &Array, first: u64, n: u64) -> TrimPlan {
    let stripe = array.chunk_blocks() * array.data_disks_per_stripe() as u64;
    let end = first + n;
    let (r0, r1) = (first.div_ceil(stripe.max(1)), end / stripe.max(1));
    if !stripes_are_rows(array) || stripe == 0 || r0 >= r1 {
        return TrimPlan {
            zero: if n > 0 { vec![(first, n)] } else { vec![] },
            rows: (0, 0),
        };
    }
    let mut zero = Vec::new();
    if first < r0 * stripe {
        zero.push((first, r0 * stripe - first));
    }
    if r1 * stripe < end {
        zero.push((r1 * stripe, end - r1 * stripe));
    }
    TrimPlan { zero, rows: (r0, r1) }
}

impl RealArray {
    /// NBD TRIM (and WRITE_ZEROES that may punch): the range reads back as
    /// zeroes; its whole stripes become holes when the array is whole.
    pub fn trim(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        self.check_range(offset, len)?;
        let bs = self.bs as u64;
        // Bytes of partial blocks at either end: zeroes.
        let (first, end) = (offset.div_ceil(bs), (offset + len) / bs);
        if first >= end {
            return self.write_zeroes(offset, len, fua);
        }
        if offset < first * bs {
            self.write_zeroes(offset, first * bs - offset, fua)?;
        }
        if end * bs < offset + len {
            self.write_zeroes(end * bs, offset + len - end * bs, fua)?;
        }
        let (plan, stripe) = {
            let live = self.live.read().unwrap();
            let a = &live.array;
            (
                plan_trim(a, first, end - first),
                a.chunk_blocks() * a.data_disks_per_stripe() as u64,
            )
        };
        for &(f, n) in &plan.zero {
            self.write_zeroes(f * bs, n * bs, fua)?;
        }
        let mut r = plan.rows.0;
        while r < plan.rows.1 {
            let e = (r + ROWS_PER_STEP).min(plan.rows.1);
            if !self.punch_rows(r, e, fua)? {
                self.write_zeroes(r * stripe * bs, (e - r) * stripe * bs, fua)?;
            }
            r = e;
        }
        Ok(())
    }

    /// Punch member rows `r0..r1` on every member; Ok(false) (nothing done)
    /// when the array is not whole or a member's file system cannot punch.
    fn punch_rows(&self, r0: u64, r1: u64, fua: bool) -> std::result::Result<bool, ReqError> {
        self.user_start();
        let r = self.punch_rows_inner(r0, r1, fua);
        self.user_end();
        self.stats.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r
    }

    fn punch_rows_inner(&self, r0: u64, r1: u64, fua: bool) -> std::result::Result<bool, ReqError> {
        let live = self.live.read().unwrap();
        let whole = live.array.failed().is_empty()
            && !live.recovering.iter().any(|&r| r)
            && live.members.iter().all(Option::is_some)
            && self.bad.lock().unwrap().is_empty();
        if !whole {
            return Ok(false);
        }
        let rows: Vec<u64> = (r0..r1).collect();
        let _guards = self.rows.lock(&rows, true);
        if self.pending.any(&rows) {
            return Ok(false);
        }
        if self.journal.covers_any(&rows) {
            self.checkpoint_journal(&live)?;
        }
        let regions = {
            let mut bm = self.bitmap.lock().unwrap();
            let regions = bm.regions_of(&rows);
            if bm.begin(&regions) {
                if let Err(e) = self.persist(&live, &bm) {
                    bm.end(&regions);
                    return Err(e);
                }
            }
            regions
        };
        let cb = live.array.chunk_blocks();
        let res = self.absorb_truncation(&live).and_then(|_| {
            let mut punched = false;
            for m in live.members.iter().flatten() {
                match m.punch_blocks(r0 * cb, (r1 - r0) * cb, self.bs, &self.faults) {
                    Ok(()) => punched = true,
                    // Nothing changed on this member, so none before it
                    // either unless it punched: then zero-write the rest.
                    Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) && !punched => return Ok(false),
                    Err(e) => return Err(io_err(e)),
                }
            }
            if fua {
                self.sync_members(&live)?;
            }
            Ok(true)
        });
        self.bitmap.lock().unwrap().end(&regions);
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::ArrayConfig;

    fn array(level: &str, disks: u32, layout: Option<&str>) -> Array {
        let cfg = ArrayConfig::from_names_sized(level, disks, 16 << 10, layout, 4096, 1 << 20).unwrap();
        Array::new(cfg).unwrap()
    }

    #[test]
    fn raid5_punches_the_whole_stripes_and_zeroes_the_partial_ends() {
        // RAID-5 of 4, 4-block chunks: a stripe is 12 data blocks, one member row.
        let a = array("raid5", 4, None);
        let p = plan_trim(&a, 5, 40); // blocks 5..45: stripes 1, 2 whole (12..36)
        assert_eq!(
            p,
            TrimPlan {
                zero: vec![(5, 7), (36, 9)],
                rows: (1, 3)
            }
        );
        // Aligned to stripes: nothing left to write.
        assert_eq!(
            plan_trim(&a, 24, 24),
            TrimPlan {
                zero: vec![],
                rows: (2, 4)
            }
        );
        // Less than a stripe: all zeroes.
        assert_eq!(
            plan_trim(&a, 13, 11),
            TrimPlan {
                zero: vec![(13, 11)],
                rows: (0, 0)
            }
        );
    }

    #[test]
    fn raid6_raid0_raid1_and_near_raid10_punch_rows_far_raid10_does_not() {
        assert_eq!(plan_trim(&array("raid6", 5, None), 0, 24).rows, (0, 2)); // 12 data blocks a stripe
        assert_eq!(plan_trim(&array("raid0", 3, None), 4, 24).rows, (1, 2)); // 12 a stripe
        assert_eq!(plan_trim(&array("raid1", 2, None), 3, 10).rows, (1, 3)); // 4 a stripe (one chunk)
        assert_eq!(plan_trim(&array("raid10", 4, Some("n2")), 0, 16).rows, (0, 2)); // 8 a stripe
        for (disks, layout) in [(4, "f2"), (4, "o2"), (3, "n2")] {
            let p = plan_trim(&array("raid10", disks, Some(layout)), 0, 64);
            assert_eq!(
                p,
                TrimPlan {
                    zero: vec![(0, 64)],
                    rows: (0, 0)
                },
                "{disks} {layout}"
            );
        }
    }

    /// Brute force over the array's own placement: every logical block whose
    /// data or any copy sits in a punched row is inside the trim, every
    /// block of a punched row's stripes is, and the zero ranges and the
    /// punched stripes together are exactly the trim, without overlap.
    #[test]
    fn punched_rows_hold_only_trimmed_blocks_on_every_level() {
        let levels: &[(&str, u32, Option<&str>)] = &[
            ("raid0", 3, None),
            ("raid1", 3, None),
            ("raid4", 4, None),
            ("raid5", 4, None),
            ("raid5", 5, Some("right-asymmetric")),
            ("raid6", 6, None),
            ("raid10", 4, Some("n2")),
            ("raid10", 6, Some("n3")),
        ];
        for &(level, disks, layout) in levels {
            let a = array(level, disks, layout);
            let cap = a.capacity_blocks().unwrap();
            let cb = a.chunk_blocks();
            for (first, n) in [
                (0, cap),
                (1, cap - 2),
                (7, 100),
                (cb * 3, cb * 9 + 1),
                (cap / 3, cap / 3),
            ] {
                let p = plan_trim(&a, first, n);
                let (r0, r1) = p.rows;
                let mut covered: Vec<bool> = vec![false; cap as usize];
                for &(f, c) in &p.zero {
                    for b in f..f + c {
                        assert!(!covered[b as usize]);
                        covered[b as usize] = true;
                    }
                }
                for b in 0..cap {
                    let pl = a.map(b);
                    let in_rows = pl
                        .disk_blocks
                        .iter()
                        .chain([&pl.disk_block])
                        .any(|&db| db / cb >= r0 && db / cb < r1);
                    let all_in = pl
                        .disk_blocks
                        .iter()
                        .chain([&pl.disk_block])
                        .all(|&db| db / cb >= r0 && db / cb < r1);
                    if in_rows {
                        assert!(all_in, "{level}: block {b} has a copy outside the punched rows");
                        assert!(
                            b >= first && b < first + n,
                            "{level}: block {b} punched outside the trim"
                        );
                        assert!(!covered[b as usize], "{level}: block {b} both punched and zeroed");
                        covered[b as usize] = true;
                    }
                }
                for b in 0..cap {
                    assert_eq!(
                        covered[b as usize],
                        b >= first && b < first + n,
                        "{level} {first}+{n}: block {b}"
                    );
                }
            }
        }
    }
}

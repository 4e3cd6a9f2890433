//! TRIM as holes: the units a trim makes all-zero are punched out of the
//! member files, so `base:allocation` (`alloc.rs`) reports them as holes and
//! sparse copies skip them; the rest is written as zeroes through the plans.
//!
//! With parity, whole stripes, on every member: when every data unit of a
//! stripe is zero, so are its P and Q (XOR and the GF(2^8) sums of zeroes),
//! so punching all of its units leaves the stripe consistent without
//! computing anything. A partial stripe keeps the zero-write path:
//! punching only its data units would need the parity updated from the old
//! data, which is exactly what the write plans already do.
//!
//! On RAID-4/5/6 a stripe is one member chunk row (MD's layouts put stripe s
//! at chunk s of every member), so its units are that row on every member.
//! Without parity (RAID-0, 1, 10, any layout) a block's units are its
//! copies alone: every whole block of the trim is punched on every copy
//! (the array's own placement says where), whatever the stripes.
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
use crate::array::Array;

/// Stripes' worth of blocks trimmed per step (what one step locks).
const ROWS_PER_STEP: u64 = 64;

/// Member blocks `block..block + n` of member `disk`, to be punched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Punch {
    pub disk: u32,
    pub block: u64,
    pub n: u64,
}

/// How a trim of logical blocks is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimPlan {
    /// Logical block ranges (first, count) written as zeroes through the
    /// plans: the partial stripes at either end of a parity level's trim.
    pub zero: Vec<(u64, u64)>,
    /// Member ranges punched: every unit in them belongs to the trim.
    pub punch: Vec<Punch>,
}

/// The plan of a trim of logical blocks `first..first + n` (see the module
/// comment).
pub fn plan_trim(array: &Array, first: u64, n: u64) -> TrimPlan {
    if n == 0 {
        return TrimPlan {
            zero: vec![],
            punch: vec![],
        };
    }
    if !array.level().has_parity() {
        return plan_copies(array, first, n);
    }
    let cb = array.chunk_blocks();
    let stripe = cb * array.data_disks_per_stripe() as u64;
    let end = first + n;
    let (r0, r1) = (first.div_ceil(stripe), end / stripe);
    if r0 >= r1 {
        return TrimPlan {
            zero: vec![(first, n)],
            punch: vec![],
        };
    }
    let mut zero = Vec::new();
    if first < r0 * stripe {
        zero.push((first, r0 * stripe - first));
    }
    if r1 * stripe < end {
        zero.push((r1 * stripe, end - r1 * stripe));
    }
    let punch = (0..array.ndisks())
        .map(|disk| Punch {
            disk,
            block: r0 * cb,
            n: (r1 - r0) * cb,
        })
        .collect();
    TrimPlan { zero, punch }
}

/// Without parity: every block on every copy, a chunk piece at a time (a
/// piece within one chunk is contiguous on each copy), runs merged per disk.
fn plan_copies(array: &Array, first: u64, n: u64) -> TrimPlan {
    let cb = array.chunk_blocks();
    let (mut b, end) = (first, first + n);
    let mut punch: Vec<Punch> = Vec::new();
    while b < end {
        let piece = (cb - b % cb).min(end - b);
        let p = array.map(b);
        for (i, &disk) in p.disks.iter().enumerate() {
            let block = p.disk_blocks.get(i).copied().unwrap_or(p.disk_block);
            match punch.iter_mut().rev().find(|x| x.disk == disk) {
                Some(x) if x.block + x.n == block => x.n += piece,
                _ => punch.push(Punch { disk, block, n: piece }),
            }
        }
        b += piece;
    }
    TrimPlan { zero: vec![], punch }
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
        let step = {
            let a = &self.live.read().unwrap().array;
            ROWS_PER_STEP * a.chunk_blocks() * a.data_disks_per_stripe() as u64
        };
        // Steps end on multiples of `step`, a whole number of stripes: a
        // stripe is whole in the trim exactly when it is whole in its step.
        let mut s = first;
        while s < end {
            let e = ((s / step + 1) * step).min(end);
            let plan = plan_trim(&self.live.read().unwrap().array, s, e - s);
            for &(f, n) in &plan.zero {
                self.write_zeroes(f * bs, n * bs, fua)?;
            }
            if !plan.punch.is_empty() && !self.punch(&plan.punch, fua)? {
                self.write_zeroes(s * bs, (e - s) * bs, fua)?;
            }
            s = e;
        }
        Ok(())
    }

    /// Punch `runs`; Ok(false) (nothing done) when the array is not whole
    /// or a member's file system cannot punch.
    fn punch(&self, runs: &[Punch], fua: bool) -> std::result::Result<bool, ReqError> {
        self.user_start();
        let r = self.punch_inner(runs, fua);
        self.user_end();
        self.stats.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r
    }

    fn punch_inner(&self, runs: &[Punch], fua: bool) -> std::result::Result<bool, ReqError> {
        let live = self.live.read().unwrap();
        let whole = live.array.failed().is_empty()
            && !live.recovering.iter().any(|&r| r)
            && live.members.iter().all(Option::is_some)
            && self.bad.lock().unwrap().is_empty();
        if !whole {
            return Ok(false);
        }
        let cb = live.array.chunk_blocks();
        let mut rows: Vec<u64> = runs
            .iter()
            .flat_map(|p| p.block / cb..(p.block + p.n).div_ceil(cb))
            .collect();
        rows.sort_unstable();
        rows.dedup();
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
        let res = self.absorb_truncation(&live).and_then(|_| {
            for (i, p) in runs.iter().enumerate() {
                let m = live.members[p.disk as usize].as_ref().expect("checked whole above");
                match m.punch_blocks(p.block, p.n, self.bs, &self.faults) {
                    Ok(()) => {}
                    // The first punch refused: nothing changed, zeroes instead.
                    Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) && i == 0 => return Ok(false),
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
    use std::collections::BTreeSet;

    fn array(level: &str, disks: u32, layout: Option<&str>) -> Array {
        let cfg = ArrayConfig::from_names_sized(level, disks, 16 << 10, layout, 4096, 1 << 20).unwrap();
        Array::new(cfg).unwrap()
    }

    fn rows_on_every_member(disks: u32, r0: u64, r1: u64) -> Vec<Punch> {
        (0..disks)
            .map(|disk| Punch {
                disk,
                block: r0 * 4,
                n: (r1 - r0) * 4,
            })
            .collect()
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
                punch: rows_on_every_member(4, 1, 3)
            }
        );
        // Aligned to stripes: nothing left to write.
        assert_eq!(
            plan_trim(&a, 24, 24),
            TrimPlan {
                zero: vec![],
                punch: rows_on_every_member(4, 2, 4)
            }
        );
        // Less than a stripe: all zeroes.
        assert_eq!(
            plan_trim(&a, 13, 11),
            TrimPlan {
                zero: vec![(13, 11)],
                punch: vec![]
            }
        );
        assert_eq!(
            plan_trim(&array("raid6", 5, None), 0, 24).punch,
            rows_on_every_member(5, 0, 2)
        );
    }

    #[test]
    fn without_parity_every_whole_block_is_punched_on_every_copy() {
        // RAID-0 of 3: blocks 5..7 sit on disk 1 (chunk 1) at member blocks 1..3.
        assert_eq!(
            plan_trim(&array("raid0", 3, None), 5, 2).punch,
            vec![Punch {
                disk: 1,
                block: 1,
                n: 2
            }]
        );
        // RAID-1 of 2: both copies, one run each.
        let p = plan_trim(&array("raid1", 2, None), 3, 10);
        assert_eq!(
            p.punch,
            vec![
                Punch {
                    disk: 0,
                    block: 3,
                    n: 10
                },
                Punch {
                    disk: 1,
                    block: 3,
                    n: 10
                }
            ]
        );
        assert!(p.zero.is_empty());
        // RAID-10 f2 on 4: chunk 0 on disk 0 row 0 and, far, on disk 1 in the second half.
        let p = plan_trim(&array("raid10", 4, Some("f2")), 0, 4);
        assert_eq!(p.punch.len(), 2);
        assert_eq!(
            p.punch[0],
            Punch {
                disk: 0,
                block: 0,
                n: 4
            }
        );
        assert_eq!(p.punch[1].disk, 1);
        assert!(p.punch[1].block >= 128);
    }

    /// Brute force over the array's own placement, every level: the zero
    /// ranges and the punched blocks are exactly the trim, without overlap;
    /// a block with any unit punched has every copy punched; on parity
    /// levels a punched row holds data of the trim only (so its P and Q are
    /// zero too).
    #[test]
    fn punched_units_hold_only_trimmed_blocks_on_every_level() {
        let levels: &[(&str, u32, Option<&str>)] = &[
            ("raid0", 3, None),
            ("raid1", 3, None),
            ("raid4", 4, None),
            ("raid5", 4, None),
            ("raid5", 5, Some("right-asymmetric")),
            ("raid6", 6, None),
            ("raid10", 4, Some("n2")),
            ("raid10", 3, Some("n2")),
            ("raid10", 6, Some("n3")),
            ("raid10", 4, Some("f2")),
            ("raid10", 4, Some("o2")),
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
                let punched: BTreeSet<(u32, u64)> = p
                    .punch
                    .iter()
                    .flat_map(|x| (x.block..x.block + x.n).map(move |b| (x.disk, b)))
                    .collect();
                assert_eq!(
                    punched.len() as u64,
                    p.punch.iter().map(|x| x.n).sum::<u64>(),
                    "{level}: overlapping runs"
                );
                let mut covered = vec![false; cap as usize];
                for &(f, c) in &p.zero {
                    for b in f..f + c {
                        assert!(!covered[b as usize]);
                        covered[b as usize] = true;
                    }
                }
                let mut rows_with_outside_data = BTreeSet::new();
                for b in 0..cap {
                    let pl = a.map(b);
                    let copies: Vec<(u32, u64)> =
                        pl.disks.iter().copied().zip(pl.disk_blocks.iter().copied()).collect();
                    let any = copies.iter().any(|c| punched.contains(c));
                    if any {
                        assert!(
                            copies.iter().all(|c| punched.contains(c)),
                            "{level}: block {b} has a copy left"
                        );
                        assert!(
                            b >= first && b < first + n,
                            "{level}: block {b} punched outside the trim"
                        );
                        assert!(!covered[b as usize], "{level}: block {b} both punched and zeroed");
                        covered[b as usize] = true;
                    }
                    if b < first || b >= first + n {
                        rows_with_outside_data.extend(copies.iter().map(|c| c.1 / cb));
                    }
                }
                for b in 0..cap {
                    assert_eq!(
                        covered[b as usize],
                        b >= first && b < first + n,
                        "{level} {first}+{n}: block {b}"
                    );
                }
                if a.level().has_parity() {
                    assert!(
                        punched
                            .iter()
                            .all(|&(_, db)| !rows_with_outside_data.contains(&(db / cb))),
                        "{level}"
                    );
                } else {
                    // No unit punched that holds no trimmed block's copy.
                    let units: usize = (first..first + n).map(|b| a.map(b).disks.len()).sum();
                    assert_eq!(punched.len(), units, "{level}");
                }
            }
        }
    }
}

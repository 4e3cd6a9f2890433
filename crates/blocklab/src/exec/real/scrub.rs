//! Check, repair and resync of one member chunk row (MD's `check`,
//! `repair` and the resync after an unclean shutdown).
//!
//! The row is read with the array's scrub plan
//! ([`Array::plan_scrub_row`](crate::array::Array::plan_scrub_row)); then,
//! block row by block row:
//!
//! * units known bad (checksum mismatch, past the end of a truncated member,
//!   read error, bad-block list) are erasures: with no more erasures than the
//!   level's parity (failed members included) they are rebuilt from the rest
//!   and rewritten (repair), else the block row is unrecoverable;
//! * with every unit good and no member failed, data and parity are
//!   compared: RAID-4/5 repair rewrites the parity from the data (as MD);
//!   RAID-6 finds the single wrong unit from P and Q (as `raid6check`) and
//!   rewrites it; when no single unit explains the mismatch (two or more
//!   units wrong) the block row is counted unrecoverable, listed, and left
//!   as it is: MD would rewrite P and Q from the data, which makes the next
//!   check clean while the data stays wrong, destroying the only evidence;
//! * mirrors: bad copies and copies that differ from the first good one are
//!   rewritten from it (MD copies the first in-sync mirror).
//!
//! Resync trusts the data, as MD's does: after a crash a block may hold new
//! data with its old checksum (or the reverse), which is not corruption, so
//! checksum mismatches are settled by rewriting the checksum and the parity
//! is recomputed from the data. Rows with a failed member are skipped by
//! resync: their writes went through the journal.
//!
//! Counts: `stripes_checked` is member chunk rows; `mismatches`, `repaired`
//! and `unrecoverable` are block rows (one block on every member).

use serde::Serialize;

use super::members::BlockState;
use super::runner::{do_reads, places, solve_row, Env, Reads};
use crate::array::gf256::{self, Syndrome, Unit};
use crate::array::layout::Level;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Check,
    Repair,
    Resync,
}

/// Unrecoverable block rows listed at most (the count goes on).
pub const LISTED_MAX: usize = 1024;

/// What a scrub found (the JSON of `real check`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ScrubReport {
    pub stripes_checked: u64,
    pub mismatches: u64,
    pub repaired: u64,
    pub unrecoverable: u64,
    /// Block rows not compared because a member is failed (no redundancy
    /// left to compare against; bad units in them are still repaired).
    pub degraded_skipped: u64,
    /// The unrecoverable block rows, as the member block they sit at (the
    /// same on every member), ascending; the first [`LISTED_MAX`]. Nothing
    /// is written to them: what is wrong stays there to be looked at.
    #[serde(default)]
    pub unrecoverable_at: Vec<u64>,
}

impl ScrubReport {
    pub fn add(&mut self, o: &ScrubReport) {
        self.stripes_checked += o.stripes_checked;
        self.mismatches += o.mismatches;
        self.repaired += o.repaired;
        self.unrecoverable += o.unrecoverable;
        self.degraded_skipped += o.degraded_skipped;
        for &b in &o.unrecoverable_at {
            self.list(b);
        }
    }

    /// Count block row `block` unrecoverable and list it.
    fn unrecoverable(&mut self, block: u64) {
        self.unrecoverable += 1;
        self.list(block);
    }

    fn list(&mut self, block: u64) {
        if self.unrecoverable_at.len() < LISTED_MAX {
            self.unrecoverable_at.push(block);
        }
    }
}

/// The writes a scrub asks for.
#[derive(Debug, Default)]
pub struct Fixes {
    /// Units to rewrite (data and checksum).
    pub units: Vec<(u32, u64, Vec<u8>)>,
    /// Units whose data is right but whose checksum must be rewritten.
    pub sums: Vec<(u32, u64, Vec<u8>)>,
}

/// Scrub member row `row`; returns the counts and the writes to apply
/// (none in check mode).
pub fn scrub_row(env: &Env, row: u64, mode: Mode) -> (ScrubReport, Fixes) {
    let a = env.array;
    let plan = a.plan_scrub_row(row);
    let reads = do_reads(env, &plan);
    let mut rep = ScrubReport {
        stripes_checked: 1,
        ..Default::default()
    };
    let mut fixes = Fixes::default();
    match a.level() {
        Level::Raid4 | Level::Raid5 | Level::Raid6 => parity_row(env, &reads, row, mode, &mut rep, &mut fixes),
        Level::Raid1 | Level::Raid10 => mirror_row(env, &reads, row, mode, &mut rep, &mut fixes),
        Level::Raid0 => {
            for (d, b, st) in reads.bad_units() {
                if mode == Mode::Resync && st == BlockState::BadSum {
                    let (u, _) = reads.raw(d, b, env.bs).expect("read");
                    fixes.sums.push((d, b, u.to_vec()));
                } else {
                    rep.mismatches += 1;
                    rep.unrecoverable(b);
                }
            }
        }
    }
    if mode == Mode::Check {
        // Counted as a repair would find them, but nothing is written.
        fixes = Fixes::default();
        rep.repaired = 0;
    }
    (rep, fixes)
}

/// A unit's data and whether it counts as good in this mode.
fn usable(reads: &Reads, d: u32, b: u64, bs: usize, mode: Mode) -> Option<(&[u8], BlockState)> {
    reads
        .raw(d, b, bs)
        .filter(|(_, st)| *st == BlockState::Ok || (mode == Mode::Resync && *st == BlockState::BadSum))
}

fn parity_row(env: &Env, reads: &Reads, row: u64, mode: Mode, rep: &mut ScrubReport, fixes: &mut Fixes) {
    let a = env.array;
    let bs = env.bs;
    let cb = a.chunk_blocks();
    let sm = a.stripe_map(row);
    let n = sm.n;
    let m = (n - sm.k) as usize;
    let erased: Vec<u32> = (0..n).filter(|&d| a.is_failed_at(d, row)).collect();
    if mode == Mode::Resync && !erased.is_empty() {
        return; // degraded rows were journaled
    }
    let slots = sm.q_slots();
    for off in 0..cb {
        let block = row * cb + off;
        let good = |d: u32| usable(reads, d, block, bs, mode).map(|(u, _)| u);
        let bad: Vec<u32> = (0..n).filter(|&d| !erased.contains(&d) && good(d).is_none()).collect();
        // Resync: checksums settled in favour of the data.
        if mode == Mode::Resync {
            for d in 0..n {
                if let Some((u, BlockState::BadSum)) = reads.raw(d, block, bs) {
                    fixes.sums.push((d, block, u.to_vec()));
                }
            }
        }
        if !bad.is_empty() {
            rep.mismatches += 1;
            if erased.len() + bad.len() <= m {
                let solved = solve_row(&sm, bs, good).expect("within the parity");
                for &d in &bad {
                    fixes.units.push((d, block, solved[d as usize].clone()));
                }
                rep.repaired += 1;
            } else {
                rep.unrecoverable(block);
            }
            continue;
        }
        if !erased.is_empty() {
            rep.degraded_skipped += 1;
            continue;
        }
        let data: Vec<&[u8]> = (0..sm.k).map(|d| good(sm.data_disk(d)).expect("good")).collect();
        let p = good(sm.p).expect("good");
        let q = sm.q.map(|q| good(q).expect("good"));
        let (np, nq) = if let Some(q) = q {
            let (mut np, mut nq) = (vec![0u8; bs], vec![0u8; bs]);
            gf256::syndrome(&data, &slots, &mut np, &mut nq);
            (np, Some((nq, q)))
        } else {
            let mut np = vec![0u8; bs];
            for d in &data {
                gf256::xor_into(&mut np, d);
            }
            (np, None)
        };
        let p_ok = np == p;
        let q_ok = nq.as_ref().is_none_or(|(nq, q)| nq == q);
        if p_ok && q_ok {
            continue;
        }
        rep.mismatches += 1;
        let rewrite_parity = |fixes: &mut Fixes| {
            if !p_ok {
                fixes.units.push((sm.p, block, np.clone()));
            }
            if let (false, Some((nq, _))) = (q_ok, &nq) {
                fixes.units.push((sm.q.unwrap(), block, nq.clone()));
            }
        };
        match (mode, q) {
            (Mode::Resync, _) | (Mode::Repair, None) => {
                rewrite_parity(fixes);
                rep.repaired += 1;
            }
            (_, Some(q)) => match gf256::locate(&data, &slots, p, q) {
                Syndrome::Wrong(Unit::Data(i)) => {
                    // Rebuild the wrong data unit from the others and P.
                    let wrong = sm.data_disk(i as u32);
                    let solved = solve_row(&sm, bs, |d| if d == wrong { None } else { good(d) }).expect("one erasure");
                    fixes.units.push((wrong, block, solved[wrong as usize].clone()));
                    rep.repaired += 1;
                }
                Syndrome::Wrong(_) => {
                    rewrite_parity(fixes);
                    rep.repaired += 1;
                }
                Syndrome::Consistent | Syndrome::Unlocatable => {
                    // Left as it is: rewriting P and Q would hide it.
                    rep.unrecoverable(block);
                }
            },
            (Mode::Check, None) => {}
        }
    }
}

fn mirror_row(env: &Env, reads: &Reads, row: u64, mode: Mode, rep: &mut ScrubReport, fixes: &mut Fixes) {
    let a = env.array;
    let bs = env.bs;
    let cb = a.chunk_blocks();
    // Logical chunks scrubbed with this row: RAID-1 chunk `row`; RAID-10
    // the chunks whose first copy is in this row.
    let chunks: Vec<u64> = match a.level() {
        Level::Raid1 => vec![row],
        _ => (0..a.ndisks())
            .filter_map(|d| match a.raid10_block_at(d, row * cb) {
                Some((l, 0)) => Some(l / cb),
                _ => None,
            })
            .collect(),
    };
    for chunk in chunks {
        for off in 0..cb {
            let l = chunk * cb + off;
            let copies: Vec<(u32, u64, &[u8], BlockState)> = places(a, l)
                .into_iter()
                .filter_map(|(d, b)| reads.raw(d, b, bs).map(|(u, st)| (d, b, u, st)))
                .collect();
            if copies.is_empty() {
                continue;
            }
            // The reference copy: the first good one (resync: or the first
            // whose only fault is its checksum, whose data wins).
            let reference = copies.iter().find(|c| c.3 == BlockState::Ok).or_else(|| {
                copies
                    .iter()
                    .find(|c| mode == Mode::Resync && c.3 == BlockState::BadSum)
            });
            let Some(&(rd, rb, ru, rst)) = reference else {
                rep.mismatches += 1;
                rep.unrecoverable(copies[0].1);
                continue;
            };
            if rst == BlockState::BadSum {
                fixes.sums.push((rd, rb, ru.to_vec()));
            }
            let mut wrong = false;
            for &(d, b, u, st) in &copies {
                if (d, b) != (rd, rb) && (st != BlockState::Ok || u != ru) {
                    fixes.units.push((d, b, ru.to_vec()));
                    wrong = true;
                }
            }
            if wrong {
                rep.mismatches += 1;
                rep.repaired += 1;
            }
        }
    }
}

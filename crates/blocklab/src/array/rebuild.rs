//! Rebuild (MD "recovery") plans: one member chunk row per step.
//!
//! MD recovers a spare sequentially from the start of the member
//! (`md_do_sync`, `recovery_offset` growing); each step here is one chunk
//! row of every recovering disk: read what the lost units of that row need,
//! compute, write the spare(s). All disk operations have [`Cause::Rebuild`].
//!
//! * RAID-4/5: every survivor of the row, XOR, write (as MD's raid5
//!   `sync_request`: a sync stripe reads all in-sync devices).
//! * RAID-6: only as many survivors as the lost units need (k of them:
//!   surviving data first, then P, then Q; one lost data or P unit is an
//!   XOR, anything with Q is a P+Q step). MD reads every in-sync device of a
//!   syncing stripe (it also checks); we read the minimum, as asked.
//! * RAID-1 / RAID-10: one surviving copy of the chunk (the first in MD's
//!   slot order), written to each recovering disk that holds it.
//!
//! Rows are those of the *member*: for RAID-4/5/6 chunk row r of every disk
//! is stripe r; for RAID-1 it is logical chunk r; for RAID-10 the row holds
//! whatever chunk the layout put there ([`Array::raid10_block_at`]), or
//! nothing (past the far regions), in which case no I/O is needed.

use super::layout::Level;
use super::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use super::Array;

fn op(disk: u32, kind: DiskOpKind, block: u64, nblocks: u64) -> Action {
    Action::Disk(DiskOp {
        disk,
        kind,
        block,
        nblocks: nblocks as u32,
        cause: Cause::Rebuild,
    })
}

impl Array {
    /// The plan rebuilding member chunk row `row` of every recovering disk
    /// (see [`Array::start_recovery`]); empty when nothing is recovering,
    /// the row holds no data, or it is rebuilt already (a resumed recovery:
    /// the orders hand out every row, the rows done before are no work).
    pub fn plan_rebuild_row(&self, row: u64) -> IoPlan {
        let mut plan = IoPlan::default();
        let targets = self.recovering();
        if targets.is_empty() || self.is_rebuilt(row) {
            return plan;
        }
        let cb = self.chunk_blocks;
        let at = row * cb;
        // At the row being rebuilt every failed disk is lost (a recovering
        // disk is in sync only below the offset).
        let lost = |d: u32| self.is_failed(d);
        match self.level() {
            Level::Raid0 => {}
            Level::Raid1 => {
                if let Some(src) = (0..self.ndisks()).find(|&d| !lost(d)) {
                    let r = plan.push(op(src, DiskOpKind::Read, at, cb), &[]);
                    for &t in &targets {
                        plan.push(op(t, DiskOpKind::Write, at, cb), &[r]);
                    }
                }
            }
            Level::Raid10 => {
                // Reads first (one per distinct source), then the writes.
                let mut reads: Vec<(u32, u64)> = Vec::new();
                let mut writes: Vec<(u32, usize)> = Vec::new();
                for &t in &targets {
                    let Some((block, _slot)) = self.raid10_block_at(t, at) else {
                        continue;
                    };
                    let Some(src) = self.raid10_copies(block).find(|&(d, _)| !lost(d)) else {
                        continue;
                    };
                    let i = reads.iter().position(|&s| s == src).unwrap_or_else(|| {
                        reads.push(src);
                        reads.len() - 1
                    });
                    writes.push((t, i));
                }
                let ids: Vec<u16> = reads
                    .iter()
                    .map(|&(d, b)| plan.push(op(d, DiskOpKind::Read, b, cb), &[]))
                    .collect();
                for (t, i) in writes {
                    plan.push(op(t, DiskOpKind::Write, at, cb), &[ids[i]]);
                }
            }
            Level::Raid4 | Level::Raid5 | Level::Raid6 => {
                let sm = self.stripe_map(row);
                let k = sm.k as usize;
                let survivors: Vec<u32> = if sm.q.is_none() {
                    (0..self.ndisks()).filter(|&d| !lost(d)).collect()
                } else {
                    let mut order: Vec<u32> = sm.data_disks();
                    order.push(sm.p);
                    order.extend(sm.q);
                    order.into_iter().filter(|&d| !lost(d)).take(k).collect()
                };
                if survivors.len() < k {
                    return plan; // more failures than the level tolerates
                }
                let lost_units: Vec<u32> = (0..self.ndisks()).filter(|&d| lost(d)).collect();
                let xor_enough = sm.q.is_none()
                    || (lost_units.len() == 1 && Some(lost_units[0]) != sm.q && !survivors.contains(&sm.q.unwrap()));
                let reads: Vec<u16> = survivors
                    .iter()
                    .map(|&d| plan.push(op(d, DiskOpKind::Read, at, cb), &[]))
                    .collect();
                let units = survivors.len() as u32;
                let c = plan.push(
                    if xor_enough {
                        Action::Xor { units }
                    } else {
                        Action::PQ { units }
                    },
                    &reads,
                );
                for &t in &targets {
                    plan.push(op(t, DiskOpKind::Write, at, cb), &[c]);
                }
            }
        }
        plan
    }
}

//! Scrub plans (MD's `check` / `repair` / resync): read everything that
//! holds redundancy for one member chunk row, so that an executor can
//! compare data with parity (or copies) and rewrite what is wrong.
//!
//! * RAID-4/5/6 and RAID-0: the chunk row on every member that holds it
//!   (stripe `row`); RAID-1: logical chunk `row` on every mirror.
//! * RAID-10: every copy of each chunk whose first copy (slot 0) lies in
//!   member row `row`; far and offset copies live in other rows, so each
//!   chunk is scrubbed exactly once over all rows.
//!
//! Members failed at that row are not read. All operations have
//! [`Cause::Rebuild`]: MD runs check, repair, resync and recovery through
//! the same background sync (`md_do_sync`).

use super::layout::Level;
use super::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use super::Array;

impl Array {
    /// The reads of a scrub of member chunk row `row` (see the module notes).
    pub fn plan_scrub_row(&self, row: u64) -> IoPlan {
        let mut plan = IoPlan::default();
        let cb = self.chunk_blocks;
        let read = |plan: &mut IoPlan, disk: u32, at: u64| {
            if !self.is_failed_at(disk, at / cb) {
                let op = DiskOp {
                    disk,
                    kind: DiskOpKind::Read,
                    block: at,
                    nblocks: cb as u32,
                    cause: Cause::Rebuild,
                };
                plan.push(Action::Disk(op), &[]);
            }
        };
        match self.level() {
            Level::Raid10 => {
                for d in 0..self.ndisks() {
                    if let Some((block, 0)) = self.raid10_block_at(d, row * cb) {
                        for (cd, at) in self.raid10_copies(block) {
                            read(&mut plan, cd, at);
                        }
                    }
                }
            }
            _ => {
                for d in 0..self.ndisks() {
                    read(&mut plan, d, row * cb);
                }
            }
        }
        plan
    }
}

//! Building I/O plans for logical reads and writes.
//!
//! A logical range (in blocks) is split into per-disk pieces; parity levels
//! decide row by row (see `degraded.rs`). The pieces are gathered by a
//! [`PlanBuilder`], which merges contiguous operations of the same kind and
//! cause on the same disk and emits the DAG in a fixed order: reads, then
//! compute steps (each waiting for the reads of its rows), then writes (each
//! waiting for the compute steps of its rows), then unreadable markers.

use super::degraded::{read_row, write_row};
use super::layout::Level;
use super::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use super::Array;

/// One not-yet-merged disk operation; `group` ties it to a compute step.
#[derive(Debug, Clone, Copy)]
struct Raw {
    disk: u32,
    block: u64,
    nblocks: u64,
    cause: Cause,
    group: u32,
}

const NO_GROUP: u32 = u32::MAX;

/// Collects raw operations and compute steps and assembles the plan.
#[derive(Debug, Default)]
pub struct PlanBuilder {
    reads: Vec<Raw>,
    writes: Vec<Raw>,
    computes: Vec<Action>,
    /// Signature of the last group, so that consecutive rows with the same
    /// pattern share one compute step.
    last_sig: Vec<u64>,
    unreadable: Vec<u64>,
}

impl PlanBuilder {
    pub fn read(&mut self, disk: u32, block: u64, nblocks: u64, cause: Cause, group: u32) {
        self.reads.push(Raw {
            disk,
            block,
            nblocks,
            cause,
            group,
        });
    }

    pub fn write(&mut self, disk: u32, block: u64, nblocks: u64, cause: Cause, group: u32) {
        self.writes.push(Raw {
            disk,
            block,
            nblocks,
            cause,
            group,
        });
    }

    pub fn unreadable(&mut self, block: u64) {
        self.unreadable.push(block);
    }

    /// A compute step for a row whose I/O pattern is `sig`; rows with the
    /// same pattern in a row (same stripe, same roles) share the step.
    fn group(&mut self, action: Action, sig: Vec<u64>) -> u32 {
        if !self.computes.is_empty() && sig == self.last_sig && self.computes.last() == Some(&action) {
            return (self.computes.len() - 1) as u32;
        }
        self.computes.push(action);
        self.last_sig = sig;
        (self.computes.len() - 1) as u32
    }

    /// Sort and merge raw ops; returns the merged ops and, per merged op, the groups it serves.
    fn merge(mut raws: Vec<Raw>) -> Vec<(Raw, Vec<u32>)> {
        raws.sort_by_key(|r| (r.disk, r.cause, r.block));
        let mut out: Vec<(Raw, Vec<u32>)> = Vec::with_capacity(raws.len());
        for r in raws {
            if let Some((last, groups)) = out.last_mut() {
                if last.disk == r.disk && last.cause == r.cause && last.block + last.nblocks == r.block {
                    last.nblocks += r.nblocks;
                    if r.group != NO_GROUP && groups.last() != Some(&r.group) {
                        groups.push(r.group);
                    }
                    continue;
                }
            }
            let groups = if r.group == NO_GROUP { vec![] } else { vec![r.group] };
            out.push((r, groups));
        }
        out
    }

    pub fn finish(mut self) -> IoPlan {
        self.unreadable.sort_unstable();
        let reads = Self::merge(self.reads);
        let writes = Self::merge(self.writes);
        let mut plan = IoPlan {
            nodes: Vec::with_capacity(reads.len() + self.computes.len() + writes.len() + self.unreadable.len()),
        };
        let mut group_reads: Vec<Vec<u16>> = vec![vec![]; self.computes.len()];
        for (raw, groups) in &reads {
            let idx = push_op(&mut plan, raw, DiskOpKind::Read, &[]);
            for &g in groups {
                group_reads[g as usize].push(idx);
            }
        }
        let reads_and_computes = reads.len() + self.computes.len();
        let mut group_node = Vec::with_capacity(self.computes.len());
        for (g, action) in self.computes.into_iter().enumerate() {
            let mut deps = std::mem::take(&mut group_reads[g]);
            deps.sort_unstable();
            deps.dedup();
            group_node.push(plan.push(action, &deps));
        }
        for (raw, groups) in writes {
            let mut deps: Vec<u16> = groups.iter().map(|&g| group_node[g as usize]).collect();
            deps.sort_unstable();
            deps.dedup();
            push_op(&mut plan, &raw, DiskOpKind::Write, &deps);
        }
        for block in self.unreadable {
            plan.push(Action::Unreadable { block }, &[]);
        }
        // Node ids are u16; only reads and compute steps are ever depended on.
        debug_assert!(
            reads_and_computes <= u16::MAX as usize,
            "plan too large for u16 node ids"
        );
        plan
    }
}

fn push_op(plan: &mut IoPlan, raw: &Raw, kind: DiskOpKind, deps: &[u16]) -> u16 {
    let op = DiskOp {
        disk: raw.disk,
        kind,
        block: raw.block,
        nblocks: raw.nblocks as u32,
        cause: raw.cause,
    };
    plan.push(Action::Disk(op), deps)
}

/// A flat, user-facing view of one plan node (for JSON output).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeView {
    pub id: u16,
    /// `read`, `write`, `xor`, `pq` or `unreadable`.
    pub op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<u32>,
    /// Disk block for disk ops, logical block for `unreadable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nblocks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
    pub deps: Vec<u16>,
}

/// Flatten a plan for display.
pub fn plan_view(plan: &IoPlan) -> Vec<NodeView> {
    plan.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut v = NodeView {
                id: i as u16,
                op: "",
                disk: None,
                block: None,
                nblocks: None,
                cause: None,
                units: None,
                deps: n.deps.clone(),
            };
            match &n.action {
                Action::Disk(o) => {
                    v.op = match o.kind {
                        DiskOpKind::Read => "read",
                        DiskOpKind::Write => "write",
                    };
                    v.disk = Some(o.disk);
                    v.block = Some(o.block);
                    v.nblocks = Some(o.nblocks);
                    v.cause = Some(o.cause);
                }
                Action::Xor { units } => {
                    v.op = "xor";
                    v.units = Some(*units);
                }
                Action::PQ { units } => {
                    v.op = "pq";
                    v.units = Some(*units);
                }
                Action::Unreadable { block } => {
                    v.op = "unreadable";
                    v.block = Some(*block);
                }
                Action::Delay { .. } => v.op = "delay",
                Action::Await { .. } => v.op = "await",
            }
            v
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
}

impl Array {
    /// The plan of a read of `nblocks` logical blocks from `block`
    /// (mirrors read their first surviving copy).
    pub fn plan_read(&self, block: u64, nblocks: u64) -> IoPlan {
        self.plan(Op::Read, block, nblocks, None)
    }

    /// As [`Array::plan_read`], but for RAID-1/10 `pick` chooses which
    /// surviving copy each chunk piece reads: it gets the copies
    /// `(disk, disk block)` in MD's slot order and returns an index. A
    /// timed executor balances reads over mirrors this way (MD's
    /// read_balance looks at queues and head positions, which only it has).
    pub fn plan_read_with(&self, block: u64, nblocks: u64, pick: &mut dyn FnMut(&[(u32, u64)]) -> usize) -> IoPlan {
        self.plan(Op::Read, block, nblocks, Some(pick))
    }

    /// The plan of a write of `nblocks` logical blocks from `block`.
    pub fn plan_write(&self, block: u64, nblocks: u64) -> IoPlan {
        self.plan(Op::Write, block, nblocks, None)
    }

    fn plan(&self, op: Op, block: u64, nblocks: u64, pick: Option<&mut dyn FnMut(&[(u32, u64)]) -> usize>) -> IoPlan {
        let mirrored = matches!(self.level(), Level::Raid1 | Level::Raid10);
        // Fast path (the common cache miss): one block readable in place.
        if op == Op::Read && nblocks == 1 && !(mirrored && pick.is_some()) {
            if let Some((disk, at)) = self.direct_copy(block) {
                let mut plan = IoPlan {
                    nodes: Vec::with_capacity(1),
                };
                let op = DiskOp {
                    disk,
                    kind: DiskOpKind::Read,
                    block: at,
                    nblocks: 1,
                    cause: Cause::User,
                };
                plan.push(Action::Disk(op), &[]);
                return plan;
            }
        }
        // A one-block read of a parity level whose disk is lost (the counted
        // cache miss on a degraded array): the row path's plan without its buffers.
        if op == Op::Read && nblocks == 1 && !mirrored && self.level() != Level::Raid0 {
            return self.plan_lost_block(block);
        }
        self.plan_rows(op, block, nblocks, pick)
    }

    /// The general planner: chunk pieces (copies) or rows (parity) gathered
    /// by a [`PlanBuilder`].
    fn plan_rows(
        &self,
        op: Op,
        block: u64,
        nblocks: u64,
        pick: Option<&mut dyn FnMut(&[(u32, u64)]) -> usize>,
    ) -> IoPlan {
        let mut b = PlanBuilder::default();
        if nblocks > 0 {
            match self.level() {
                Level::Raid0 | Level::Raid1 | Level::Raid10 => self.plan_copies(&mut b, op, block, nblocks, pick),
                _ => self.plan_parity(&mut b, op, block, nblocks),
            }
        }
        b.finish()
    }

    /// The plan [`plan_rows`](Self::plan_rows) makes for a read of the one
    /// block `block` of a parity level (RAID-4/5/6) that is not readable in
    /// place, without its buffers: what `read_row` asks of the row, the reads
    /// in the builder's order (by disk; one block each, so none merge), the
    /// compute step waiting for all of them; or the block unreadable when
    /// more disks are lost than the parity rebuilds. (Tests compare it with
    /// the general planner.)
    fn plan_lost_block(&self, block: u64) -> IoPlan {
        let cb = self.chunk_blocks;
        let k = self.data_disks_per_stripe() as u64;
        let stripe_blocks = cb * k;
        let stripe = block / stripe_blocks;
        let base = stripe * stripe_blocks;
        let (index, off) = ((block - base) / cb, block % cb);
        let sm = self.stripe_map(stripe);
        let failed = |d: u32| self.is_failed_at(d, stripe);
        let disk_block = stripe * cb + off;
        let op = |disk: u32, cause: Cause| {
            Action::Disk(DiskOp {
                disk,
                kind: DiskOpKind::Read,
                block: disk_block,
                nblocks: 1,
                cause,
            })
        };
        let disk = sm.data_disk(index as u32);
        if !failed(disk) {
            let mut plan = IoPlan {
                nodes: Vec::with_capacity(1),
            };
            plan.push(op(disk, Cause::User), &[]);
            return plan;
        }
        // `read_row` of the one wanted unit, whose disk is lost.
        let (n, m) = (sm.n, sm.n - sm.k);
        let lost = (0..n).filter(|&d| failed(d)).count() as u32;
        if lost > m {
            let mut plan = IoPlan {
                nodes: Vec::with_capacity(1),
            };
            plan.push(Action::Unreadable { block }, &[]);
            return plan;
        }
        // Reconstruct: read every surviving unit of the row (none is the
        // wanted one), then one compute step waiting for them all.
        let mut plan = IoPlan {
            nodes: Vec::with_capacity((n - lost) as usize + 1),
        };
        for d in (0..n).filter(|&d| !failed(d)) {
            plan.push(op(d, Cause::ReconstructRead), &[]);
        }
        let lost_data = lost - failed(sm.p) as u32 - sm.q.map_or(0, |q| failed(q) as u32);
        let action = if lost_data == 1 && !failed(sm.p) {
            Action::Xor { units: sm.k }
        } else {
            Action::PQ { units: n - lost }
        };
        let deps: Vec<u16> = (0..plan.nodes.len() as u16).collect();
        plan.nodes.push(super::plan::Node { action, deps });
        plan
    }

    /// The general planner's read of `nblocks` from `block` (tests compare
    /// the fast paths of [`Array::plan_read`] with it).
    #[cfg(test)]
    pub(super) fn plan_read_by_rows(&self, block: u64, nblocks: u64) -> IoPlan {
        self.plan_rows(Op::Read, block, nblocks, None)
    }

    /// The surviving disk and disk block a read of `block` can use directly
    /// (first surviving copy for mirrors), without reconstruction.
    pub(crate) fn direct_copy(&self, block: u64) -> Option<(u32, u64)> {
        let (chunk, off) = self.chunk_of(block);
        let cb = self.chunk_blocks;
        let n = self.ndisks() as u64;
        let (disk, at) = match self.level() {
            Level::Raid0 => ((chunk % n) as u32, (chunk / n) * cb + off),
            Level::Raid1 => ((0..n as u32).find(|&d| !self.is_failed_at(d, block / cb))?, block),
            Level::Raid10 => self
                .r10
                .copies(chunk)
                .find(|&(d, row)| !self.is_failed_at(d, row))
                .map(|(d, row)| (d, row * cb + off))?,
            _ => {
                let k = self.data_disks_per_stripe() as u64;
                let stripe = chunk / k;
                (self.stripe_map(stripe).data_disk((chunk % k) as u32), stripe * cb + off)
            }
        };
        (!self.is_failed_at(disk, at / cb)).then_some((disk, at))
    }

    /// Pieces of `[block, block+nblocks)` that stay within one chunk:
    /// (first logical block, length, chunk number, offset in chunk).
    fn chunk_pieces(&self, block: u64, nblocks: u64) -> impl Iterator<Item = (u64, u64, u64, u64)> + '_ {
        let end = block + nblocks;
        let cb = self.chunk_blocks;
        let mut at = block;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let (chunk, off) = (at / cb, at % cb);
            let len = (cb - off).min(end - at);
            let piece = (at, len, chunk, off);
            at += len;
            Some(piece)
        })
    }

    /// RAID-0, RAID-1, RAID-10: every block has its own copies.
    fn plan_copies(
        &self,
        b: &mut PlanBuilder,
        op: Op,
        block: u64,
        nblocks: u64,
        mut pick: Option<&mut dyn FnMut(&[(u32, u64)]) -> usize>,
    ) {
        let n = self.ndisks();
        let cb = self.chunk_blocks;
        for (first, len, chunk, off) in self.chunk_pieces(block, nblocks) {
            let copies: Vec<(u32, u64)> = match self.level() {
                Level::Raid0 => vec![((chunk % n as u64) as u32, (chunk / n as u64) * cb + off)],
                Level::Raid1 => (0..n).map(|d| (d, first)).collect(),
                _ => self.r10.copies(chunk).map(|(d, row)| (d, row * cb + off)).collect(),
            };
            let alive: Vec<(u32, u64)> = copies
                .into_iter()
                .filter(|&(d, at)| !self.is_failed_at(d, at / cb))
                .collect();
            if alive.is_empty() {
                (first..first + len).for_each(|x| b.unreadable(x));
                continue;
            }
            match op {
                // Without `pick`, read the first surviving copy in MD's slot order. That is
                // what MD's RAID-10 read_balance picks on an idle array of
                // rotating disks: with near > 1 every idle copy scores
                // distance 0 and the first wins; with near = 1 and far /
                // offset copies it takes the lowest device address, and the
                // addresses grow with the slot. (A busy MD array prefers
                // idle or nearer heads; a counted model has no queues.)
                Op::Read => {
                    let i = pick.as_mut().map_or(0, |p| p(&alive).min(alive.len() - 1));
                    b.read(alive[i].0, alive[i].1, len, Cause::User, NO_GROUP)
                }
                Op::Write => {
                    for (d, at) in alive {
                        b.write(d, at, len, Cause::User, NO_GROUP);
                    }
                }
            }
        }
    }

    /// RAID-4/5/6: row by row where parity is involved.
    fn plan_parity(&self, b: &mut PlanBuilder, op: Op, block: u64, nblocks: u64) {
        let cb = self.chunk_blocks;
        let k = self.data_disks_per_stripe() as u64;
        let stripe_blocks = cb * k;
        let end = block + nblocks;
        let first_stripe = block / stripe_blocks;
        let last_stripe = (end - 1) / stripe_blocks;
        for stripe in first_stripe..=last_stripe {
            let sm = self.stripe_map(stripe);
            // A stripe is one chunk row of every member (the recovery offset's unit).
            let failed = |d: u32| self.is_failed_at(d, stripe);
            let lo = block.max(stripe * stripe_blocks);
            let hi = end.min((stripe + 1) * stripe_blocks);
            // Fast path: a read touching no failed disk is one op per chunk piece.
            if op == Op::Read {
                let touches_failed = self
                    .chunk_pieces(lo, hi - lo)
                    .any(|(_, _, chunk, _)| failed(sm.data_disk((chunk % k) as u32)));
                if !touches_failed {
                    for (_, len, chunk, off) in self.chunk_pieces(lo, hi - lo) {
                        let disk = sm.data_disk((chunk % k) as u32);
                        b.read(disk, stripe * cb + off, len, Cause::User, NO_GROUP);
                    }
                    continue;
                }
            }
            // Offsets (rows) touched in this stripe, ascending.
            let offsets: Vec<u64> = if hi - lo >= cb {
                (0..cb).collect()
            } else {
                let mut v: Vec<u64> = (lo..hi).map(|x| x % cb).collect();
                v.sort_unstable();
                v
            };
            let base = stripe * stripe_blocks;
            for off in offsets {
                let disk_block = stripe * cb + off;
                // Data units d of this row whose logical block lies in [lo, hi).
                let mut sel = vec![false; k as usize];
                for d in 0..k {
                    let lb = base + d * cb + off;
                    sel[d as usize] = lb >= lo && lb < hi;
                }
                let io = match op {
                    Op::Read => read_row(&sm, &failed, &sel),
                    Op::Write => write_row(&sm, &failed, &sel).1,
                };
                let group = match io.compute.clone() {
                    Some(action) => {
                        let mut sig: Vec<u64> = vec![stripe];
                        sig.extend(io.reads.iter().map(|&(d, c)| ((d as u64) << 8) | c as u64));
                        sig.push(u64::MAX);
                        sig.extend(io.writes.iter().map(|&(d, c)| ((d as u64) << 8) | c as u64));
                        b.group(action, sig)
                    }
                    None => NO_GROUP,
                };
                for &(d, cause) in &io.reads {
                    b.read(d, disk_block, 1, cause, group);
                }
                for &(d, cause) in &io.writes {
                    b.write(d, disk_block, 1, cause, group);
                }
                for &d in &io.unreadable {
                    b.unreadable(base + d as u64 * cb + off);
                }
            }
        }
    }
}

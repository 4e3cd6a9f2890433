//! The counted executor: runs plans at once (no time) and tallies what they
//! ask of the disks — blocks and operations per disk, per cause, per kind —
//! plus compute steps and blocks that could not be produced.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::array::{Action, Cause, DiskOpKind, IoPlan};

const CAUSES: [Cause; 5] = [
    Cause::User,
    Cause::ReconstructRead,
    Cause::ParityUpdate,
    Cause::Rebuild,
    Cause::Destage,
];

#[inline]
fn cause_index(c: Cause) -> usize {
    match c {
        Cause::User => 0,
        Cause::ReconstructRead => 1,
        Cause::ParityUpdate => 2,
        Cause::Rebuild => 3,
        Cause::Destage => 4,
    }
}

/// Blocks and operations of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub blocks: u64,
    pub ops: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.blocks += other.blocks;
        self.ops += other.ops;
    }
}

/// Reads and writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadWrite {
    pub read: Tally,
    pub write: Tally,
}

impl ReadWrite {
    fn add(&mut self, other: &ReadWrite) {
        self.read.add(other.read);
        self.write.add(other.write);
    }
    fn is_zero(&self) -> bool {
        self.read.ops == 0 && self.write.ops == 0
    }
}

/// Counts per disk, indexed [disk][cause].
#[derive(Debug, Clone, Default)]
pub struct CountExecutor {
    per_disk: Vec<[ReadWrite; 5]>,
    plans: u64,
    xor: u64,
    pq: u64,
    unreadable: u64,
}

/// Per-disk part of a [`CountSummary`].
#[derive(Debug, Clone, Serialize)]
pub struct DiskCounts {
    pub disk: u32,
    pub read: Tally,
    pub write: Tally,
    pub by_cause: BTreeMap<Cause, ReadWrite>,
}

/// Serializable totals of a counted run.
#[derive(Debug, Clone, Serialize)]
pub struct CountSummary {
    pub plans: u64,
    pub read: Tally,
    pub write: Tally,
    pub by_cause: BTreeMap<Cause, ReadWrite>,
    pub disks: Vec<DiskCounts>,
    pub xor_steps: u64,
    pub pq_steps: u64,
    pub unreadable_blocks: u64,
}

impl CountExecutor {
    /// An executor for an array of `ndisks` disks (grows if a plan names more).
    pub fn new(ndisks: u32) -> CountExecutor {
        CountExecutor {
            per_disk: vec![Default::default(); ndisks as usize],
            ..Default::default()
        }
    }

    /// Run one plan: every node completes at once.
    pub fn run(&mut self, plan: &IoPlan) {
        self.plans += 1;
        for node in &plan.nodes {
            match &node.action {
                Action::Disk(op) => {
                    let d = op.disk as usize;
                    if d >= self.per_disk.len() {
                        self.per_disk.resize(d + 1, Default::default());
                    }
                    let rw = &mut self.per_disk[d][cause_index(op.cause)];
                    let t = match op.kind {
                        DiskOpKind::Read => &mut rw.read,
                        DiskOpKind::Write => &mut rw.write,
                    };
                    t.blocks += op.nblocks as u64;
                    t.ops += 1;
                }
                Action::Xor { .. } => self.xor += 1,
                Action::PQ { .. } => self.pq += 1,
                Action::Unreadable { .. } => self.unreadable += 1,
                Action::Delay { .. } | Action::Await { .. } => {}
            }
        }
    }

    fn disk_total(&self, disk: usize) -> ReadWrite {
        let mut rw = ReadWrite::default();
        for c in &self.per_disk[disk] {
            rw.add(c);
        }
        rw
    }

    /// Blocks read from `disk` (all causes).
    pub fn reads(&self, disk: u32) -> u64 {
        self.per_disk
            .get(disk as usize)
            .map_or(0, |_| self.disk_total(disk as usize).read.blocks)
    }

    /// Blocks written to `disk` (all causes).
    pub fn writes(&self, disk: u32) -> u64 {
        self.per_disk
            .get(disk as usize)
            .map_or(0, |_| self.disk_total(disk as usize).write.blocks)
    }

    /// Blocks of `kind` issued for `cause`, all disks.
    pub fn blocks(&self, kind: DiskOpKind, cause: Cause) -> u64 {
        let c = cause_index(cause);
        self.per_disk
            .iter()
            .map(|d| match kind {
                DiskOpKind::Read => d[c].read.blocks,
                DiskOpKind::Write => d[c].write.blocks,
            })
            .sum()
    }

    /// Blocks read from all disks. Plans never address failed disks, so this
    /// is the number of surviving-disk block reads.
    pub fn total_reads(&self) -> u64 {
        (0..self.per_disk.len()).map(|d| self.disk_total(d).read.blocks).sum()
    }

    /// Blocks written to all disks.
    pub fn total_writes(&self) -> u64 {
        (0..self.per_disk.len()).map(|d| self.disk_total(d).write.blocks).sum()
    }

    /// Logical blocks that could not be read or stored.
    pub fn unreadable(&self) -> u64 {
        self.unreadable
    }

    pub fn plans(&self) -> u64 {
        self.plans
    }

    pub fn summary(&self) -> CountSummary {
        let mut by_cause: BTreeMap<Cause, ReadWrite> = BTreeMap::new();
        let mut total = ReadWrite::default();
        let mut disks = Vec::with_capacity(self.per_disk.len());
        for (d, causes) in self.per_disk.iter().enumerate() {
            let mut disk_cause = BTreeMap::new();
            for (i, rw) in causes.iter().enumerate() {
                if !rw.is_zero() {
                    by_cause.entry(CAUSES[i]).or_default().add(rw);
                    disk_cause.insert(CAUSES[i], *rw);
                }
            }
            let t = self.disk_total(d);
            total.add(&t);
            disks.push(DiskCounts {
                disk: d as u32,
                read: t.read,
                write: t.write,
                by_cause: disk_cause,
            });
        }
        CountSummary {
            plans: self.plans,
            read: total.read,
            write: total.write,
            by_cause,
            disks,
            xor_steps: self.xor,
            pq_steps: self.pq,
            unreadable_blocks: self.unreadable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Array, ArrayConfig, Level};

    #[test]
    fn counts_a_degraded_raid5_read() {
        // 4 disks, left-symmetric, chunk = 1 block: block 0 is on disk 0 (stripe 0, P on 3).
        let mut cfg = ArrayConfig::new(Level::Raid5, 4);
        cfg.chunk_bytes = 4096;
        let mut a = Array::new(cfg).unwrap();
        a.fail(0).unwrap();
        let mut ex = CountExecutor::new(4);
        ex.run(&a.plan_read(0, 1));
        assert_eq!(ex.total_reads(), 3);
        assert_eq!(ex.reads(0), 0);
        assert_eq!(ex.blocks(DiskOpKind::Read, Cause::ReconstructRead), 3);
        assert_eq!(ex.summary().xor_steps, 1);
        ex.run(&a.plan_read(1, 1)); // disk 1, healthy
        assert_eq!(ex.blocks(DiskOpKind::Read, Cause::User), 1);
        let s = serde_json::to_value(ex.summary()).unwrap();
        assert_eq!(s["read"]["blocks"], 4);
        assert_eq!(s["by_cause"]["reconstruct-read"]["read"]["blocks"], 3);
        assert_eq!(s["plans"], 2);
    }

    #[test]
    fn counts_unreadable() {
        let mut a = Array::new(ArrayConfig::new(Level::Raid0, 2)).unwrap();
        a.fail(1).unwrap();
        let mut ex = CountExecutor::new(2);
        ex.run(&a.plan_read(0, 32)); // chunk 0 on disk 0, chunk 1 on disk 1
        assert_eq!(ex.total_reads(), 16);
        assert_eq!(ex.unreadable(), 16);
    }
}

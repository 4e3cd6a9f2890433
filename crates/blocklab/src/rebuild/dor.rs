//! `dor`: disk-oriented reconstruction (Holland, Gibson, Siewiorek, FTCS'93;
//! Holland's thesis CMU-CS-94-164; RAIDframe's `rf_reconstruct.c`).
//!
//! Instead of one step per row that joins every survivor, each surviving
//! disk runs its own stream of reconstruction reads, one outstanding read at
//! a time, and advances as soon as its read returns, so a disk that is
//! momentarily less busy with user requests reads ahead. Rows are taken up
//! from a row order (ascending for `dor`; PRO's popularity order for
//! `pro-dor`) into a set of *active* rows buffered in memory; a row's
//! spare write (the XOR / P+Q and the writes of its rebuild plan) is issued
//! when all its reads have arrived, and the row leaves the set when written.
//! At most `lead` rows are active: the bound on how far the fastest disk
//! may run ahead of the slowest (RAIDframe's head-separation limit) and on
//! the buffers (Holland: a few tracks per disk suffice). The default, 8 rows
//! of 64 KiB, is about one outer track of the 7,200 RPM disk of the papers.
//!
//! Which disks a row reads, and what it writes, is the array's own rebuild
//! plan of the row ([`Array::plan_rebuild_row`]): every survivor for
//! RAID-4/5, k survivors for RAID-6, one copy for RAID-1/10 (so a mirror's
//! stream is the one disk the plan reads).
//!
//! DOR's I/O is meant to be of low priority (served when no user request
//! waits at the disk) and it runs without MD's speed limits: it absorbs the
//! bandwidth users leave. Both are the driver's settings; these are the
//! order's preferences.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use super::rows::RowSource;
use super::strategy::{RebuildStep, Strategy};
use crate::array::{Action, Array, DiskOp, DiskOpKind, IoPlan};

/// Default bound on active rows.
pub const DEFAULT_LEAD: usize = 8;

/// Tag of a read of `row` on `disk`: row << 9 | (disk + 1); a row's write: row << 9.
fn read_tag(row: u64, disk: u32) -> u64 {
    (row << 9) | (disk as u64 + 1)
}

/// One row being rebuilt: the reads still to issue, how many arrived, and
/// the rest of its plan (compute and writes).
#[derive(Debug, Clone)]
struct Active {
    row: u64,
    /// Reads not yet issued (disk, op).
    to_read: Vec<DiskOp>,
    need: usize,
    arrived: usize,
    /// Compute and writes of the row's plan, reads removed.
    write: IoPlan,
    written: bool,
}

/// The reads of a rebuild plan, and the plan without them (dependencies on
/// reads dropped: they have arrived by the time it is issued).
fn split(plan: IoPlan) -> (Vec<DiskOp>, IoPlan) {
    let mut reads = Vec::new();
    let mut new_index: Vec<Option<u16>> = Vec::with_capacity(plan.nodes.len());
    let mut rest = IoPlan::default();
    for node in plan.nodes {
        if let Action::Disk(op) = &node.action {
            if op.kind == DiskOpKind::Read {
                reads.push(*op);
                new_index.push(None);
                continue;
            }
        }
        let deps: Vec<u16> = node.deps.iter().filter_map(|&d| new_index[d as usize]).collect();
        new_index.push(Some(rest.push(node.action, &deps)));
    }
    (reads, rest)
}

/// Disk-oriented reconstruction over any row order.
#[derive(Debug)]
pub struct Dor<S: RowSource> {
    name: &'static str,
    source: S,
    rows: u64,
    lead: usize,
    /// Active rows in the order they were taken up.
    active: VecDeque<Active>,
    /// Per disk: a read of its stream is outstanding.
    busy: Vec<bool>,
    /// Per disk: it survives, so it may have a stream.
    stream: Vec<bool>,
    /// Rows whose reads have all arrived, waiting for their write.
    ready: VecDeque<u64>,
    done: u64,
    reads_issued: u64,
    max_active: u64,
}

impl<S: RowSource> Dor<S> {
    /// `name`: `dor`, or `pro-dor` with PRO's order as `source`.
    pub fn new(name: &'static str, array: &Array, rows: u64, source: S, lead: usize) -> Self {
        Dor {
            name,
            source,
            rows,
            lead: lead.max(1),
            active: VecDeque::new(),
            busy: vec![false; array.ndisks() as usize],
            stream: (0..array.ndisks()).map(|d| !array.is_failed(d)).collect(),
            ready: VecDeque::new(),
            done: 0,
            reads_issued: 0,
            max_active: 0,
        }
    }

    fn find(&mut self, row: u64) -> Option<&mut Active> {
        self.active.iter_mut().find(|a| a.row == row)
    }

    /// The earliest active row with an unissued read on a free disk.
    fn free_read(&self) -> Option<(usize, usize)> {
        for (i, a) in self.active.iter().enumerate() {
            if let Some(j) = a.to_read.iter().position(|op| !self.busy[op.disk as usize]) {
                return Some((i, j));
            }
        }
        None
    }

    fn any_free_disk(&self) -> bool {
        self.busy.iter().zip(&self.stream).any(|(&b, &s)| s && !b)
    }

    /// Take up the next row of the order.
    fn activate(&mut self, array: &Array, now: u64) -> bool {
        let Some(row) = self.source.next_row(now) else {
            return false;
        };
        let (to_read, write) = split(array.plan_rebuild_row(row));
        let need = to_read.len();
        self.active.push_back(Active {
            row,
            to_read,
            need,
            arrived: 0,
            write,
            written: false,
        });
        self.max_active = self.max_active.max(self.active.len() as u64);
        if need == 0 {
            self.ready.push_back(row);
        }
        true
    }
}

impl<S: RowSource> Strategy for Dor<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn has_step(&self) -> bool {
        !self.ready.is_empty()
            || self.free_read().is_some()
            || (self.active.len() < self.lead && self.source.has_row() && self.any_free_disk())
    }

    fn next_step(&mut self, array: &Array, now: u64) -> Option<RebuildStep> {
        loop {
            // A row whose reads have all arrived is written first (it frees a buffer).
            if let Some(row) = self.ready.pop_front() {
                let a = self.find(row).expect("a ready row is active");
                a.written = true;
                let plan = std::mem::take(&mut a.write);
                return Some(RebuildStep {
                    tag: row << 9,
                    plan,
                    rows: 1,
                    kib: None,
                });
            }
            if let Some((i, j)) = self.free_read() {
                let a = &mut self.active[i];
                let op = a.to_read.remove(j);
                let row = a.row;
                self.busy[op.disk as usize] = true;
                self.reads_issued += 1;
                let mut plan = IoPlan::default();
                plan.push(Action::Disk(op), &[]);
                return Some(RebuildStep {
                    tag: read_tag(row, op.disk),
                    plan,
                    rows: 0,
                    kib: None,
                });
            }
            if self.active.len() >= self.lead || !self.activate(array, now) {
                return None;
            }
        }
    }

    fn complete(&mut self, tag: u64, array: &mut Array, _now: u64) -> u64 {
        let row = tag >> 9;
        let disk = tag & 0x1ff;
        if disk > 0 {
            self.busy[(disk - 1) as usize] = false;
            let a = self.find(row).expect("a read of an active row");
            a.arrived += 1;
            if a.arrived == a.need {
                self.ready.push_back(row);
            }
            return 0;
        }
        let i = self
            .active
            .iter()
            .position(|a| a.row == row)
            .expect("a written row is active");
        let a = self.active.remove(i).expect("present");
        debug_assert!(a.written);
        array.mark_rebuilt(row);
        self.done += 1;
        1
    }

    fn is_finished(&self) -> bool {
        self.done == self.rows
    }

    fn rebuilt_rows(&self) -> u64 {
        self.done
    }

    fn observe_user(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, now: u64) {
        self.source.observe(array, blocks, plan, now);
    }

    fn self_limited(&self) -> bool {
        true
    }

    fn prefers_low_priority(&self) -> bool {
        true
    }

    fn prefers_speed_rule(&self) -> bool {
        false
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        let mut s = self.source.stats();
        s.insert("lead".into(), self.lead as u64);
        s.insert("active_max".into(), self.max_active);
        s.insert("stream_reads".into(), self.reads_issued);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArrayConfig, Level};
    use crate::rebuild::rows::Sequential;

    fn recovering(level: Level, n: u32, rows: u64, lost: &[u32]) -> Array {
        let mut cfg = ArrayConfig::new(level, n);
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        for &d in lost {
            a.fail(d).unwrap();
        }
        a.start_recovery(lost).unwrap();
        a
    }

    #[test]
    fn split_keeps_the_compute_and_the_writes() {
        let a = recovering(Level::Raid5, 4, 4, &[1]);
        let (reads, rest) = split(a.plan_rebuild_row(2));
        assert_eq!(reads.iter().map(|o| o.disk).collect::<Vec<_>>(), [0, 2, 3]);
        assert_eq!(rest.nodes.len(), 2);
        assert_eq!(rest.nodes[0].action, Action::Xor { units: 3 });
        assert!(rest.nodes[0].deps.is_empty());
        assert_eq!(rest.nodes[1].deps, vec![0]);
    }

    #[test]
    fn streams_run_ahead_up_to_the_lead_and_rows_are_written_when_complete() {
        // RAID-5 of 3, disk 0 lost: streams on disks 1 and 2, lead 2 rows.
        let mut a = recovering(Level::Raid5, 3, 4, &[0]);
        let mut d = Dor::new("dor", &a, 4, Sequential::new(4), 2);
        let s1 = d.next_step(&a, 0).unwrap(); // disk 1 reads row 0
        let s2 = d.next_step(&a, 0).unwrap(); // disk 2 reads row 0
        assert_eq!((s1.tag, s2.tag, s1.rows), (read_tag(0, 1), read_tag(0, 2), 0));
        assert!(!d.has_step(), "both streams busy");
        // Disk 1 is fast: it reads rows 1 while disk 2 is still on row 0.
        assert_eq!(d.complete(s1.tag, &mut a, 0), 0);
        let s3 = d.next_step(&a, 0).unwrap();
        assert_eq!(s3.tag, read_tag(1, 1));
        d.complete(s3.tag, &mut a, 0);
        // Two rows active (the lead): disk 1 may not start row 2.
        assert!(!d.has_step());
        // Disk 2's read of row 0 arrives: row 0 is written.
        d.complete(s2.tag, &mut a, 0);
        let w = d.next_step(&a, 0).unwrap();
        assert_eq!((w.tag, w.rows), (0, 1));
        assert!(w.plan.disk_ops().all(|o| o.disk == 0 && o.kind == DiskOpKind::Write));
        assert!(a.is_failed_at(0, 0));
        assert_eq!(d.complete(w.tag, &mut a, 0), 1);
        assert!(
            !a.is_failed_at(0, 0) && a.is_failed_at(0, 1),
            "row 0 served by the spare"
        );
    }

    #[test]
    fn every_row_is_read_once_per_survivor_and_written_once() {
        for (level, n, lost) in [
            (Level::Raid5, 5, vec![2]),
            (Level::Raid6, 6, vec![0, 3]),
            (Level::Raid1, 3, vec![1]),
            (Level::Raid10, 4, vec![1]),
        ] {
            let rows = 9;
            let mut a = recovering(level, n, rows, &lost);
            let mut d = Dor::new("dor", &a, rows, Sequential::new(rows), 3);
            let mut expect_reads = 0;
            for r in 0..rows {
                expect_reads += a
                    .plan_rebuild_row(r)
                    .disk_ops()
                    .filter(|o| o.kind == DiskOpKind::Read)
                    .count();
            }
            let (mut reads, mut writes) = (0, 0);
            let mut pending: Vec<u64> = Vec::new();
            // Complete the most recent step first (an adversarial order).
            while !d.is_finished() {
                while d.has_step() {
                    match d.next_step(&a, 0) {
                        Some(s) => {
                            reads += s.plan.disk_ops().filter(|o| o.kind == DiskOpKind::Read).count();
                            writes += s.rows;
                            pending.push(s.tag);
                        }
                        None => break,
                    }
                }
                let t = pending.pop().expect("progress");
                d.complete(t, &mut a, 0);
            }
            assert_eq!((reads, writes), (expect_reads, rows), "{level:?}");
            assert!((0..rows).all(|r| a.is_rebuilt(r)));
        }
    }
}

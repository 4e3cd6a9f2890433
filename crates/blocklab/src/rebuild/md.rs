//! `md`: Linux MD's recovery order. Member chunk rows in ascending order,
//! one row of every recovering disk per step ([`Array::plan_rebuild_row`]),
//! and a recovery offset (MD's `recovery_offset`): the number of leading
//! rows whose step has completed. Rows below it are served by the spares.
//! A row completed out of order (several steps in flight; with the FCFS
//! scheduler the spare's writes complete in order and this does not
//! happen) is also marked in the array's map of rebuilt units: MD keeps
//! writing its spare in such rows, so user writes must reach the spare
//! there, and the map is how the array knows (reads of such a row use the
//! spare a few rows before MD's offset would let them).

use std::collections::BTreeSet;

use super::strategy::{RebuildStep, Strategy};
use crate::array::Array;

#[derive(Debug, Clone)]
pub struct Md {
    rows: u64,
    next_row: u64,
    /// Completed rows above the offset (at most as many as were in flight,
    /// so memory does not grow with the disk).
    ahead: BTreeSet<u64>,
    offset: u64,
}

impl Md {
    /// The order over `rows` member chunk rows ([`Array::member_rows`]).
    pub fn new(rows: u64) -> Md {
        Md {
            rows,
            next_row: 0,
            ahead: BTreeSet::new(),
            offset: 0,
        }
    }

    /// The recovery offset in rows.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl Strategy for Md {
    fn name(&self) -> &'static str {
        "md"
    }

    fn has_step(&self) -> bool {
        self.next_row < self.rows
    }

    fn next_step(&mut self, array: &Array, _now: u64) -> Option<RebuildStep> {
        if self.next_row >= self.rows {
            return None;
        }
        let row = self.next_row;
        self.next_row += 1;
        Some(RebuildStep::row(row, array.plan_rebuild_row(row)))
    }

    fn complete(&mut self, row: u64, array: &mut Array, _now: u64) -> u64 {
        if row > self.offset {
            array.mark_rebuilt(row);
        }
        self.ahead.insert(row);
        while self.ahead.remove(&self.offset) {
            self.offset += 1;
        }
        // A resumed recovery: the array's offset may be ahead of a fresh
        // order's, which then passes the rows below it as no work.
        array.set_recovered_rows(self.offset.max(array.recovered_rows()));
        1
    }

    fn is_finished(&self) -> bool {
        self.offset == self.rows
    }

    fn rebuilt_rows(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArrayConfig, Level};

    /// RAID-5 of 3 with `rows` chunk rows per member, disk 0 recovering.
    fn recovering(rows: u64) -> Array {
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        a.fail(0).unwrap();
        a.start_recovery(&[0]).unwrap();
        a
    }

    #[test]
    fn issues_rows_in_ascending_order_with_the_arrays_row_plans() {
        let a = recovering(4);
        let mut md = Md::new(4);
        let mut tags = Vec::new();
        while md.has_step() {
            let s = md.next_step(&a, 0).unwrap();
            assert_eq!(s.plan, a.plan_rebuild_row(s.tag));
            tags.push(s.tag);
        }
        assert_eq!(tags, [0, 1, 2, 3]);
        assert!(md.next_step(&a, 0).is_none());
        assert!(!md.is_finished(), "issued is not rebuilt");
    }

    #[test]
    fn the_offset_moves_only_over_a_completed_prefix() {
        let mut a = recovering(4);
        let mut md = Md::new(4);
        for _ in 0..4 {
            md.next_step(&a, 0).unwrap();
        }
        // Row 1 first: row 0 is still degraded, so the offset stays at 0;
        // row 1 is in the map of rebuilt units (its spare is current).
        assert_eq!(md.complete(1, &mut a, 0), 1);
        assert_eq!((md.offset(), a.recovered_rows()), (0, 0));
        assert!(a.is_failed_at(0, 0) && !a.is_failed_at(0, 1));
        // Row 0 completes the prefix 0..2.
        md.complete(0, &mut a, 0);
        assert_eq!((md.offset(), a.recovered_rows(), md.rebuilt_rows()), (2, 2, 2));
        assert!(!a.is_failed_at(0, 1) && a.is_failed_at(0, 2));
        md.complete(3, &mut a, 0);
        assert_eq!(md.offset(), 2);
        assert!(a.is_failed_at(0, 2) && !a.is_failed_at(0, 3));
        assert!(!md.is_finished());
        md.complete(2, &mut a, 0);
        assert_eq!((md.offset(), a.recovered_rows()), (4, 4));
        assert!(md.is_finished());
    }

    #[test]
    fn no_rows_is_finished_at_once() {
        let md = Md::new(0);
        assert!(md.is_finished() && !md.has_step());
    }
}

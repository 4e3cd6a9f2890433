//! Row orders: the sequence in which member chunk rows are taken up for
//! rebuilding, separate from how a row is rebuilt (one whole-row step, or
//! DOR's per-disk reads). `Sequential` is MD's ascending order; PRO's
//! popularity order (`pro::ProOrder`) is the other.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::Range;

use crate::array::{Array, IoPlan, Level};

/// A source of rows to rebuild; each row is handed out once.
pub trait RowSource: Send + Debug {
    /// Whether rows remain to be handed out.
    fn has_row(&self) -> bool;
    /// The next row to take up at `now` (ns), if any remain.
    fn next_row(&mut self, now: u64) -> Option<u64>;
    /// A user request (array blocks `blocks`, planned as `plan`) at `now`:
    /// an access monitor's input. Default: ignore.
    fn observe(&mut self, _array: &Array, _blocks: Range<u64>, _plan: &IoPlan, _now: u64) {}
    /// Figures of the order for the report.
    fn stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
}

/// Ascending rows, 0 to `rows - 1` (MD's order).
#[derive(Debug, Clone)]
pub struct Sequential {
    rows: u64,
    next: u64,
}

impl Sequential {
    pub fn new(rows: u64) -> Self {
        Sequential { rows, next: 0 }
    }
}

impl RowSource for Sequential {
    fn has_row(&self) -> bool {
        self.next < self.rows
    }
    fn next_row(&mut self, _now: u64) -> Option<u64> {
        (self.next < self.rows).then(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// The member chunk rows a plan's disk operations touch, ascending, each once.
pub fn rows_of_plan(plan: &IoPlan, chunk_blocks: u64) -> Vec<u64> {
    let cb = chunk_blocks.max(1);
    let mut rows: Vec<u64> = Vec::new();
    for op in plan.disk_ops() {
        let first = op.block / cb;
        let last = (op.block + (op.nblocks as u64).max(1) - 1) / cb;
        rows.extend(first..=last);
    }
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// Whether a user request for array blocks `blocks` touches data on a
/// recovering disk that is not yet rebuilt there (a *lost unit*): a read of
/// it is reconstructed, a write to it is planned degraded.
pub fn touches_lost(array: &Array, blocks: Range<u64>) -> bool {
    if array.recovering().is_empty() {
        return false;
    }
    let cb = array.chunk_blocks();
    let mut b = blocks.start;
    while b < blocks.end {
        let p = array.map(b);
        let mut failed = p
            .disks
            .iter()
            .zip(&p.disk_blocks)
            .map(|(&d, &at)| array.is_failed_at(d, at / cb));
        // Mirrors lose a block only when every copy is lost; parity levels
        // when its one data unit is.
        let lost = if matches!(array.level(), Level::Raid1 | Level::Raid10) {
            failed.all(|f| f)
        } else {
            failed.next().unwrap_or(false)
        };
        if lost {
            return true;
        }
        // Next chunk piece.
        b = (b / cb + 1) * cb;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::ArrayConfig;

    #[test]
    fn sequential_hands_out_every_row_once_in_order() {
        let mut s = Sequential::new(3);
        let got: Vec<u64> = std::iter::from_fn(|| s.next_row(0)).collect();
        assert_eq!(got, [0, 1, 2]);
        assert!(!s.has_row());
    }

    #[test]
    fn rows_of_a_plan_and_lost_units() {
        // RAID-5 of 3, 2-block chunks: stripe s = row s; blocks 4s..4s+4.
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.chunk_bytes = 2 * cfg.block_size;
        cfg.disk_bytes = 8 * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        // A read of blocks 3..6 spans stripes 0 and 1 (rows 0 and 1).
        assert_eq!(rows_of_plan(&a.plan_read(3, 3), 2), vec![0, 1]);
        a.fail(0).unwrap();
        a.start_recovery(&[0]).unwrap();
        let on0: Vec<u64> = (0..8).filter(|&b| a.disk_of(b) == 0).collect();
        let off0 = (0..8).find(|&b| a.disk_of(b) != 0).unwrap();
        assert!(touches_lost(&a, on0[0]..on0[0] + 1));
        assert!(!touches_lost(&a, off0..off0 + 1));
        let row = a.map(on0[0]).disk_block / 2;
        a.mark_rebuilt(row);
        assert!(!touches_lost(&a, on0[0]..on0[0] + 1), "rebuilt: the spare holds it");
    }
}

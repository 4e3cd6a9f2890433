//! The map of rebuilt units of the recovering disks: which member chunk rows
//! the spares already hold, so that out-of-order rebuild orders (PRO, DOR)
//! can serve reads of those rows from the spare.
//!
//! Two parts, both "rebuilt":
//! * a prefix `[0, prefix)` — MD's `recovery_offset`, moved by orders that
//!   rebuild sequentially (`md`), O(1) whatever the disk size;
//! * a bitmap with one bit per *unit* of `unit_rows` consecutive rows (PRO's
//!   Reconstruction Bitmap Table, RAIDframe's reconMap). A unit's bit is set
//!   when every one of its rows has been reported rebuilt; until then reads
//!   of all its rows stay degraded (a coarser map costs memory less and
//!   redirects later). The bitmap grows as bits are set (one bit per unit:
//!   9.5 KiB for a 5 GB member at 64 KiB rows).
//!
//! Rows are reported once each ([`RebuiltMap::mark`]); units partly rebuilt
//! keep a count (at most as many as there are rows in flight).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuiltMap {
    unit_rows: u64,
    /// Rows of a member (`u64::MAX` when the member size is unknown): the
    /// last unit may be shorter.
    rows: u64,
    prefix: u64,
    bits: Vec<u64>,
    /// Units with some but not all rows rebuilt: rows done so far.
    partial: BTreeMap<u64, u64>,
}

impl Default for RebuiltMap {
    fn default() -> Self {
        RebuiltMap::new(1, u64::MAX)
    }
}

impl RebuiltMap {
    /// A map of `rows` member rows, one bit per `unit_rows` rows (at least 1).
    pub fn new(unit_rows: u64, rows: u64) -> Self {
        RebuiltMap {
            unit_rows: unit_rows.max(1),
            rows,
            prefix: 0,
            bits: Vec::new(),
            partial: BTreeMap::new(),
        }
    }

    /// Rows per bit.
    pub fn unit_rows(&self) -> u64 {
        self.unit_rows
    }

    /// Forget everything (a new recovery starts), keeping the geometry.
    pub fn clear(&mut self) {
        self.prefix = 0;
        self.bits.clear();
        self.partial.clear();
    }

    #[inline]
    fn bit(&self, unit: u64) -> bool {
        let w = (unit / 64) as usize;
        w < self.bits.len() && self.bits[w] >> (unit % 64) & 1 == 1
    }

    fn set_bit(&mut self, unit: u64) {
        let w = (unit / 64) as usize;
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (unit % 64);
    }

    /// Whether member chunk row `row` is rebuilt on the spares.
    #[inline]
    pub fn is_rebuilt(&self, row: u64) -> bool {
        row < self.prefix || self.bit(row / self.unit_rows)
    }

    /// MD's recovery offset: rows `0..rows` are rebuilt.
    pub fn set_prefix(&mut self, rows: u64) {
        self.prefix = rows;
    }

    /// The recovery offset (rows below it are rebuilt; rows above it may be
    /// too, per the bitmap).
    pub fn prefix(&self) -> u64 {
        self.prefix
    }

    /// Rows in `unit` (the last one may be short).
    fn rows_in(&self, unit: u64) -> u64 {
        let first = unit * self.unit_rows;
        self.unit_rows.min(self.rows.saturating_sub(first)).max(1)
    }

    /// Row `row` has been rebuilt on every recovering disk (report each row
    /// once). Returns true when this completed its unit (reads of the
    /// unit's rows now go to the spares).
    pub fn mark(&mut self, row: u64) -> bool {
        let unit = row / self.unit_rows;
        if self.bit(unit) {
            return false;
        }
        let need = self.rows_in(unit);
        let done = self.partial.entry(unit).or_insert(0);
        *done += 1;
        if *done >= need {
            self.partial.remove(&unit);
            self.set_bit(unit);
            return true;
        }
        false
    }

    /// Units whose bit is set.
    pub fn units_set(&self) -> u64 {
        self.bits.iter().map(|w| w.count_ones() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_bits_both_count_as_rebuilt() {
        let mut m = RebuiltMap::new(1, 10);
        m.set_prefix(3);
        assert!(m.is_rebuilt(2) && !m.is_rebuilt(3));
        assert!(m.mark(7));
        assert!(m.is_rebuilt(7) && !m.is_rebuilt(6) && !m.is_rebuilt(8));
        assert_eq!(m.units_set(), 1);
        m.clear();
        assert!(!m.is_rebuilt(0) && !m.is_rebuilt(7));
    }

    #[test]
    fn a_coarse_unit_is_rebuilt_only_when_all_its_rows_are() {
        // 10 rows, 4 per unit: units 0..4, 4..8, 8..10 (short).
        let mut m = RebuiltMap::new(4, 10);
        assert!(!m.mark(5) && !m.mark(4) && !m.mark(7));
        assert!(!m.is_rebuilt(5), "3 of 4 rows: still degraded");
        assert!(m.mark(6));
        assert!((4..8).all(|r| m.is_rebuilt(r)) && !m.is_rebuilt(3) && !m.is_rebuilt(8));
        assert!(!m.mark(9));
        assert!(m.mark(8), "the last unit has 2 rows");
        assert!(m.is_rebuilt(9));
        // Bits far away grow the map.
        let mut big = RebuiltMap::new(1, u64::MAX);
        big.mark(1_000_000);
        assert!(big.is_rebuilt(1_000_000) && !big.is_rebuilt(999_999));
    }
}

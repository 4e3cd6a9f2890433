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

    /// The rows rebuilt above the prefix, as ascending half-open runs
    /// `[start, end)` (units partly rebuilt are left out): with the prefix,
    /// what a recovery must record to resume (the real executor's state
    /// file). One run per stretch of consecutive rebuilt rows, so MD's order
    /// needs at most as many as rows were in flight, PRO's about one per hot
    /// zone it served.
    pub fn runs(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (w, &word) in self.bits.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let unit = w as u64 * 64 + bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let start = (unit * self.unit_rows).max(self.prefix);
                let end = ((unit + 1) * self.unit_rows).min(self.rows);
                if start >= end {
                    continue;
                }
                match out.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => out.push((start, end)),
                }
            }
        }
        out
    }

    /// Forget everything, then take `prefix` and the rebuilt `runs` (as
    /// [`runs`](Self::runs) gives them) back: a recovery resumed.
    pub fn restore(&mut self, prefix: u64, runs: &[(u64, u64)]) {
        self.clear();
        self.prefix = prefix;
        for &(start, end) in runs {
            let mut row = start;
            while row < end {
                let unit = row / self.unit_rows;
                let first = unit * self.unit_rows;
                let last = ((unit + 1) * self.unit_rows).min(self.rows);
                // Rows of the unit before `row` are all below the prefix (a
                // run starts at the prefix in the middle of a unit).
                let before_covered = row <= first.max(prefix.min(last));
                if before_covered && last <= end {
                    // A whole unit: its bit, without counting rows.
                    self.partial.remove(&unit);
                    self.set_bit(unit);
                    row = last;
                } else {
                    self.mark(row);
                    row += 1;
                }
            }
        }
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

    #[test]
    fn runs_round_trip_through_restore() {
        // Rows 0..3 by the prefix; 5, 6, 7 and 70 marked, 2 marked below it.
        let mut m = RebuiltMap::new(1, 100);
        m.set_prefix(3);
        for r in [2, 6, 5, 7, 70] {
            m.mark(r);
        }
        assert_eq!(m.runs(), vec![(5, 8), (70, 71)]);
        let mut back = RebuiltMap::new(1, 100);
        back.mark(40);
        back.restore(m.prefix(), &m.runs());
        assert_eq!(back.runs(), m.runs());
        assert!((0..100).all(|r| back.is_rebuilt(r) == (r < 3 || (5..8).contains(&r) || r == 70)));
        // Coarse units: only whole units are runs; a run that covers part
        // of a unit is counted towards it.
        let mut c = RebuiltMap::new(4, 10);
        for r in [4, 5, 6, 7, 8] {
            c.mark(r);
        }
        assert_eq!(c.runs(), vec![(4, 8)]);
        let mut c2 = RebuiltMap::new(4, 10);
        c2.restore(0, &[(4, 8), (8, 9)]);
        assert!(c2.is_rebuilt(5) && !c2.is_rebuilt(8));
        assert!(c2.mark(9), "row 8 was counted: row 9 completes the last unit");
        // A brute-force check over many random maps.
        let mut x = 7u64;
        for _ in 0..200 {
            let mut m = RebuiltMap::new(1 + x % 3, 150);
            m.set_prefix(x % 40);
            for _ in 0..60 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                m.mark((x >> 33) % 150);
            }
            let mut r = RebuiltMap::new(m.unit_rows(), 150);
            r.restore(m.prefix(), &m.runs());
            assert!((0..150).all(|row| r.is_rebuilt(row) == m.is_rebuilt(row)));
        }
    }
}

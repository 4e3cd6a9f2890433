//! The write-intent bitmap (MD's internal bitmap), in memory.
//!
//! One bit per region of `rows` member chunk rows. Before the first write
//! to a region whose bit is clear on disk, the bit is set and the state file
//! rewritten (atomically, synced); only then do the member writes start. A
//! bit is cleared once the region has no write in flight and the members
//! were synced after its last write (on flush, and by the server every few
//! seconds, as MD's bitmap daemon). After a crash only the regions whose bit
//! is set need their parity recomputed (resync), not the whole array.
//!
//! Regions cover 64 MiB of each member (mdadm's default bitmap chunk) or
//! more, so that the bitmap stays under 4096 bits.
//!
//! Cost: one state-file rewrite (three syncs) for the first write to a clean
//! region after each clearing; nothing for writes to regions already dirty;
//! after a crash, a resync of 64 MiB per member for each dirty region.

/// What the bitmap tracks for each region.
#[derive(Debug, Clone)]
pub struct Bitmap {
    /// Member chunk rows per region.
    pub rows: u64,
    /// The bits as last written to the state file.
    pub on_disk: Vec<bool>,
    /// Writes in flight per region.
    inflight: Vec<u32>,
    /// Writes started per region (to see whether one began since a sync).
    started: Vec<u64>,
}

/// Regions per array at most (the bitmap's size in the state file).
pub const MAX_REGIONS: u64 = 4096;
/// Bytes of each member per region at least: mdadm's default bitmap chunk
/// for an internal bitmap. Smaller regions mean less to resync after a
/// crash but more state-file writes while writing.
pub const MIN_REGION_BYTES: u64 = 64 << 20;

/// Rows per region: at least [`MIN_REGION_BYTES`] of each member, and at
/// most [`MAX_REGIONS`] bits.
pub fn region_rows(member_rows: u64, chunk_bytes: u64) -> u64 {
    member_rows
        .div_ceil(MAX_REGIONS)
        .max(MIN_REGION_BYTES.div_ceil(chunk_bytes))
        .max(1)
}

impl Bitmap {
    pub fn new(rows: u64, member_rows: u64, on_disk: Vec<bool>) -> Bitmap {
        let n = member_rows.div_ceil(rows).max(1) as usize;
        let mut on_disk = on_disk;
        on_disk.resize(n, false);
        Bitmap {
            rows,
            on_disk,
            inflight: vec![0; n],
            started: vec![0; n],
        }
    }

    pub fn regions(&self) -> usize {
        self.on_disk.len()
    }

    /// The regions of member rows `rows`, ascending, without repeats.
    pub fn regions_of(&self, rows: &[u64]) -> Vec<usize> {
        let mut r: Vec<usize> = rows.iter().map(|&x| (x / self.rows) as usize).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// Start writes to `regions`; true when a bit had to be set (the caller
    /// must persist the bitmap before writing).
    pub fn begin(&mut self, regions: &[usize]) -> bool {
        let mut changed = false;
        for &r in regions {
            self.inflight[r] += 1;
            self.started[r] += 1;
            if !self.on_disk[r] {
                self.on_disk[r] = true;
                changed = true;
            }
        }
        changed
    }

    pub fn end(&mut self, regions: &[usize]) {
        for &r in regions {
            self.inflight[r] -= 1;
        }
    }

    /// A snapshot of the write counters, taken before syncing the members.
    pub fn mark(&self) -> Vec<u64> {
        self.started.clone()
    }

    /// Clear the bits of regions idle since `mark` (the members were synced
    /// in between); true when a bit changed.
    pub fn clear_idle(&mut self, mark: &[u64]) -> bool {
        let mut changed = false;
        for (r, bit) in self.on_disk.iter_mut().enumerate() {
            if *bit && self.inflight[r] == 0 && self.started[r] == mark[r] {
                *bit = false;
                changed = true;
            }
        }
        changed
    }

    pub fn dirty(&self) -> Vec<usize> {
        (0..self.on_disk.len()).filter(|&r| self.on_disk[r]).collect()
    }

    pub fn any_dirty(&self) -> bool {
        self.on_disk.iter().any(|&b| b)
    }

    /// Forget every bit (after a full resync).
    pub fn clear_all(&mut self) {
        self.on_disk.iter_mut().for_each(|b| *b = false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_writes_and_syncs() {
        let mut b = Bitmap::new(2, 7, vec![]);
        assert_eq!(b.regions(), 4);
        assert_eq!(b.regions_of(&[5, 0, 1, 4]), vec![0, 2]);
        assert!(b.begin(&[0, 2]));
        assert!(!b.begin(&[2]), "already set: no state write");
        let m = b.mark();
        b.end(&[0, 2]);
        // Region 2 still has a write in flight: only region 0 clears.
        assert!(b.clear_idle(&m));
        assert_eq!(b.dirty(), vec![2]);
        b.end(&[2]);
        // A write started after the mark keeps the bit.
        let m = b.mark();
        b.begin(&[2]);
        b.end(&[2]);
        assert!(!b.clear_idle(&m));
        assert_eq!(b.dirty(), vec![2]);
        let m = b.mark();
        assert!(b.clear_idle(&m));
        assert!(!b.any_dirty());
        // 64 MiB of member per region (1024 rows of 64 KiB), or more rows
        // when the member would need over 4096 regions.
        assert_eq!(region_rows(10, 65536), 1024);
        assert_eq!(region_rows(1024 * MAX_REGIONS * 3 + 1, 65536), 3073);
        assert_eq!(region_rows(10, 1 << 30), 1);
    }
}

//! What a cache layer prefetches on a read miss (Hsu & Smith §4
//! "Prefetching"): which blocks, never when or how (the cache layer reads
//! them below as background work and keeps them).
//!
//! * large fetch unit — a miss fetches the aligned units of `unit` blocks
//!   that cover the request, the blocks before it first (one I/O, in
//!   ascending order); the request waits for all of it ([`fetch_range`]);
//! * read-ahead — after the missed request, the next `blocks` blocks, as a
//!   second I/O the request does not wait for;
//! * conditional sequential prefetch (CSP, after Smith's sequential
//!   detector): segments of `segment` blocks, an LRU directory of
//!   `directory` segments each with the length of the run of consecutive
//!   segments ending there, updated on every read (never by prefetch). On a
//!   read miss, when the run of the request's last segment is at least
//!   `trigger`, prefetch `min(factor × run × segment, max)` blocks after the
//!   request. (The paper says the run must "exceed" the trigger but also
//!   that a trigger of 1 prefetches "on every cache miss": at least.)

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// The aligned range `[start, end)` of fetch units of `unit` blocks that
/// covers blocks `[first, first + count)`.
pub fn fetch_range(first: u64, count: u64, unit: u64) -> (u64, u64) {
    let unit = unit.max(1);
    let start = first / unit * unit;
    let end = (first + count.max(1)).div_ceil(unit) * unit;
    (start, end)
}

/// Conditional sequential prefetch: the segment directory and the amount.
#[derive(Debug, Clone)]
pub struct Csp {
    segment: u64,
    trigger: u64,
    factor: u64,
    max: u64,
    capacity: usize,
    /// segment -> (run, stamp of last use)
    dir: FxHashMap<u64, (u64, u64)>,
    /// stamp -> segment (LRU order)
    order: BTreeMap<u64, u64>,
    clock: u64,
}

impl Csp {
    /// Sizes in blocks; `capacity` directory entries.
    pub fn new(segment: u64, trigger: u64, factor: u64, max: u64, capacity: usize) -> Self {
        Csp {
            segment: segment.max(1),
            trigger: trigger.max(1),
            factor: factor.max(1),
            max: max.max(1),
            capacity: capacity.max(1),
            dir: FxHashMap::default(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    fn touch(&mut self, seg: u64, run: u64) {
        self.clock += 1;
        if let Some((_, old)) = self.dir.insert(seg, (run, self.clock)) {
            self.order.remove(&old);
        }
        self.order.insert(self.clock, seg);
    }

    fn remove(&mut self, seg: u64) {
        if let Some((_, stamp)) = self.dir.remove(&seg) {
            self.order.remove(&stamp);
        }
    }

    /// A read of blocks `[first, first + count)`: update the directory for
    /// each segment it touches, in order.
    pub fn observe(&mut self, first: u64, count: u64) {
        let (s0, s1) = (first / self.segment, (first + count.max(1) - 1) / self.segment);
        for seg in s0..=s1 {
            match self.dir.get(&seg) {
                Some(&(run, _)) => self.touch(seg, run),
                None => {
                    let prev = seg.checked_sub(1).and_then(|p| self.dir.get(&p).map(|&(r, _)| r));
                    if let Some(r) = prev {
                        self.remove(seg - 1);
                        self.touch(seg, r + 1);
                    } else {
                        self.touch(seg, 1);
                    }
                    if self.dir.len() > self.capacity {
                        if let Some((_, victim)) = self.order.pop_first() {
                            self.dir.remove(&victim);
                        }
                    }
                }
            }
        }
    }

    /// The run counter of the segment holding `block` (0: not in the directory).
    pub fn run_at(&self, block: u64) -> u64 {
        self.dir.get(&(block / self.segment)).map_or(0, |&(r, _)| r)
    }

    /// Blocks to prefetch after a missed read ending at block `end - 1`
    /// (0: the run is below the trigger).
    pub fn amount(&self, last_block: u64) -> u64 {
        let run = self.run_at(last_block);
        if run < self.trigger {
            0
        } else {
            (self.factor * run * self.segment).min(self.max)
        }
    }
}

/// Non-opportunistic prefetch of a cache layer.
#[derive(Debug, Clone)]
pub enum Prefetcher {
    None,
    /// Read ahead this many blocks after every read miss.
    Readahead(u64),
    Csp(Csp),
}

impl Prefetcher {
    /// Every read request reaching the layer (hit or miss).
    pub fn observe(&mut self, first: u64, count: u64) {
        if let Prefetcher::Csp(c) = self {
            c.observe(first, count);
        }
    }

    /// After a read miss of `[first, first + count)`: how many blocks to
    /// prefetch from `first + count` (0: none).
    pub fn on_miss(&self, first: u64, count: u64) -> u64 {
        match self {
            Prefetcher::None => 0,
            Prefetcher::Readahead(n) => *n,
            Prefetcher::Csp(c) => c.amount(first + count.max(1) - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_large_fetch_unit_example() {
        // "if the fetch unit is 64 sectors or blocks, a read request for
        // blocks 60–68 causes blocks 0–127 to be fetched"
        assert_eq!(fetch_range(60, 9, 64), (0, 128));
        assert_eq!(fetch_range(20, 1, 16), (16, 32));
        assert_eq!(fetch_range(16, 16, 16), (16, 32));
        assert_eq!(fetch_range(5, 3, 1), (5, 8));
    }

    /// Reads of `size` blocks one after another from block 0, on an
    /// infinite cache: (block, run, prefetched blocks) of every miss.
    fn sequential(reads: u64, size: u64, csp: &mut Csp) -> Vec<(u64, u64, u64)> {
        let mut cached = std::collections::HashSet::new();
        let mut misses = Vec::new();
        for i in 0..reads {
            let first = i * size;
            csp.observe(first, size);
            let miss = (first..first + size).any(|b| !cached.contains(&b));
            cached.extend(first..first + size);
            if miss {
                let n = csp.amount(first + size - 1);
                misses.push((first, csp.run_at(first + size - 1), n));
                cached.extend(first + size..first + size + n);
            }
        }
        misses
    }

    #[test]
    fn csp_vectors_of_the_research_note() {
        // 64 sequential 4 KiB reads, 16 KiB segments (4 blocks), trigger 1,
        // factor 2, max 256 KiB (64 blocks): misses at 0 K (run 1, 32 KiB),
        // 36 K (run 3, 96 KiB) and 136 K (run 9, 288 KiB capped to 256).
        let mut c = Csp::new(4, 1, 2, 64, 64);
        assert_eq!(sequential(64, 1, &mut c), vec![(0, 1, 8), (9, 3, 24), (34, 9, 64)]);
        // 32 sequential 8 KiB reads, 8 KiB segments: 0 K (1, 16 KiB),
        // 24 K (4, 64 KiB), 96 K (13, 208 KiB).
        let mut c = Csp::new(2, 1, 2, 64, 64);
        assert_eq!(sequential(32, 2, &mut c), vec![(0, 1, 4), (6, 4, 16), (24, 13, 52)]);
    }

    #[test]
    fn csp_directory_is_lru_and_runs_need_the_previous_segment() {
        let mut c = Csp::new(4, 2, 2, 64, 2);
        c.observe(0, 1); // seg 0: run 1
        assert_eq!(c.amount(0), 0, "run 1 is below a trigger of 2");
        c.observe(100, 1); // seg 25
        c.observe(4, 1); // seg 1 follows seg 0: run 2, seg 0 removed
        assert_eq!(c.run_at(4), 2);
        assert_eq!(c.run_at(0), 0);
        assert_eq!(c.amount(4), 16);
        c.observe(200, 1); // seg 50 evicts the LRU entry (seg 25)
        assert_eq!(c.run_at(100), 0);
        assert_eq!(c.run_at(4), 2);
        // A hit on a segment already in the directory only moves it.
        c.observe(5, 2);
        assert_eq!(c.run_at(5), 2);
    }
}

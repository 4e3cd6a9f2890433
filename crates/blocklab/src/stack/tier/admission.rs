//! What production SSD caches keep out of the SSD:
//! - **promotion after N accesses** (Open CAS's NHIT policy): once the
//!   partition is at least `trigger` full, a missed block is inserted only
//!   at its N-th access (misses counted since it was last inserted); below
//!   the trigger every miss is inserted. Open CAS: N = 3, trigger 80 %.
//!   The counts are kept for every block missed and not yet inserted
//!   (Open CAS bounds its table and forgets; this keeps them exactly).
//! - **sequential cutoff** (bcache, Open CAS): the most recent streams
//!   are remembered (128, as both); a request that continues one (starts
//!   where it ended, same direction) adds its bytes, and once a stream has
//!   moved more than the cutoff its requests bypass the SSD (bcache 4 MiB,
//!   Open CAS 1 MiB).

use rustc_hash::FxHashMap;

use crate::trace::Op;

/// Open CAS's NHIT promotion.
pub struct Promotion {
    after: u32,
    trigger: f64,
    counts: FxHashMap<u64, u32>,
}

impl Promotion {
    pub fn new(after: u32, trigger: f64) -> Self {
        Promotion {
            after: after.max(1),
            trigger,
            counts: FxHashMap::default(),
        }
    }

    /// A miss of `block` in a partition `occupancy` full (share of its
    /// quota): whether to insert it now.
    pub fn admit(&mut self, block: u64, occupancy: f64) -> bool {
        if self.after <= 1 {
            return true;
        }
        let c = self.counts.entry(block).or_insert(0);
        *c += 1;
        if occupancy < self.trigger || *c >= self.after {
            self.counts.remove(&block);
            return true;
        }
        false
    }
}

/// Streams remembered by the sequential cutoff (bcache and Open CAS: 128).
pub const STREAMS: usize = 128;

#[derive(Debug, Clone, Copy)]
struct Stream {
    /// The block after its last request.
    next: u64,
    write: bool,
    bytes: u64,
    last_use: u64,
}

/// bcache's / Open CAS's sequential cutoff.
pub struct SequentialCutoff {
    cutoff: u64,
    streams: Vec<Stream>,
    clock: u64,
}

impl SequentialCutoff {
    /// `cutoff` bytes (a stream bypasses once it has moved more).
    pub fn new(cutoff: u64) -> Self {
        SequentialCutoff {
            cutoff,
            streams: Vec::new(),
            clock: 0,
        }
    }

    /// A request of `nblocks` blocks from `first` (`block_size` bytes each):
    /// whether it bypasses the SSD.
    pub fn bypass(&mut self, op: Op, first: u64, nblocks: u64, block_size: u64) -> bool {
        self.clock += 1;
        let write = op == Op::Write;
        let bytes = nblocks * block_size;
        let end = first + nblocks;
        let s = match self.streams.iter_mut().find(|s| s.next == first && s.write == write) {
            Some(s) => {
                s.bytes += bytes;
                s
            }
            None => {
                let fresh = Stream {
                    next: end,
                    write,
                    bytes,
                    last_use: 0,
                };
                if self.streams.len() < STREAMS {
                    self.streams.push(fresh);
                    self.streams.last_mut().expect("just pushed")
                } else {
                    // Replace the least recently used stream (the first on ties).
                    let i = (0..self.streams.len())
                        .min_by_key(|&i| self.streams[i].last_use)
                        .expect("streams are full");
                    self.streams[i] = fresh;
                    &mut self.streams[i]
                }
            }
        };
        s.next = end;
        s.last_use = self.clock;
        s.bytes > self.cutoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nhit_inserts_at_the_nth_miss_above_the_trigger() {
        let mut p = Promotion::new(3, 0.8);
        assert!(p.admit(5, 0.5), "below the trigger: always");
        assert!(!p.admit(5, 0.9));
        assert!(!p.admit(5, 0.9));
        assert!(p.admit(5, 0.9), "third access since the last insert");
        assert!(!p.admit(5, 0.9), "counting starts over");
        assert!(Promotion::new(1, 0.0).admit(1, 1.0));
    }

    #[test]
    fn a_stream_bypasses_past_the_cutoff() {
        let mut s = SequentialCutoff::new(16 * 1024);
        // 4 KiB blocks, requests of two blocks: 8, 16, then 24 KiB > 16 KiB.
        assert!(!s.bypass(Op::Read, 0, 2, 4096));
        assert!(!s.bypass(Op::Read, 2, 2, 4096));
        assert!(s.bypass(Op::Read, 4, 2, 4096));
        // A write at the same place is another stream; a jump starts afresh.
        assert!(!s.bypass(Op::Write, 6, 2, 4096));
        assert!(!s.bypass(Op::Read, 100, 2, 4096));
        assert!(s.bypass(Op::Read, 6, 2, 4096), "the read stream goes on");
        // Interleaved streams are told apart.
        let mut s = SequentialCutoff::new(8 * 1024);
        for i in 0..3u64 {
            let a = s.bypass(Op::Read, 1000 + i, 1, 4096);
            let b = s.bypass(Op::Read, 5000 + i, 1, 4096);
            assert_eq!((a, b), (i == 2, i == 2));
        }
    }
}

//! Trace statistics in one streaming pass (`blocklab trace stats`).
//!
//! Memory grows with the number of unique blocks (one map entry each, for
//! the access classes) and tenants, never with the trace length.
//!
//! Definitions:
//! - block accesses: a request touching bytes [offset, offset+len) accesses
//!   every `block_size` block it overlaps; unique blocks count (tenant, block)
//!   pairs.
//! - span: from the earliest to the latest request time (equal to first →
//!   last for a time-ordered trace); IOPS = requests / span (none when the
//!   span is zero).
//! - size histogram: power-of-two buckets [2^k, 2^(k+1)) bytes, plus a bucket
//!   for zero-length requests.
//! - sequentiality: share of requests that start exactly where the previous
//!   request of the same tenant ended (the first request of a tenant is not
//!   sequential).
//! - access classes, over block accesses: cold-read / cold-write for the first
//!   access to a block, then RAR, RAW, WAR, WAW by this access's op and the
//!   op of the previous access to the same block (RAW = read after write).

use crate::error::Result;
use crate::trace::blocks::{block_key, BlockOptions};
use crate::trace::{open, Op, Request, TraceOptions};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::path::Path;

/// Counts of block accesses by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AccessClasses {
    pub cold_read: u64,
    pub cold_write: u64,
    /// Read after read.
    pub rar: u64,
    /// Read after write.
    pub raw: u64,
    /// Write after read.
    pub war: u64,
    /// Write after write.
    pub waw: u64,
}

impl AccessClasses {
    /// Count one access of class `c`.
    #[inline]
    pub fn count(&mut self, c: AccessClass) {
        match c {
            AccessClass::ColdRead => self.cold_read += 1,
            AccessClass::ColdWrite => self.cold_write += 1,
            AccessClass::Rar => self.rar += 1,
            AccessClass::Raw => self.raw += 1,
            AccessClass::War => self.war += 1,
            AccessClass::Waw => self.waw += 1,
        }
    }

    /// All accesses counted.
    pub fn total(&self) -> u64 {
        self.cold_read + self.cold_write + self.rar + self.raw + self.war + self.waw
    }

    /// Add another set of counts to these.
    pub fn merge(&mut self, o: &AccessClasses) {
        self.cold_read += o.cold_read;
        self.cold_write += o.cold_write;
        self.rar += o.rar;
        self.raw += o.raw;
        self.war += o.war;
        self.waw += o.waw;
    }
}

/// The class of one block access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessClass {
    ColdRead,
    ColdWrite,
    Rar,
    Raw,
    War,
    Waw,
}

impl AccessClass {
    /// The class of an access (`write` or read) to a block whose previous
    /// access was a write (`Some(true)`), a read (`Some(false)`) or none.
    #[inline]
    pub fn of(previous_write: Option<bool>, write: bool) -> AccessClass {
        match (previous_write, write) {
            (None, true) => AccessClass::ColdWrite,
            (None, false) => AccessClass::ColdRead,
            (Some(false), false) => AccessClass::Rar,
            (Some(true), false) => AccessClass::Raw,
            (Some(false), true) => AccessClass::War,
            (Some(true), true) => AccessClass::Waw,
        }
    }

    /// A re-access of a block (not a first touch).
    #[inline]
    pub fn is_reuse(self) -> bool {
        !matches!(self, AccessClass::ColdRead | AccessClass::ColdWrite)
    }

    /// A re-access that reads (RAR, RAW): the reuses a read cache can turn
    /// into hits, the ones useful reuse distance keeps.
    #[inline]
    pub fn is_read_reuse(self) -> bool {
        matches!(self, AccessClass::Rar | AccessClass::Raw)
    }
}

/// One bucket of the request-size histogram: sizes in [lo, hi) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    pub lo: u64,
    /// Exclusive upper bound; `None` for the top bucket [2^63, 2^64).
    pub hi: Option<u64>,
    pub count: u64,
}

/// Statistics of a whole trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub block_size: u64,
    pub block_accesses: u64,
    pub unique_blocks: u64,
    pub tenants: u64,
    /// Earliest and latest request time (seconds), none for an empty trace.
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub span: f64,
    pub iops: Option<f64>,
    pub size_histogram: Vec<SizeBucket>,
    pub sequential: u64,
    pub sequential_ratio: Option<f64>,
    pub classes: AccessClasses,
    /// Malformed records skipped (`skip_bad`).
    pub skipped: u64,
}

/// The streaming accumulator behind [`trace_stats`].
pub struct StatsBuilder {
    block_size: u64,
    requests: u64,
    reads: u64,
    writes: u64,
    bytes_read: u64,
    bytes_written: u64,
    block_accesses: u64,
    start: f64,
    end: f64,
    /// [0] zero-length; [k+1] sizes in [2^k, 2^(k+1)).
    sizes: [u64; 65],
    sequential: u64,
    /// End offset of the last request of each tenant.
    tenant_end: FxHashMap<u32, u64>,
    /// Whether the last access to each block was a write.
    last_write: FxHashMap<u64, bool>,
    classes: AccessClasses,
}

impl StatsBuilder {
    pub fn new(block_size: u64) -> Result<Self> {
        BlockOptions {
            block_size,
            reads_only: false,
        }
        .validate()?;
        Ok(StatsBuilder {
            block_size,
            requests: 0,
            reads: 0,
            writes: 0,
            bytes_read: 0,
            bytes_written: 0,
            block_accesses: 0,
            start: f64::INFINITY,
            end: f64::NEG_INFINITY,
            sizes: [0; 65],
            sequential: 0,
            tenant_end: FxHashMap::default(),
            last_write: FxHashMap::default(),
            classes: AccessClasses::default(),
        })
    }

    /// Account one request.
    pub fn add(&mut self, r: &Request) -> Result<()> {
        self.requests += 1;
        let write = r.op == Op::Write;
        if write {
            self.writes += 1;
            self.bytes_written = self.bytes_written.saturating_add(r.len);
        } else {
            self.reads += 1;
            self.bytes_read = self.bytes_read.saturating_add(r.len);
        }
        self.start = self.start.min(r.time);
        self.end = self.end.max(r.time);
        let bucket = if r.len == 0 {
            0
        } else {
            64 - r.len.leading_zeros() as usize
        };
        self.sizes[bucket] += 1;
        let end = r.offset + r.len; // readers guarantee no overflow
        if let Some(prev) = self.tenant_end.insert(r.tenant, end) {
            if prev == r.offset {
                self.sequential += 1;
            }
        }
        for block in r.blocks(self.block_size) {
            let key = block_key(r.tenant, block)?;
            self.block_accesses += 1;
            self.classes
                .count(AccessClass::of(self.last_write.insert(key, write), write));
        }
        Ok(())
    }

    pub fn finish(self, skipped: u64) -> TraceStats {
        let empty = self.requests == 0;
        let span = if empty { 0.0 } else { self.end - self.start };
        let size_histogram = self
            .sizes
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &count)| match i {
                0 => SizeBucket {
                    lo: 0,
                    hi: Some(1),
                    count,
                },
                i => SizeBucket {
                    lo: 1u64 << (i - 1),
                    hi: 1u64.checked_shl(i as u32),
                    count,
                },
            })
            .collect();
        TraceStats {
            requests: self.requests,
            reads: self.reads,
            writes: self.writes,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            block_size: self.block_size,
            block_accesses: self.block_accesses,
            unique_blocks: self.last_write.len() as u64,
            tenants: self.tenant_end.len() as u64,
            start: (!empty).then_some(self.start),
            end: (!empty).then_some(self.end),
            span,
            iops: (span > 0.0).then(|| self.requests as f64 / span),
            size_histogram,
            sequential: self.sequential,
            sequential_ratio: (!empty).then(|| self.sequential as f64 / self.requests as f64),
            classes: self.classes,
            skipped,
        }
    }
}

/// Statistics of the trace at `path`, in one streaming pass.
pub fn trace_stats(path: &Path, opts: &TraceOptions, block_size: u64) -> Result<TraceStats> {
    let mut b = StatsBuilder::new(block_size)?;
    let mut reader = open(path, opts)?;
    for r in &mut reader {
        b.add(&r?)?;
    }
    Ok(b.finish(reader.skipped()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(time: f64, write: bool, offset: u64, len: u64, tenant: u32) -> Request {
        Request {
            time,
            op: if write { Op::Write } else { Op::Read },
            offset,
            len,
            tenant,
            fs: Default::default(),
        }
    }

    fn stats(reqs: &[Request], block_size: u64) -> TraceStats {
        let mut b = StatsBuilder::new(block_size).unwrap();
        for r in reqs {
            b.add(r).unwrap();
        }
        b.finish(0)
    }

    #[test]
    fn hand_worked_example() {
        // Block size 4096; the comments give each block access's class.
        let reqs = [
            req(1.0, false, 0, 8192, 0),    // cold-read 0, cold-read 1
            req(2.0, true, 4096, 4096, 0),  // WAR 1
            req(3.0, false, 4096, 5000, 0), // RAW 1, cold-read 2
            req(5.0, true, 8192, 512, 1),   // cold-write (tenant 1, block 2)
            req(4.0, true, 8192, 512, 0),   // WAR 2
        ];
        let s = stats(&reqs, 4096);
        assert_eq!((s.requests, s.reads, s.writes), (5, 2, 3));
        assert_eq!(s.block_accesses, 7);
        assert_eq!(s.unique_blocks, 4);
        assert_eq!(s.tenants, 2);
        assert_eq!(
            s.classes,
            AccessClasses {
                cold_read: 3,
                cold_write: 1,
                rar: 0,
                raw: 1,
                war: 2,
                waw: 0
            }
        );
        // No request starts where its tenant's previous one ended (8192, 8192, 9096).
        assert_eq!(s.sequential, 0);
        assert_eq!((s.start, s.end, s.span), (Some(1.0), Some(5.0), 4.0));
        assert_eq!(s.iops, Some(5.0 / 4.0));
        let h: Vec<(u64, u64)> = s.size_histogram.iter().map(|b| (b.lo, b.count)).collect();
        assert_eq!(h, vec![(512, 2), (4096, 2), (8192, 1)]);

        let seq = [
            req(0.0, false, 0, 4096, 0),
            req(0.0, false, 4096, 4096, 0),
            req(0.0, false, 0, 100, 1),
            req(0.0, true, 8192, 1, 0),
        ];
        let s = stats(&seq, 4096);
        assert_eq!(s.sequential, 2);
        assert_eq!(s.sequential_ratio, Some(0.5));
        assert_eq!(s.iops, None);
    }

    #[test]
    fn empty_trace() {
        let s = stats(&[], 4096);
        assert_eq!((s.requests, s.start, s.iops, s.sequential_ratio), (0, None, None, None));
        assert!(s.size_histogram.is_empty());
        assert!(StatsBuilder::new(0).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Against a brute-force reference that rescans the whole history.
        #[test]
        fn matches_brute_force(spec in proptest::collection::vec((0u64..20_000, 0u64..9000, any::<bool>(), 0u32..3), 0..80), bs in prop::sample::select(vec![512u64, 4096, 8192])) {
            let reqs: Vec<Request> = spec.iter().enumerate().map(|(i, &(o, l, w, t))| req(i as f64, w, o, l, t)).collect();
            let s = stats(&reqs, bs);
            let mut history: Vec<(u32, u64, bool)> = Vec::new();
            let mut c = AccessClasses::default();
            let mut seq = 0;
            for (i, r) in reqs.iter().enumerate() {
                if let Some(p) = reqs[..i].iter().rev().find(|p| p.tenant == r.tenant) {
                    if p.offset + p.len == r.offset { seq += 1; }
                }
                let w = r.op == Op::Write;
                if r.len > 0 {
                    for b in r.offset / bs..=(r.offset + r.len - 1) / bs {
                        match history.iter().rev().find(|h| h.0 == r.tenant && h.1 == b).map(|h| h.2) {
                            None => if w { c.cold_write += 1 } else { c.cold_read += 1 },
                            Some(pw) => match (pw, w) {
                                (false, false) => c.rar += 1,
                                (true, false) => c.raw += 1,
                                (false, true) => c.war += 1,
                                (true, true) => c.waw += 1,
                            },
                        }
                        history.push((r.tenant, b, w));
                    }
                }
            }
            prop_assert_eq!(s.classes, c);
            prop_assert_eq!(s.sequential, seq);
            prop_assert_eq!(s.block_accesses, history.len() as u64);
            let mut uniq: Vec<(u32, u64)> = history.iter().map(|h| (h.0, h.1)).collect();
            uniq.sort();
            uniq.dedup();
            prop_assert_eq!(s.unique_blocks, uniq.len() as u64);
            prop_assert_eq!(s.size_histogram.iter().map(|b| b.count).sum::<u64>(), reqs.len() as u64);
            for b in &s.size_histogram {
                let n = reqs.iter().filter(|r| r.len >= b.lo && b.hi.is_none_or(|h| r.len < h)).count() as u64;
                prop_assert_eq!(n, b.count);
            }
        }
    }
}

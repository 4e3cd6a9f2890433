//! LRU miss-ratio curves: exact (Mattson stack distances) and SHARDS.
//!
//! **Exact.** An LRU cache of `c` blocks hits exactly the accesses whose stack
//! distance (distinct blocks touched since the previous access to the same
//! block, itself included) is at most `c` (Mattson et al., 1970). The distance
//! is counted with a Fenwick tree over "last access" slots: each cached key
//! marks the slot of its latest access, and the distance of an access is the
//! number of marks after the key's previous slot, plus one: O(log M) per
//! access. Slots are handed out in access order; when they run out the live
//! marks are renumbered densely (compaction), so memory is O(unique blocks),
//! not O(trace length).
//!
//! **SHARDS** (Waldspurger et al., FAST'15). Spatial sampling: a key is
//! sampled when `hash(key) mod P < T` (rate R = T/P, P = 2^32), distances among
//! the sampled keys are scaled by 1/R. Fixed-rate keeps T; fixed-size keeps at
//! most `max_samples` keys by lowering T to the largest sampled hash and
//! evicting the keys that have it, rescaling the histogram by R_new/R_old.
//! Both apply SHARDS_adj: the expected number of sampled references N·R minus
//! the actual number is added to the first bucket (distance 1).

use crate::cache::sim::{count_unique_keys, Keys};
use crate::cache::sizes;
use crate::error::{Error, Result};
use crate::trace::blocks::BlockOptions;
use crate::trace::TraceOptions;
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;
use std::path::Path;

/// A Fenwick (binary indexed) tree of counts.
#[derive(Debug, Clone)]
struct Fenwick {
    t: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick { t: vec![0; n + 1] }
    }
    /// A tree whose first `ones` slots hold 1, built in O(n).
    fn with_ones(n: usize, ones: usize) -> Self {
        let mut t = vec![0u32; n + 1];
        for i in 1..=n {
            if i <= ones {
                t[i] += 1;
            }
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                t[j] += t[i];
            }
        }
        Fenwick { t }
    }
    fn len(&self) -> usize {
        self.t.len() - 1
    }
    #[inline]
    fn add(&mut self, slot: usize, delta: i32) {
        let mut i = slot + 1;
        while i < self.t.len() {
            self.t[i] = self.t[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }
    /// Sum of slots 0..=slot.
    #[inline]
    fn prefix(&self, slot: usize) -> u64 {
        let mut i = slot + 1;
        let mut s = 0u64;
        while i > 0 {
            s += self.t[i] as u64;
            i &= i - 1;
        }
        s
    }
}

const MIN_SLOTS: usize = 1 << 12;

/// Exact LRU stack distances of a key sequence, in O(log M) per access and
/// O(M) memory (M = keys currently tracked).
#[derive(Debug, Clone)]
pub struct StackDistance {
    last: FxHashMap<u64, u32>,
    tree: Fenwick,
    next: usize,
    /// Smallest tree; compaction keeps at least this many slots.
    min_slots: usize,
}

impl Default for StackDistance {
    fn default() -> Self {
        Self::new()
    }
}

impl StackDistance {
    pub fn new() -> Self {
        Self::with_min_slots(MIN_SLOTS)
    }

    /// A stack whose tree starts at `min_slots` slots (at least 16), for
    /// uses that keep many small stacks (one per tenant). The tree still
    /// grows to four times the live keys, so the cost per access is the same.
    pub fn with_min_slots(min_slots: usize) -> Self {
        let min_slots = min_slots.max(16);
        StackDistance {
            last: FxHashMap::default(),
            tree: Fenwick::new(min_slots),
            next: 0,
            min_slots,
        }
    }

    /// Keys tracked (unique keys seen and not removed).
    pub fn len(&self) -> usize {
        self.last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Renumber live slots densely and size the tree to four times the live
    /// keys (16 bytes a key), so the next compaction is at least three times
    /// as many accesses away: compaction stays a small share of the work.
    fn compact(&mut self) {
        let mut slots: Vec<u32> = self.last.values().copied().collect();
        slots.sort_unstable();
        for v in self.last.values_mut() {
            *v = slots.binary_search(v).expect("live slot") as u32;
        }
        let n = slots.len();
        let cap = (4 * n).max(self.min_slots);
        assert!(
            cap < u32::MAX as usize,
            "too many unique keys for the stack-distance tree"
        );
        self.tree = Fenwick::with_ones(cap, n);
        self.next = n;
    }

    /// Record an access; returns its stack distance (>= 1), or None for the
    /// first access to the key (a cold miss).
    #[inline]
    pub fn access(&mut self, key: u64) -> Option<u64> {
        if self.next == self.tree.len() {
            self.compact();
        }
        let t = self.next;
        self.next += 1;
        let live = self.last.len() as u64;
        match self.last.get_mut(&key) {
            Some(slot) => {
                let p = *slot as usize;
                let d = live - self.tree.prefix(p) + 1;
                self.tree.add(p, -1);
                self.tree.add(t, 1);
                *slot = t as u32;
                Some(d)
            }
            None => {
                self.last.insert(key, t as u32);
                self.tree.add(t, 1);
                None
            }
        }
    }

    /// Forget a key (SHARDS fixed-size eviction).
    pub fn remove(&mut self, key: u64) {
        if let Some(p) = self.last.remove(&key) {
            self.tree.add(p as usize, -1);
        }
    }
}

/// A histogram of (scaled) stack distances: the data behind a curve.
#[derive(Debug, Clone, Default)]
pub struct Curve {
    /// Accesses in the trace (sampled or not).
    pub accesses: u64,
    /// Weight of cold misses (first accesses).
    pub cold: f64,
    /// (distance, weight), distances ascending and distinct.
    pub hist: Vec<(u64, f64)>,
    /// Normaliser: the total weight (accesses for exact, N·R for SHARDS_adj).
    pub total: f64,
    /// Unique keys seen (exact), or the estimate (sampled keys / R).
    pub unique: f64,
    /// The sampling rate R the curve was made at (1 for exact).
    pub rate: f64,
    /// suffix[i] = sum of weights of hist[i..].
    suffix: Vec<f64>,
}

impl Curve {
    fn new(accesses: u64, cold: f64, mut hist: Vec<(u64, f64)>, total: f64, unique: f64) -> Self {
        hist.sort_unstable_by_key(|&(d, _)| d);
        let mut suffix = vec![0.0; hist.len() + 1];
        for i in (0..hist.len()).rev() {
            suffix[i] = suffix[i + 1] + hist[i].1;
        }
        Curve {
            accesses,
            cold,
            hist,
            total,
            unique,
            rate: 1.0,
            suffix,
        }
    }

    /// Estimated LRU miss ratio of a cache of `c` blocks: (cold + weight of
    /// distances > c) / total, clamped to [0, 1]. None for an empty trace.
    pub fn miss_ratio(&self, c: u64) -> Option<f64> {
        if self.total <= 0.0 {
            return None;
        }
        let i = self.hist.partition_point(|&(d, _)| d <= c);
        Some(((self.cold + self.suffix[i]) / self.total).clamp(0.0, 1.0))
    }

    /// The whole curve: one point at every distance where it steps down.
    pub fn points(&self) -> Vec<Point> {
        self.hist
            .iter()
            .map(|&(d, _)| Point {
                cache_blocks: d,
                miss_ratio: self.miss_ratio(d),
            })
            .collect()
    }
}

/// One point of a miss-ratio curve.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    pub cache_blocks: u64,
    /// None (JSON null) for an empty trace, as in the cache simulator.
    pub miss_ratio: Option<f64>,
}

/// Exact MRC builder.
#[derive(Debug, Default)]
pub struct ExactMrc {
    sd: StackDistance,
    counts: Vec<u64>,
    cold: u64,
    accesses: u64,
}

impl ExactMrc {
    pub fn new() -> Self {
        Self::default()
    }
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.accesses += 1;
        match self.sd.access(key) {
            None => self.cold += 1,
            Some(d) => {
                let d = d as usize;
                if d >= self.counts.len() {
                    self.counts.resize(d + 1, 0);
                }
                self.counts[d] += 1;
            }
        }
    }
    pub fn finish(self) -> Curve {
        let hist = self
            .counts
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(d, &n)| (d as u64, n as f64))
            .collect();
        Curve::new(
            self.accesses,
            self.cold as f64,
            hist,
            self.accesses as f64,
            self.sd.len() as f64,
        )
    }
}

/// P of SHARDS: hashes are reduced to 32 bits.
const P: u64 = 1 << 32;

/// A deterministic 64-bit mixer (splitmix64's finaliser) for spatial sampling.
#[inline]
pub fn hash64(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline]
fn sample_hash(key: u64) -> u64 {
    hash64(key) >> 32
}

/// SHARDS builder (fixed-rate, or fixed-size with `max_samples`).
#[derive(Debug)]
pub struct Shards {
    sd: StackDistance,
    /// Sample when sample_hash(key) < threshold.
    threshold: u64,
    max_samples: Option<usize>,
    /// (hash, key) of tracked keys, largest hash on top (fixed-size only).
    heap: BinaryHeap<(u64, u64)>,
    /// Weights are stored divided by `scale` so that lowering the rate
    /// rescales every count at once (true weight = stored * scale).
    hist: FxHashMap<u64, f64>,
    cold: f64,
    sampled: f64,
    scale: f64,
    accesses: u64,
    adjust: bool,
}

impl Shards {
    /// Fixed-rate SHARDS at rate `rate` in (0, 1].
    pub fn fixed_rate(rate: f64) -> Result<Self> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(Error::config(format!("SHARDS rate must be in (0, 1], got {rate}")));
        }
        let threshold = ((rate * P as f64).round() as u64).clamp(1, P);
        Ok(Self::with(threshold, None))
    }

    /// Fixed-size SHARDS keeping at most `max_samples` keys (starting at rate 1).
    pub fn fixed_size(max_samples: usize) -> Result<Self> {
        if max_samples == 0 {
            return Err(Error::config("SHARDS max samples must be at least 1"));
        }
        Ok(Self::with(P, Some(max_samples)))
    }

    fn with(threshold: u64, max_samples: Option<usize>) -> Self {
        Shards {
            sd: StackDistance::new(),
            threshold,
            max_samples,
            heap: BinaryHeap::new(),
            hist: FxHashMap::default(),
            cold: 0.0,
            sampled: 0.0,
            scale: 1.0,
            accesses: 0,
            adjust: true,
        }
    }

    /// Turn SHARDS_adj off (for comparison).
    pub fn without_adjustment(mut self) -> Self {
        self.adjust = false;
        self
    }

    /// Current sampling rate R = T/P.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / P as f64
    }

    #[inline]
    pub fn access(&mut self, key: u64) {
        self.accesses += 1;
        let h = sample_hash(key);
        if h >= self.threshold {
            return;
        }
        let one = 1.0 / self.scale;
        self.sampled += one;
        match self.sd.access(key) {
            Some(d) => {
                let scaled = ((d as f64 / self.rate()).round() as u64).max(1);
                *self.hist.entry(scaled).or_insert(0.0) += one;
            }
            None => {
                self.cold += one;
                if let Some(max) = self.max_samples {
                    self.heap.push((h, key));
                    if self.sd.len() > max {
                        self.lower_threshold();
                    }
                }
            }
        }
    }

    /// Fixed-size: drop every key with the largest hash, make that hash the
    /// new threshold and rescale the counts to the new rate.
    fn lower_threshold(&mut self) {
        let old = self.rate();
        let Some(&(top, _)) = self.heap.peek() else { return };
        while let Some(&(h, key)) = self.heap.peek() {
            if h != top {
                break;
            }
            self.heap.pop();
            self.sd.remove(key);
        }
        self.threshold = top;
        self.scale *= self.rate() / old;
    }

    pub fn finish(self) -> Curve {
        let rate = self.rate();
        let expected = self.accesses as f64 * rate;
        let scale = self.scale;
        let mut hist: FxHashMap<u64, f64> = self.hist.into_iter().map(|(d, w)| (d, w * scale)).collect();
        let sampled = self.sampled * scale;
        let total = if self.adjust {
            *hist.entry(1).or_insert(0.0) += expected - sampled;
            expected
        } else {
            sampled
        };
        let unique = self.sd.len() as f64 / rate;
        let mut curve = Curve::new(
            self.accesses,
            self.cold * scale,
            hist.into_iter().collect(),
            total,
            unique,
        );
        curve.rate = rate;
        curve
    }
}

/// Which curve to compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    Exact,
    ShardsRate(f64),
    ShardsSize(usize),
}

impl Method {
    /// From the CLI's `--method`, `--rate` and `--max-samples`.
    pub fn parse(method: &str, rate: Option<f64>, max_samples: Option<u64>) -> Result<Method> {
        match method {
            "exact" => {
                if rate.is_some() || max_samples.is_some() {
                    return Err(Error::config("--rate and --max-samples apply to --method shards only"));
                }
                Ok(Method::Exact)
            }
            "shards" => match (rate, max_samples) {
                (Some(_), Some(_)) => Err(Error::config("give either --rate or --max-samples, not both")),
                (None, Some(k)) => {
                    let k = usize::try_from(k).map_err(|_| Error::config("--max-samples too large"))?;
                    Shards::fixed_size(k)?;
                    Ok(Method::ShardsSize(k))
                }
                (r, None) => {
                    let r = r.unwrap_or(0.01);
                    Shards::fixed_rate(r)?;
                    Ok(Method::ShardsRate(r))
                }
            },
            other => Err(Error::unknown("MRC method", other, &["exact", "shards"])),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Method::Exact => "exact",
            _ => "shards",
        }
    }
}

/// Compute the curve of a key sequence.
pub fn curve_of<I: IntoIterator<Item = Result<u64>>>(keys: I, method: Method) -> Result<Curve> {
    match method {
        Method::Exact => {
            let mut m = ExactMrc::new();
            for k in keys {
                m.access(k?);
            }
            Ok(m.finish())
        }
        Method::ShardsRate(_) | Method::ShardsSize(_) => {
            let mut s = match method {
                Method::ShardsRate(r) => Shards::fixed_rate(r)?,
                Method::ShardsSize(k) => Shards::fixed_size(k)?,
                Method::Exact => unreachable!("handled above"),
            };
            for k in keys {
                s.access(k?);
            }
            Ok(s.finish())
        }
    }
}

/// SHARDS simulates a cache of C blocks by the sampled blocks it holds,
/// C·R, and scales sampled distances by 1/R: a size is resolved in steps of
/// 1/R blocks and its miss ratio rests on the reuses of about C·R sampled
/// blocks. Below this many sampled blocks a step is more than 1 % of the
/// size and the estimate is mostly sampling noise (at R = 0.01, sizes 1,
/// 100 and 300 give 0.733 / 0.727 / 0.719 where the exact curve says 0.997
/// / 0.866 / 0.794 on the README's 1M-access Zipf trace), so such sizes are flagged.
pub const MIN_SAMPLED_BLOCKS: f64 = 100.0;

/// What an MRC run reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MrcReport {
    pub method: String,
    pub points: Vec<Point>,
    pub accesses: u64,
    /// Malformed records skipped (`skip_bad`).
    pub skipped: u64,
    /// SHARDS: the sampling rate of the curve (fixed-size: where it ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// SHARDS: sizes below this many blocks hold fewer than
    /// [`MIN_SAMPLED_BLOCKS`] sampled blocks; their points are not to be trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_from_blocks: Option<u64>,
    /// One line per problem with the result (sizes too small for SHARDS).
    pub warnings: Vec<String>,
}

/// The warning for the points of a SHARDS curve at `rate` below
/// `trusted_from` blocks, if any.
fn shards_warning(points: &[Point], rate: f64, trusted_from: u64) -> Option<String> {
    let small: Vec<u64> = points
        .iter()
        .map(|p| p.cache_blocks)
        .filter(|&c| c < trusted_from)
        .collect();
    if small.is_empty() {
        return None;
    }
    let which = if small.len() <= 8 {
        format!(
            "size(s) {} blocks",
            small.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
        )
    } else {
        format!("{} points below {trusted_from} blocks", small.len())
    };
    Some(format!(
        "SHARDS at rate {rate:.4}: {which} hold fewer than {MIN_SAMPLED_BLOCKS} sampled blocks \
         (size x rate); their miss ratios are not to be trusted (sizes from {trusted_from} blocks are; \
         use --method exact or a higher --rate)"
    ))
}

/// The LRU miss-ratio curve of a trace file: the whole curve, or the points
/// at `sizes` (comma-separated, as for `blocklab cache`). A `%` size uses the
/// exact unique-block count: free for the exact method, a counting pre-pass
/// for SHARDS.
pub fn mrc_trace(
    path: &Path,
    trace: &TraceOptions,
    blocks: BlockOptions,
    method: Method,
    sizes_list: Option<&str>,
) -> Result<MrcReport> {
    blocks.validate()?;
    if let Some(list) = sizes_list {
        sizes::parse_specs(list)?;
    }
    // An oracleGeneral file by memory map when it allows, as `cache` reads it.
    let mut keys = Keys::open(path, trace, blocks)?;
    let curve = curve_of(keys.keys(), method)?;
    let skipped = keys.skipped();
    let points = match sizes_list {
        None => curve.points(),
        Some(list) => {
            let unique = if !sizes::needs_unique(list) {
                None
            } else if method == Method::Exact {
                Some(curve.unique as u64)
            } else {
                Some(count_unique_keys(Keys::open(path, trace, blocks)?.keys())?)
            };
            sizes::parse_sizes(list, blocks.block_size, unique)?
                .into_iter()
                .map(|c| Point {
                    cache_blocks: c,
                    miss_ratio: curve.miss_ratio(c),
                })
                .collect()
        }
    };
    let (rate, trusted_from_blocks, warnings) = if method == Method::Exact {
        (None, None, Vec::new())
    } else {
        // At rate 1 every block is sampled: the curve is exact.
        let trusted_from = if curve.rate >= 1.0 {
            0
        } else {
            (MIN_SAMPLED_BLOCKS / curve.rate).ceil() as u64
        };
        let warning = shards_warning(&points, curve.rate, trusted_from);
        (Some(curve.rate), Some(trusted_from), warning.into_iter().collect())
    };
    Ok(MrcReport {
        method: method.name().into(),
        points,
        accesses: curve.accesses,
        skipped,
        rate,
        trusted_from_blocks,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{build, Access};
    use proptest::prelude::*;

    /// Brute force: distance = distinct keys since the previous access, inclusive.
    fn brute_distances(keys: &[u64]) -> Vec<Option<u64>> {
        (0..keys.len())
            .map(|i| {
                let prev = (0..i).rev().find(|&j| keys[j] == keys[i])?;
                let mut s: Vec<u64> = keys[prev + 1..=i].to_vec();
                s.sort_unstable();
                s.dedup();
                Some(s.len() as u64)
            })
            .collect()
    }

    fn lru_misses(keys: &[u64], c: u64) -> u64 {
        let mut p = build("lru", c as usize).unwrap();
        keys.iter().filter(|&&k| !p.access(&Access::read(k))).count() as u64
    }

    #[test]
    fn shards_flags_sizes_with_too_few_sampled_blocks() {
        // 200,000 accesses over 20,000 blocks in a loop of random-ish order.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t.csv");
        let text: String = (0..200_000u64)
            .map(|i| format!("{i},R,{},4096\n", (i * 7919 % 20_000) * 4096))
            .collect();
        std::fs::write(&path, text).unwrap();
        let topts = TraceOptions {
            format: "csv".into(),
            ..Default::default()
        };
        let blocks = BlockOptions::default();
        let r = mrc_trace(&path, &topts, blocks, Method::ShardsRate(0.01), Some("1,100,300,20000")).unwrap();
        assert!((r.rate.unwrap() - 0.01).abs() < 1e-6, "{:?}", r.rate);
        assert_eq!(r.trusted_from_blocks, Some(10_000));
        assert_eq!(r.warnings.len(), 1);
        let w = &r.warnings[0];
        assert!(
            w.contains("size(s) 1, 100, 300 blocks hold fewer than 100 sampled blocks"),
            "{w}"
        );
        assert!(w.contains("from 10000 blocks"), "{w}");
        // Large enough sizes only: no warning; exact: never.
        let r = mrc_trace(&path, &topts, blocks, Method::ShardsRate(0.01), Some("10000,20000")).unwrap();
        assert!(r.warnings.is_empty());
        let r = mrc_trace(&path, &topts, blocks, Method::Exact, Some("1,100")).unwrap();
        assert!(r.warnings.is_empty() && r.rate.is_none());
        let r = mrc_trace(&path, &topts, blocks, Method::ShardsRate(1.0), Some("1,100")).unwrap();
        assert!(r.warnings.is_empty() && r.trusted_from_blocks == Some(0));
    }

    /// An oracleGeneral file (read by memory map, as `cache` reads it) gives
    /// the curve the generic reader gives (made to read by checking times).
    #[test]
    fn oracle_files_by_memory_map_give_the_generic_readers_curve() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t.oracleGeneral");
        let mut buf = Vec::new();
        for (i, k) in crate::trace::synth::zipf_keys(20_000, 900, 0.9, 5)
            .unwrap()
            .into_iter()
            .enumerate()
        {
            crate::trace::oracle::write_record(&mut buf, i as u32, k | (2 << 40), 4096, -1).unwrap();
        }
        std::fs::write(&path, &buf).unwrap();
        let mapped = TraceOptions {
            format: "oracle".into(),
            ..Default::default()
        };
        let generic = TraceOptions {
            order: crate::trace::order::TimeOrder::Strict,
            ..mapped.clone()
        };
        assert!(matches!(
            Keys::open(&path, &mapped, BlockOptions::default()).unwrap(),
            Keys::Oracle(_)
        ));
        for method in [Method::Exact, Method::ShardsRate(0.5)] {
            let run = |t: &TraceOptions| {
                let r = mrc_trace(&path, t, BlockOptions::default(), method, Some("10,100,50%")).unwrap();
                (r.points, r.accesses, r.skipped, r.rate)
            };
            assert_eq!(run(&mapped), run(&generic), "{method:?}");
        }
    }

    #[test]
    fn distances_by_hand() {
        // a b c b a a: -, -, -, 2, 3, 1
        let mut sd = StackDistance::new();
        let got: Vec<_> = [1, 2, 3, 2, 1, 1].iter().map(|&k| sd.access(k)).collect();
        assert_eq!(got, vec![None, None, None, Some(2), Some(3), Some(1)]);
    }

    #[test]
    fn compaction_keeps_distances() {
        // Far more accesses than MIN_SLOTS over few keys forces many compactions.
        let keys: Vec<u64> = (0..50_000u64).map(|i| (i * 7919) % 37 + (i % 5) * 1000).collect();
        let mut sd = StackDistance::new();
        let got: Vec<_> = keys.iter().map(|&k| sd.access(k)).collect();
        let want = brute_distances(&keys[..2000]);
        assert_eq!(&got[..2000], &want[..]);
        assert!(sd.tree.len() <= MIN_SLOTS.max(4 * sd.len()) * 2);
        // Distances after compactions against a fresh brute force on a window.
        let mut last = FxHashMap::default();
        for (i, &k) in keys.iter().enumerate() {
            if let Some(p) = last.insert(k, i) {
                let mut s: Vec<u64> = keys[p + 1..=i].to_vec();
                s.sort_unstable();
                s.dedup();
                assert_eq!(got[i], Some(s.len() as u64), "access {i}");
            }
            if i > 6000 {
                break;
            }
        }
    }

    #[test]
    fn exact_curve_by_hand() {
        let keys = [1u64, 2, 3, 2, 1, 1];
        let c = curve_of(keys.iter().map(|&k| Ok(k)), Method::Exact).unwrap();
        assert_eq!(c.miss_ratio(1), Some(5.0 / 6.0));
        assert_eq!(c.miss_ratio(2), Some(4.0 / 6.0));
        assert_eq!(c.miss_ratio(3), Some(3.0 / 6.0));
        assert_eq!(
            c.points().iter().map(|p| p.cache_blocks).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(c.unique, 3.0);
    }

    #[test]
    fn method_parse() {
        assert_eq!(Method::parse("exact", None, None).unwrap(), Method::Exact);
        assert_eq!(
            Method::parse("shards", Some(0.1), None).unwrap(),
            Method::ShardsRate(0.1)
        );
        assert_eq!(Method::parse("shards", None, Some(10)).unwrap(), Method::ShardsSize(10));
        assert!(Method::parse("shards", Some(1.5), None).is_err());
        assert!(Method::parse("shards", Some(0.5), Some(3)).is_err());
        assert!(Method::parse("exact", Some(0.5), None).is_err());
        let e = Method::parse("olken", None, None).unwrap_err().to_string();
        assert!(e.contains("exact") && e.contains("shards"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn stack_distance_equals_brute_force(keys in prop::collection::vec(0u64..40, 0..400)) {
            let mut sd = StackDistance::new();
            let got: Vec<_> = keys.iter().map(|&k| sd.access(k)).collect();
            prop_assert_eq!(got, brute_distances(&keys));
        }

        /// The exact curve equals LRU simulation at every size.
        #[test]
        fn exact_equals_lru_at_every_size(keys in prop::collection::vec(0u64..50, 1..800)) {
            let c = curve_of(keys.iter().map(|&k| Ok(k)), Method::Exact).unwrap();
            for size in 1..=52u64 {
                let m = lru_misses(&keys, size);
                prop_assert_eq!(c.miss_ratio(size), Some(m as f64 / keys.len() as f64), "size {}", size);
            }
        }

        /// SHARDS at rate 1 (fixed-rate, or fixed-size never full) is exact.
        #[test]
        fn shards_rate_one_is_exact(keys in prop::collection::vec(0u64..50, 1..500)) {
            let e = curve_of(keys.iter().map(|&k| Ok(k)), Method::Exact).unwrap();
            let r = curve_of(keys.iter().map(|&k| Ok(k)), Method::ShardsRate(1.0)).unwrap();
            let s = curve_of(keys.iter().map(|&k| Ok(k)), Method::ShardsSize(1000)).unwrap();
            for size in 1..=52u64 {
                prop_assert_eq!(e.miss_ratio(size), r.miss_ratio(size));
                prop_assert_eq!(e.miss_ratio(size), s.miss_ratio(size));
            }
        }
    }

    #[test]
    fn fixed_size_keeps_at_most_max_samples() {
        let mut s = Shards::fixed_size(100).unwrap();
        for i in 0..100_000u64 {
            s.access(hash64(i) % 20_000);
            assert!(s.sd.len() <= 100);
        }
        assert!(s.rate() < 0.05 && s.rate() > 0.0);
    }

    /// Mean absolute error of SHARDS against the exact curve on a 1M-access
    /// Zipf(1.0) trace over 100k blocks, at 100 sizes evenly spread up to
    /// the footprint. Slow in a debug build: `cargo test --release -- --ignored`.
    #[test]
    #[ignore]
    fn shards_error_on_zipf() {
        let keys = crate::trace::synth::zipf_keys(1_000_000, 100_000, 1.0, 42).unwrap();
        let exact = curve_of(keys.iter().map(|&k| Ok(k)), Method::Exact).unwrap();
        let sizes: Vec<u64> = (1..=100).map(|i| i * exact.unique as u64 / 100).collect();
        for method in [
            Method::ShardsRate(0.01),
            Method::ShardsRate(0.1),
            Method::ShardsSize(8192),
        ] {
            let s = curve_of(keys.iter().map(|&k| Ok(k)), method).unwrap();
            let mae: f64 = sizes
                .iter()
                .map(|&c| (s.miss_ratio(c).unwrap() - exact.miss_ratio(c).unwrap()).abs())
                .sum::<f64>()
                / sizes.len() as f64;
            println!("{method:?}: mean absolute error {mae:.5} over {} sizes", sizes.len());
            assert!(mae < 0.02, "{method:?}: MAE {mae}");
        }
    }
}

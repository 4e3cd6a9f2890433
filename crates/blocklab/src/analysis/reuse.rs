//! Reuse analysis: the cache sizes that traditional reuse distance (TRD,
//! Centaur) and useful reuse distance (URD, ECI-Cache) ask for, per tenant
//! and per time window (`blocklab trace reuse`).
//!
//! Definitions (sizes are LRU stack distances, in blocks):
//! - The stack distance of a re-access is the number of distinct blocks of the
//!   same stack touched since the previous access to the block, itself
//!   included (the `StackDistance` engine of [`super::mrc`]): an LRU cache of
//!   `c` blocks hits the access iff its distance is at most `c`. The paper's
//!   "reuse distance" counts the blocks strictly between, one less.
//! - `trd_size`: the largest stack distance over all reuses (RAR, RAW, WAR,
//!   WAW) = the smallest LRU cache in which every reuse hits.
//! - `urd_size`: the same over the reuses whose access is a read (RAR, RAW).
//!   The distance still counts every block touched in between, written or
//!   read (writes occupy a write-allocate cache). So `urd_size <= trd_size`,
//!   and `urd_size` is the smallest write-allocate LRU cache in which every
//!   read that can hit does.
//! - `trd_p99_size` / `urd_p99_size`: the smallest cache in which at least 99 %
//!   of those reuses hit (nearest rank: the ceil(0.99·n)-th smallest distance).
//! - Every size is 0 when there is no such reuse.
//! - Access classes come from [`AccessClass::of`], the classification of
//!   `trace stats`.
//!
//! **Per tenant.** With `per_tenant` each tenant has its own stack (its
//! distances never count other tenants' blocks: one LRU partition each);
//! without it the trace is one stack over all (tenant, block) keys, as one
//! shared LRU cache (`blocklab mrc`).
//!
//! **Windows.** Window k holds the requests with time in [t0 + k·W,
//! t0 + (k+1)·W), t0 the first request's time; a request earlier than the
//! current window (an unordered trace) counts in the current window, so one
//! pass suffices. A window's figures cover the reuses *landing* in it; with
//! [`History::All`] (the default) their distances reach back into earlier
//! windows, with [`History::Window`] every stack (and the access classes)
//! starts afresh each window, as if each window were its own trace. Windows
//! without accesses are not reported.
//!
//! Cost: O(log M) per block access (M = blocks of the stack), memory one map
//! entry per block plus one histogram bucket per distance seen.

use super::mrc::StackDistance;
use super::stats::{AccessClass, AccessClasses};
use crate::error::{Error, Result};
use crate::trace::blocks::block_key;
use crate::trace::{open, Op, TraceOptions};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::path::Path;

/// How far back distances reach when the trace is cut into windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// Distances are measured against the whole past (the stacks persist).
    All,
    /// Stacks and access classes start afresh every window.
    Window,
}

impl History {
    pub const NAMES: &'static [&'static str] = &["all", "window"];

    pub fn parse(s: &str) -> Result<History> {
        match s {
            "all" => Ok(History::All),
            "window" => Ok(History::Window),
            other => Err(Error::unknown("history", other, Self::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            History::All => "all",
            History::Window => "window",
        }
    }
}

/// Distances below this are counted in a dense array, larger ones in a
/// hash map: closing a window then costs O(this + distinct large distances),
/// not O(largest distance).
const DENSE_DISTANCES: usize = 1 << 12;

/// A histogram of stack distances (reuses counted per distance).
#[derive(Debug, Clone)]
pub struct DistanceHistogram {
    /// dense[d]: reuses at distance d < dense_limit.
    dense: Vec<u64>,
    dense_limit: usize,
    /// Distances >= dense_limit.
    sparse: FxHashMap<u64, u64>,
    reuses: u64,
    max: u64,
}

impl Default for DistanceHistogram {
    fn default() -> Self {
        Self::with_dense_limit(DENSE_DISTANCES)
    }
}

impl PartialEq for DistanceHistogram {
    fn eq(&self, o: &Self) -> bool {
        self.reuses == o.reuses && self.counts() == o.counts()
    }
}

impl Eq for DistanceHistogram {}

impl DistanceHistogram {
    /// Distances below `limit` in a dense array (`usize::MAX`: all of them,
    /// the fastest when the histogram is never reset).
    pub fn with_dense_limit(limit: usize) -> Self {
        DistanceHistogram {
            dense: Vec::new(),
            dense_limit: limit,
            sparse: FxHashMap::default(),
            reuses: 0,
            max: 0,
        }
    }

    #[inline]
    pub fn add(&mut self, d: u64) {
        self.add_count(d, 1);
    }

    #[inline]
    fn add_count(&mut self, d: u64, n: u64) {
        if (d as usize) < self.dense_limit {
            let i = d as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] += n;
        } else {
            *self.sparse.entry(d).or_insert(0) += n;
        }
        self.reuses += n;
        self.max = self.max.max(d);
    }

    /// Reuses counted.
    pub fn reuses(&self) -> u64 {
        self.reuses
    }

    pub fn is_empty(&self) -> bool {
        self.reuses == 0
    }

    /// `(distance, reuses)` for every distance present, ascending.
    pub fn counts(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .dense
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(d, &n)| (d as u64, n))
            .collect();
        let mut tail: Vec<(u64, u64)> = self.sparse.iter().map(|(&d, &n)| (d, n)).collect();
        tail.sort_unstable();
        v.extend(tail);
        v
    }

    /// The largest distance (0 when empty): the LRU size in which every
    /// counted reuse hits.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The smallest LRU size in which at least `basis_points`/10,000 of the
    /// counted reuses hit (nearest rank; 0 when empty). 9,900 is the 99th
    /// percentile, 10,000 the maximum.
    pub fn percentile(&self, basis_points: u32) -> u64 {
        if self.reuses == 0 {
            return 0;
        }
        let bp = basis_points.clamp(1, 10_000) as u128;
        // ceil(n · bp / 10,000) in integers: exact for any n.
        let need = ((self.reuses as u128 * bp).div_ceil(10_000)).max(1) as u64;
        let mut seen = 0;
        for (d, n) in self.counts() {
            seen += n;
            if seen >= need {
                return d;
            }
        }
        self.max
    }

    /// Reuses with distance at most `c` (the hits of an LRU cache of `c` blocks).
    pub fn within(&self, c: u64) -> u64 {
        let end = (c as usize).saturating_add(1).min(self.dense.len());
        let dense: u64 = self.dense[..end].iter().sum();
        dense
            + self
                .sparse
                .iter()
                .filter(|&(&d, _)| d <= c)
                .map(|(_, &n)| n)
                .sum::<u64>()
    }

    /// The step function of hits against cache size: `(d, reuses with
    /// distance <= d)` at every distance present, ascending.
    pub fn steps(&self) -> Vec<(u64, u64)> {
        let mut seen = 0;
        self.counts()
            .into_iter()
            .map(|(d, n)| {
                seen += n;
                (d, seen)
            })
            .collect()
    }

    /// Add another histogram's counts to this one: O(its dense part + its
    /// large distances).
    pub fn merge(&mut self, o: &DistanceHistogram) {
        for (d, &n) in o.dense.iter().enumerate() {
            if n > 0 {
                self.add_count(d as u64, n);
            }
        }
        for (&d, &n) in &o.sparse {
            self.add_count(d, n);
        }
    }
}

/// The reuse profile of one tenant over one stretch of the trace: access
/// classes and the TRD and URD distance histograms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReuseProfile {
    pub classes: AccessClasses,
    /// Distances of every reuse (RAR, RAW, WAR, WAW).
    pub trd: DistanceHistogram,
    /// Distances of the read reuses (RAR, RAW).
    pub urd: DistanceHistogram,
    /// Requests seen by [`ReuseTracker::request`], and those of them that
    /// started at the block after the tenant's previous request ended
    /// (ECI §5's sequential VMs).
    pub requests: u64,
    pub sequential_requests: u64,
}

impl ReuseProfile {
    /// An empty profile whose histograms count distances below `limit`
    /// densely (see [`DistanceHistogram::with_dense_limit`]).
    pub fn with_dense_limit(limit: usize) -> Self {
        ReuseProfile {
            classes: AccessClasses::default(),
            trd: DistanceHistogram::with_dense_limit(limit),
            urd: DistanceHistogram::with_dense_limit(limit),
            requests: 0,
            sequential_requests: 0,
        }
    }

    /// The share of the requests that continued the previous one; None
    /// without requests.
    pub fn sequential_share(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.sequential_requests as f64 / self.requests as f64)
    }

    /// Block accesses counted.
    pub fn accesses(&self) -> u64 {
        self.classes.total()
    }

    /// Count one access of `class` at stack distance `distance` (None for a
    /// first access).
    #[inline]
    pub fn record(&mut self, class: AccessClass, distance: Option<u64>) {
        self.classes.count(class);
        if let Some(d) = distance {
            self.trd.add(d);
            if class.is_read_reuse() {
                self.urd.add(d);
            }
        }
    }

    pub fn merge(&mut self, o: &ReuseProfile) {
        self.classes.merge(&o.classes);
        self.trd.merge(&o.trd);
        self.urd.merge(&o.urd);
        self.requests += o.requests;
        self.sequential_requests += o.sequential_requests;
    }

    /// ECI's write ratio: (WAR + WAW) / all accesses; None without accesses.
    pub fn write_ratio(&self) -> Option<f64> {
        let n = self.accesses();
        (n > 0).then(|| (self.classes.war + self.classes.waw) as f64 / n as f64)
    }

    /// The JSON row of this profile (`tenant` None: all tenants pooled).
    pub fn summary(&self, tenant: Option<u32>) -> ReuseSummary {
        ReuseSummary {
            tenant,
            accesses: self.accesses(),
            classes: self.classes,
            trd_size: self.trd.max(),
            urd_size: self.urd.max(),
            trd_p99_size: self.trd.percentile(9_900),
            urd_p99_size: self.urd.percentile(9_900),
            trd_reuses: self.trd.reuses(),
            urd_reuses: self.urd.reuses(),
            write_ratio: self.write_ratio(),
        }
    }
}

/// What one access was: its class and stack distance (None when first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse {
    pub class: AccessClass,
    pub distance: Option<u64>,
}

/// Initial tree slots of a tenant's stack: small, since a trace may hold
/// thousands of tenants with a few blocks each.
const TENANT_MIN_SLOTS: usize = 64;

struct Stack {
    /// Tenant, or 0 when pooled.
    group: u32,
    sd: StackDistance,
    /// Whether the last access to each key was a write.
    last_write: FxHashMap<u64, bool>,
    /// The key after the last request's end ([`ReuseTracker::request`]).
    next_key: Option<u64>,
    window: ReuseProfile,
}

impl Stack {
    fn new(group: u32, dense_limit: usize) -> Self {
        Stack {
            group,
            sd: StackDistance::with_min_slots(TENANT_MIN_SLOTS),
            last_write: FxHashMap::default(),
            next_key: None,
            window: ReuseProfile::with_dense_limit(dense_limit),
        }
    }
}

/// The online reuse analyser: feed it block accesses, close a window to get
/// the profile of each tenant active in it. This is what a partitioned cache
/// tier runs beside its partitions, every window.
pub struct ReuseTracker {
    per_tenant: bool,
    history: History,
    dense_limit: usize,
    index: FxHashMap<u32, usize>,
    stacks: Vec<Stack>,
    /// (group, index) of the last stack used: consecutive accesses mostly
    /// come from one request, so this skips the tenant lookup.
    last: Option<(u32, usize)>,
}

impl ReuseTracker {
    /// `per_tenant`: one stack per tenant (else one stack over all tenants,
    /// reported as tenant 0 by [`end_window`](Self::end_window)).
    pub fn new(per_tenant: bool, history: History) -> Self {
        Self::with_dense_limit(per_tenant, history, DENSE_DISTANCES)
    }

    /// A tracker whose window histograms count distances below `limit`
    /// densely: `usize::MAX` when a single window covers the whole stream.
    fn with_dense_limit(per_tenant: bool, history: History, dense_limit: usize) -> Self {
        ReuseTracker {
            per_tenant,
            history,
            dense_limit,
            index: FxHashMap::default(),
            stacks: Vec::new(),
            last: None,
        }
    }

    /// Record one block access. Errors only when pooled and the (tenant,
    /// block) pair does not fit a cache key (see [`block_key`]).
    #[inline]
    pub fn access(&mut self, tenant: u32, block: u64, write: bool) -> Result<Reuse> {
        let (group, key) = self.key(tenant, block)?;
        let i = self.stack_of(group);
        let s = &mut self.stacks[i];
        let distance = s.sd.access(key);
        let class = AccessClass::of(s.last_write.insert(key, write), write);
        s.window.record(class, distance);
        Ok(Reuse { class, distance })
    }

    /// Record one request of `nblocks` blocks from `first` (before its
    /// block accesses): sequential when it starts where the tenant's
    /// previous request ended.
    pub fn request(&mut self, tenant: u32, first: u64, nblocks: u64) -> Result<()> {
        let (group, key) = self.key(tenant, first)?;
        let i = self.stack_of(group);
        let s = &mut self.stacks[i];
        s.window.requests += 1;
        s.window.sequential_requests += u64::from(s.next_key == Some(key));
        s.next_key = Some(key + nblocks);
        Ok(())
    }

    #[inline]
    fn key(&self, tenant: u32, block: u64) -> Result<(u32, u64)> {
        Ok(if self.per_tenant {
            (tenant, block)
        } else {
            (0, block_key(tenant, block)?)
        })
    }

    /// The index of `group`'s stack, made on its first use.
    #[inline]
    fn stack_of(&mut self, group: u32) -> usize {
        match self.last {
            Some((g, i)) if g == group => i,
            _ => {
                let n = self.stacks.len();
                let i = *self.index.entry(group).or_insert(n);
                if i == n {
                    self.stacks.push(Stack::new(group, self.dense_limit));
                }
                self.last = Some((group, i));
                i
            }
        }
    }

    /// Close the current window: the profile of every tenant with accesses
    /// since the last close, by ascending tenant (pooled: one entry, tenant
    /// 0). With [`History::Window`] every stack starts afresh.
    pub fn end_window(&mut self) -> Vec<(u32, ReuseProfile)> {
        let mut out: Vec<(u32, ReuseProfile)> = self
            .stacks
            .iter_mut()
            .filter(|s| s.window.accesses() > 0)
            .map(|s| {
                let fresh = ReuseProfile::with_dense_limit(self.dense_limit);
                (s.group, std::mem::replace(&mut s.window, fresh))
            })
            .collect();
        out.sort_unstable_by_key(|&(g, _)| g);
        if self.history == History::Window {
            self.stacks.clear();
            self.index.clear();
            self.last = None;
        }
        out
    }
}

/// Options of [`reuse_trace`].
#[derive(Debug, Clone, Copy)]
pub struct ReuseOptions {
    pub block_size: u64,
    pub per_tenant: bool,
    /// Window length in seconds (None: the whole trace is one window).
    pub window: Option<f64>,
    pub history: History,
}

impl Default for ReuseOptions {
    fn default() -> Self {
        ReuseOptions {
            block_size: 4096,
            per_tenant: false,
            window: None,
            history: History::All,
        }
    }
}

impl ReuseOptions {
    pub fn validate(&self) -> Result<()> {
        if self.block_size == 0 {
            return Err(Error::config("block size must be positive"));
        }
        if let Some(w) = self.window {
            if !(w.is_finite() && w > 0.0) {
                return Err(Error::config(format!(
                    "--window must be a positive number of seconds, not {w}"
                )));
            }
        }
        Ok(())
    }
}

/// One row of the report: a tenant (or all tenants) over the whole trace or
/// one window. Field names are a contract (JSON of `trace reuse`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReuseSummary {
    /// None (JSON null) when tenants are pooled.
    pub tenant: Option<u32>,
    pub accesses: u64,
    pub classes: AccessClasses,
    pub trd_size: u64,
    pub urd_size: u64,
    pub trd_p99_size: u64,
    pub urd_p99_size: u64,
    /// Reuses behind each size: RAR+RAW+WAR+WAW and RAR+RAW.
    pub trd_reuses: u64,
    pub urd_reuses: u64,
    /// (WAR + WAW) / accesses, what ECI's write-policy rule compares with θ.
    pub write_ratio: Option<f64>,
}

/// Sums over the rows of a report or window: what TRD and URD sizing would
/// ask of a cache holding one partition per row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReuseTotals {
    pub rows: u64,
    pub accesses: u64,
    pub trd_size: u64,
    pub urd_size: u64,
    pub trd_p99_size: u64,
    pub urd_p99_size: u64,
}

impl ReuseTotals {
    fn of(rows: &[ReuseSummary]) -> Self {
        let mut t = ReuseTotals {
            rows: rows.len() as u64,
            ..Default::default()
        };
        for r in rows {
            t.accesses += r.accesses;
            t.trd_size += r.trd_size;
            t.urd_size += r.urd_size;
            t.trd_p99_size += r.trd_p99_size;
            t.urd_p99_size += r.urd_p99_size;
        }
        t
    }
}

/// One window of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReuse {
    /// Index k: the window covers [start, end) = [t0 + k·W, t0 + (k+1)·W).
    pub window: u64,
    pub start: f64,
    pub end: f64,
    pub tenants: Vec<ReuseSummary>,
    pub totals: ReuseTotals,
}

/// What `blocklab trace reuse` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReuseReport {
    pub block_size: u64,
    pub per_tenant: bool,
    pub window_s: Option<f64>,
    pub history: &'static str,
    pub requests: u64,
    /// Block accesses.
    pub accesses: u64,
    /// The whole trace, one row per tenant (or one pooled row).
    pub tenants: Vec<ReuseSummary>,
    pub totals: ReuseTotals,
    /// Per window, when a window length was given.
    pub windows: Option<Vec<WindowReuse>>,
    /// Malformed records skipped (`skip_bad`).
    pub skipped: u64,
}

/// A closed window: its index and bounds, and the profile of every tenant
/// active in it (ascending tenant; tenant 0 when pooled).
#[derive(Debug, Clone)]
pub struct ClosedWindow {
    pub window: u64,
    pub start: f64,
    pub end: f64,
    pub profiles: Vec<(u32, ReuseProfile)>,
}

/// Feeds requests to a [`ReuseTracker`], cutting windows by time: the
/// streaming core of [`reuse_trace`] and of the partition plan, usable on
/// any request stream. Without a window length the whole stream is window 0,
/// from its earliest to its latest request time.
pub struct WindowedReuse {
    opts: ReuseOptions,
    tracker: ReuseTracker,
    /// (t0, current window index) once the first request was seen.
    clock: Option<(f64, u64)>,
    earliest: f64,
    latest: f64,
    pub requests: u64,
    /// Block accesses.
    pub accesses: u64,
}

impl WindowedReuse {
    pub fn new(opts: ReuseOptions) -> Result<Self> {
        opts.validate()?;
        Ok(WindowedReuse {
            opts,
            // One window for the whole stream: never reset, dense is fastest.
            tracker: ReuseTracker::with_dense_limit(
                opts.per_tenant,
                opts.history,
                if opts.window.is_some() {
                    DENSE_DISTANCES
                } else {
                    usize::MAX
                },
            ),
            clock: None,
            earliest: f64::INFINITY,
            latest: f64::NEG_INFINITY,
            requests: 0,
            accesses: 0,
        })
    }

    pub fn options(&self) -> &ReuseOptions {
        &self.opts
    }

    fn close(&mut self) -> Option<ClosedWindow> {
        let profiles = self.tracker.end_window();
        if profiles.is_empty() {
            return None;
        }
        let (window, start, end) = match (self.opts.window, self.clock) {
            (Some(w), Some((t0, k))) => (k, t0 + k as f64 * w, t0 + (k + 1) as f64 * w),
            _ => (0, self.earliest, self.latest),
        };
        Some(ClosedWindow {
            window,
            start,
            end,
            profiles,
        })
    }

    /// Account one request; returns the window it closed, if any (a
    /// request past the current window closes it before being counted).
    pub fn add(&mut self, r: &crate::trace::Request) -> Result<Option<ClosedWindow>> {
        let mut closed = None;
        if let Some(w) = self.opts.window {
            match self.clock {
                None => self.clock = Some((r.time, 0)),
                Some((t0, k)) => {
                    let at = ((r.time - t0) / w).floor();
                    if at > k as f64 {
                        closed = self.close();
                        // Beyond 2^64 windows the index saturates.
                        self.clock = Some((t0, at as u64));
                    }
                }
            }
        }
        self.earliest = self.earliest.min(r.time);
        self.latest = self.latest.max(r.time);
        self.requests += 1;
        let write = r.op == Op::Write;
        for block in r.blocks(self.opts.block_size) {
            self.tracker.access(r.tenant, block, write)?;
            self.accesses += 1;
        }
        Ok(closed)
    }

    /// Close the last window.
    pub fn finish(&mut self) -> Option<ClosedWindow> {
        self.close()
    }
}

/// Builds a [`ReuseReport`] from a request stream.
pub struct ReuseAnalysis {
    w: WindowedReuse,
    totals: FxHashMap<u32, ReuseProfile>,
    windows: Vec<WindowReuse>,
}

impl ReuseAnalysis {
    pub fn new(opts: ReuseOptions) -> Result<Self> {
        Ok(ReuseAnalysis {
            w: WindowedReuse::new(opts)?,
            totals: FxHashMap::default(),
            windows: Vec::new(),
        })
    }

    fn tenant_of(&self, group: u32) -> Option<u32> {
        self.w.opts.per_tenant.then_some(group)
    }

    fn take(&mut self, c: Option<ClosedWindow>) {
        let Some(c) = c else { return };
        if self.w.opts.window.is_some() {
            let rows: Vec<ReuseSummary> = c.profiles.iter().map(|(g, p)| p.summary(self.tenant_of(*g))).collect();
            self.windows.push(WindowReuse {
                window: c.window,
                start: c.start,
                end: c.end,
                totals: ReuseTotals::of(&rows),
                tenants: rows,
            });
        }
        for (g, p) in c.profiles {
            match self.totals.entry(g) {
                std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().merge(&p),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(p);
                }
            }
        }
    }

    /// Account one request.
    pub fn add(&mut self, r: &crate::trace::Request) -> Result<()> {
        let c = self.w.add(r)?;
        self.take(c);
        Ok(())
    }

    pub fn finish(mut self, skipped: u64) -> ReuseReport {
        let c = self.w.finish();
        self.take(c);
        let mut groups: Vec<(u32, ReuseProfile)> = self.totals.drain().collect();
        groups.sort_unstable_by_key(|&(g, _)| g);
        let tenants: Vec<ReuseSummary> = groups.iter().map(|(g, p)| p.summary(self.tenant_of(*g))).collect();
        let o = self.w.opts;
        ReuseReport {
            block_size: o.block_size,
            per_tenant: o.per_tenant,
            window_s: o.window,
            history: o.history.name(),
            requests: self.w.requests,
            accesses: self.w.accesses,
            totals: ReuseTotals::of(&tenants),
            tenants,
            windows: o.window.map(|_| self.windows),
            skipped,
        }
    }
}

/// The reuse report of the trace at `path`, in one streaming pass.
pub fn reuse_trace(path: &Path, trace: &TraceOptions, opts: &ReuseOptions) -> Result<ReuseReport> {
    let mut a = ReuseAnalysis::new(*opts)?;
    let mut reader = open(path, trace)?;
    for r in &mut reader {
        a.add(&r?)?;
    }
    Ok(a.finish(reader.skipped()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{build, Access};
    use crate::trace::Request;
    use proptest::prelude::*;

    fn req(time: f64, write: bool, block: u64, tenant: u32) -> Request {
        Request {
            time,
            op: if write { Op::Write } else { Op::Read },
            offset: block * 4096,
            len: 4096,
            tenant,
            fs: Default::default(),
        }
    }

    fn run(reqs: &[Request], opts: ReuseOptions) -> ReuseReport {
        let mut a = ReuseAnalysis::new(opts).unwrap();
        for r in reqs {
            a.add(r).unwrap();
        }
        a.finish(0)
    }

    /// The sequence rebuilt from the text of the paper's Fig. 5 (sectors as
    /// blocks): R2 R3 R4 R5 W1 W2 R1. TRD: W2 re-touches block 2 five
    /// requests later, {3,4,5,1,2} → 5 blocks; URD: R1 reads block 1 written
    /// two requests before, {2,1} → 2 blocks.
    #[test]
    fn paper_worked_example() {
        let seq = [
            (false, 2),
            (false, 3),
            (false, 4),
            (false, 5),
            (true, 1),
            (true, 2),
            (false, 1),
        ];
        let reqs: Vec<Request> = seq
            .iter()
            .enumerate()
            .map(|(i, &(w, b))| req(i as f64, w, b, 0))
            .collect();
        let r = run(&reqs, ReuseOptions::default());
        let t = &r.tenants[0];
        assert_eq!(t.tenant, None);
        assert_eq!(t.accesses, 7);
        assert_eq!(
            t.classes,
            AccessClasses {
                cold_read: 4,
                cold_write: 1,
                rar: 0,
                raw: 1,
                war: 1,
                waw: 0
            }
        );
        assert_eq!((t.trd_size, t.urd_size), (5, 2));
        assert_eq!((t.trd_p99_size, t.urd_p99_size), (5, 2));
        assert_eq!((t.trd_reuses, t.urd_reuses), (2, 1));
        assert_eq!(t.write_ratio, Some(1.0 / 7.0));
        // The paper's claim: 2 blocks of write-allocate LRU give the same
        // read hits as 5.
        let keys: Vec<(u64, bool)> = seq.iter().map(|&(w, b)| (b, w)).collect();
        assert_eq!(read_hits(&keys, 2), 1);
        assert_eq!(read_hits(&keys, 5), 1);
        assert_eq!(read_hits(&keys, 1), 0);
    }

    /// Read hits of a write-allocate LRU cache of `c` blocks.
    fn read_hits(keys: &[(u64, bool)], c: u64) -> u64 {
        let mut p = build("lru", c as usize).unwrap();
        keys.iter()
            .filter(|&&(k, w)| {
                let hit = p.access(&Access {
                    block: k,
                    next_use: crate::cache::NEVER,
                    write: w,
                });
                hit && !w
            })
            .count() as u64
    }

    fn all_hits(keys: &[(u64, bool)], c: u64) -> u64 {
        let mut p = build("lru", c as usize).unwrap();
        keys.iter().filter(|&&(k, _)| p.access(&Access::read(k))).count() as u64
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut h = DistanceHistogram::default();
        for d in 1..=100 {
            h.add(d);
        }
        assert_eq!(h.percentile(9_900), 99);
        assert_eq!(h.percentile(10_000), 100);
        assert_eq!(h.percentile(5_000), 50);
        assert_eq!(h.percentile(1), 1);
        h.add(1000);
        // 101 reuses: ceil(0.99 · 101) = 100 → the 100th smallest.
        assert_eq!(h.percentile(9_900), 100);
        assert_eq!(h.max(), 1000);
        assert_eq!(h.within(99), 99);
        assert_eq!(h.within(5000), 101);
        assert_eq!(DistanceHistogram::default().percentile(9_900), 0);
        assert_eq!(DistanceHistogram::default().max(), 0);
    }

    #[test]
    fn windows_and_history() {
        // Tenant 3: block 1 read at 0 s and 1 s, block 2 at 1.5 s, block 1
        // read again at 12 s (window 1; window length 10 s). Tenant 5 writes
        // in window 2 only.
        let reqs = [
            req(0.0, false, 1, 3),
            req(1.0, false, 1, 3),
            req(1.5, true, 2, 3),
            req(12.0, false, 1, 3),
            req(25.0, true, 7, 5),
            req(26.0, true, 7, 5),
        ];
        let opts = ReuseOptions {
            per_tenant: true,
            window: Some(10.0),
            ..Default::default()
        };
        let r = run(&reqs, opts);
        let w = r.windows.as_ref().unwrap();
        assert_eq!(w.iter().map(|w| w.window).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!((w[1].start, w[1].end), (10.0, 20.0));
        // History all: the re-read in window 1 reaches back over block 2.
        assert_eq!(w[1].tenants[0].tenant, Some(3));
        assert_eq!((w[1].tenants[0].urd_size, w[1].tenants[0].classes.rar), (2, 1));
        assert_eq!(w[2].tenants[0].tenant, Some(5));
        assert_eq!((w[2].tenants[0].trd_size, w[2].tenants[0].urd_size), (1, 0));
        // Whole trace per tenant.
        assert_eq!(r.tenants.len(), 2);
        assert_eq!((r.tenants[0].trd_size, r.tenants[0].urd_size), (2, 2));
        assert_eq!(r.totals.trd_size, 3);
        // History window: window 1's re-read is a cold read.
        let r = run(
            &reqs,
            ReuseOptions {
                history: History::Window,
                ..opts
            },
        );
        let w1 = &r.windows.as_ref().unwrap()[1].tenants[0];
        assert_eq!((w1.classes.cold_read, w1.urd_size), (1, 0));
        // No window: no window list.
        assert!(run(&reqs, ReuseOptions::default()).windows.is_none());
    }

    #[test]
    fn bad_options() {
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let o = ReuseOptions {
                window: Some(w),
                ..Default::default()
            };
            assert!(ReuseAnalysis::new(o).is_err(), "{w}");
        }
        assert!(ReuseAnalysis::new(ReuseOptions {
            block_size: 0,
            ..Default::default()
        })
        .is_err());
        assert!(History::parse("some").unwrap_err().to_string().contains("all, window"));
    }

    /// Brute force: for each access, the previous access to the same key (of
    /// the same stack), the distinct keys since, and its class; grouped by
    /// the window of the access.
    fn brute(reqs: &[Request], opts: ReuseOptions) -> ReuseReport {
        struct Acc {
            group: u32,
            key: u64,
            write: bool,
            window: u64,
        }
        let mut accs: Vec<Acc> = Vec::new();
        let mut t0 = None;
        let mut k = 0u64;
        for r in reqs {
            if let Some(w) = opts.window {
                let t0 = *t0.get_or_insert(r.time);
                k = k.max(((r.time - t0) / w).floor().max(0.0) as u64);
            }
            for b in r.blocks(opts.block_size) {
                let (group, key) = if opts.per_tenant {
                    (r.tenant, b)
                } else {
                    (0, ((r.tenant as u64) << 40) | b)
                };
                accs.push(Acc {
                    group,
                    key,
                    write: r.op == Op::Write,
                    window: k,
                });
            }
        }
        let mut per: std::collections::BTreeMap<(u64, u32), (AccessClasses, Vec<u64>, Vec<u64>)> = Default::default();
        for (i, a) in accs.iter().enumerate() {
            let same_stack = |b: &Acc| b.group == a.group && (opts.history == History::All || b.window == a.window);
            let prev = (0..i).rev().find(|&j| same_stack(&accs[j]) && accs[j].key == a.key);
            let e = per.entry((a.window, a.group)).or_default();
            let class = AccessClass::of(prev.map(|j| accs[j].write), a.write);
            e.0.count(class);
            if let Some(j) = prev {
                let mut keys: Vec<u64> = accs[j + 1..=i]
                    .iter()
                    .filter(|b| same_stack(b))
                    .map(|b| b.key)
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                let d = keys.len() as u64;
                e.1.push(d);
                if !a.write {
                    e.2.push(d);
                }
            }
        }
        let row = |g: u32, c: &AccessClasses, trd: &[u64], urd: &[u64]| {
            let pct = |v: &[u64]| -> u64 {
                if v.is_empty() {
                    return 0;
                }
                let mut v = v.to_vec();
                v.sort_unstable();
                v[(99 * v.len()).div_ceil(100) - 1]
            };
            let n = c.total();
            ReuseSummary {
                tenant: opts.per_tenant.then_some(g),
                accesses: n,
                classes: *c,
                trd_size: trd.iter().copied().max().unwrap_or(0),
                urd_size: urd.iter().copied().max().unwrap_or(0),
                trd_p99_size: pct(trd),
                urd_p99_size: pct(urd),
                trd_reuses: trd.len() as u64,
                urd_reuses: urd.len() as u64,
                write_ratio: (n > 0).then(|| (c.war + c.waw) as f64 / n as f64),
            }
        };
        let mut whole: std::collections::BTreeMap<u32, (AccessClasses, Vec<u64>, Vec<u64>)> = Default::default();
        let mut windows: Vec<WindowReuse> = Vec::new();
        for (&(k, g), (c, trd, urd)) in &per {
            let e = whole.entry(g).or_default();
            e.0.merge(c);
            e.1.extend(trd);
            e.2.extend(urd);
            if let Some(w) = opts.window {
                if windows.last().is_none_or(|x| x.window != k) {
                    windows.push(WindowReuse {
                        window: k,
                        start: t0.unwrap() + k as f64 * w,
                        end: t0.unwrap() + (k + 1) as f64 * w,
                        tenants: vec![],
                        totals: Default::default(),
                    });
                }
                windows.last_mut().unwrap().tenants.push(row(g, c, trd, urd));
            }
        }
        for w in &mut windows {
            w.totals = ReuseTotals::of(&w.tenants);
        }
        let tenants: Vec<ReuseSummary> = whole.iter().map(|(&g, (c, t, u))| row(g, c, t, u)).collect();
        ReuseReport {
            block_size: opts.block_size,
            per_tenant: opts.per_tenant,
            window_s: opts.window,
            history: opts.history.name(),
            requests: reqs.len() as u64,
            accesses: accs.len() as u64,
            totals: ReuseTotals::of(&tenants),
            tenants,
            windows: opts.window.map(|_| windows),
            skipped: 0,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Every figure of the report against the brute force, for any mix
        /// of per-tenant, window and history.
        #[test]
        fn report_equals_brute_force(
            spec in prop::collection::vec((0u64..30, 1u64..3, any::<bool>(), 0u32..3, 0.0f64..4.0), 0..120),
            per_tenant in any::<bool>(),
            window in prop::option::of(prop::sample::select(vec![1.0f64, 2.5, 10.0])),
            by_window in any::<bool>(),
        ) {
            let mut t = 0.0;
            let reqs: Vec<Request> = spec.iter().map(|&(b, n, w, tenant, dt)| {
                // Mostly ascending times, with some steps back (unordered traces).
                t += dt - 0.5;
                Request { time: t, op: if w { Op::Write } else { Op::Read }, offset: b * 4096, len: n * 4096 - 100, tenant, fs: Default::default() }
            }).collect();
            let opts = ReuseOptions {
                per_tenant,
                window,
                history: if by_window { History::Window } else { History::All },
                ..Default::default()
            };
            prop_assert_eq!(run(&reqs, opts), brute(&reqs, opts));
        }

        /// Trackers with different dense limits close identical windows.
        #[test]
        fn tracker_dense_limit_is_invisible(
            accs in prop::collection::vec((0u32..3, 0u64..20, any::<bool>(), any::<bool>()), 0..200),
            by_window in any::<bool>(),
        ) {
            let h = if by_window { History::Window } else { History::All };
            let mut a = ReuseTracker::with_dense_limit(true, h, 2);
            let mut b = ReuseTracker::with_dense_limit(true, h, usize::MAX);
            for &(t, blk, w, close) in &accs {
                prop_assert_eq!(a.access(t, blk, w).unwrap(), b.access(t, blk, w).unwrap());
                if close {
                    prop_assert_eq!(a.end_window(), b.end_window());
                }
            }
            prop_assert_eq!(a.end_window(), b.end_window());
        }

        /// The dense/sparse split of a histogram changes nothing it answers.
        #[test]
        fn histogram_split_is_invisible(
            a in prop::collection::vec(1u64..40, 0..60),
            b in prop::collection::vec(1u64..40, 0..60),
            limit in 0usize..45,
            c in 0u64..45,
            bp in 1u32..=10_000,
        ) {
            let fill = |v: &[u64], limit: usize| {
                let mut h = DistanceHistogram::with_dense_limit(limit);
                v.iter().for_each(|&d| h.add(d));
                h
            };
            let (mut small, mut whole) = (fill(&a, limit), fill(&a, usize::MAX));
            small.merge(&fill(&b, usize::MAX));
            whole.merge(&fill(&b, limit));
            let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
            all.sort_unstable();
            prop_assert_eq!(&small, &whole);
            for h in [&small, &whole] {
                prop_assert_eq!(h.reuses(), all.len() as u64);
                prop_assert_eq!(h.max(), all.last().copied().unwrap_or(0));
                prop_assert_eq!(h.within(c), all.iter().filter(|&&d| d <= c).count() as u64);
                let want = if all.is_empty() { 0 } else { all[(all.len() * bp as usize).div_ceil(10_000).max(1) - 1] };
                prop_assert_eq!(h.percentile(bp), want);
                let steps = h.steps();
                prop_assert!(steps.windows(2).all(|w| w[0].0 < w[1].0));
                prop_assert_eq!(steps.last().map_or(0, |s| s.1), all.len() as u64);
            }
        }

        /// The sizes mean what they say: in a write-allocate LRU of
        /// `trd_size` blocks every reuse hits, in one block less some reuse
        /// misses; the same for `urd_size` and read reuses. URD <= TRD.
        #[test]
        fn sizes_are_the_smallest_lru_caches(spec in prop::collection::vec((0u64..25, any::<bool>()), 1..200)) {
            let reqs: Vec<Request> = spec.iter().enumerate().map(|(i, &(b, w))| req(i as f64, w, b, 0)).collect();
            let r = run(&reqs, ReuseOptions::default());
            let s = &r.tenants[0];
            prop_assert!(s.urd_size <= s.trd_size);
            let keys: Vec<(u64, bool)> = spec.iter().map(|&(b, w)| (b, w)).collect();
            if s.trd_size > 0 {
                prop_assert_eq!(all_hits(&keys, s.trd_size), s.trd_reuses);
                if s.trd_size > 1 {
                    prop_assert!(all_hits(&keys, s.trd_size - 1) < s.trd_reuses);
                }
            }
            if s.urd_size > 0 {
                prop_assert_eq!(read_hits(&keys, s.urd_size), s.urd_reuses);
                if s.urd_size > 1 {
                    prop_assert!(read_hits(&keys, s.urd_size - 1) < s.urd_reuses);
                }
            }
        }
    }
}

//! The SSD tier: an SSD cache shared by the trace's tenants, between the
//! host cache layers and the array (`[tier]` in a stack file). What it does
//! is ECI-Cache's (Ahmadian, Mutlu, Asadi, SIGMETRICS 2018) and its
//! baseline Centaur's, beside what production SSD caches ship:
//!
//! * [`frames`] — the SSD's frames, per-partition LRU, dirty order, resize;
//! * [`partitioner`] — how the SSD is shared: `global`, `static`;
//!   [`reuse_sized`] — `centaur` (traditional reuse distance) and `eci`
//!   (useful reuse distance), re-sized every window by `analysis::sizing`
//!   and `analysis::partition`;
//! * [`mode`] — the per-tenant write policies (`wb`, `wt`, `ro`, `wa`, `wo`,
//!   `pt`) and ECI's adaptive choice (`analysis::write_policy`);
//! * [`admission`] — promotion after N accesses (Open CAS), sequential cutoff
//!   (bcache, Open CAS); cleaning with watermarks (dm-writecache) is here;
//! * [`report`] — the `tier` object of the result.
//!
//! **Tenants.** A block's tenant is read off the stack's address map
//! (`AddressMap::tenant_of`): `concat` and `key` give every tenant its own
//! range of stack blocks, so a block's tenant never depends on who asks (a
//! destage from a cache layer above carries no request). With `ignore`
//! every tenant addresses one volume: the tier sees one tenant, 0.
//!
//! **Decisions and time.** Every decision is made when an I/O reaches the
//! tier, block by block in address order, so the counted and the timed
//! executor make the same ones (open replay: same order). Windows follow
//! the trace's clock (the time of the user requests): the first request of
//! window k+1 closes window k, as `analysis::partition_plan` does, and the
//! decisions of window k apply from there on. Background I/O (destages of
//! the layers above) belongs to the window in progress.
//!
//! **Plans (timed).** The SSD is a device of the executor (disk `base` =
//! after the target's). A request waits for its SSD reads (hits), its
//! array reads (misses), its SSD writes (write-back, write-through) and its
//! array writes; a hit on a block whose fetch is still in flight reads the
//! SSD once that fetch has completed. The fill of a read miss is background work that
//! starts when the request's plan completes. A destage (eviction of a dirty
//! block, a partition shrinking, cleaning, the final flush) is background
//! work: SSD read, then the array write. The frame of an evicted block is
//! reused at once (as if its data moved to a write-behind buffer).
//!
//! **Latency without time.** Besides the executor's response times, the
//! tier keeps two latency models, computed from the decisions (so the same
//! in both executors): ours, per request (`latency_ms`: a request that
//! reaches the array costs `hdd_ms`, one served by the SSD alone `ssd_ms`,
//! so a read-only tenant's writes cost `hdd_ms`), and the paper's Eq. 2 per
//! block access (`eq2_latency_ms`: from the read hit ratio alone, every
//! write at `hdd_ms` whatever the policy; [`report::eq2_latency_ms`]).

pub mod admission;
pub mod frames;
pub mod mode;
pub mod partitioner;
pub mod report;
pub mod reuse_sized;
pub mod spec;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use self::admission::{Promotion, SequentialCutoff};
use self::frames::{Frames, Victim};
use self::mode::{Mode, ModeRule};
use self::partitioner::Partitioner;
use self::report::{eq2_latency_ms, ModelLatency, TierCounts, TierReport, TierTenant, TierWindow, WindowTenant};
use super::address::AddressMap;
use super::layer::{Below, Class, Cx, Deferred, Exec, Io, Layer};
use super::result::{DeviceFigures, StackResult};
use super::spec::Origin;
use crate::analysis::reuse::{History, ReuseTracker};
use crate::analysis::write_policy::{AdaptiveWritePolicy, WritePolicy};
use crate::array::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use crate::device::DeviceModel;
use crate::error::{Error, Result};
use crate::timed::executor::PlanId;
use crate::trace::Op;

/// Everything a tier is made of (`[tier]`, resolved by `stack::build`).
pub struct TierConfig {
    /// The stack file (errors of the timed pass name its keys).
    pub origin: Origin,
    pub block_size: u64,
    /// SSD blocks.
    pub size: u64,
    pub partitioner: Box<dyn Partitioner>,
    pub window_s: f64,
    pub solver_name: String,
    pub history: History,
    pub default_rule: ModeRule,
    pub tenant_rules: BTreeMap<u32, ModeRule>,
    pub theta: f64,
    pub promote_after: u32,
    pub promote_trigger: f64,
    /// Bytes (0: no cutoff).
    pub sequential_cutoff: u64,
    /// (high, low) watermarks of dirty blocks per partition.
    pub clean: Option<(f64, f64)>,
    pub flush: bool,
    /// The SSD's model (resolved path or `const:`), for the timed executor.
    pub model: Option<String>,
    pub ssd_ms: f64,
    pub hdd_ms: f64,
    pub ssd_cost_per_gb: f64,
    pub base_cost: f64,
    pub addr: AddressMap,
    /// Tag of this layer's background work (`runtime::layer_tag`).
    pub tag: u64,
}

/// A value integrated over the trace's clock (for time-averaged allocations).
#[derive(Debug, Clone, Copy, Default)]
struct TimeAvg {
    value: u64,
    since: f64,
    area: f64,
}

impl TimeAvg {
    fn starting(value: u64, now: f64) -> Self {
        TimeAvg {
            value,
            since: now,
            area: 0.0,
        }
    }
    fn set(&mut self, value: u64, now: f64) {
        self.area += self.value as f64 * (now - self.since).max(0.0);
        self.since = now;
        self.value = value;
    }
    /// Mean over [start, end] (the value before `since` counted as 0).
    fn mean(&self, start: f64, end: f64) -> f64 {
        let span = end - start;
        if span <= 0.0 {
            return self.value as f64;
        }
        (self.area + self.value as f64 * (end - self.since).max(0.0)) / span
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct LatencySums {
    reads: u64,
    read_ms: f64,
    writes: u64,
    write_ms: f64,
}

impl LatencySums {
    fn add(&mut self, o: &LatencySums) {
        self.reads += o.reads;
        self.read_ms += o.read_ms;
        self.writes += o.writes;
        self.write_ms += o.write_ms;
    }
    fn report(&self) -> ModelLatency {
        let mean = |s: f64, n: u64| if n > 0 { s / n as f64 } else { 0.0 };
        ModelLatency {
            requests: self.reads + self.writes,
            latency_ms: mean(self.read_ms + self.write_ms, self.reads + self.writes),
            read_requests: self.reads,
            read_latency_ms: mean(self.read_ms, self.reads),
            write_requests: self.writes,
            write_latency_ms: mean(self.write_ms, self.writes),
        }
    }
}

struct Tenant {
    tenant: u32,
    part: usize,
    rule: ModeRule,
    mode: Mode,
    counts: TierCounts,
    /// At the last window's end (the timeline's per-window figures).
    at_window: TierCounts,
    latency: LatencySums,
    at_window_latency: LatencySums,
    quota: TimeAvg,
    held: TimeAvg,
    read_only_windows: u64,
}

/// The SSD tier layer.
pub struct TierLayer {
    cfg: TierConfig,
    frames: Frames,
    /// `global`: the one partition.
    shared: Option<usize>,
    tenants: Vec<Tenant>,
    index: FxHashMap<u32, usize>,
    tracker: Option<ReuseTracker>,
    adaptive: AdaptiveWritePolicy,
    promotion: Promotion,
    cutoff: Option<SequentialCutoff>,
    /// (t0, current window index) once a request was seen.
    clock: Option<(f64, u64)>,
    start: Option<f64>,
    now: f64,
    /// Timed runs: cached blocks whose fetch has not completed, by the plan fetching them.
    inflight: FxHashMap<u64, PlanId>,
    windows: u64,
    infeasible: u64,
    timeline: Vec<TierWindow>,
    /// The SSD in the executor: disk index and sectors-per-unit factor.
    base: u32,
    unit: u64,
    ssd_read_ops: u64,
    ssd_write_ops: u64,
    ssd_read_blocks: u64,
    ssd_write_blocks: u64,
    // Reused per I/O.
    hit_frames: Vec<u32>,
    waits: Vec<PlanId>,
    array_reads: Vec<u64>,
    array_writes: Vec<u64>,
    ssd_writes: Vec<u32>,
    fills: Vec<u32>,
    destage: Vec<(u64, u32)>,
    touched: Vec<usize>,
    /// Real bytes: (block, frame) of the read misses filled, kept once the
    /// request's contents are in.
    kept: Vec<(u64, u32)>,
    /// The layer's index in the stack: the address of its store in a data path.
    layer: usize,
}

/// Contiguous runs `(first, length)` of sorted values.
fn runs<T: Copy + Into<u64>>(v: &[T]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let first: u64 = (*v.get(i)?).into();
        let mut n = 1u64;
        while i + (n as usize) < v.len() && v[i + n as usize].into() == first + n {
            n += 1;
        }
        i += n as usize;
        Some((first, n))
    })
}

/// Runs per background plan at most (plans have 16-bit node ids).
const RUNS_PER_PLAN: usize = 1024;

impl TierLayer {
    pub fn new(cfg: TierConfig) -> Result<Self> {
        let mut frames = Frames::new(cfg.size);
        let shared = if cfg.partitioner.shared() {
            let p = frames.add_part();
            frames.set_quota(p, cfg.size, &mut Vec::new())?;
            Some(p)
        } else {
            None
        };
        let adaptive =
            cfg.default_rule == ModeRule::Adaptive || cfg.tenant_rules.values().any(|r| *r == ModeRule::Adaptive);
        let tracker = (adaptive || cfg.partitioner.needs_profiles()).then(|| ReuseTracker::new(true, cfg.history));
        Ok(TierLayer {
            frames,
            shared,
            tenants: Vec::new(),
            index: FxHashMap::default(),
            tracker,
            adaptive: AdaptiveWritePolicy::new(cfg.theta)?,
            promotion: Promotion::new(cfg.promote_after, cfg.promote_trigger),
            cutoff: (cfg.sequential_cutoff > 0).then(|| SequentialCutoff::new(cfg.sequential_cutoff)),
            clock: None,
            start: None,
            now: 0.0,
            inflight: FxHashMap::default(),
            windows: 0,
            infeasible: 0,
            timeline: Vec::new(),
            base: 0,
            unit: 1,
            ssd_read_ops: 0,
            ssd_write_ops: 0,
            ssd_read_blocks: 0,
            ssd_write_blocks: 0,
            hit_frames: Vec::new(),
            waits: Vec::new(),
            array_reads: Vec::new(),
            array_writes: Vec::new(),
            ssd_writes: Vec::new(),
            fills: Vec::new(),
            destage: Vec::new(),
            touched: Vec::new(),
            kept: Vec::new(),
            layer: super::data::layer_of(cfg.tag),
            cfg,
        })
    }

    /// Dirty blocks in the SSD now (tests).
    pub fn dirty_blocks(&self) -> Vec<u64> {
        self.frames.dirty_blocks().into_iter().map(|x| x.0).collect()
    }

    /// Σ of the partitions' quotas now (tests).
    pub fn allocated(&self) -> u64 {
        self.frames.capacity() - self.frames.unallocated()
    }

    /// The tenant index of `tenant`, creating its state (and partition) on first sight.
    fn tenant(&mut self, tenant: u32) -> Result<usize> {
        if let Some(&i) = self.index.get(&tenant) {
            return Ok(i);
        }
        let (part, quota) = match self.shared {
            Some(p) => (p, 0),
            None => {
                let p = self.frames.add_part();
                let q = self.cfg.partitioner.initial(tenant, self.frames.unallocated());
                self.frames.set_quota(p, q, &mut Vec::new())?;
                (p, q)
            }
        };
        let rule = self
            .cfg
            .tenant_rules
            .get(&tenant)
            .copied()
            .unwrap_or(self.cfg.default_rule);
        let i = self.tenants.len();
        self.tenants.push(Tenant {
            tenant,
            part,
            rule,
            mode: rule.initial(),
            counts: TierCounts::default(),
            at_window: TierCounts::default(),
            latency: LatencySums::default(),
            at_window_latency: LatencySums::default(),
            quota: TimeAvg::starting(quota, self.now),
            held: TimeAvg::starting(0, self.now),
            read_only_windows: 0,
        });
        self.index.insert(tenant, i);
        Ok(i)
    }

    fn held_change(&mut self, ti: usize, up: bool) {
        let t = &mut self.tenants[ti];
        let v = if up { t.held.value + 1 } else { t.held.value - 1 };
        t.held.set(v, self.now);
    }

    /// A block left the SSD (evicted, given back, invalidated). On real
    /// bytes, a dirty block to destage leaves its frame now (the frame may
    /// be reused before the destage goes below).
    fn gone(&mut self, v: &Victim, destage: bool, cx: &mut Cx) -> Result<()> {
        if let Some(d) = cx.data() {
            if v.dirty && destage {
                d.evict_dirty(self.layer, v.block, Some(v.frame as u64))?;
            } else {
                d.forget(self.layer, v.block, Some(v.frame as u64));
            }
        }
        self.held_change(v.owner as usize, false);
        self.inflight.remove(&v.block);
        if v.dirty && destage {
            let c = &mut self.tenants[v.owner as usize].counts;
            c.destaged += 1;
            c.ssd_reads += 1;
            c.array_writes += 1;
            self.destage.push((v.block, v.frame));
        }
        Ok(())
    }

    /// Whether a miss of `block` by tenant `ti` may be inserted now.
    fn admit(&mut self, ti: usize, block: u64, bypass: bool) -> bool {
        let p = self.tenants[ti].part;
        let q = self.frames.quota(p);
        if bypass || q == 0 {
            return false;
        }
        let occupancy = self.frames.len(p) as f64 / q as f64;
        self.promotion.admit(block, occupancy)
    }

    /// Insert `block` for tenant `ti` (admitted); returns its frame.
    fn insert(&mut self, ti: usize, block: u64, dirty: bool, cx: &mut Cx) -> Result<u32> {
        let p = self.tenants[ti].part;
        let (frame, victim) = self.frames.insert(p, block, ti as u32, dirty)?;
        if let Some(v) = victim {
            self.gone(&v, true, cx)?;
        }
        self.held_change(ti, true);
        self.tenants[ti].counts.ssd_writes += 1;
        Ok(frame)
    }

    /// The trace's clock reached `time`: close the window it ended, if any.
    fn advance(&mut self, time: f64, cx: &mut Cx, below: &mut Below) -> Result<()> {
        if self.start.is_none() {
            self.start = Some(time);
            self.now = time;
        }
        self.now = self.now.max(time);
        match self.clock {
            None => self.clock = Some((time, 0)),
            Some((t0, k)) => {
                let at = ((time - t0) / self.cfg.window_s).floor();
                if at > k as f64 {
                    self.close_window(k, cx, below)?;
                    self.clock = Some((t0, at as u64));
                }
            }
        }
        Ok(())
    }

    /// Window `k` is over: re-size the partitions, choose the write policies.
    fn close_window(&mut self, k: u64, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let profiles = self.tracker.as_mut().map(|t| t.end_window()).unwrap_or_default();
        self.windows += 1;
        let mut known: Vec<u32> = self.tenants.iter().map(|t| t.tenant).collect();
        known.sort_unstable();
        let r = self.cfg.partitioner.resize(&profiles, &known)?;
        if !r.feasible {
            self.infeasible += 1;
        }
        // Shrink first (giving frames back), then grow.
        let mut changes: Vec<(usize, u64)> = Vec::new();
        for &(t, q) in &r.quotas {
            let ti = self.tenant(t)?;
            if self.frames.quota(self.tenants[ti].part) != q {
                changes.push((ti, q));
            }
        }
        changes.sort_by_key(|&(ti, q)| (q >= self.frames.quota(self.tenants[ti].part), self.tenants[ti].tenant));
        let mut victims = Vec::new();
        for (ti, q) in changes {
            self.frames.set_quota(self.tenants[ti].part, q, &mut victims)?;
            let now = self.now;
            self.tenants[ti].quota.set(q, now);
        }
        for v in &victims {
            self.gone(v, true, cx)?;
        }
        for (t, p) in &profiles {
            let ti = self.tenant(*t)?;
            if self.tenants[ti].rule == ModeRule::Adaptive {
                let w = self.adaptive.end_window(*t, &p.classes);
                self.tenants[ti].mode = w.into();
                if w == WritePolicy::ReadOnly {
                    self.tenants[ti].read_only_windows += 1;
                }
            }
        }
        self.record_window(k, &r);
        self.flush_destages(cx, below)
    }

    fn record_window(&mut self, k: u64, r: &partitioner::Resize) {
        let mut order: Vec<usize> = (0..self.tenants.len()).collect();
        order.sort_by_key(|&i| self.tenants[i].tenant);
        let mut tenants = Vec::new();
        let mut allocated = 0;
        for i in order {
            let shared = self.shared.is_some();
            let t = &mut self.tenants[i];
            let d = TierCounts {
                accesses: t.counts.accesses - t.at_window.accesses,
                reads: t.counts.reads - t.at_window.reads,
                read_hits: t.counts.read_hits - t.at_window.read_hits,
                ssd_writes: t.counts.ssd_writes - t.at_window.ssd_writes,
                ..Default::default()
            };
            t.at_window = t.counts;
            let (l, l0) = (t.latency, t.at_window_latency);
            t.at_window_latency = l;
            let requests = l.reads + l.writes - l0.reads - l0.writes;
            let ms = l.read_ms + l.write_ms - l0.read_ms - l0.write_ms;
            let alloc = if shared { t.held.value } else { t.quota.value };
            allocated += alloc;
            if d.accesses == 0 && alloc == 0 && t.held.value == 0 {
                continue;
            }
            tenants.push(WindowTenant {
                tenant: t.tenant,
                allocated_blocks: alloc,
                held_blocks: t.held.value,
                want: r
                    .allocations
                    .binary_search_by_key(&t.tenant, |a| a.tenant)
                    .ok()
                    .map(|j| r.allocations[j].want),
                write_policy: t.mode.name().to_string(),
                accesses: d.accesses,
                reads: d.reads,
                read_hits: d.read_hits,
                ssd_writes: d.ssd_writes,
                requests,
                latency_ms: if requests > 0 { ms / requests as f64 } else { 0.0 },
                eq2_latency_ms: eq2_latency_ms(&d, self.cfg.ssd_ms, self.cfg.hdd_ms),
            });
        }
        self.timeline.push(TierWindow {
            window: k,
            end_s: (k + 1) as f64 * self.cfg.window_s,
            feasible: r.feasible,
            allocated_blocks: allocated,
            tenants,
        });
    }

    /// An SSD operation of `n` frames from `first`.
    fn ssd_op(&self, kind: DiskOpKind, first: u64, n: u64, cause: Cause) -> Action {
        Action::Disk(DiskOp {
            disk: self.base,
            kind,
            block: first * self.unit,
            nblocks: (n * self.unit) as u32,
            cause,
        })
    }

    /// Tally SSD operations over `frames` (sorted in place) and, in time,
    /// push them into `plan` depending on `deps`; returns the nodes.
    fn ssd_ops(
        &mut self,
        frames: &mut [u32],
        kind: DiskOpKind,
        cause: Cause,
        plan: Option<&mut IoPlan>,
        deps: &[u16],
    ) -> Vec<u16> {
        frames.sort_unstable();
        let rs: Vec<(u64, u64)> = runs(frames).collect();
        let blocks: u64 = rs.iter().map(|r| r.1).sum();
        match kind {
            DiskOpKind::Read => {
                self.ssd_read_ops += rs.len() as u64;
                self.ssd_read_blocks += blocks;
            }
            DiskOpKind::Write => {
                self.ssd_write_ops += rs.len() as u64;
                self.ssd_write_blocks += blocks;
            }
        }
        let Some(plan) = plan else { return Vec::new() };
        rs.into_iter()
            .map(|(f, n)| plan.push(self.ssd_op(kind, f, n, cause), deps))
            .collect()
    }

    /// Write the queued destages (`self.destage`) back: background plans of
    /// an SSD read then the array write, contiguous blocks as one operation.
    fn flush_destages(&mut self, cx: &mut Cx, below: &mut Below) -> Result<()> {
        if self.destage.is_empty() {
            return Ok(());
        }
        let mut d = std::mem::take(&mut self.destage);
        d.sort_unstable();
        let timed = cx.timed;
        let blocks: Vec<u64> = d.iter().map(|x| x.0).collect();
        let all: Vec<(u64, u64)> = runs(&blocks).collect();
        let mut at = 0;
        for chunk in all.chunks(RUNS_PER_PLAN) {
            let nblocks: u64 = chunk.iter().map(|r| r.1).sum();
            let mut frames: Vec<u32> = d[at..at + nblocks as usize].iter().map(|x| x.1).collect();
            at += nblocks as usize;
            let mut child = Cx::new(&mut *cx.exec);
            let mut ssd = IoPlan::default();
            let reads = self.ssd_ops(
                &mut frames,
                DiskOpKind::Read,
                Cause::Destage,
                timed.then_some(&mut ssd),
                &[],
            );
            // The array writes start when the SSD reads are done.
            let join = if timed {
                Some(ssd.push(Action::Delay { ns: 0 }, &reads))
            } else {
                None
            };
            let io = |&(first, n): &(u64, u64)| Io::blocks(Op::Write, first, n, Cause::Destage);
            if let Some(d) = child.data() {
                // (The Ios are gathered only for a data path: counted and
                // timed runs allocate nothing more per chunk.)
                d.begin_background(self.layer, &chunk.iter().map(io).collect::<Vec<_>>());
            }
            for r in chunk {
                below.handle(&io(r), &mut child)?;
            }
            if let Some(d) = child.data() {
                d.end_background();
            }
            let array = std::mem::take(&mut child.plan);
            if let Some(j) = join {
                let base = ssd.nodes.len() as u16;
                ssd.append(array);
                for node in &mut ssd.nodes[base as usize..] {
                    if node.deps.is_empty() {
                        node.deps.push(j);
                    }
                }
            }
            let id = child.id;
            let later = std::mem::take(&mut child.deferred);
            drop(child);
            cx.deferred.push(Deferred {
                plan: ssd,
                id,
                tag: self.cfg.tag,
                class: Class::Normal,
            });
            cx.deferred.extend(later);
        }
        self.destage = d;
        self.destage.clear();
        Ok(())
    }

    /// Cleaning: a partition more than `high` dirty writes its oldest dirty
    /// blocks back until at most `low` is.
    fn clean(&mut self, p: usize, cx: &mut Cx) -> Result<()> {
        let Some((high, low)) = self.cfg.clean else {
            return Ok(());
        };
        let q = self.frames.quota(p) as f64;
        if (self.frames.dirty_len(p) as f64) <= high * q {
            return Ok(());
        }
        while self.frames.dirty_len(p) as f64 > low * q {
            let Some((f, b)) = self.frames.oldest_dirty(p) else {
                break;
            };
            self.frames.set_dirty(f, false);
            if let Some(d) = cx.data() {
                d.stage(self.layer, b, Some(f as u64))?;
            }
            let c = &mut self.tenants[self.frames.owner(f) as usize].counts;
            c.destaged += 1;
            c.ssd_reads += 1;
            c.array_writes += 1;
            self.destage.push((b, f));
        }
        Ok(())
    }

    /// Send blocks below, the whole `io` when all of its blocks go (a tier
    /// that keeps nothing is transparent), else contiguous runs.
    fn pass_below(io: &Io, blocks: &[u64], cx: &mut Cx, below: &mut Below) -> Result<()> {
        if blocks.len() as u64 == io.nblocks {
            return below.handle(io, cx);
        }
        for (first, n) in runs(blocks) {
            below.handle(&Io::blocks(io.op, first, n, io.cause), cx)?;
        }
        Ok(())
    }
}

impl Layer for TierLayer {
    fn handle(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        if let Some(o) = cx.origin {
            self.advance(o.time, cx, below)?;
        }
        if io.nblocks == 0 {
            return Ok(());
        }
        let write = io.op == Op::Write;
        let timed = cx.timed;
        let bypass = match &mut self.cutoff {
            Some(c) => c.bypass(io.op, io.first, io.nblocks, self.cfg.block_size),
            None => false,
        };
        self.hit_frames.clear();
        self.waits.clear();
        self.array_reads.clear();
        self.array_writes.clear();
        self.ssd_writes.clear();
        self.fills.clear();
        self.touched.clear();
        self.kept.clear();
        let mut last: Option<(u32, usize)> = None;
        if let Some(t) = &mut self.tracker {
            t.request(self.cfg.addr.tenant_of(io.first), io.first, io.nblocks)?;
        }
        for b in io.first..io.first + io.nblocks {
            let tenant = self.cfg.addr.tenant_of(b);
            let ti = match last {
                Some((t, i)) if t == tenant => i,
                _ => {
                    let i = self.tenant(tenant)?;
                    last = Some((tenant, i));
                    i
                }
            };
            if let Some(t) = &mut self.tracker {
                t.access(tenant, b, write)?;
            }
            let part = self.tenants[ti].part;
            if self.touched.last() != Some(&part) {
                self.touched.push(part);
            }
            let mode = self.tenants[ti].mode;
            let frame = self.frames.lookup(b);
            let c = &mut self.tenants[ti].counts;
            c.accesses += 1;
            if !write {
                c.reads += 1;
                if let Some(f) = frame {
                    c.hits += 1;
                    c.read_hits += 1;
                    c.ssd_reads += 1;
                    self.frames.touch(f);
                    self.hit_frames.push(f);
                    if let Some(d) = cx.data() {
                        d.hit(self.layer, b, Some(f as u64))?;
                    }
                    match self.inflight.get(&b) {
                        Some(&id) if !cx.exec.is_done(id) => self.waits.push(id),
                        _ => {
                            self.inflight.remove(&b);
                        }
                    }
                } else {
                    c.array_reads += 1;
                    self.array_reads.push(b);
                    if mode.fills_reads() {
                        if self.admit(ti, b, bypass) {
                            let f = self.insert(ti, b, false, cx)?;
                            self.fills.push(f);
                            if cx.moves_data {
                                self.kept.push((b, f));
                            }
                            if timed {
                                self.inflight.insert(b, cx.id);
                            }
                        } else {
                            self.tenants[ti].counts.bypassed += 1;
                        }
                    }
                }
                continue;
            }
            // A write: the cached copy, if any, gets the new data or goes.
            self.inflight.remove(&b);
            let mode = if bypass { Mode::PassThrough } else { mode };
            match (mode, frame) {
                (Mode::WriteBack | Mode::WriteOnly, Some(f)) => {
                    c.hits += 1;
                    c.ssd_writes += 1;
                    self.frames.touch(f);
                    self.frames.set_dirty(f, true);
                    self.ssd_writes.push(f);
                    if let Some(d) = cx.data() {
                        d.keep(self.layer, b, Some(f as u64))?;
                    }
                }
                (Mode::WriteThrough | Mode::WriteAround, Some(f)) => {
                    c.hits += 1;
                    c.ssd_writes += 1;
                    c.array_writes += 1;
                    self.frames.touch(f);
                    self.frames.set_dirty(f, false);
                    self.ssd_writes.push(f);
                    self.array_writes.push(b);
                    if let Some(d) = cx.data() {
                        d.keep(self.layer, b, Some(f as u64))?;
                    }
                }
                (Mode::ReadOnly | Mode::PassThrough, Some(_)) => {
                    c.array_writes += 1;
                    if bypass && !matches!(self.tenants[ti].mode, Mode::ReadOnly | Mode::PassThrough) {
                        self.tenants[ti].counts.bypassed += 1;
                    }
                    self.array_writes.push(b);
                    // The new data is in the array: the SSD's copy (dirty or not) is stale.
                    let v = self.frames.remove(b).expect("the block is cached");
                    self.gone(&v, false, cx)?;
                }
                (Mode::WriteBack | Mode::WriteOnly | Mode::WriteThrough, None) => {
                    let through = mode == Mode::WriteThrough;
                    if self.admit(ti, b, false) {
                        let f = self.insert(ti, b, !through, cx)?;
                        self.ssd_writes.push(f);
                        if let Some(d) = cx.data() {
                            d.keep(self.layer, b, Some(f as u64))?;
                        }
                        if through {
                            self.tenants[ti].counts.array_writes += 1;
                            self.array_writes.push(b);
                        }
                    } else {
                        let c = &mut self.tenants[ti].counts;
                        c.bypassed += 1;
                        c.array_writes += 1;
                        self.array_writes.push(b);
                    }
                }
                (Mode::WriteAround | Mode::ReadOnly | Mode::PassThrough, None) => {
                    let would_cache = bypass
                        && !matches!(
                            self.tenants[ti].mode,
                            Mode::ReadOnly | Mode::PassThrough | Mode::WriteAround
                        );
                    let c = &mut self.tenants[ti].counts;
                    c.array_writes += 1;
                    if would_cache {
                        c.bypassed += 1;
                    }
                    self.array_writes.push(b);
                }
            }
        }
        // The paper's latency model, per request that reached the tier.
        if cx.origin.is_some() {
            let went_below = !self.array_reads.is_empty() || !self.array_writes.is_empty();
            let ms = if went_below { self.cfg.hdd_ms } else { self.cfg.ssd_ms };
            let ti = self.tenant(self.cfg.addr.tenant_of(io.first))?;
            let l = &mut self.tenants[ti].latency;
            if write {
                l.writes += 1;
                l.write_ms += ms;
            } else {
                l.reads += 1;
                l.read_ms += ms;
            }
        }
        // What the request waits for: hits read the SSD, after the fetches
        // still bringing some of them in.
        let mut plan = IoPlan::default();
        self.waits.sort_unstable();
        self.waits.dedup();
        let awaits: Vec<u16> = if timed {
            self.waits
                .iter()
                .map(|&id| plan.push(Action::Await { plan: id }, &[]))
                .collect()
        } else {
            Vec::new()
        };
        let mut hits = std::mem::take(&mut self.hit_frames);
        self.ssd_ops(
            &mut hits,
            DiskOpKind::Read,
            Cause::User,
            timed.then_some(&mut plan),
            &awaits,
        );
        self.hit_frames = hits;
        let mut writes = std::mem::take(&mut self.ssd_writes);
        self.ssd_ops(
            &mut writes,
            DiskOpKind::Write,
            Cause::User,
            timed.then_some(&mut plan),
            &[],
        );
        self.ssd_writes = writes;
        cx.add(plan);
        if !self.array_reads.is_empty() {
            let r = std::mem::take(&mut self.array_reads);
            Self::pass_below(io, &r, cx, below)?;
            self.array_reads = r;
        }
        // Real bytes: the fills still in their frames keep what was read.
        if !self.kept.is_empty() {
            let kept = std::mem::take(&mut self.kept);
            for &(b, f) in &kept {
                if self.frames.lookup(b) == Some(f) {
                    if let Some(d) = cx.data() {
                        d.keep(self.layer, b, Some(f as u64))?;
                    }
                }
            }
            self.kept = kept;
        }
        if !self.array_writes.is_empty() {
            let w = std::mem::take(&mut self.array_writes);
            Self::pass_below(io, &w, cx, below)?;
            self.array_writes = w;
        }
        // Fills: written to the SSD once the request's data is in.
        if !self.fills.is_empty() {
            let mut fills = std::mem::take(&mut self.fills);
            let mut bg = IoPlan::default();
            let wait = timed.then(|| bg.push(Action::Await { plan: cx.id }, &[]));
            let deps: Vec<u16> = wait.into_iter().collect();
            self.ssd_ops(
                &mut fills,
                DiskOpKind::Write,
                Cause::User,
                timed.then_some(&mut bg),
                &deps,
            );
            self.fills = fills;
            if timed {
                let id = cx.exec.reserve();
                cx.deferred.push(Deferred {
                    plan: bg,
                    id,
                    tag: self.cfg.tag,
                    class: Class::Normal,
                });
            }
        }
        let touched = std::mem::take(&mut self.touched);
        for &p in &touched {
            self.clean(p, cx)?;
        }
        self.touched = touched;
        self.flush_destages(cx, below)
    }

    fn flush(&mut self, exec: &mut dyn Exec, below: &mut Below) -> Result<()> {
        if !self.cfg.flush {
            return Ok(());
        }
        // The flush is nobody's request: its work is submitted at once.
        let mut cx = Cx::new(exec);
        for (b, f, owner) in self.frames.dirty_blocks() {
            self.frames.set_dirty(f, false);
            if let Some(d) = cx.data() {
                d.stage(self.layer, b, Some(f as u64))?;
            }
            let c = &mut self.tenants[owner as usize].counts;
            c.destaged += 1;
            c.ssd_reads += 1;
            c.array_writes += 1;
            self.destage.push((b, f));
        }
        self.flush_destages(&mut cx, below)?;
        cx.submit_deferred()
    }

    /// Blocks in the SSD (the real executor checks its cache device holds as many).
    fn resident(&self) -> Option<usize> {
        Some(self.frames.used() as usize)
    }

    fn persistent_dirty(&self) -> Vec<u64> {
        self.dirty_blocks()
    }

    fn devices(&mut self, base: u32, sectors_per_block: u64) -> Result<Vec<Box<dyn DeviceModel>>> {
        let o = &self.cfg.origin;
        let model = self.cfg.model.as_ref().ok_or_else(|| {
            o.err(
                "tier.model",
                "the timed executor needs the SSD's device model (e.g. `examples/disks/ssd.toml` or `const:0.1`)",
            )
        })?;
        let m = crate::device::load_model(model).map_err(|e| o.err("tier.model", e))?;
        let bs = self.cfg.block_size;
        let need = self.frames.capacity().saturating_mul(bs);
        let have = m.capacity_sectors().saturating_mul(512);
        if need > have {
            return Err(o.err(
                "tier.size",
                format!(
                    "{} blocks ({need} B) do not fit the SSD model's {have} B",
                    self.frames.capacity()
                ),
            ));
        }
        let per_block = bs / 512;
        if sectors_per_block == 0 || !per_block.is_multiple_of(sectors_per_block) {
            return Err(Error::config(format!(
                "internal: the executor's unit of {sectors_per_block} sectors does not divide a block"
            )));
        }
        self.base = base;
        self.unit = per_block / sectors_per_block;
        Ok(vec![m])
    }

    fn report(&self, out: &mut StackResult) {
        let start = self.start.unwrap_or(0.0);
        let end = self.now;
        let bs = self.cfg.block_size;
        let shared = self.shared.is_some();
        let n = self.tenants.len().max(1) as f64;
        let mut order: Vec<&Tenant> = self.tenants.iter().collect();
        order.sort_by_key(|t| t.tenant);
        let mut counts = TierCounts::default();
        let mut lat = LatencySums::default();
        let mut mean_alloc = 0.0;
        let mut alloc = 0;
        let mut dirty_total = 0;
        let mut dirty: FxHashMap<u32, u64> = FxHashMap::default();
        for (_, _, owner) in self.frames.dirty_blocks() {
            *dirty.entry(owner).or_insert(0) += 1;
        }
        let cost_of = |blocks: f64, base: f64| self.cfg.ssd_cost_per_gb * blocks * bs as f64 / 1e9 + base;
        let per_cost = |ms: f64, cost: f64| (ms > 0.0 && cost > 0.0).then(|| 1.0 / ms / cost);
        let ppc = |latency: &ModelLatency, cost: f64| per_cost(latency.latency_ms, cost);
        let eq2 = |c: &TierCounts| eq2_latency_ms(c, self.cfg.ssd_ms, self.cfg.hdd_ms);
        let tenants = order
            .iter()
            .map(|t| {
                let (a, m) = if shared {
                    (t.held.value, t.held.mean(start, end))
                } else {
                    (t.quota.value, t.quota.mean(start, end))
                };
                counts.add(&t.counts);
                lat.add(&t.latency);
                mean_alloc += m;
                alloc += a;
                let d = dirty.get(&(self.index[&t.tenant] as u32)).copied().unwrap_or(0);
                dirty_total += d;
                let latency = t.latency.report();
                let tenant_cost = cost_of(m, self.cfg.base_cost / n);
                TierTenant {
                    tenant: t.tenant,
                    allocated_blocks: a,
                    mean_allocated_blocks: m,
                    held_blocks: t.held.value,
                    dirty_blocks: d,
                    counts: t.counts,
                    write_policy: t.mode.name().to_string(),
                    read_only_windows: t.read_only_windows,
                    performance_per_cost: ppc(&latency, tenant_cost),
                    eq2_latency_ms: eq2(&t.counts),
                    eq2_performance_per_cost: per_cost(eq2(&t.counts), tenant_cost),
                    latency,
                }
            })
            .collect();
        let latency = lat.report();
        let cost = cost_of(mean_alloc, self.cfg.base_cost);
        let ssd_disk = out.devices.len() as u32;
        out.devices.push(DeviceFigures {
            disk: ssd_disk,
            ops: self.ssd_read_ops + self.ssd_write_ops,
            reads: self.ssd_read_ops,
            writes: self.ssd_write_ops,
            read_blocks: self.ssd_read_blocks,
            write_blocks: self.ssd_write_blocks,
            ..Default::default()
        });
        out.tier = Some(TierReport {
            size: self.frames.capacity(),
            partitioner: self.cfg.partitioner.kind().name().to_string(),
            block_size: bs,
            window_s: self.cfg.window_s,
            solver: self.cfg.solver_name.clone(),
            theta: self.cfg.theta,
            counts,
            allocated_blocks: alloc,
            mean_allocated_blocks: mean_alloc,
            dirty_blocks: dirty_total,
            windows: self.windows,
            infeasible_windows: self.infeasible,
            performance: (latency.latency_ms > 0.0).then(|| 1.0 / latency.latency_ms),
            performance_per_cost: ppc(&latency, cost),
            eq2_latency_ms: eq2(&counts),
            eq2_performance_per_cost: per_cost(eq2(&counts), cost),
            latency,
            cost,
            timed_performance_per_cost: None,
            ssd_disk,
            ssd_read_ops: self.ssd_read_ops,
            ssd_write_ops: self.ssd_write_ops,
            tenants,
            timeline: self.timeline.clone(),
        });
    }
}

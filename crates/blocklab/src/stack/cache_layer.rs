//! A host cache layer: any replacement policy (`cache::Policy`, fault-aware
//! ones included) over blocks of the stack, with a write policy.
//!
//! Decisions are made when a request arrives, block by block in address
//! order, so a counted and a timed run of the same requests in the same
//! order hit and miss on the same blocks. In time:
//! * a request whose blocks all hit takes `hit_ms`; one that goes below
//!   waits for the slower of `hit_ms` and the layers below (they overlap);
//! * a hit on a block whose fetch is still in flight waits for that fetch;
//! * read misses are fetched below, contiguous blocks of one request as one
//!   operation (`merge_misses = false`: one operation per block).
//!
//! Writes:
//! * `back`: the block is cached and dirty; it is written below (cause
//!   `destage`) when it is evicted, and at the end of the run (`flush`).
//!   Destages are background work: the request that evicted the block does
//!   not wait for them.
//! * `through`: the block is cached and the write goes below before the
//!   request completes.
//! * `around`: the write goes below; a cached copy is updated (a hit), a
//!   block not cached is not allocated (a miss).
//! * `reads_only`: writes are not cache accesses; they go below and drop a
//!   cached copy (it would be stale).
//!
//! Writes cover whole blocks: a write of part of a block is taken as a write
//! of the block (no read of the rest).
//!
//! On real bytes (the real executor, `Cx::data`), each move of a block's
//! contents is told to the data path where the decision is made (one call
//! per move, `stack::data`): a read hit, a fill after a miss, a write into
//! the cache, an eviction (a dirty one hands its contents to the destage),
//! an invalidation, a flush. Read-ahead and CSP keep blocks before their
//! contents arrive: the read ahead's background piece keeps them in the
//! store as contents on their way (`Below::read_ahead`), which a later hit
//! waits for. Fetch units (which read held blocks again into the request's
//! own frame), the prefetch buffer and opportunistic blocks have no data
//! path: the real executor refuses them.
//!
//! Prefetch (Hsu & Smith §4, configured by [`PrefetchConfig`]; what to
//! prefetch is `stack::prefetch`'s):
//! * a read request *misses* when one of its blocks is in neither the cache
//!   nor the prefetch buffer; only misses prefetch;
//! * a large fetch unit widens the missed request's fetch to the aligned
//!   units around it, one operation from the first to the last block not
//!   held (the request waits for all of it); the extra blocks are kept if
//!   they were not held;
//! * read-ahead and CSP read the blocks after the request as one operation
//!   the request does not wait for (of the normal class, queued behind the
//!   demand read: the paper's "two start I/Os"; `prefetch_class = "idle"`
//!   makes it wait for idle devices), from the request's end to the last
//!   block not held (held ones between are read again); blocks not held
//!   are kept (in the cache at its most recent end, or in the prefetch
//!   buffer) when the prefetch is issued, so a read of them waits for it;
//! * the prefetch buffer (an LRU of its own) keeps opportunistically read
//!   blocks (or all prefetched ones); a hit there moves the block to the cache;
//! * a read below of blocks whose write below is still in flight (a
//!   destage, a write-through) waits for that write first, so it never
//!   returns their old data; what the device reads opportunistically is not
//!   kept for such blocks.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::data::layer_of;
use super::layer::{Below, Class, Cx, Exec, Io, Layer};
use super::miss_trace::MissTrace;
use super::prefetch::{fetch_range, Prefetcher};
use super::result::{LayerReport, StackResult};
use super::spec::WritePolicy;
use crate::array::plan::{Action, Cause, IoPlan};
use crate::cache::{Access, Policy, NEVER};
use crate::error::{Error, Result};
use crate::timed::engine::Ns;
use crate::timed::executor::PlanId;
use crate::trace::Op;

pub struct CacheLayer {
    policy: Box<dyn Policy>,
    write: WritePolicy,
    reads_only: bool,
    hit_ns: Ns,
    merge_misses: bool,
    /// Tag of this layer's background work (see `runtime::layer_tag`).
    tag: u64,
    /// The layer's index in the stack: the address of its store in a data
    /// path (executors that move real bytes).
    index: usize,
    dirty: FxHashSet<u64>,
    /// Timed runs: cached blocks whose fetch has not completed, by the plan fetching them.
    inflight: FxHashMap<u64, PlanId>,
    /// `opt`: the next-use index of every access this layer will see, in order.
    next_use: Option<(Arc<Vec<u64>>, usize)>,
    miss_trace: Option<MissTrace>,
    stats: LayerReport,
    /// Prefetch, when configured.
    pf: Option<PrefetchConfig>,
    /// Timed runs: blocks written below, by the plan writing them (until it is done).
    written_below: FxHashMap<u64, PlanId>,
    /// The read request seen last (its plan id) and whether it missed:
    /// pieces of one request (a write buffer above splits them) count once.
    last_read: Option<(PlanId, bool)>,
    // Reused per request.
    misses: Vec<u64>,
    destage: Vec<u64>,
    waits: Vec<PlanId>,
}

/// A cache layer's prefetch (resolved from `[[cache]]`).
pub struct PrefetchConfig {
    /// Blocks of a fetch unit (1: the request's own blocks).
    pub fetch_unit: u64,
    pub prefetcher: Prefetcher,
    /// The prefetch buffer, an LRU (None: none).
    pub buffer: Option<Box<dyn Policy>>,
    /// Every prefetched block goes to the buffer (else only opportunistic ones).
    pub buffer_holds_all: bool,
    /// The layer keeps what the device reads opportunistically.
    pub opportunistic: bool,
    /// Device queue class of read-ahead and CSP I/O.
    pub class: Class,
    /// Blocks of the storage below (prefetch stops there).
    pub limit: Option<u64>,
}

/// What a cache layer is made of (`[[cache]]`, resolved).
pub struct CacheConfig {
    pub name: String,
    pub policy_name: String,
    pub policy: Box<dyn Policy>,
    pub write: WritePolicy,
    pub reads_only: bool,
    pub hit_ns: Ns,
    pub merge_misses: bool,
    pub tag: u64,
    pub next_use: Option<Arc<Vec<u64>>>,
    pub miss_trace: Option<MissTrace>,
    pub prefetch: Option<PrefetchConfig>,
}

impl CacheLayer {
    pub fn new(c: CacheConfig) -> Self {
        CacheLayer {
            stats: LayerReport {
                name: c.name,
                policy: c.policy_name,
                write: if c.reads_only { "reads-only" } else { c.write.name() }.to_string(),
                cache_blocks: c.policy.capacity() as u64,
                prefetch_buffer_blocks: c
                    .prefetch
                    .as_ref()
                    .and_then(|p| p.buffer.as_ref())
                    .map_or(0, |b| b.capacity() as u64),
                ..Default::default()
            },
            policy: c.policy,
            write: c.write,
            reads_only: c.reads_only,
            hit_ns: c.hit_ns,
            merge_misses: c.merge_misses,
            tag: c.tag,
            index: layer_of(c.tag),
            dirty: FxHashSet::default(),
            inflight: FxHashMap::default(),
            next_use: c.next_use.map(|v| (v, 0)),
            miss_trace: c.miss_trace,
            pf: c.prefetch,
            written_below: FxHashMap::default(),
            last_read: None,
            misses: Vec::new(),
            destage: Vec::new(),
            waits: Vec::new(),
        }
    }

    /// Dirty blocks held now (tests).
    pub fn dirty_blocks(&self) -> usize {
        self.dirty.len()
    }

    fn next_use(&mut self) -> Result<u64> {
        let Some((v, i)) = &mut self.next_use else {
            return Ok(NEVER);
        };
        let n = *v
            .get(*i)
            .ok_or_else(|| Error::config("the trace changed after its pass for `opt` (more accesses)"))?;
        *i += 1;
        Ok(n)
    }

    /// The policy evicted a block for the one just inserted (a dirty one
    /// is destaged at the end of the request: its contents leave the store now).
    fn evicted(&mut self, cx: &mut Cx) -> Result<()> {
        if let Some(v) = self.policy.evicted() {
            self.forget_fetch(v);
            // (Empty in counted, reads-only runs: skip the hashing.)
            let dirty = !self.dirty.is_empty() && self.dirty.remove(&v);
            if dirty {
                self.stats.dirty_evictions += 1;
                self.destage.push(v);
            }
            if let Some(d) = cx.data() {
                if dirty {
                    d.evict_dirty(self.index, v, None)?;
                } else {
                    d.forget(self.index, v, None);
                }
            }
        }
        Ok(())
    }

    /// After the misses of a read were fetched below: the blocks the
    /// policy still holds keep the fetched contents.
    fn keep_fetched(&mut self, misses: &[u64], cx: &mut Cx) -> Result<()> {
        if let Some(d) = cx.data() {
            for &b in misses {
                if self.policy.contains(b) {
                    d.keep(self.index, b, None)?;
                }
            }
        }
        Ok(())
    }

    /// Block `b` is no longer on its way in (evicted, overwritten, dropped).
    /// Nothing is ever in flight in counted runs: skip the hashing there.
    #[inline]
    fn forget_fetch(&mut self, b: u64) {
        if !self.inflight.is_empty() {
            self.inflight.remove(&b);
        }
    }

    /// A read hit on `b`: the request waits for `b`'s fetch if it is still
    /// in flight.
    #[inline]
    fn wait_for_fetch(&mut self, b: u64, cx: &Cx) {
        if let Some(&id) = self.inflight.get(&b) {
            if cx.exec.is_done(id) {
                self.inflight.remove(&b);
            } else {
                self.waits.push(id);
            }
        }
    }

    /// Block `b` is fetched by the request being served (`cx`'s plan).
    #[inline]
    fn fetch(&mut self, b: u64, cx: &Cx) {
        self.misses.push(b);
        if cx.timed {
            self.inflight.insert(b, cx.id);
        }
    }

    /// A miss on `b`, written to the layer's miss trace when it keeps one.
    fn trace_miss(&mut self, b: u64, op: Op, cx: &Cx) -> Result<()> {
        if let (Some(w), Some(o)) = (&mut self.miss_trace, &cx.origin) {
            w.push(o.time, op, o.tenant, b - o.stack_first + o.volume_first)?;
        }
        Ok(())
    }

    /// The request waits for every fetch in flight it hit (once each).
    fn await_fetches(&mut self, cx: &mut Cx) {
        self.waits.sort_unstable();
        self.waits.dedup();
        for &id in &self.waits {
            cx.await_plan(id);
        }
    }

    /// Write `blocks` (sorted) below as background work of `cx`'s request,
    /// one operation per contiguous run (per block without `merge_misses`).
    fn write_back(&mut self, blocks: &[u64], cx: &mut Cx, below: &mut Below) -> Result<()> {
        let ios: Vec<Io> = runs(blocks, self.merge_misses)
            .map(|(first, n)| Io::blocks(Op::Write, first, n, Cause::Destage))
            .collect();
        // One plan per at most this many runs (plans have 16-bit node ids).
        let mut written = Vec::new();
        for chunk in ios.chunks(1024) {
            let at = cx.deferred.len();
            below.background(chunk, cx, self.tag, Class::Normal)?;
            if cx.timed {
                written.push((cx.deferred[at].id, chunk));
            }
        }
        for (id, chunk) in written {
            for io in chunk {
                self.note_written(io.first, io.nblocks, id);
            }
        }
        Ok(())
    }

    /// Blocks `[first, first + n)` are being written below by plan `id` (timed runs).
    fn note_written(&mut self, first: u64, n: u64, id: PlanId) {
        if self.pf.is_some() {
            for b in first..first + n {
                self.written_below.insert(b, id);
            }
        }
    }

    /// Whether the device may still hold old data of `b` (a write below is in flight).
    fn write_pending(&mut self, b: u64, exec: &dyn Exec) -> bool {
        match self.written_below.get(&b) {
            Some(&id) if !exec.is_done(id) => true,
            Some(_) => {
                self.written_below.remove(&b);
                false
            }
            None => false,
        }
    }

    /// The plans still writing blocks of `[a, z)` below (timed runs).
    fn pending_writes(&mut self, a: u64, z: u64, exec: &dyn Exec) -> Vec<PlanId> {
        if self.written_below.is_empty() {
            return Vec::new();
        }
        let mut ids = Vec::new();
        for b in a..z {
            if self.write_pending(b, exec) {
                ids.push(self.written_below[&b]);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// A read request (or a piece of one) arrives: count it once.
    fn count_read_request(&mut self, id: PlanId) {
        if self.last_read.map(|(i, _)| i) != Some(id) {
            self.last_read = Some((id, false));
            self.stats.read_requests += 1;
        }
    }

    /// The read request being served missed (counted once).
    fn count_read_miss(&mut self) {
        if let Some((_, missed)) = &mut self.last_read {
            if !*missed {
                *missed = true;
                self.stats.read_request_misses += 1;
            }
        }
    }

    /// Whether the prefetch buffer holds `b`.
    fn buffered(&self, b: u64) -> bool {
        self.pf
            .as_ref()
            .and_then(|p| p.buffer.as_ref())
            .is_some_and(|buf| buf.contains(b))
    }

    /// Keep block `b` read ahead (not held anywhere): in the prefetch buffer
    /// when `to_buffer` and there is one, else in the cache. (Its contents
    /// arrive after it is kept: on real bytes the read ahead's piece keeps
    /// them, `Below::read_ahead`.)
    fn keep_prefetched(&mut self, b: u64, to_buffer: bool, cx: &mut Cx) -> Result<()> {
        let next_use = NEVER;
        if let Some(buf) = self.pf.as_mut().and_then(|p| p.buffer.as_mut()).filter(|_| to_buffer) {
            buf.access(&Access {
                block: b,
                next_use,
                write: false,
            });
            if let Some(v) = buf.evicted() {
                self.forget_fetch(v);
            }
            return Ok(());
        }
        self.policy.access(&Access {
            block: b,
            next_use,
            write: false,
        });
        self.evicted(cx)
    }

    /// A read with prefetch configured (see the module comment).
    fn handle_read_prefetching(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let timed = cx.timed;
        self.misses.clear();
        self.destage.clear();
        self.waits.clear();
        self.count_read_request(cx.id);
        let (first, n) = (io.first, io.nblocks);
        let end = first + n;
        let pf = self.pf.as_mut().expect("prefetch configured");
        pf.prefetcher.observe(first, n);
        let (unit, limit, holds_all, class) = (
            pf.fetch_unit,
            pf.limit.unwrap_or(u64::MAX),
            pf.buffer_holds_all,
            pf.class,
        );
        let missed = (first..end).any(|b| !self.policy.contains(b) && !self.buffered(b));
        let (lo, hi) = if missed && unit > 1 {
            let (lo, hi) = fetch_range(first, n, unit);
            (lo, hi.min(limit.max(end)))
        } else {
            (first, end)
        };
        let mut any_hit = false;
        for b in lo..hi {
            let requested = b >= first && b < end;
            if !requested {
                // The rest of a fetch unit: kept when held nowhere.
                if !self.policy.contains(b) && !self.buffered(b) {
                    self.keep_prefetched(b, false, cx)?;
                    self.stats.prefetched_blocks += 1;
                    self.fetch(b, cx);
                }
                continue;
            }
            self.stats.accesses += 1;
            self.stats.read_accesses += 1;
            let from_buffer = match self.pf.as_mut().and_then(|p| p.buffer.as_mut()) {
                Some(buf) => buf.remove(b),
                None => false,
            };
            let hit = self.policy.access(&Access {
                block: b,
                next_use: NEVER,
                write: false,
            });
            if !hit {
                self.evicted(cx)?;
            }
            if hit || from_buffer {
                self.stats.hits += 1;
                self.stats.read_hits += 1;
                if from_buffer {
                    self.stats.prefetch_buffer_hits += 1;
                }
                any_hit = true;
                self.wait_for_fetch(b, cx);
                if let Some(d) = cx.data() {
                    // (No prefetch buffer on real bytes: a hit is the cache's.)
                    d.hit(self.index, b, None)?;
                }
            } else {
                self.trace_miss(b, io.op, cx)?;
                self.fetch(b, cx);
            }
        }
        self.stats.misses = self.stats.accesses - self.stats.hits;
        if any_hit {
            cx.delay(self.hit_ns);
        }
        self.await_fetches(cx);
        if !self.misses.is_empty() {
            self.count_read_miss();
            let misses = std::mem::take(&mut self.misses);
            let (a, z) = (misses[0], misses[misses.len() - 1] + 1);
            let writes = self.pending_writes(a, z, &*cx.exec);
            let first_await = cx.plan.nodes.len();
            for &id in &writes {
                cx.await_plan(id);
            }
            let from = cx.plan.nodes.len();
            if unit > 1 {
                // One operation over the fetch unit, from the first block not
                // held to the last (held ones between are read again).
                self.stats.fetched_blocks += z - a;
                below.handle(&Io::blocks(Op::Read, a, z - a, io.cause), cx)?;
            } else {
                for (f, len) in runs(&misses, true) {
                    self.stats.fetched_blocks += len;
                    below.handle(&Io::blocks(Op::Read, f, len, io.cause), cx)?;
                }
            }
            after(&mut cx.plan, first_await..from);
            if unit == 1 {
                // (A fetch unit reads held blocks again: refused on real bytes.)
                self.keep_fetched(&misses, cx)?;
            }
            self.misses = misses;
        }
        if missed {
            let amount = self.pf.as_ref().map_or(0, |p| p.prefetcher.on_miss(first, n));
            let (ps, pe) = (end, end.saturating_add(amount).min(limit));
            let mut kept = Vec::new();
            for b in ps..pe {
                if !self.policy.contains(b) && !self.buffered(b) {
                    kept.push(b);
                }
            }
            // One I/O from the request's end (the drive streams on from the
            // demand read) to the last block not held.
            if let (Some(_), Some(&z)) = (kept.first(), kept.last()) {
                let a = ps;
                for &b in &kept {
                    self.keep_prefetched(b, holds_all, cx)?;
                }
                self.stats.prefetched_blocks += kept.len() as u64;
                self.stats.prefetch_ops += 1;
                let writes = self.pending_writes(a, z + 1, &*cx.exec);
                let at = cx.deferred.len();
                // On real bytes the cache keeps the contents on their way
                // (what it still holds: a later keep may have evicted one).
                let keep: Vec<u64> = if cx.moves_data {
                    kept.iter().copied().filter(|&b| self.policy.contains(b)).collect()
                } else {
                    Vec::new()
                };
                let ahead = [Io::blocks(Op::Read, a, z + 1 - a, io.cause)];
                below.read_ahead(&ahead, cx, self.tag, class, &keep)?;
                if timed {
                    let d = &mut cx.deferred[at];
                    if !writes.is_empty() {
                        // The prefetch follows the writes still in flight.
                        let mut p = IoPlan::default();
                        for &id in &writes {
                            p.push(Action::Await { plan: id }, &[]);
                        }
                        p.append(std::mem::take(&mut d.plan));
                        after(&mut p, 0..writes.len());
                        d.plan = p;
                    }
                    let id = d.id;
                    for &b in &kept {
                        self.inflight.insert(b, id);
                    }
                }
            }
        }
        if !self.destage.is_empty() {
            let mut d = std::mem::take(&mut self.destage);
            d.sort_unstable();
            self.write_back(&d, cx, below)?;
            self.destage = d;
        }
        Ok(())
    }

    fn handle_reads_only_write(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        for b in io.first..io.first + io.nblocks {
            if self.policy.remove(b) {
                self.dirty.remove(&b);
                if let Some(d) = cx.data() {
                    d.forget(self.index, b, None);
                }
            }
            self.forget_fetch(b);
        }
        self.drop_buffered(io);
        if cx.timed {
            self.note_written(io.first, io.nblocks, cx.id);
        }
        self.stats.written_below_blocks += io.nblocks;
        below.handle(io, cx)
    }

    /// A write makes the prefetch buffer's copies of its blocks stale.
    fn drop_buffered(&mut self, io: &Io) {
        if let Some(buf) = self.pf.as_mut().and_then(|p| p.buffer.as_mut()) {
            for b in io.first..io.first + io.nblocks {
                if buf.remove(b) {
                    self.inflight.remove(&b);
                }
            }
        }
    }
}

/// The nodes of `plan` from `awaits.end` on that depend on nothing now
/// depend on the nodes `awaits` (a read below that must follow writes).
fn after(plan: &mut IoPlan, awaits: std::ops::Range<usize>) {
    if awaits.is_empty() {
        return;
    }
    let deps: Vec<u16> = awaits.clone().map(|i| i as u16).collect();
    for n in &mut plan.nodes[awaits.end..] {
        if n.deps.is_empty() {
            n.deps = deps.clone();
        }
    }
}

/// Contiguous runs `(first, length)` of sorted blocks (single blocks when
/// `merge` is false).
fn runs(blocks: &[u64], merge: bool) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let first = *blocks.get(i)?;
        let mut n = 1;
        while merge && i + (n as usize) < blocks.len() && blocks[i + n as usize] == first + n {
            n += 1;
        }
        i += n as usize;
        Some((first, n))
    })
}

impl Layer for CacheLayer {
    fn handle(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let write = io.op == Op::Write;
        if write && self.reads_only {
            return self.handle_reads_only_write(io, cx, below);
        }
        if !write && self.pf.is_some() {
            return self.handle_read_prefetching(io, cx, below);
        }
        if write {
            self.drop_buffered(io);
        } else {
            self.count_read_request(cx.id);
        }
        self.misses.clear();
        self.destage.clear();
        self.waits.clear();
        let around = write && self.write == WritePolicy::Around;
        let mut any_hit = false;
        for b in io.first..io.first + io.nblocks {
            self.stats.accesses += 1;
            if !write {
                self.stats.read_accesses += 1;
            }
            let hit = if around && !self.policy.contains(b) {
                false // write-around: no allocation
            } else {
                let next_use = self.next_use()?;
                let hit = self.policy.access(&Access {
                    block: b,
                    next_use,
                    write,
                });
                if !hit {
                    self.evicted(cx)?;
                }
                if write {
                    // The cache's copy (new, or updated) takes the written contents.
                    if let Some(d) = cx.data() {
                        d.keep(self.index, b, None)?;
                    }
                }
                hit
            };
            if hit {
                self.stats.hits += 1;
                any_hit = true;
                if !write {
                    self.stats.read_hits += 1;
                    self.wait_for_fetch(b, cx);
                    if let Some(d) = cx.data() {
                        d.hit(self.index, b, None)?;
                    }
                }
            } else {
                self.trace_miss(b, io.op, cx)?;
                if !write {
                    self.fetch(b, cx);
                }
            }
            if write {
                // The cached copy (if any) now holds the new data.
                self.forget_fetch(b);
                if self.write == WritePolicy::Back {
                    self.dirty.insert(b);
                }
            }
        }
        let n = io.nblocks;
        self.stats.misses = self.stats.accesses - self.stats.hits;
        let in_cache = if write {
            self.write != WritePolicy::Around || any_hit
        } else {
            any_hit
        };
        if in_cache {
            cx.delay(self.hit_ns);
        }
        self.await_fetches(cx);
        if !self.misses.is_empty() {
            self.count_read_miss();
            let misses = std::mem::take(&mut self.misses);
            for (first, len) in runs(&misses, self.merge_misses) {
                self.stats.fetched_blocks += len;
                below.handle(&Io::blocks(Op::Read, first, len, io.cause), cx)?;
            }
            self.keep_fetched(&misses, cx)?;
            self.misses = misses;
        }
        if write && self.write != WritePolicy::Back {
            self.stats.written_below_blocks += n;
            if cx.timed {
                self.note_written(io.first, io.nblocks, cx.id);
            }
            below.handle(io, cx)?;
        }
        if !self.destage.is_empty() {
            let mut d = std::mem::take(&mut self.destage);
            d.sort_unstable();
            self.write_back(&d, cx, below)?;
            self.destage = d;
        }
        Ok(())
    }

    fn flush(&mut self, exec: &mut dyn Exec, below: &mut Below) -> Result<()> {
        if let Some(w) = &mut self.miss_trace {
            w.finish()?;
        }
        if self.dirty.is_empty() {
            return Ok(());
        }
        let mut d: Vec<u64> = self.dirty.drain().collect();
        d.sort_unstable();
        self.stats.flushed_blocks += d.len() as u64;
        // The flush is nobody's request: its work is submitted at once.
        let mut cx = Cx::new(exec);
        if let Some(data) = cx.data() {
            // The blocks stay cached, clean: a copy of each goes below.
            for &b in &d {
                data.stage(self.index, b, None)?;
            }
        }
        self.write_back(&d, &mut cx, below)?;
        cx.finish_background()
    }

    fn accept_free(&mut self, first: u64, n: u64, cx: &mut Cx, below: &mut Below) -> Result<()> {
        if !self.pf.as_ref().is_some_and(|p| p.opportunistic) {
            return Ok(());
        }
        self.destage.clear();
        let end = first + n;
        for b in first..end {
            if self.policy.contains(b) || self.buffered(b) || self.write_pending(b, &*cx.exec) {
                continue;
            }
            self.keep_prefetched(b, true, cx)?;
            self.stats.opportunistic_blocks += 1;
        }
        if !self.destage.is_empty() {
            let mut d = std::mem::take(&mut self.destage);
            d.sort_unstable();
            self.write_back(&d, cx, below)?;
            self.destage = d;
        }
        Ok(())
    }

    fn resident(&self) -> Option<usize> {
        Some(self.policy.len())
    }

    fn reset_stats(&mut self) {
        self.stats = LayerReport {
            name: std::mem::take(&mut self.stats.name),
            policy: std::mem::take(&mut self.stats.policy),
            write: std::mem::take(&mut self.stats.write),
            cache_blocks: self.stats.cache_blocks,
            prefetch_buffer_blocks: self.stats.prefetch_buffer_blocks,
            ..Default::default()
        };
        self.last_read = None;
    }

    fn report(&self, out: &mut StackResult) {
        let mut s = self.stats.clone();
        s.miss_ratio = if s.accesses > 0 {
            s.misses as f64 / s.accesses as f64
        } else {
            0.0
        };
        out.layers.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_merge_contiguous_blocks() {
        let v = [1, 2, 3, 7, 9, 10];
        assert_eq!(runs(&v, true).collect::<Vec<_>>(), vec![(1, 3), (7, 1), (9, 2)]);
        assert_eq!(runs(&v, false).count(), 6);
        assert_eq!(runs(&[], true).count(), 0);
    }
}

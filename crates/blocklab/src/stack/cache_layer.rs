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

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::layer::{Below, Class, Cx, Exec, Io, Layer};
use super::miss_trace::MissTrace;
use super::result::{LayerReport, StackResult};
use super::spec::WritePolicy;
use crate::array::plan::Cause;
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
    dirty: FxHashSet<u64>,
    /// Timed runs: cached blocks whose fetch has not completed, by the plan fetching them.
    inflight: FxHashMap<u64, PlanId>,
    /// `opt`: the next-use index of every access this layer will see, in order.
    next_use: Option<(Arc<Vec<u64>>, usize)>,
    miss_trace: Option<MissTrace>,
    stats: LayerReport,
    // Reused per request.
    misses: Vec<u64>,
    destage: Vec<u64>,
    waits: Vec<PlanId>,
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
}

impl CacheLayer {
    pub fn new(c: CacheConfig) -> Self {
        CacheLayer {
            stats: LayerReport {
                name: c.name,
                policy: c.policy_name,
                write: if c.reads_only { "reads-only" } else { c.write.name() }.to_string(),
                cache_blocks: c.policy.capacity() as u64,
                ..Default::default()
            },
            policy: c.policy,
            write: c.write,
            reads_only: c.reads_only,
            hit_ns: c.hit_ns,
            merge_misses: c.merge_misses,
            tag: c.tag,
            dirty: FxHashSet::default(),
            inflight: FxHashMap::default(),
            next_use: c.next_use.map(|v| (v, 0)),
            miss_trace: c.miss_trace,
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

    /// The policy evicted a block for the one just inserted.
    fn evicted(&mut self) {
        if let Some(v) = self.policy.evicted() {
            self.inflight.remove(&v);
            if self.dirty.remove(&v) {
                self.stats.dirty_evictions += 1;
                self.destage.push(v);
            }
        }
    }

    /// Write `blocks` (sorted) below as background work of `cx`'s request,
    /// one operation per contiguous run (per block without `merge_misses`).
    fn write_back(&self, blocks: &[u64], cx: &mut Cx, below: &mut Below) -> Result<()> {
        let ios: Vec<Io> = runs(blocks, self.merge_misses)
            .map(|(first, n)| Io::blocks(Op::Write, first, n, Cause::Destage))
            .collect();
        // One plan per at most this many runs (plans have 16-bit node ids).
        for chunk in ios.chunks(1024) {
            below.background(chunk, cx, self.tag, Class::Normal)?;
        }
        Ok(())
    }

    fn handle_reads_only_write(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        for b in io.first..io.first + io.nblocks {
            if self.policy.remove(b) {
                self.dirty.remove(&b);
            }
            self.inflight.remove(&b);
        }
        self.stats.written_below_blocks += io.nblocks;
        below.handle(io, cx)
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
        self.misses.clear();
        self.destage.clear();
        self.waits.clear();
        let timed = cx.exec.timed();
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
                    self.evicted();
                }
                hit
            };
            if hit {
                self.stats.hits += 1;
                any_hit = true;
                if !write {
                    self.stats.read_hits += 1;
                    if let Some(&id) = self.inflight.get(&b) {
                        if cx.exec.is_done(id) {
                            self.inflight.remove(&b);
                        } else {
                            self.waits.push(id);
                        }
                    }
                }
            } else {
                if let (Some(w), Some(o)) = (&mut self.miss_trace, &cx.origin) {
                    w.push(o.time, io.op, o.tenant, b - o.stack_first + o.volume_first)?;
                }
                if !write {
                    self.misses.push(b);
                    if timed {
                        self.inflight.insert(b, cx.id);
                    }
                }
            }
            if write {
                // The cached copy (if any) now holds the new data.
                self.inflight.remove(&b);
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
        self.waits.sort_unstable();
        self.waits.dedup();
        for &id in &self.waits {
            cx.await_plan(id);
        }
        if !self.misses.is_empty() {
            let misses = std::mem::take(&mut self.misses);
            for (first, len) in runs(&misses, self.merge_misses) {
                self.stats.fetched_blocks += len;
                below.handle(&Io::blocks(Op::Read, first, len, io.cause), cx)?;
            }
            self.misses = misses;
        }
        if write && self.write != WritePolicy::Back {
            self.stats.written_below_blocks += n;
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
        self.write_back(&d, &mut cx, below)?;
        cx.submit_deferred()
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

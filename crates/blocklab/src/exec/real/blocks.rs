//! The data path of a stack on real bytes (`stack::data::DataPath`): the
//! host cache layers' stores in memory, the frames of block contents of the
//! request being served and of its background pieces, and the array of
//! member files at the bottom.
//!
//! The executor seen by the layers is the counted one (`AtOnce`: every plan
//! completes when it is made), so every decision is a counted run's; this
//! module only moves the bytes those decisions name. It does no I/O itself:
//! the array's and the tier file's I/O a decision names is recorded as jobs
//! (`inflight.rs`), run by the request's thread once the stack's mutex is
//! released, and contents still on their way are held as cells the jobs fill.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::inflight::{Cell, Content, InFlight, Job, Key, Work};
use super::tier_store::TierStore;
use super::RealArray;
use crate::array::IoPlan;
use crate::error::{Error, Result};
use crate::stack::data::DataPath;
use crate::stack::layer::{AtOnce, Class, Exec, Io};
use crate::timed::engine::Ns;
use crate::timed::executor::PlanId;
use crate::trace::Op;

/// One block's contents, shared: a hit puts the store's block in the
/// request's frame and a fill puts the frame's in the store without a copy
/// (a hit must never cost more than a miss). Never changed once made.
pub type Block = Arc<[u8]>;

/// Block contents by block: a request's, or a store's.
pub type Frame = FxHashMap<u64, Content>;

/// Block contents of a stack on real bytes.
pub struct Blocks {
    array: Arc<RealArray>,
    bs: usize,
    /// Each layer's store (by the layer's index): a host cache's blocks in memory.
    stores: Vec<Frame>,
    /// The request's frame first, then one per background piece being handled.
    frames: Vec<Frame>,
    /// The layer whose background piece each frame after the request's is.
    frame_layers: Vec<usize>,
    /// Whether each of those pieces is a read ahead (its reads fail only its cells).
    frames_ahead: Vec<bool>,
    /// Contents of evicted or flushed dirty blocks, waiting for their
    /// destage, by (layer, block): two layers may destage one block.
    staged: FxHashMap<(usize, u64), Content>,
    /// The SSD tier's cache device and its layer index (hooks with a `slot`).
    tier: Option<(usize, TierStore)>,
    /// The I/O the request's decision named so far, in order.
    jobs: Vec<Job>,
    /// Every job recorded and not done, by the block or frame it touches.
    pub inflight: Arc<InFlight>,
    /// Blocks read to complete a write of part of a block (outside the layers' policies).
    pub partial_block_reads: u64,
}

fn missing(what: &str, layer: usize, block: u64) -> Error {
    Error::config(format!(
        "internal: layer {layer} {what} block {block} whose contents are not at hand (a data-path bug)"
    ))
}

impl Blocks {
    pub fn new(array: Arc<RealArray>) -> Self {
        let bs = array.block_size();
        Blocks {
            array,
            bs,
            stores: Vec::new(),
            frames: vec![Frame::default()],
            frame_layers: Vec::new(),
            frames_ahead: Vec::new(),
            staged: FxHashMap::default(),
            tier: None,
            jobs: Vec::new(),
            inflight: Arc::new(InFlight::default()),
            partial_block_reads: 0,
        }
    }

    fn record(&mut self, work: Work) {
        self.jobs.push(Job::record(&self.inflight, work));
    }

    /// Blocks `first..first + n` of the array, read by a job; each block's
    /// contents on the way, but those `keep` says not to (None).
    fn read_array(&mut self, first: u64, n: u64, keep: impl Fn(u64) -> bool) -> Vec<Option<Content>> {
        let cells: Vec<_> = (first..first + n).map(|b| keep(b).then(Cell::new)).collect();
        let out = cells.iter().map(|c| c.clone().map(Content::Coming)).collect();
        let array = self.array.clone();
        let ahead = self.frames_ahead.last().copied().unwrap_or(false);
        self.record(Work::ArrayRead {
            array,
            first,
            into: cells,
            ahead,
        });
        out
    }

    /// Commit the tier's dirty blocks `dirty` to its journal (a FLUSH, once
    /// the array is durable).
    pub fn commit_tier(&mut self, dirty: &[u64]) -> Result<()> {
        match &mut self.tier {
            Some((_, t)) => t.commit(dirty, |k: Key| self.inflight.is_lost(k)),
            None => Ok(()),
        }
    }

    /// The tier's cache device file, if the stack has a tier (tests).
    #[cfg(test)]
    pub fn tier_file(&self) -> Option<Arc<super::tier_store::TierFile>> {
        self.tier.as_ref().map(|t| t.1.file().clone())
    }

    /// The tier's layer index, if the stack has one.
    pub fn tier_layer(&self) -> Option<usize> {
        self.tier.as_ref().map(|t| t.0)
    }

    /// The SSD tier (layer `layer`) keeps its frames in `store`.
    pub fn set_tier(&mut self, layer: usize, store: TierStore) {
        self.tier = Some((layer, store));
    }

    /// Layers with a store (memory or file): staged contents of any of them
    /// are newer than the array's.
    fn layers(&self) -> usize {
        self.stores.len().max(self.tier.as_ref().map_or(0, |t| t.0 + 1))
    }

    /// The tier's store, when layer `layer` addressing `slot` is the tier.
    fn tier_at(&mut self, layer: usize, slot: Option<u64>) -> Option<&mut TierStore> {
        match (&mut self.tier, slot) {
            (Some((l, t)), Some(_)) if *l == layer => Some(t),
            _ => None,
        }
    }

    /// The tier's copy of `block`, which the tier says is in `frame` (read
    /// by a job: on the way).
    fn tier_read(&mut self, layer: usize, block: u64, frame: u64, what: &str) -> Result<Content> {
        let t = self
            .tier_at(layer, Some(frame))
            .ok_or_else(|| missing(what, layer, block))?;
        if t.frame_of(block) != Some(frame) {
            return Err(missing(what, layer, block));
        }
        let file = t.file().clone();
        let into = Cell::new();
        self.record(Work::TierRead {
            file,
            frame,
            into: into.clone(),
        });
        Ok(Content::Coming(into))
    }

    pub fn block_size(&self) -> usize {
        self.bs
    }

    /// A new request: an empty frame (what an error left behind is dropped).
    pub fn begin_request(&mut self) {
        self.frames.truncate(1);
        self.frames[0].clear();
        self.frame_layers.clear();
        self.frames_ahead.clear();
        self.staged.clear();
    }

    /// Jobs a decision recorded and nobody took (it panicked under the
    /// mutex): they run before anything waits for the table to empty.
    pub fn leftover(&mut self) -> Vec<Job> {
        std::mem::take(&mut self.jobs)
    }

    /// The request's decision is made: its frame (a read's contents, maybe
    /// on the way) and the jobs that move its bytes, to run outside the mutex.
    pub fn end_request(&mut self) -> (Frame, Vec<Job>) {
        (std::mem::take(&mut self.frames[0]), std::mem::take(&mut self.jobs))
    }

    /// The request writes `bytes` to `block`.
    pub fn put(&mut self, block: u64, bytes: Content) {
        self.frames[0].insert(block, bytes);
    }

    /// The request writes bytes `at..at + len` of `block` (`patch`, None:
    /// zeroes): merged with the block's newest contents — the topmost store
    /// holding it, else the array (no policy sees this) — at once when they
    /// are at hand, else by a job when they arrive.
    pub fn put_part(&mut self, block: u64, at: usize, len: usize, patch: Option<&[u8]>) -> Result<()> {
        self.partial_block_reads += 1;
        let from = self.newest(block)?;
        let c = match from {
            Content::Ready(old) => {
                let mut c = Box::<[u8]>::from(&old[..]);
                match patch {
                    Some(p) => c[at..at + len].copy_from_slice(p),
                    None => c[at..at + len].fill(0),
                }
                Content::Ready(Block::from(c))
            }
            from => {
                let into = Cell::new();
                self.record(Work::Merge {
                    from,
                    at,
                    len,
                    patch: patch.map(Box::from),
                    into: into.clone(),
                });
                Content::Coming(into)
            }
        };
        self.put(block, c);
        Ok(())
    }

    /// The newest contents of `block`: the topmost store holding it, else
    /// the array.
    fn newest(&mut self, block: u64) -> Result<Content> {
        if let Some(c) = self.stores.iter().find_map(|s| s.get(&block)) {
            return Ok(c.clone());
        }
        if let Some((l, t)) = &self.tier {
            if let Some(f) = t.frame_of(block) {
                let l = *l;
                return self.tier_read(l, block, f, "merges");
            }
        }
        let mut c = self.read_array(block, 1, |_| true);
        Ok(c.pop().flatten().expect("one block read"))
    }

    /// Blocks held by layer `layer`'s store.
    pub fn store_len(&self, layer: usize) -> usize {
        match &self.tier {
            Some((l, t)) if *l == layer => t.len(),
            _ => self.stores.get(layer).map_or(0, |s| s.len()),
        }
    }

    /// Whether any layer's store holds `block`.
    pub fn held(&self, block: u64) -> bool {
        self.stores.iter().any(|s| s.contains_key(&block))
            || self.tier.as_ref().is_some_and(|t| t.1.frame_of(block).is_some())
    }

    /// Blocks of `[first, end)` held by any store, ascending.
    pub fn held_in(&self, first: u64, end: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .stores
            .iter()
            .flat_map(|s| s.keys().copied())
            .chain(self.tier.iter().flat_map(|t| t.1.blocks()))
            .filter(|&b| b >= first && b < end)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn store(&mut self, layer: usize) -> &mut Frame {
        if self.stores.len() <= layer {
            self.stores.resize_with(layer + 1, Frame::default);
        }
        &mut self.stores[layer]
    }

    /// The contents of `block` staged for a destage by the topmost layer
    /// above `layer`, if any: newer than anything below. (A request may
    /// evict a dirty block, then miss on it before the destage goes below:
    /// the counted decisions read below first, the bytes must be these.)
    fn staged_above(&self, layer: usize, block: u64) -> Option<&Content> {
        if self.staged.is_empty() {
            return None;
        }
        (0..layer).find_map(|l| self.staged.get(&(l, block)))
    }

    fn top(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("the request's frame")
    }
}

impl DataPath for Blocks {
    fn hit(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()> {
        if let Some(f) = slot {
            let c = match self.staged_above(layer, block) {
                // Newer than the frame's (which must still hold the block).
                Some(c)
                    if self
                        .tier
                        .as_ref()
                        .is_some_and(|t| t.0 == layer && t.1.frame_of(block) == Some(f)) =>
                {
                    c.clone()
                }
                _ => self.tier_read(layer, block, f, "hit on")?,
            };
            self.top().insert(block, c);
            return Ok(());
        }
        let held = self
            .stores
            .get_mut(layer)
            .and_then(|s| s.get_mut(&block))
            .ok_or_else(|| missing("hit on", layer, block))?;
        held.settle();
        let held = held.clone();
        let c = self.staged_above(layer, block).cloned().unwrap_or(held);
        self.top().insert(block, c);
        Ok(())
    }

    fn keep(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()> {
        if let Some(f) = slot {
            let frames = self.frames.len();
            let c = self.frames[frames - 1]
                .get(&block)
                .ok_or_else(|| missing("keeps", layer, block))?
                .clone();
            let t = match &mut self.tier {
                Some((l, t)) if *l == layer => t,
                _ => return Err(missing("keeps", layer, block)),
            };
            t.set(block, f);
            let file = t.file().clone();
            self.record(Work::TierWrite {
                file,
                frame: f,
                from: c,
            });
            return Ok(());
        }
        let c = self
            .top()
            .get(&block)
            .ok_or_else(|| missing("keeps", layer, block))?
            .clone();
        self.store(layer).insert(block, c);
        Ok(())
    }

    fn forget(&mut self, layer: usize, block: u64, slot: Option<u64>) {
        if let Some(t) = self.tier_at(layer, slot) {
            t.unset(block);
            return;
        }
        if let Some(s) = self.stores.get_mut(layer) {
            s.remove(&block);
        }
    }

    fn evict_dirty(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()> {
        if let Some(f) = slot {
            let c = self.tier_read(layer, block, f, "evicts dirty")?;
            if let Some(t) = self.tier_at(layer, slot) {
                t.unset(block);
            }
            self.staged.insert((layer, block), c);
            return Ok(());
        }
        let c = self
            .stores
            .get_mut(layer)
            .and_then(|s| s.remove(&block))
            .ok_or_else(|| missing("evicts dirty", layer, block))?;
        self.staged.insert((layer, block), c);
        Ok(())
    }

    fn stage(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()> {
        if let Some(f) = slot {
            let c = self.tier_read(layer, block, f, "destages")?;
            self.staged.insert((layer, block), c);
            return Ok(());
        }
        let c = self
            .stores
            .get(layer)
            .and_then(|s| s.get(&block))
            .ok_or_else(|| missing("destages", layer, block))?
            .clone();
        self.staged.insert((layer, block), c);
        Ok(())
    }

    fn begin_background(&mut self, layer: usize, ios: &[Io]) {
        let mut f = Frame::default();
        for io in ios {
            for b in io.first..io.first + io.nblocks {
                if let Some(c) = self.staged.remove(&(layer, b)) {
                    f.insert(b, c);
                }
            }
        }
        self.frames.push(f);
        self.frame_layers.push(layer);
        self.frames_ahead.push(false);
    }

    fn begin_read_ahead(&mut self, layer: usize) {
        self.frames.push(Frame::default());
        self.frame_layers.push(layer);
        self.frames_ahead.push(true);
    }

    fn end_background(&mut self) {
        if self.frames.len() > 1 {
            self.frames.pop();
            self.frame_layers.pop();
            self.frames_ahead.pop();
        }
    }

    fn target(&mut self, io: &Io) -> Result<()> {
        if io.nblocks == 0 {
            return Ok(());
        }
        match io.op {
            Op::Read => {
                // Read all the same; a block staged above takes the staged copy.
                let layers = self.layers();
                let staged: Vec<Option<Content>> = (io.first..io.first + io.nblocks)
                    .map(|b| self.staged_above(layers, b).cloned())
                    .collect();
                let cells = self.read_array(io.first, io.nblocks, |b| staged[(b - io.first) as usize].is_none());
                for (i, (c, s)) in cells.into_iter().zip(staged).enumerate() {
                    let c = s.or(c).expect("one or the other");
                    self.top().insert(io.first + i as u64, c);
                }
            }
            Op::Write => {
                let top = self.frames.last().expect("the request's frame");
                let from = (io.first..io.first + io.nblocks)
                    .map(|b| {
                        top.get(&b)
                            .cloned()
                            .ok_or_else(|| missing("writes below", usize::MAX, b))
                    })
                    .collect::<Result<Vec<Content>>>()?;
                // A copy staged for a destage by a layer below the writer
                // (the request's frame: every layer) is older than these
                // bytes: its destage, which goes after, must write them
                // (a tier's write not admitted after it evicted the block).
                // Looked up by (layer, block), never scanned: a FLUSH stages
                // every dirty block before its pieces go below one by one.
                if !self.staged.is_empty() {
                    let below = self.frame_layers.last().map_or(0, |w| w + 1);
                    let layers = self.layers();
                    for (i, c) in from.iter().enumerate() {
                        let b = io.first + i as u64;
                        for l in below..layers {
                            if let Some(sc) = self.staged.get_mut(&(l, b)) {
                                *sc = c.clone();
                            }
                        }
                    }
                }
                let array = self.array.clone();
                self.record(Work::ArrayWrite {
                    array,
                    first: io.first,
                    from,
                });
            }
        }
        Ok(())
    }
}

/// The executor a stack on real bytes sees: the counted one (nothing waits,
/// every plan completes when made) with a data path.
pub struct RealExec {
    pub at: AtOnce,
    pub blocks: Blocks,
}

impl Exec for RealExec {
    fn timed(&self) -> bool {
        false
    }
    fn now(&self) -> Ns {
        self.at.now()
    }
    fn pending(&self, _disk: usize) -> usize {
        0
    }
    fn reserve(&mut self) -> PlanId {
        self.at.reserve()
    }
    fn is_done(&self, _id: PlanId) -> bool {
        true
    }
    fn submit_background(&mut self, _plan: IoPlan, _id: PlanId, _tag: u64, _class: Class) -> Result<()> {
        Ok(())
    }
    fn data(&mut self) -> Option<&mut dyn DataPath> {
        Some(&mut self.blocks)
    }
}

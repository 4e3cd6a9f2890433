//! The data path of a stack on real bytes (`stack::data::DataPath`): the
//! host cache layers' stores in memory, the frames of block contents of the
//! request being served and of its background pieces, and the array of
//! member files at the bottom.
//!
//! The executor seen by the layers is the counted one (`AtOnce`: every plan
//! completes when it is made), so every decision is a counted run's; this
//! module only moves the bytes those decisions name.

use std::sync::Arc;

use rustc_hash::FxHashMap;

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

type Frame = FxHashMap<u64, Block>;

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
    /// Contents of evicted or flushed dirty blocks, waiting for their
    /// destage, by (layer, block): two layers may destage one block.
    staged: FxHashMap<(usize, u64), Block>,
    /// The SSD tier's cache device and its layer index (hooks with a `slot`).
    tier: Option<(usize, TierStore)>,
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
            staged: FxHashMap::default(),
            tier: None,
            partial_block_reads: 0,
        }
    }

    /// Commit the tier's dirty blocks `dirty` to its journal (a FLUSH, once
    /// the array is durable).
    pub fn commit_tier(&mut self, dirty: &[u64]) -> Result<()> {
        match &mut self.tier {
            Some((_, t)) => t.commit(dirty),
            None => Ok(()),
        }
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

    /// The tier's copy of `block`, which the tier says is in `frame`.
    fn tier_read(&mut self, layer: usize, block: u64, frame: u64, what: &str) -> Result<Box<[u8]>> {
        let t = self
            .tier_at(layer, Some(frame))
            .ok_or_else(|| missing(what, layer, block))?;
        if t.frame_of(block) != Some(frame) {
            return Err(missing(what, layer, block));
        }
        t.read(frame)
    }

    pub fn block_size(&self) -> usize {
        self.bs
    }

    /// A new request: an empty frame (what an error left behind is dropped).
    pub fn begin_request(&mut self) {
        self.frames.truncate(1);
        self.frames[0].clear();
        self.frame_layers.clear();
        self.staged.clear();
    }

    /// The request's contents of `block` (a read's result), if at hand.
    pub fn get(&self, block: u64) -> Option<&[u8]> {
        self.frames[0].get(&block).map(|b| &b[..])
    }

    /// The request writes `bytes` to `block`.
    pub fn put(&mut self, block: u64, bytes: Block) {
        self.frames[0].insert(block, bytes);
    }

    /// The newest contents of `block`: the topmost store holding it, else
    /// the array (to complete a write of part of it; no policy sees this).
    pub fn newest(&mut self, block: u64) -> Result<Box<[u8]>> {
        self.partial_block_reads += 1;
        if let Some(c) = self.stores.iter().find_map(|s| s.get(&block)) {
            return Ok(Box::from(&c[..]));
        }
        if let Some((_, t)) = &self.tier {
            if let Some(f) = t.frame_of(block) {
                return t.read(f);
            }
        }
        let mut buf = vec![0u8; self.bs].into_boxed_slice();
        self.array
            .read(block * self.bs as u64, &mut buf)
            .map_err(|e| Error::io(self.array.dir().display().to_string(), e))?;
        Ok(buf)
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
    fn staged_above(&self, layer: usize, block: u64) -> Option<&Block> {
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
            let held = self.tier_read(layer, block, f, "hit on")?;
            let c = match self.staged_above(layer, block) {
                Some(c) => c.clone(),
                None => Block::from(held),
            };
            self.top().insert(block, c);
            return Ok(());
        }
        let held = self
            .stores
            .get(layer)
            .and_then(|s| s.get(&block))
            .ok_or_else(|| missing("hit on", layer, block))?;
        let c = self.staged_above(layer, block).unwrap_or(held).clone();
        self.top().insert(block, c);
        Ok(())
    }

    fn keep(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()> {
        if let Some(f) = slot {
            let frames = self.frames.len();
            let c = self.frames[frames - 1]
                .get(&block)
                .ok_or_else(|| missing("keeps", layer, block))?;
            let t = match &mut self.tier {
                Some((l, t)) if *l == layer => t,
                _ => return Err(missing("keeps", layer, block)),
            };
            t.write(f, c)?;
            t.set(block, f);
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
            self.staged.insert((layer, block), Block::from(c));
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
            self.staged.insert((layer, block), Block::from(c));
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
    }

    fn end_background(&mut self) {
        if self.frames.len() > 1 {
            self.frames.pop();
            self.frame_layers.pop();
        }
    }

    fn target(&mut self, io: &Io) -> Result<()> {
        if io.nblocks == 0 {
            return Ok(());
        }
        let bs = self.bs;
        let shown = || self.array.dir().display().to_string();
        let at = io.first * bs as u64;
        match io.op {
            Op::Read => {
                let mut buf = vec![0u8; io.nblocks as usize * bs];
                self.array.read(at, &mut buf).map_err(|e| Error::io(shown(), e))?;
                let layers = self.layers();
                for (i, c) in buf.chunks_exact(bs).enumerate() {
                    let b = io.first + i as u64;
                    let c = match self.staged_above(layers, b) {
                        Some(staged) => staged.clone(),
                        None => Block::from(c),
                    };
                    self.top().insert(b, c);
                }
            }
            Op::Write => {
                let top = self.frames.last().expect("the request's frame");
                let mut buf = Vec::with_capacity(io.nblocks as usize * bs);
                for b in io.first..io.first + io.nblocks {
                    let c = top.get(&b).ok_or_else(|| missing("writes below", usize::MAX, b))?;
                    buf.extend_from_slice(c);
                }
                // A copy staged for a destage by a layer below the writer
                // (the request's frame: every layer) is older than these
                // bytes: its destage, which goes after, must write them
                // (a tier's write not admitted after it evicted the block).
                // Looked up by (layer, block), never scanned: a FLUSH stages
                // every dirty block before its pieces go below one by one.
                if !self.staged.is_empty() {
                    let below = self.frame_layers.last().map_or(0, |w| w + 1);
                    let layers = self.layers();
                    for (i, c) in buf.chunks_exact(bs).enumerate() {
                        let b = io.first + i as u64;
                        for l in below..layers {
                            if let Some(sc) = self.staged.get_mut(&(l, b)) {
                                *sc = Block::from(c);
                            }
                        }
                    }
                }
                self.array.write(at, &buf, false).map_err(|e| Error::io(shown(), e))?;
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

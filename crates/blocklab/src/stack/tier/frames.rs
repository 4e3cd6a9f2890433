//! The SSD's frames: which block each holds, in which partition, dirty or not.
//!
//! A frame is one block of the SSD (frame f is SSD block f: its address in
//! the SSD's plans). A partition (one per tenant, or one shared by all)
//! holds at most its quota of frames and replaces in LRU order, the
//! paper's policy; its dirty frames are also kept in the order they became
//! dirty, which is what cleaning writes back first. Both lists thread
//! through the frame numbers (`cache::list::Links32`), so a cached block
//! costs a few words. Frames never used are handed out in order and freed
//! ones reused last-freed first: memory grows with what is cached, not with
//! the SSD's size.
//!
//! Shrinking a partition evicts its LRU blocks at once and hands them back
//! (dirty ones must be destaged by the caller): that is how a real cache
//! gives space back, and why partitions are kept here rather than behind
//! `cache::Policy`, which has no notion of a capacity that changes.
//!
//! Invariant: the quotas sum to at most the capacity, so a partition under
//! its quota always finds a free frame.

use rustc_hash::FxHashMap;

use crate::cache::list::{Ends, Links32, NIL};
use crate::error::{Error, Result};

/// A block that left the SSD (evicted or given back by a shrink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    pub block: u64,
    pub frame: u32,
    /// The owner the block was inserted with (the tier's tenant index).
    pub owner: u32,
    pub dirty: bool,
}

#[derive(Debug, Clone, Default)]
struct Part {
    quota: u64,
    lru: Ends,
    dirty: Ends,
}

pub struct Frames {
    capacity: u64,
    map: FxHashMap<u64, u32>,
    /// Per frame: its block, partition, owner, dirty bit.
    block: Vec<u64>,
    part: Vec<u32>,
    owner: Vec<u32>,
    dirty: Vec<bool>,
    lru: Links32,
    dirty_links: Links32,
    free: Vec<u32>,
    /// Frames `fresh..` were never used.
    fresh: u32,
    parts: Vec<Part>,
    quotas: u64,
}

impl Frames {
    /// An SSD of `capacity` frames (at most `u32::MAX - 1`).
    pub fn new(capacity: u64) -> Self {
        Frames {
            capacity: capacity.min(NIL as u64 - 1),
            map: FxHashMap::default(),
            block: Vec::new(),
            part: Vec::new(),
            owner: Vec::new(),
            dirty: Vec::new(),
            lru: Links32::default(),
            dirty_links: Links32::default(),
            free: Vec::new(),
            fresh: 0,
            parts: Vec::new(),
            quotas: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// A new, empty partition of quota 0; returns its index.
    pub fn add_part(&mut self) -> usize {
        self.parts.push(Part::default());
        self.parts.len() - 1
    }

    pub fn quota(&self, p: usize) -> u64 {
        self.parts[p].quota
    }

    /// Frames not given to any partition.
    pub fn unallocated(&self) -> u64 {
        self.capacity - self.quotas
    }

    /// Blocks held by partition `p`.
    pub fn len(&self, p: usize) -> u64 {
        self.parts[p].lru.len as u64
    }

    pub fn dirty_len(&self, p: usize) -> u64 {
        self.parts[p].dirty.len as u64
    }

    /// Blocks held by every partition.
    pub fn used(&self) -> u64 {
        self.map.len() as u64
    }

    /// Set `p`'s quota: a smaller one evicts its LRU blocks at once (pushed to
    /// `out`, least recent first). Errors when the quotas would exceed the capacity.
    pub fn set_quota(&mut self, p: usize, quota: u64, out: &mut Vec<Victim>) -> Result<()> {
        let old = self.parts[p].quota;
        let total = self.quotas - old + quota;
        if total > self.capacity {
            return Err(Error::config(format!(
                "internal: partitions of {total} blocks on an SSD of {}",
                self.capacity
            )));
        }
        self.quotas = total;
        self.parts[p].quota = quota;
        while self.len(p) > quota {
            let v = self.evict_tail(p).expect("a partition above its quota holds blocks");
            out.push(v);
        }
        Ok(())
    }

    pub fn lookup(&self, block: u64) -> Option<u32> {
        self.map.get(&block).copied()
    }

    pub fn owner(&self, frame: u32) -> u32 {
        self.owner[frame as usize]
    }

    pub fn part_of(&self, frame: u32) -> usize {
        self.part[frame as usize] as usize
    }

    pub fn is_dirty(&self, frame: u32) -> bool {
        self.dirty[frame as usize]
    }

    /// The block was accessed: most recently used of its partition.
    pub fn touch(&mut self, frame: u32) {
        let p = self.part[frame as usize] as usize;
        self.lru.move_to_head(&mut self.parts[p].lru, frame);
    }

    /// Mark the frame dirty (newest dirty) or clean.
    pub fn set_dirty(&mut self, frame: u32, dirty: bool) {
        let f = frame as usize;
        if self.dirty[f] == dirty {
            // A re-write keeps the frame's place: its unwritten data is as old as before.
            return;
        }
        let p = self.part[f] as usize;
        self.dirty[f] = dirty;
        if dirty {
            self.dirty_links.push_head(&mut self.parts[p].dirty, frame);
        } else {
            self.dirty_links.unlink(&mut self.parts[p].dirty, frame);
        }
    }

    /// Insert `block` (not cached) into partition `p` (quota at least 1) for
    /// `owner`; a full partition evicts its LRU block, whose frame is reused.
    pub fn insert(&mut self, p: usize, block: u64, owner: u32, dirty: bool) -> Result<(u32, Option<Victim>)> {
        debug_assert!(!self.map.contains_key(&block));
        if self.parts[p].quota == 0 {
            return Err(Error::config("internal: insert into a partition of quota 0"));
        }
        let (frame, victim) = if self.len(p) >= self.parts[p].quota {
            let v = self.evict_tail(p).expect("a full partition holds blocks");
            // `evict_tail` freed the frame: take it back.
            let f = self.free.pop().expect("the evicted frame is free");
            (f, Some(v))
        } else if let Some(f) = self.free.pop() {
            (f, None)
        } else if (self.fresh as u64) < self.capacity {
            self.fresh += 1;
            (self.fresh - 1, None)
        } else {
            return Err(Error::config("internal: no free frame under the quota"));
        };
        let f = frame as usize;
        if f >= self.block.len() {
            self.block.resize(f + 1, 0);
            self.part.resize(f + 1, 0);
            self.owner.resize(f + 1, 0);
            self.dirty.resize(f + 1, false);
        }
        self.block[f] = block;
        self.part[f] = p as u32;
        self.owner[f] = owner;
        self.dirty[f] = false;
        self.map.insert(block, frame);
        self.lru.push_head(&mut self.parts[p].lru, frame);
        if dirty {
            self.set_dirty(frame, true);
        }
        Ok((frame, victim))
    }

    /// Drop `block` (an invalidation); returns what it was.
    pub fn remove(&mut self, block: u64) -> Option<Victim> {
        let frame = self.map.get(&block).copied()?;
        Some(self.release(frame))
    }

    fn evict_tail(&mut self, p: usize) -> Option<Victim> {
        let t = self.parts[p].lru.tail;
        (t != NIL).then(|| self.release(t))
    }

    fn release(&mut self, frame: u32) -> Victim {
        let f = frame as usize;
        let p = self.part[f] as usize;
        let v = Victim {
            block: self.block[f],
            frame,
            owner: self.owner[f],
            dirty: self.dirty[f],
        };
        self.set_dirty(frame, false);
        self.lru.unlink(&mut self.parts[p].lru, frame);
        self.map.remove(&v.block);
        self.free.push(frame);
        v
    }

    /// The oldest dirty block of `p`: (frame, block).
    pub fn oldest_dirty(&self, p: usize) -> Option<(u32, u64)> {
        let t = self.parts[p].dirty.tail;
        (t != NIL).then(|| (t, self.block[t as usize]))
    }

    /// Every dirty block, by ascending block: (block, frame, owner).
    pub fn dirty_blocks(&self) -> Vec<(u64, u32, u32)> {
        let mut v: Vec<(u64, u32, u32)> = self
            .map
            .iter()
            .filter(|(_, &f)| self.dirty[f as usize])
            .map(|(&b, &f)| (b, f, self.owner[f as usize]))
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_per_partition_and_frames_reused() {
        let mut f = Frames::new(4);
        let a = f.add_part();
        let b = f.add_part();
        let mut out = Vec::new();
        f.set_quota(a, 2, &mut out).unwrap();
        f.set_quota(b, 2, &mut out).unwrap();
        assert!(f.set_quota(b, 3, &mut out).is_err(), "quotas above the SSD");
        assert_eq!(f.unallocated(), 0);
        let (f1, v) = f.insert(a, 10, 0, false).unwrap();
        assert_eq!((f1, v), (0, None));
        f.insert(a, 11, 0, true).unwrap();
        f.insert(b, 20, 1, false).unwrap();
        f.touch(f1); // 10 most recent: 11 is the LRU of a.
        let (f4, v) = f.insert(a, 12, 0, false).unwrap();
        let v = v.unwrap();
        assert_eq!((v.block, v.dirty, v.owner), (11, true, 0));
        assert_eq!(f4, v.frame, "the victim's frame is reused");
        assert_eq!(f.lookup(11), None);
        assert_eq!(f.len(a), 2);
        // Shrinking a to 0 gives back 10 and 12, least recent first.
        f.set_dirty(f.lookup(12).unwrap(), true);
        f.set_quota(a, 0, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|v| (v.block, v.dirty)).collect::<Vec<_>>(),
            vec![(10, false), (12, true)]
        );
        assert_eq!((f.len(a), f.used(), f.unallocated()), (0, 1, 2));
        assert!(f.insert(a, 13, 0, false).is_err());
    }

    #[test]
    fn dirty_order_and_removal() {
        let mut f = Frames::new(8);
        let p = f.add_part();
        f.set_quota(p, 8, &mut Vec::new()).unwrap();
        for b in 0..4 {
            f.insert(p, b, 0, b % 2 == 1).unwrap();
        }
        assert_eq!(f.dirty_len(p), 2);
        assert_eq!(f.oldest_dirty(p).map(|x| x.1), Some(1));
        let fr0 = f.lookup(0).unwrap();
        f.set_dirty(fr0, true);
        assert_eq!(f.oldest_dirty(p).map(|x| x.1), Some(1));
        let v = f.remove(1).unwrap();
        assert!(v.dirty);
        assert_eq!(f.oldest_dirty(p).map(|x| x.1), Some(3));
        assert_eq!(f.dirty_blocks().iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(f.dirty_len(p), 2);
    }
}

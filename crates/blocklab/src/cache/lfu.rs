//! LFU: evict the block with the fewest accesses since it entered the cache.
//!
//! The count starts at 1 on insertion and is forgotten on eviction. Among
//! blocks with the same count the least recently accessed one goes first
//! (libCacheSim `LFU` appends a block to the tail of its frequency bucket on
//! every access and evicts from the bucket head: the same order).
//!
//! O(1) per access: one bucket per count that some cached block has, the
//! buckets in a list by increasing count, each bucket a list of its blocks by
//! time of last access (an access moves the block to the tail of the next
//! count's bucket). The victim, the smallest (count, time of last access), is
//! the head of the first bucket.
//!
//! `remove` drops the block and its count (LFU keeps no history: a removed
//! block that comes back starts again at 1, as after an eviction).

use super::index::{access_all_prefetching, BlockIndex};
use super::list::{Ends, Links32, NIL};
use super::{Access, Policy};

/// The blocks of one count, oldest access first (the list's tail end).
struct Bucket {
    count: u64,
    blocks: Ends,
    /// Neighbouring buckets: smaller and larger counts.
    lower: u32,
    higher: u32,
}

pub struct Lfu {
    capacity: usize,
    index: BlockIndex,
    /// Per slot: its block, its bucket.
    blocks: Vec<u64>,
    bucket_of: Vec<u32>,
    /// Per slot: its place in its bucket's list (head: newest access).
    links: Links32,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// The bucket of the smallest count (NIL when empty).
    lowest: u32,
    /// Slots of removed blocks.
    free: Vec<u32>,
    evicted: Option<u64>,
}

impl Lfu {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        Lfu {
            capacity,
            index: BlockIndex::with_capacity(reserve),
            blocks: Vec::with_capacity(reserve),
            bucket_of: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            lowest: NIL,
            free: Vec::new(),
            evicted: None,
        }
    }

    /// A new empty bucket of `count` between `lower` and `higher` (NIL: none).
    fn new_bucket(&mut self, count: u64, lower: u32, higher: u32) -> u32 {
        let b = Bucket {
            count,
            blocks: Ends::default(),
            lower,
            higher,
        };
        let id = match self.free_buckets.pop() {
            Some(id) => {
                self.buckets[id as usize] = b;
                id
            }
            None => {
                self.buckets.push(b);
                (self.buckets.len() - 1) as u32
            }
        };
        if lower != NIL {
            self.buckets[lower as usize].higher = id;
        } else {
            self.lowest = id;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = id;
        }
        id
    }

    /// Take slot `s` out of its bucket, dropping the bucket if it empties.
    fn unlink(&mut self, s: u32) {
        let b = self.bucket_of[s as usize];
        let bucket = &mut self.buckets[b as usize];
        self.links.unlink(&mut bucket.blocks, s);
        if bucket.blocks.len == 0 {
            let (lower, higher) = (bucket.lower, bucket.higher);
            if lower != NIL {
                self.buckets[lower as usize].higher = higher;
            } else {
                self.lowest = higher;
            }
            if higher != NIL {
                self.buckets[higher as usize].lower = lower;
            }
            self.free_buckets.push(b);
        }
    }

    /// Put slot `s` in bucket `b` as its newest access.
    #[inline]
    fn link(&mut self, s: u32, b: u32) {
        self.links.push_head(&mut self.buckets[b as usize].blocks, s);
        self.bucket_of[s as usize] = b;
    }

    /// A hit on slot `s`: one more access.
    fn bump(&mut self, s: u32) {
        let b = self.bucket_of[s as usize];
        let Bucket { count, higher, .. } = self.buckets[b as usize];
        let alone = self.buckets[b as usize].blocks.len == 1;
        if alone && (higher == NIL || self.buckets[higher as usize].count != count + 1) {
            // Its bucket becomes the next count's, in place.
            self.buckets[b as usize].count = count + 1;
            return;
        }
        let next = if higher != NIL && self.buckets[higher as usize].count == count + 1 {
            higher
        } else {
            self.new_bucket(count + 1, b, higher)
        };
        self.unlink(s);
        self.link(s, next);
    }

    /// The bucket of count 1, made when missing (it is always the lowest).
    fn ones(&mut self) -> u32 {
        if self.lowest != NIL && self.buckets[self.lowest as usize].count == 1 {
            self.lowest
        } else {
            self.new_bucket(1, NIL, self.lowest)
        }
    }
}

impl Policy for Lfu {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if let Some(slot) = self.index.get(a.block) {
            self.bump(slot);
            return true;
        }
        let slot = if self.index.len() >= self.capacity {
            let s = self.buckets[self.lowest as usize].blocks.tail;
            let old = self.blocks[s as usize];
            self.evicted = Some(old);
            self.index.remove(old);
            self.unlink(s);
            self.blocks[s as usize] = a.block;
            s
        } else if let Some(s) = self.free.pop() {
            self.blocks[s as usize] = a.block;
            s
        } else {
            self.blocks.push(a.block);
            self.bucket_of.push(NIL);
            (self.blocks.len() - 1) as u32
        };
        self.index.insert(a.block, slot);
        let ones = self.ones();
        self.link(slot, ones);
        false
    }

    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        access_all_prefetching(self, accesses, |p, block| p.index.prefetch(block))
    }

    fn contains(&self, block: u64) -> bool {
        self.index.contains(block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.index.remove(block) {
            Some(s) => {
                self.unlink(s);
                self.free.push(s);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

//! Replacement policies for the counted executor.
//!
//! Each policy is one file behind the small [`Policy`] trait. A policy is fed
//! block accesses one at a time and says hit or miss; on a miss it inserts the
//! block (evicting as it sees fit) and reports the block it evicted; it can
//! answer whether a block is cached and drop a block on request. Block ids are u64; `next_use` is the index
//! of the next access to the same block (`NEVER` when none), needed only by
//! offline policies such as OPT.

pub mod arc;
pub mod clock;
pub mod fault;
pub mod fifo;
mod ghost;
mod index;
pub mod lfu;
pub mod lirs;
pub mod list;
pub mod lru;
pub mod lru2;
pub mod mq;
pub mod objects;
pub mod opt;
#[cfg(test)]
mod reference;
pub mod s3fifo;
pub mod sieve;
pub mod sim;
pub mod sizes;
pub(crate) mod slab;
mod slot_queue;
#[cfg(test)]
mod tests;
pub mod twoq;

use crate::error::{Error, Result};

/// `next_use` of an access whose block is never accessed again.
pub const NEVER: u64 = u64::MAX;

/// One block access presented to a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub block: u64,
    /// Index (in the access stream) of the next access to this block, or NEVER.
    pub next_use: u64,
    pub write: bool,
}

impl Access {
    /// A read of `block` with no knowledge of its next use (what an online
    /// policy sees).
    pub fn read(block: u64) -> Access {
        Access {
            block,
            next_use: NEVER,
            write: false,
        }
    }
}

/// A cache replacement policy.
///
/// Besides hit/miss, a layer above the policy (a write-back, write-around or
/// invalidating cache) needs to know what left the cache and what is in it:
/// [`Policy::evicted`], [`Policy::contains`], [`Policy::remove`]. "Resident"
/// means cached now; ghost entries (ids a policy remembers after eviction)
/// are not resident. Every access evicts at most one resident block, and only
/// when the cache is full: every policy here makes room for one block by
/// evicting one (ghost moves aside), so the eviction report is a single
/// block (checked for every policy by `tests.rs`).
pub trait Policy: Send {
    /// Present one access; returns true on a hit. On a miss the block is inserted.
    fn access(&mut self, a: &Access) -> bool;
    /// Present a run of accesses in order; the number of hits. The same as
    /// calling [`Policy::access`] on each, but one dynamic call per run (the
    /// counted simulator feeds chunks); a policy may also look ahead in the
    /// run (LRU, LFU, CLOCK, OPT and ARC prefetch the index entries of the
    /// next accesses: `index::access_all_prefetching`).
    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        accesses.iter().map(|a| self.access(a) as u64).sum()
    }
    /// Whether `block` is cached now (resident). No change of state: no
    /// recency or frequency update.
    fn contains(&self, block: u64) -> bool;
    /// The resident block the last `access` evicted to make room, if it
    /// evicted one (None after a hit, and after a miss that found free room).
    /// `remove` does not change it.
    fn evicted(&self) -> Option<u64>;
    /// Drop `block` from the cache if it is resident (an invalidation);
    /// returns whether it was. A non-resident block is left alone (false, no
    /// change of state). What a policy keeps is in its file's header; every
    /// policy here forgets the removed block entirely (it does not become a
    /// ghost: an invalidation is not a replacement decision) and keeps its
    /// ghosts and history of other blocks.
    fn remove(&mut self, block: u64) -> bool;
    /// Blocks currently cached.
    fn len(&self) -> usize;
    /// Capacity in blocks.
    fn capacity(&self) -> usize;
}

/// Names accepted by [`build`].
pub const POLICIES: &[&str] = &[
    "lru", "fifo", "lfu", "clock", "sieve", "arc", "2q", "lirs", "s3fifo", "lru2", "mq", "opt",
];

/// Build a policy by name with a capacity in blocks.
pub fn build(name: &str, capacity: usize) -> Result<Box<dyn Policy>> {
    if capacity == 0 {
        return Err(Error::config("cache size must be at least one block"));
    }
    Ok(match name {
        "lru" => Box::new(lru::Lru::new(capacity)),
        "fifo" => Box::new(fifo::Fifo::new(capacity)),
        "lfu" => Box::new(lfu::Lfu::new(capacity)),
        "clock" => Box::new(clock::Clock::new(capacity)),
        "sieve" => Box::new(sieve::Sieve::new(capacity)),
        "arc" => Box::new(arc::Arc::new(capacity)),
        "2q" => Box::new(twoq::TwoQ::new(capacity)),
        "lirs" => Box::new(lirs::Lirs::new(capacity)),
        "s3fifo" => Box::new(s3fifo::S3Fifo::new(capacity)),
        "lru2" => Box::new(lru2::Lru2::new(capacity)),
        "mq" => Box::new(mq::Mq::new(capacity)),
        "opt" => Box::new(opt::Opt::new(capacity)),
        other => return Err(Error::unknown("policy", other, POLICIES)),
    })
}

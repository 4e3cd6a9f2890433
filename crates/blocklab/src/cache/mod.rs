//! Replacement policies for the counted executor.
//!
//! Each policy is one file behind the small [`Policy`] trait. A policy is fed
//! block accesses one at a time and says hit or miss; on a miss it inserts the
//! block (evicting as it sees fit). Block ids are u64; `next_use` is the index
//! of the next access to the same block (`NEVER` when none), needed only by
//! offline policies such as OPT.

pub mod arc;
pub mod clock;
pub mod fault;
pub mod fifo;
mod ghost;
mod lazy_heap;
pub mod lfu;
pub mod lirs;
pub mod list;
pub mod lru;
pub mod lru2;
pub mod mq;
pub mod opt;
#[cfg(test)]
mod reference;
pub mod s3fifo;
pub mod sieve;
pub mod sim;
pub mod sizes;
mod slab;
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
pub trait Policy: Send {
    /// Present one access; returns true on a hit. On a miss the block is inserted.
    fn access(&mut self, a: &Access) -> bool;
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

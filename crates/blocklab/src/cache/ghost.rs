//! A bounded FIFO of ghost ids: slots of evicted blocks that a policy still
//! remembers (2Q's A1out, S3-FIFO's G, MQ's Qout).
//!
//! Ghosts live in the policy's own slab and link array, so remembering a
//! block moves its slot into this list instead of copying the id, and a miss
//! on a remembered id finds it through the policy's map. The list only decides
//! which slot leaves memory for good; the policy drops it from its map and
//! frees it (see [`Ghosts::remember`]).

use super::list::{Ends, Links32};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Ghosts {
    list: Ends,
    cap: usize,
}

impl Ghosts {
    /// Room for `cap` ids; 0 remembers nothing.
    pub fn new(cap: usize) -> Self {
        Ghosts {
            list: Ends::default(),
            cap,
        }
    }

    /// Remember slot `s` (already unlinked from its queue) as the newest
    /// ghost, dropping the oldest one when full. Returns the slot the caller
    /// must forget for good (remove from its map, free): the dropped oldest
    /// ghost, or `s` itself when the capacity is 0.
    #[inline]
    #[must_use]
    pub fn remember(&mut self, links: &mut Links32, s: u32) -> Option<u32> {
        if self.cap == 0 {
            return Some(s);
        }
        let dropped = if self.list.len + 1 > self.cap {
            links.pop_tail(&mut self.list)
        } else {
            None
        };
        links.push_head(&mut self.list, s);
        dropped
    }

    /// Take ghost `s` out of the list (a miss on a remembered id): the caller
    /// reuses the slot for the block coming back.
    #[inline]
    pub fn take(&mut self, links: &mut Links32, s: u32) {
        links.unlink(&mut self.list, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_of_bounded_size() {
        let mut links = Links32::with_capacity(8);
        for i in 0..8 {
            links.ensure(i);
        }
        let mut g = Ghosts::new(2);
        assert_eq!(g.remember(&mut links, 0), None);
        assert_eq!(g.remember(&mut links, 1), None);
        assert_eq!(g.remember(&mut links, 2), Some(0)); // oldest dropped
        g.take(&mut links, 1);
        assert_eq!(g.remember(&mut links, 3), None); // room again after take
        assert_eq!(g.remember(&mut links, 4), Some(2));
        let mut none = Ghosts::new(0);
        assert_eq!(none.remember(&mut links, 5), Some(5));
    }
}

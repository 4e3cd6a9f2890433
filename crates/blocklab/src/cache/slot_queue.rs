//! A FIFO queue of slots from which a slot can be dropped anywhere, shared by
//! FIFO and CLOCK.
//!
//! Both used to be a ring of `capacity` slots, which cannot lose a block from
//! the middle (an invalidation) and still give the next newcomer the newest
//! place. Here the order is a `VecDeque` of slot indices: a dropped slot is
//! only marked dead and is skipped (and freed) when it reaches the front, so
//! pushing, popping and dropping are O(1). Without drops the queue is the old
//! ring exactly: slots rotate through it in the same order, memory is read
//! sequentially. Dead entries are swept out when they outnumber the live ones
//! (plus a constant), so memory stays within about twice the cached blocks.

use std::collections::VecDeque;

/// Dead entries tolerated beyond the live count before a sweep.
const SLACK: usize = 64;

pub(crate) struct SlotQueue {
    /// Slots, oldest first; may hold dead slots.
    queue: VecDeque<u32>,
    /// Per slot: holds a cached block (false: dropped, or free).
    live: Vec<bool>,
    /// Slots out of the queue and free for reuse.
    free: Vec<u32>,
    /// Live slots in the queue.
    len: usize,
}

impl SlotQueue {
    /// Room for `n` slots without reallocating.
    pub fn with_capacity(n: usize) -> Self {
        SlotQueue {
            queue: VecDeque::with_capacity(n),
            live: Vec::with_capacity(n),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Live slots in the queue.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// A slot for a new block (not yet in the queue): a freed one, else a new
    /// one; true when new (it is then the next index, and the caller grows its
    /// per-slot vectors by one).
    #[inline]
    pub fn alloc(&mut self) -> (u32, bool) {
        match self.free.pop() {
            Some(s) => {
                self.live[s as usize] = true;
                (s, false)
            }
            None => {
                self.live.push(true);
                ((self.live.len() - 1) as u32, true)
            }
        }
    }

    /// Append live slot `s` (allocated, or just popped) as the newest.
    #[inline]
    pub fn push_back(&mut self, s: u32) {
        self.queue.push_back(s);
        self.len += 1;
    }

    /// Take the oldest live slot out of the queue (it stays allocated: the
    /// caller pushes it back or reuses it). Dead slots met on the way are freed.
    #[inline]
    pub fn pop_front(&mut self) -> Option<u32> {
        while let Some(s) = self.queue.pop_front() {
            if self.live[s as usize] {
                self.len -= 1;
                return Some(s);
            }
            self.free.push(s);
        }
        None
    }

    /// Drop live slot `s`, which is in the queue.
    pub fn kill(&mut self, s: u32) {
        self.live[s as usize] = false;
        self.len -= 1;
        if self.queue.len() - self.len > self.len + SLACK {
            let (live, free) = (&self.live, &mut self.free);
            self.queue.retain(|&x| {
                let keep = live[x as usize];
                if !keep {
                    free.push(x);
                }
                keep
            });
        }
    }

    /// Entries in the queue, dead ones included (tests).
    #[cfg(test)]
    pub fn entries(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_survives_kills_and_memory_stays_bounded() {
        let mut q = SlotQueue::with_capacity(4);
        let s: Vec<u32> = (0..4).map(|_| q.alloc().0).collect();
        for &x in &s {
            q.push_back(x);
        }
        q.kill(s[1]);
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop_front(), Some(s[0]));
        // s[1] is dead: skipped and freed, so the next alloc reuses it.
        assert_eq!(q.pop_front(), Some(s[2]));
        assert_eq!(q.alloc(), (s[1], false));
        // Churn without pops: kills alone must not grow the queue for ever.
        for _ in 0..10_000 {
            let (x, _) = q.alloc();
            q.push_back(x);
            q.kill(x);
        }
        assert_eq!(q.len(), 1);
        assert!(q.entries() <= 2 * q.len() + SLACK + 1, "{}", q.entries());
        assert_eq!(q.pop_front(), Some(s[3]));
        assert_eq!(q.pop_front(), None);
    }
}

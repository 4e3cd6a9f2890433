//! An intrusive doubly linked list over a slab of slots, indexed by u32.
//! Policies keep their queues here so that a cached block costs a few words.

pub const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Links {
    prev: u32,
    next: u32,
}

/// Doubly linked lists threaded through shared slot indices. One `Lists`
/// value can hold several disjoint lists (identified by their `Ends`).
#[derive(Debug, Default, Clone)]
pub struct Links32 {
    links: Vec<Links>,
}

/// Head (most recent end) and tail (eviction end) of one list.
#[derive(Debug, Clone, Copy)]
pub struct Ends {
    pub head: u32,
    pub tail: u32,
    pub len: usize,
}

impl Default for Ends {
    fn default() -> Self {
        Ends {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl Links32 {
    pub fn with_capacity(n: usize) -> Self {
        Links32 {
            links: Vec::with_capacity(n),
        }
    }

    /// Make sure slot `i` exists.
    #[inline]
    pub fn ensure(&mut self, i: u32) {
        let i = i as usize;
        if i >= self.links.len() {
            self.links.resize(i + 1, Links { prev: NIL, next: NIL });
        }
    }

    #[inline]
    pub fn next(&self, i: u32) -> u32 {
        self.links[i as usize].next
    }

    #[inline]
    pub fn prev(&self, i: u32) -> u32 {
        self.links[i as usize].prev
    }

    /// Insert slot `i` at the head of `l`.
    #[inline]
    pub fn push_head(&mut self, l: &mut Ends, i: u32) {
        self.ensure(i);
        self.links[i as usize] = Links {
            prev: NIL,
            next: l.head,
        };
        if l.head != NIL {
            self.links[l.head as usize].prev = i;
        } else {
            l.tail = i;
        }
        l.head = i;
        l.len += 1;
    }

    /// Unlink slot `i` from `l`.
    #[inline]
    pub fn unlink(&mut self, l: &mut Ends, i: u32) {
        let Links { prev, next } = self.links[i as usize];
        if prev != NIL {
            self.links[prev as usize].next = next;
        } else {
            l.head = next;
        }
        if next != NIL {
            self.links[next as usize].prev = prev;
        } else {
            l.tail = prev;
        }
        l.len -= 1;
    }

    /// Move slot `i` (already in `l`) to the head.
    #[inline]
    pub fn move_to_head(&mut self, l: &mut Ends, i: u32) {
        if l.head != i {
            self.unlink(l, i);
            self.push_head(l, i);
        }
    }

    /// Remove and return the tail of `l`.
    #[inline]
    pub fn pop_tail(&mut self, l: &mut Ends) -> Option<u32> {
        let t = l.tail;
        if t == NIL {
            return None;
        }
        self.unlink(l, t);
        Some(t)
    }
}

//! Objects of different sizes in a cache counted in bytes: libCacheSim's
//! request model, for the `cachesim` form on traces whose records are
//! objects (vscsi: one object per request, id its LBN, size its length).
//!
//! Everywhere else blocklab caches blocks of one size (the [`super::Policy`]
//! trait); libCacheSim's `cachesim` instead gives each request an object of
//! its own size and a cache of so many bytes. What a request does follows
//! its `cache_get_base` (cache/cache.c): a hit is an object already held,
//! whatever size it is asked with now (its size stays the one it was
//! inserted with); a miss of an object larger than the whole cache inserts
//! nothing; any other miss evicts until the object fits, then inserts it.
//! The policies are its LRU, FIFO and Clock (one-bit counter, insertion at
//! frequency 0) — those whose eviction order does not depend on sizes.

use crate::error::{Error, Result};
use rustc_hash::{FxHashMap, FxHashSet};

/// A cache of objects of different sizes (see the module comment).
pub struct SizedCache {
    kind: Kind,
    capacity: u64,
    used: u64,
    index: FxHashMap<u64, usize>,
    /// Queue nodes; `head` is the newest, `tail` the next victim.
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lru,
    Fifo,
    Clock,
}

const NIL: usize = usize::MAX;

struct Node {
    id: u64,
    size: u64,
    freq: u8,
    prev: usize,
    next: usize,
}

/// Policies offered on objects of different sizes.
pub const SIZED_POLICIES: &[&str] = &["lru", "fifo", "clock"];

impl SizedCache {
    /// A cache of `capacity` bytes (or objects, when every size is 1).
    pub fn new(policy: &str, capacity: u64) -> Result<SizedCache> {
        let kind = match policy {
            "lru" => Kind::Lru,
            "fifo" => Kind::Fifo,
            "clock" => Kind::Clock,
            other => {
                return Err(Error::unknown(
                    "policy on objects of different sizes",
                    other,
                    SIZED_POLICIES,
                ))
            }
        };
        Ok(SizedCache {
            kind,
            capacity,
            used: 0,
            index: FxHashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        })
    }

    /// One request: true on a hit.
    pub fn get(&mut self, id: u64, size: u64) -> bool {
        if let Some(&n) = self.index.get(&id) {
            match self.kind {
                Kind::Lru => {
                    self.unlink(n);
                    self.push_head(n);
                }
                Kind::Fifo => {}
                Kind::Clock => self.nodes[n].freq = 1,
            }
            return true;
        }
        if size > self.capacity {
            return false; // libCacheSim: "larger than cache size", not inserted
        }
        while self.used + size > self.capacity {
            self.evict();
        }
        let node = Node {
            id,
            size,
            freq: 0,
            prev: NIL,
            next: NIL,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n] = node;
                n
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_head(n);
        self.index.insert(id, n);
        self.used += size;
        false
    }

    /// Bytes held.
    pub fn used(&self) -> u64 {
        self.used
    }

    fn evict(&mut self) {
        let mut victim = self.tail;
        // Clock: a referenced object goes back to the head with its bit cleared.
        while self.kind == Kind::Clock && self.nodes[victim].freq >= 1 {
            self.nodes[victim].freq -= 1;
            self.unlink(victim);
            self.push_head(victim);
            victim = self.tail;
        }
        self.unlink(victim);
        let node = &self.nodes[victim];
        self.used -= node.size;
        self.index.remove(&node.id);
        self.free.push(victim);
    }

    fn unlink(&mut self, n: usize) {
        let (prev, next) = (self.nodes[n].prev, self.nodes[n].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_head(&mut self, n: usize) {
        self.nodes[n].prev = NIL;
        self.nodes[n].next = self.head;
        if self.head == NIL {
            self.tail = n;
        } else {
            self.nodes[self.head].prev = n;
        }
        self.head = n;
    }
}

/// One cell of a run on objects: what libCacheSim's `cachesim` counts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObjectCell {
    pub policy: String,
    /// The cache's size in bytes (in objects when every size is 1).
    pub cache_size: u64,
    pub requests: u64,
    pub request_bytes: u64,
    pub misses: u64,
    pub miss_bytes: u64,
}

/// Every (policy, size) cell, policy-major, over one pass of `objects`
/// (`(id, size)` per request).
pub fn simulate(
    objects: impl Iterator<Item = Result<(u64, u64)>>,
    policies: &[String],
    sizes: &[u64],
) -> Result<Vec<ObjectCell>> {
    let mut cells: Vec<(SizedCache, ObjectCell)> = Vec::new();
    for p in policies {
        for &s in sizes {
            let cell = ObjectCell {
                policy: p.clone(),
                cache_size: s,
                requests: 0,
                request_bytes: 0,
                misses: 0,
                miss_bytes: 0,
            };
            cells.push((SizedCache::new(p, s)?, cell));
        }
    }
    for o in objects {
        let (id, size) = o?;
        for (cache, cell) in cells.iter_mut() {
            cell.requests += 1;
            cell.request_bytes += size;
            if !cache.get(id, size) {
                cell.misses += 1;
                cell.miss_bytes += size;
            }
        }
    }
    Ok(cells.into_iter().map(|(_, c)| c).collect())
}

/// libCacheSim's working set (`cal_working_set_size`): distinct objects, and
/// the sum of their sizes at first sight.
pub fn working_set(objects: impl Iterator<Item = Result<(u64, u64)>>) -> Result<(u64, u64)> {
    let mut seen = FxHashSet::default();
    let (mut n, mut bytes) = (0u64, 0u64);
    for o in objects {
        let (id, size) = o?;
        if seen.insert(id) {
            n += 1;
            bytes += size;
        }
    }
    Ok((n, bytes))
}

/// A vscsi file's requests as `(id, size)` objects, libCacheSim's way
/// ([`crate::trace::vscsi::objects`]); every size 1 with `ignore_obj_size`.
fn vscsi_objects(path: &std::path::Path, ignore_obj_size: bool) -> Result<impl Iterator<Item = Result<(u64, u64)>>> {
    let objects = crate::trace::vscsi::objects(path)?;
    Ok(objects.map(move |o| o.map(|o| (o.id, if ignore_obj_size { 1 } else { o.size }))))
}

/// `cachesim TRACE vscsi ALGO SIZES` as libCacheSim runs it: one object per
/// request. Sizes are bytes; with `ignore_obj_size` they count objects and
/// every policy of the block simulator runs (each object one key); without
/// it only [`SIZED_POLICIES`] (others: an error naming the policy).
pub fn vscsi_cells(
    path: &std::path::Path,
    policies: &[String],
    sizes: &[u64],
    ignore_obj_size: bool,
) -> Result<Vec<ObjectCell>> {
    if !ignore_obj_size {
        if let Some(p) = policies.iter().find(|p| !SIZED_POLICIES.contains(&p.as_str())) {
            return Err(Error::config(format!(
                "ALGO: `{p}` is not offered on vscsi objects of different sizes (lru, fifo, clock are); \
                 --ignore-obj-size counts objects and runs every policy"
            )));
        }
        return simulate(vscsi_objects(path, false)?, policies, sizes);
    }
    let offline = policies.iter().any(|p| super::sim::is_offline(p));
    let next = if offline {
        Some(super::sim::next_uses_of_keys(vscsi_objects(path, true)?.map(|o| o.map(|o| o.0)))?.into_iter())
    } else {
        None
    };
    let mut next = next;
    let accesses = vscsi_objects(path, true)?.map(move |o| {
        o.map(|(id, _)| super::Access {
            block: id,
            next_use: next.as_mut().and_then(|n| n.next()).unwrap_or(super::NEVER),
            write: false,
        })
    });
    let cells = super::sim::cells(policies, sizes);
    let (results, _) = super::sim::simulate_accesses(accesses, &cells, &mut |_| Ok(()))?;
    Ok(results
        .into_iter()
        .map(|r| ObjectCell {
            policy: r.policy,
            cache_size: r.cache_blocks,
            requests: r.accesses,
            request_bytes: r.accesses,
            misses: r.misses,
            miss_bytes: r.misses,
        })
        .collect())
}

/// libCacheSim's working set of a vscsi file: (objects, bytes).
pub fn vscsi_working_set(path: &std::path::Path) -> Result<(u64, u64)> {
    working_set(vscsi_objects(path, false)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: &str, capacity: u64, reqs: &[(u64, u64)]) -> Vec<bool> {
        let mut c = SizedCache::new(policy, capacity).unwrap();
        let out = reqs.iter().map(|&(id, s)| c.get(id, s)).collect();
        assert!(c.used() <= capacity);
        out
    }

    #[test]
    fn lru_evicts_least_recent_until_the_new_object_fits() {
        // 10 bytes: 1 and 2 (4 each) fit; the hit on 1 makes 2 the LRU, so
        // 3 evicts 2; 2 then evicts 1; 4 (6 bytes) evicts 3 alone (4 + 6 = 10
        // fits); 1 is gone.
        let reqs = [(1, 4), (2, 4), (1, 4), (3, 4), (2, 4), (4, 6), (1, 4)];
        assert_eq!(
            run("lru", 10, &reqs),
            vec![false, false, true, false, false, false, false]
        );
    }

    #[test]
    fn fifo_ignores_hits_and_clock_gives_a_second_chance() {
        // 8 bytes, objects of 4: a b a c -> FIFO evicts a (first in) despite its hit.
        let reqs = [(1, 4), (2, 4), (1, 4), (3, 4), (1, 4)];
        assert_eq!(run("fifo", 8, &reqs), vec![false, false, true, false, false]);
        // Clock: a was referenced, so c's insertion passes it over and evicts b.
        assert_eq!(run("clock", 8, &reqs), vec![false, false, true, false, true]);
    }

    #[test]
    fn an_object_larger_than_the_cache_misses_and_evicts_nothing() {
        let reqs = [(1, 4), (2, 9), (1, 4)];
        assert_eq!(run("lru", 8, &reqs), vec![false, false, true]);
    }

    #[test]
    fn a_hit_keeps_the_size_it_was_inserted_with() {
        // libCacheSim counts a held object as a hit at any size, and its
        // bytes stay those of its insertion: 1(2) then 1(8) is a hit, and
        // 2(6) still fits beside it in 8 bytes.
        let reqs = [(1, 2), (1, 8), (2, 6), (1, 2)];
        assert_eq!(run("lru", 8, &reqs), vec![false, true, false, true]);
    }

    #[test]
    fn objects_of_size_one_are_the_block_policies() {
        // Every size 1: the byte budget is an object count, and LRU, FIFO and
        // CLOCK decide as blocklab's block policies do.
        let keys: Vec<u64> = (0..5000u64).map(|i| (i * 7919 + i / 3) % 97).collect();
        for p in SIZED_POLICIES {
            let mut block = super::super::build(p, 20).unwrap();
            let mut sized = SizedCache::new(p, 20).unwrap();
            for &k in &keys {
                assert_eq!(block.access(&super::super::Access::read(k)), sized.get(k, 1), "{p}");
            }
        }
    }

    #[test]
    fn cells_count_requests_and_bytes_and_the_working_set_first_sizes() {
        let reqs = vec![(1u64, 4u64), (2, 4), (1, 2), (3, 8)];
        let cells = simulate(reqs.iter().map(|&r| Ok(r)), &["lru".into()], &[8]).unwrap();
        assert_eq!((cells[0].requests, cells[0].request_bytes), (4, 18));
        assert_eq!((cells[0].misses, cells[0].miss_bytes), (3, 16));
        assert_eq!(working_set(reqs.iter().map(|&r| Ok(r))).unwrap(), (3, 16));
        assert!(SizedCache::new("arc", 8).is_err());
    }
}

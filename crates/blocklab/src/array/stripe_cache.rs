//! MD's RAID-4/5/6 stripe cache for reads of a degraded array
//! (`array.stripe_cache = N`).
//!
//! What Linux's `drivers/md/raid5.c` does (facts we model):
//! - A *stripe head* covers one page (4 KiB, `STRIPE_SIZE`) of every member
//!   at the same member offset; `stripe_cache_size` of them are kept (256 by
//!   default), reused least recently used first.
//! - While the array is not degraded, a read inside one chunk bypasses the
//!   cache (`chunk_aligned_read`); once it is degraded every read goes
//!   through stripe heads ("better not do chunk aligned read because later we
//!   might have to read it again in order to reconstruct data on failed
//!   drives").
//! - Reading a page of a failed member reads the stripe head's other pages
//!   and computes the missing one; the pages stay up to date while the
//!   stripe head is cached, so a later read of any page of it (the lost one
//!   included) reads no disk.
//!
//! Our model, one array block = one page: while any disk is failed (or
//! rebuilding), each read plan is filtered: a disk read of a page its stripe
//! head holds up to date is dropped (it becomes a zero-time `Delay`, so the
//! plan's shape stays), an XOR left with nothing read becomes a `Delay` too.
//! Then the pages read are marked up to date, and every stripe head a
//! reconstruct-read touched is whole (the lost page was computed). Write
//! plans drop the stripe heads they touch (conservative: MD would keep the
//! new data). Rebuild I/O is not routed through it. Off (N = 0) the plans
//! are untouched.

use crate::array::plan::{Action, Cause, DiskOpKind, IoPlan};
use crate::cache::list::{Ends, Links32};
use crate::cache::slab::Slab;

/// Stripe heads by member offset, least recently used first out.
pub struct StripeCache {
    capacity: usize,
    /// Member offset <-> slot.
    heads: Slab,
    /// Per slot: up-to-date pages (bit per disk).
    pages: Vec<u64>,
    links: Links32,
    order: Ends,
}

impl StripeCache {
    /// `capacity` stripe heads (at least 1); at most 64 members.
    pub fn new(capacity: usize) -> Self {
        StripeCache {
            capacity: capacity.max(1),
            heads: Slab::with_capacity(0),
            pages: Vec::new(),
            links: Links32::default(),
            order: Ends::default(),
        }
    }

    /// Forget everything (a new pass).
    pub fn clear(&mut self) {
        *self = StripeCache::new(self.capacity);
    }

    /// Whether page (`offset`, `disk`) is up to date in the cache.
    pub fn holds(&self, offset: u64, disk: u32) -> bool {
        self.heads
            .get(offset)
            .is_some_and(|s| self.pages[s as usize] >> disk & 1 == 1)
    }

    /// Mark pages of stripe head `offset` up to date (made most recent,
    /// evicting the least recent head when full).
    fn mark(&mut self, offset: u64, pages: u64) {
        if let Some(s) = self.heads.get(offset) {
            self.pages[s as usize] |= pages;
            self.links.move_to_head(&mut self.order, s);
            return;
        }
        if self.order.len >= self.capacity {
            let t = self.links.pop_tail(&mut self.order).expect("full cache");
            self.heads.forget(t);
        }
        let (s, new) = self.heads.insert(offset);
        if new {
            self.pages.push(pages);
        } else {
            self.pages[s as usize] = pages;
        }
        self.links.push_head(&mut self.order, s);
    }

    fn drop_head(&mut self, offset: u64) {
        if let Some(s) = self.heads.get(offset) {
            self.links.unlink(&mut self.order, s);
            self.heads.forget(s);
        }
    }

    /// The plan a degraded array runs for `plan` with this cache (see the
    /// module header), and the cache updated by it. `ndisks` members.
    pub fn filter(&mut self, plan: IoPlan, ndisks: u32) -> IoPlan {
        let all: u64 = if ndisks >= 64 { u64::MAX } else { (1 << ndisks) - 1 };
        let writes = plan
            .disk_ops()
            .any(|op| op.kind == DiskOpKind::Write && op.cause != Cause::Rebuild);
        if writes {
            for op in plan.disk_ops() {
                if op.kind == DiskOpKind::Write {
                    for o in op.block..op.block + op.nblocks as u64 {
                        self.drop_head(o);
                    }
                }
            }
            return plan;
        }
        // Old node index -> new node indices (empty: nothing left to wait for).
        let mut map: Vec<Vec<u16>> = Vec::with_capacity(plan.nodes.len());
        let mut out = IoPlan::default();
        let mut read: Vec<(u64, u32, bool)> = Vec::new(); // (offset, disk, reconstruct)
        for node in plan.nodes {
            let deps: Vec<u16> = node
                .deps
                .iter()
                .flat_map(|&d| map[d as usize].iter().copied())
                .collect();
            let mut made = Vec::new();
            match node.action {
                Action::Disk(op) if op.kind == DiskOpKind::Read => {
                    // The runs of pages not held, each one read.
                    let end = op.block + op.nblocks as u64;
                    let mut b = op.block;
                    while b < end {
                        if self.holds(b, op.disk) {
                            b += 1;
                            continue;
                        }
                        let start = b;
                        while b < end && !self.holds(b, op.disk) {
                            b += 1;
                        }
                        let mut part = op;
                        part.block = start;
                        part.nblocks = (b - start) as u32;
                        made.push(out.push(Action::Disk(part), &deps));
                    }
                    for o in op.block..end {
                        read.push((o, op.disk, op.cause == Cause::ReconstructRead));
                    }
                }
                Action::Xor { .. } | Action::PQ { .. } if deps.is_empty() && !node.deps.is_empty() => {
                    // Every input was held: the page is in the cache already.
                }
                action => made.push(out.push(action, &deps)),
            }
            if made.is_empty() && !deps.is_empty() {
                // Keep the ordering of what waits for this node.
                made.push(out.push(Action::Delay { ns: 0 }, &deps));
            }
            map.push(made);
        }
        if out.nodes.is_empty() {
            out.push(Action::Delay { ns: 0 }, &[]);
        }
        for (o, disk, reconstruct) in read {
            self.mark(o, if reconstruct { all } else { 1 << disk });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Array, ArrayConfig, Level};
    use crate::exec::count::CountExecutor;

    /// Disk reads of a plan: (disk, block, blocks).
    fn reads(p: &IoPlan) -> Vec<(u32, u64, u32)> {
        p.disk_ops()
            .filter(|o| o.kind == DiskOpKind::Read)
            .map(|o| (o.disk, o.block, o.nblocks))
            .collect()
    }

    /// A 5-disk RAID-5, 4 KiB chunks (one block per chunk), disk 0 failed.
    fn degraded() -> Array {
        let mut c = ArrayConfig::new(Level::Raid5, 5);
        c.chunk_bytes = 4096;
        let mut a = Array::new(c).unwrap();
        a.fail(0).unwrap();
        a
    }

    /// The array block of stripe `row` (4 data blocks) that lives on `disk`.
    fn block_on(a: &Array, row: u64, disk: u32) -> u64 {
        (row * 4..row * 4 + 4).find(|&b| a.disk_of(b) == disk).unwrap()
    }

    #[test]
    fn two_misses_in_one_stripe_on_the_failed_disk_cost_n_minus_1_reads_once() {
        let a = degraded();
        let lost = block_on(&a, 3, 0);
        assert_eq!(a.read_penalty(lost), Some(4));
        let mut c = StripeCache::new(256);
        let first = c.filter(a.plan_read(lost, 1), 5);
        assert_eq!(reads(&first).len(), 4, "n - 1 = 4 reads to reconstruct");
        let again = c.filter(a.plan_read(lost, 1), 5);
        assert_eq!(reads(&again), vec![], "the page is up to date in the stripe head");
        // A healthy block of the same row: also held (read for the reconstruction).
        let healthy = (12..16).find(|&b| b != lost).unwrap();
        let third = c.filter(a.plan_read(healthy, 1), 5);
        assert_eq!(reads(&third), vec![]);
        // Without the cache: 4 + 4 + 1 reads; with it 4.
        let mut ledger = CountExecutor::new(5);
        for p in [&first, &again, &third] {
            ledger.run(p);
        }
        assert_eq!(ledger.total_reads(), 4);
    }

    #[test]
    fn a_healthy_read_holds_its_page_only_and_lru_evicts() {
        let a = degraded();
        let mut c = StripeCache::new(1);
        let h = block_on(&a, 2, 1);
        assert_eq!(reads(&c.filter(a.plan_read(h, 1), 5)).len(), 1);
        assert_eq!(reads(&c.filter(a.plan_read(h, 1), 5)).len(), 0);
        // The lost block of row 2 still needs the 3 pages not held.
        let lost = block_on(&a, 2, 0);
        assert_eq!(reads(&c.filter(a.plan_read(lost, 1), 5)).len(), 3);
        // One stripe head only: row 5 pushes row 2 out.
        c.filter(a.plan_read(block_on(&a, 5, 2), 1), 5);
        assert_eq!(reads(&c.filter(a.plan_read(h, 1), 5)).len(), 1);
        // A write drops the head it touches.
        c.filter(a.plan_write(h, 1), 5);
        assert!(!c.holds(2, 1));
    }
}

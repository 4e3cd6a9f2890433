//! Removes must not leak: memory follows the cache's state, not the number of
//! invalidations. Every policy goes through a long churn of inserts, hits and
//! removes at a fixed size, with a counting allocator (this test binary only,
//! one test, so nothing else allocates while it measures); heap use after the
//! churn must stay at what it was once the churn had reached a steady state.

use blocklab::cache::fault::{all_policies, build_fault_aware, FaultMap, ModMap};
use blocklab::cache::{Access, Policy};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const CAP: usize = 1000;

/// `cycles` rounds of: a hit-prone access to a hot block, a new block in and
/// straight out again, and now and then a hot block removed.
fn churn(p: &mut dyn Policy, from: u64, cycles: u64) {
    for i in from..from + cycles {
        p.access(&Access::read(i % 600));
        let fresh = 1_000_000 + i;
        p.access(&Access::read(fresh));
        assert!(p.remove(fresh));
        if i % 7 == 0 {
            p.remove(i % 600);
        }
    }
}

#[test]
fn removes_do_not_grow_memory() {
    for name in all_policies() {
        let faults: Arc<dyn FaultMap> = Arc::new(ModMap::with_failed(4, &[1]));
        let mut p = build_fault_aware(name, CAP, faults).unwrap();
        // Fill, pass 3x the size through (ghost lists fill), reach a steady churn.
        for b in 0..3 * CAP as u64 {
            p.access(&Access::read(100_000 + b));
        }
        churn(p.as_mut(), 0, 50_000);
        let steady = LIVE.load(Ordering::Relaxed);
        churn(p.as_mut(), 50_000, 300_000);
        let after = LIVE.load(Ordering::Relaxed);
        let grown = after - steady;
        println!("{name:9} steady {steady} bytes, grown {grown}");
        assert!(
            grown <= 64 * 1024,
            "{name}: {grown} bytes more after 300,000 more removes"
        );
        drop(p);
    }
}

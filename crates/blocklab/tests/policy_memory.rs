//! Bytes of heap per cached block, measured with a counting allocator (this
//! test binary only). LRU must stay within 64 bytes per block; the others are
//! printed for the record (`cargo test --test policy_memory -- --nocapture`).

use blocklab::cache::{build, Access, NEVER, POLICIES};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

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

/// Heap bytes per cached block once `cap` distinct blocks (then twice as
/// many, so that ghost lists fill) have gone through the policy.
fn bytes_per_block(name: &str, cap: usize) -> f64 {
    let before = LIVE.load(Ordering::Relaxed);
    let mut p = build(name, cap).unwrap();
    for b in 0..(3 * cap as u64) {
        p.access(&Access {
            block: b,
            next_use: NEVER,
            write: false,
        });
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(p.len(), cap);
    let bytes = (after - before) as f64 / cap as f64;
    drop(p);
    bytes
}

#[test]
fn lru_fits_in_64_bytes_per_block() {
    // Only this test allocates in this binary while it measures.
    for cap in [100_000, 70_000, 1_000_000] {
        let b = bytes_per_block("lru", cap);
        println!("lru cap={cap}: {b:.1} bytes/block");
        assert!(b <= 64.0, "lru uses {b:.1} bytes per block at {cap}");
    }
    for name in POLICIES {
        println!("{name:7} cap=20000: {:.1} bytes/block", bytes_per_block(name, 20_000));
    }
}

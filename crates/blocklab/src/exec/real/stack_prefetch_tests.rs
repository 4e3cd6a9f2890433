//! Hsu–Smith's read-ahead (`prefetch = "readahead" | "csp"`) of a host
//! cache on real bytes: the counted run's decisions (prefetches included),
//! and bytes that are always the newest acknowledged ones — a write racing
//! the read ahead of its block wins, a hit on a block still on its way waits.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::stack::{array_config, RealStack};
use super::{OpenConfig, RealArray};
use crate::stack::result::{LayerReport, StackResult};
use crate::stack::spec::StackSpec;
use crate::stack::test_util::parse_spec;
use crate::trace::{Op, Request};

// Members of stack_tests' size, run through its counted and real replays.
use super::stack_tests::{counted, real, MEMBER};
const BS: u64 = 4096;

fn stack_text(caches: &str) -> String {
    format!(
        "tenant_map = \"ignore\"\n{caches}\n[array]\nraid = \"raid5\"\ndisks = 4\nchunk = \"16KiB\"\n\
         [device]\nmodel = \"const:1\"\n"
    )
}

fn spec(text: &str, sets: &[&str]) -> StackSpec {
    parse_spec(text, sets, "stack.toml", PathBuf::new()).unwrap()
}

/// A host cache layer of `size` blocks that reads ahead (`prefetch` keys in `pf`).
fn cache(policy: &str, size: u64, write: &str, pf: &str) -> String {
    format!("[[cache]]\npolicy = \"{policy}\"\nsize = {size}\nwrite = \"{write}\"\n{pf}\n")
}

const READAHEAD: &str = "prefetch = \"readahead\"\nreadahead = \"64KiB\"";
const CSP: &str = "prefetch = \"csp\"\ncsp_segment = \"16KiB\"\ncsp_max = \"128KiB\"";

fn real_array(dir: &Path, s: &StackSpec) -> Arc<RealArray> {
    RealArray::create(dir, array_config(s, MEMBER).unwrap(), false).unwrap();
    Arc::new(RealArray::open(dir, OpenConfig::default()).unwrap())
}

fn rng(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Seeded requests over `blocks` blocks: sequential read streams (what
/// read-ahead is for), random reads, writes (some just ahead of the stream,
/// on blocks being read ahead; some of part of a block).
fn workload(seed: u64, n: usize, blocks: u64) -> Vec<Request> {
    let mut s = seed;
    let mut cursor = 0u64;
    (0..n)
        .map(|i| {
            let u = rng(&mut s) % 100;
            let nb = 1 + rng(&mut s) % 4;
            let (op, b) = match u {
                0..=59 => {
                    if rng(&mut s).is_multiple_of(40) {
                        cursor = rng(&mut s) % blocks;
                    }
                    let b = cursor;
                    cursor = (cursor + nb) % (blocks - 4);
                    (Op::Read, b)
                }
                60..=79 => (Op::Read, rng(&mut s) % (blocks - 4)),
                80..=89 => (Op::Write, (cursor + 1 + rng(&mut s) % 12) % (blocks - 4)),
                _ => (Op::Write, rng(&mut s) % (blocks - 4)),
            };
            let (mut offset, mut len) = (b * BS, nb * BS);
            if op == Op::Write && rng(&mut s).is_multiple_of(4) {
                offset += rng(&mut s) % 4 * 512;
                len -= rng(&mut s) % 4 * 512 + 512;
            }
            Request {
                time: i as f64 * 0.001,
                op,
                offset,
                len,
                tenant: 0,
                fs: Default::default(),
            }
        })
        .collect()
}

fn decisions(l: &LayerReport) -> [u64; 11] {
    [
        l.accesses,
        l.hits,
        l.misses,
        l.read_hits,
        l.read_request_misses,
        l.dirty_evictions,
        l.flushed_blocks,
        l.fetched_blocks,
        l.written_below_blocks,
        l.prefetched_blocks,
        l.prefetch_ops,
    ]
}

fn assert_same(c: &StackResult, r: &StackResult, what: &str) {
    assert_eq!(c.layers.len(), r.layers.len(), "{what}");
    for (a, b) in c.layers.iter().zip(&r.layers) {
        assert_eq!(decisions(a), decisions(b), "{what}: layer {}", a.name);
    }
    let (ca, ra) = (c.array.as_ref().unwrap(), r.array.as_ref().unwrap());
    assert_eq!(ca.ops_by_cause, ra.ops_by_cause, "{what}: array operations by cause");
    assert_eq!(c.devices, r.devices, "{what}: per disk");
}

#[test]
fn counted_and_real_prefetch_alike_healthy_and_degraded() {
    let cases = [
        cache("lru", 64, "back", READAHEAD),
        cache("arc", 48, "through", CSP),
        cache("lru", 32, "around", READAHEAD),
        // Read-ahead in the top layer over a second layer that keeps what it reads.
        cache("lru", 32, "back", CSP) + &cache("lru", 96, "back", ""),
    ];
    for caches in &cases {
        for degraded in [false, true] {
            let text = stack_text(caches);
            let s = spec(&text, &[]);
            let dir = tempfile::tempdir().unwrap();
            let a = real_array(dir.path(), &s);
            if degraded {
                a.fail(1).unwrap();
            }
            let reqs = workload(5, 1500, 512);
            let st = RealStack::new(&s, a.clone()).unwrap();
            let r = real(&st, &reqs);
            let sets: &[&str] = if degraded { &["array.failed=[1]"] } else { &[] };
            let c = counted(&spec(&text, sets), &reqs);
            let l = &c.layers[0];
            assert!(
                l.prefetch_ops > 0 && l.hits > 0 && l.misses > 0,
                "a test that reads ahead: {l:?}"
            );
            assert_same(&c, &r, &format!("{caches} degraded={degraded}"));
            for (policy, store) in st.residency() {
                assert_eq!(policy, store, "a layer's store holds what its policy holds");
            }
        }
    }
}

/// The bytes of `block` at version `v` (0: never written, all zeroes).
fn stamp(block: u64, v: u64) -> Vec<u8> {
    if v == 0 {
        return vec![0; BS as usize];
    }
    let mut b = vec![(v as u8) | 1; BS as usize];
    b[..8].copy_from_slice(&block.to_le_bytes());
    b[8..16].copy_from_slice(&v.to_le_bytes());
    b
}

/// Several threads: sequential readers (every miss reads ahead) and writers
/// of the blocks just ahead of them, each block written by one writer, its
/// versions counted up. A read must return the block at a version at least
/// the one acknowledged before the read began and at most the one begun
/// before it ended: never the bytes of an older write, never zeroes.
#[test]
fn writes_racing_the_read_ahead_of_their_blocks_win() {
    const BLOCKS: u64 = 256;
    for (caches, fail) in [
        (cache("lru", 48, "back", READAHEAD), false),
        (cache("lru", 48, "through", CSP), true),
        (cache("arc", 40, "back", CSP) + &cache("lru", 64, "through", ""), false),
    ] {
        let s = spec(&stack_text(&caches), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_array(dir.path(), &s);
        if fail {
            a.fail(2).unwrap();
        }
        let st = RealStack::new(&s, a.clone()).unwrap();
        let begun: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let acked: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let front = AtomicU64::new(0);
        std::thread::scope(|sc| {
            for r in 0..2u64 {
                let (st, begun, acked, front) = (&st, &begun, &acked, &front);
                sc.spawn(move || {
                    let mut s = 17 + r;
                    let mut b = r * BLOCKS / 2;
                    for _ in 0..600 {
                        let n = 1 + rng(&mut s) % 3;
                        let first = b % (BLOCKS - n);
                        front.store(first, Ordering::Relaxed);
                        let lo: Vec<u64> = (first..first + n)
                            .map(|x| acked[x as usize].load(Ordering::SeqCst))
                            .collect();
                        let mut buf = vec![0u8; (n * BS) as usize];
                        st.read(first * BS, &mut buf).unwrap();
                        for (i, x) in (first..first + n).enumerate() {
                            let hi = begun[x as usize].load(Ordering::SeqCst);
                            let got = &buf[i * BS as usize..(i + 1) * BS as usize];
                            let ok = (lo[i]..=hi).any(|v| got == stamp(x, v));
                            assert!(ok, "block {x}: bytes of no version in {}..={hi}", lo[i]);
                        }
                        b = first + n;
                    }
                });
            }
            for w in 0..2u64 {
                let (st, begun, acked, front) = (&st, &begun, &acked, &front);
                sc.spawn(move || {
                    let mut s = 91 + w;
                    for _ in 0..400 {
                        // A block of this writer's just ahead of a reader.
                        let ahead = front.load(Ordering::Relaxed) + 1 + rng(&mut s) % 16;
                        let x = (ahead & !1 | w) % BLOCKS;
                        let v = begun[x as usize].load(Ordering::SeqCst) + 1;
                        begun[x as usize].store(v, Ordering::SeqCst);
                        st.write(x * BS, &stamp(x, v), false).unwrap();
                        acked[x as usize].store(v, Ordering::SeqCst);
                        if rng(&mut s).is_multiple_of(100) {
                            st.flush().unwrap();
                        }
                    }
                });
            }
        });
        // Quiet: every block reads back at its last version, and after a
        // FLUSH the array alone holds it.
        st.flush().unwrap();
        let l = &st.result().layers[0];
        assert!(
            l.prefetch_ops > 0 && l.prefetched_blocks > 0,
            "{caches}: no read-ahead: {l:?}"
        );
        for x in 0..BLOCKS {
            let want = stamp(x, acked[x as usize].load(Ordering::SeqCst));
            let mut buf = vec![0u8; BS as usize];
            st.read(x * BS, &mut buf).unwrap();
            assert!(buf == want, "{caches}: block {x} through the stack");
            a.read(x * BS, &mut buf).unwrap();
            assert!(buf == want, "{caches}: block {x} on the array alone");
        }
        assert_eq!(st.io_in_flight(), 0);
    }
}

/// Spin (yielding) until `ready` holds, or `limit` passed (the caller then
/// checks what it needs: this only gives a wrong order its chance).
fn until_or(limit: std::time::Duration, ready: impl Fn() -> bool) {
    let t = std::time::Instant::now();
    while !ready() && t.elapsed() < limit {
        std::thread::yield_now();
    }
}

#[test]
fn a_read_ahead_decided_after_a_write_below_reads_the_written_bytes() {
    // Write-around: block 5 is not cached, its write goes to the array.
    let s = spec(&stack_text(&cache("lru", 32, "around", READAHEAD)), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let new = vec![0xa5u8; BS as usize];
    // The write is decided, its member I/O not done.
    let w = st.decide(0, None, Op::Write, 5 * BS, BS, Some(&new)).unwrap();
    let before = st.io_in_flight();
    std::thread::scope(|sc| {
        // A miss on block 4 reads blocks 5.. ahead and keeps them.
        let reader = sc.spawn(|| {
            let mut buf = vec![0u8; BS as usize];
            st.read(4 * BS, &mut buf).unwrap();
        });
        until_or(std::time::Duration::from_millis(300), || {
            reader.is_finished() || st.io_in_flight() > before + 1
        });
        // Give a read ahead that ignored the write the time to finish first.
        until_or(std::time::Duration::from_millis(200), || reader.is_finished());
        w.complete(None).unwrap();
        reader.join().unwrap();
    });
    let mut buf = vec![0u8; BS as usize];
    st.read(5 * BS, &mut buf).unwrap();
    let l = &st.result().layers[0];
    assert_eq!(
        (l.prefetch_ops, l.read_hits),
        (1, 1),
        "block 5 was read ahead, then hit: {l:?}"
    );
    assert!(
        buf == new,
        "the read ahead kept the block's bytes from before the write"
    );
}

#[test]
fn a_write_after_the_read_ahead_of_its_block_wins() {
    let s = spec(&stack_text(&cache("lru", 32, "back", READAHEAD)), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    a.write(5 * BS, &vec![0x11u8; BS as usize], false).unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    // A miss on block 4: blocks 5.. read ahead, their bytes on the way.
    let r = st.decide(0, None, Op::Read, 4 * BS, BS, None).unwrap();
    let new = vec![0x77u8; BS as usize];
    st.write(5 * BS, &new, false).unwrap();
    let mut buf = vec![0u8; BS as usize];
    st.read(5 * BS, &mut buf).unwrap();
    assert!(buf == new, "a hit after the write");
    r.complete(Some(&mut vec![0u8; BS as usize])).unwrap();
    st.read(5 * BS, &mut buf).unwrap();
    assert!(
        buf == new,
        "the read ahead, landed after the write, put older bytes back"
    );
    st.flush().unwrap();
    a.read(5 * BS, &mut buf).unwrap();
    assert!(buf == new, "the array after a FLUSH");
    let l = &st.result().layers[0];
    assert_eq!((l.prefetch_ops, l.read_hits), (1, 2), "{l:?}");
}

#[test]
fn a_failed_read_ahead_fails_the_hits_on_it_never_its_request_nor_with_zeroes() {
    // RAID-0, two members, 16 KiB chunks: blocks 0-3 on member 0, 4-7 on 1.
    let text = "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 32\nwrite = \"back\"\n\
                prefetch = \"readahead\"\nreadahead = \"32KiB\"\n\
                [array]\nraid = \"raid0\"\ndisks = 2\nchunk = \"16KiB\"\n[device]\nmodel = \"const:1\"\n";
    let s = spec(text, &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    a.write(0, &vec![0x3cu8; 8 * BS as usize], false).unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    // A miss on block 0 reads 1..=8 ahead; member 1 fails before the I/O runs.
    let d = st.decide(0, None, Op::Read, 0, BS, None).unwrap();
    a.fail(1).unwrap();
    let mut buf = vec![0u8; BS as usize];
    d.complete(Some(&mut buf)).unwrap();
    assert_eq!(buf, vec![0x3cu8; BS as usize], "the demand read is whole");
    // Block 1 (member 0) was read ahead in the same failed I/O: a hit, an error.
    let got = st.read(BS, &mut buf);
    assert!(
        got.is_err(),
        "a hit on a failed read ahead returned bytes: {:?}",
        &buf[..4]
    );
    assert_eq!(st.result().layers[0].read_hits, 1);
}

#[test]
fn read_ahead_runs_on_real_bytes_its_idle_class_noted_and_the_other_prefetch_keys_refused() {
    let text = stack_text(&cache("lru", 32, "back", READAHEAD));
    let s = spec(&text, &["cache.0.prefetch_class=\"idle\""]);
    super::stack::check_real(&s).unwrap();
    let notes = super::stack::ignored_keys(&s);
    assert!(
        notes.iter().any(|n| n.contains("cache.0.prefetch_class: ignored")),
        "{notes:?}"
    );
    for (set, key) in [
        ("cache.0.fetch_unit=\"64KiB\"", "cache.0.fetch_unit"),
        ("cache.0.prefetch_buffer=\"64KiB\"", "cache.0.prefetch_buffer"),
    ] {
        let e = super::stack::check_real(&spec(&text, &[set])).unwrap_err().to_string();
        assert!(e.contains("stack.toml") && e.contains(key), "{key}: {e}");
    }
}

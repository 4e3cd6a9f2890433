//! A stack on real bytes: its decisions are a counted run's (counted ≡
//! real), every read returns what a reference image holds, a FLUSH leaves
//! the array alone holding it, and fault-aware caches see the real array.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::rebuild::RebuildOptions;
use super::stack::{array_config, RealStack};
use super::{OpenConfig, RealArray};
use crate::stack::build::{build, Executor};
use crate::stack::result::StackResult;
use crate::stack::spec::{Origin, StackSpec};
use crate::trace::{self, Op, Request, TraceOptions};

const MEMBER: u64 = 4 << 20;

fn spec(text: &str, sets: &[&str]) -> StackSpec {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    StackSpec::from_str_with(
        text,
        &sets,
        Origin {
            file: "stack.toml".into(),
            dir: PathBuf::new(),
        },
    )
    .unwrap()
}

/// A RAID stack with host caches; `{level}`, `{disks}`, `{caches}` filled in.
fn stack_text(level: &str, disks: u32, caches: &str) -> String {
    format!(
        "tenant_map = \"ignore\"\n{caches}\n[array]\nraid = \"{level}\"\ndisks = {disks}\nchunk = \"16KiB\"\n\
         [device]\nmodel = \"const:1\"\n"
    )
}

fn cache(policy: &str, size: u64, write: &str) -> String {
    format!("[[cache]]\npolicy = \"{policy}\"\nsize = {size}\nwrite = \"{write}\"\n")
}

/// The real array of `s` in `dir`, opened.
fn real_array(dir: &Path, s: &StackSpec) -> Arc<RealArray> {
    let cfg = array_config(s, MEMBER).unwrap();
    RealArray::create(dir, cfg, false).unwrap();
    Arc::new(RealArray::open(dir, OpenConfig::default()).unwrap())
}

fn rng(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Seeded requests over `size` bytes: a skewed (Zipf-like: the square of a
/// uniform number) choice of 4 KiB regions, some writes, some requests of
/// part of a block when `partial`.
fn synthetic(seed: u64, n: usize, size: u64, write_share: u64, partial: bool) -> Vec<Request> {
    let mut s = seed;
    let blocks = size / 4096;
    (0..n)
        .map(|i| {
            let u = rng(&mut s) % 1_000_000;
            let b = (u * u / 1_000_000) * blocks / 1_000_000;
            let nb = 1 + rng(&mut s) % 4;
            let b = b.min(blocks - nb);
            let (mut offset, mut len) = (b * 4096, nb * 4096);
            if partial && rng(&mut s).is_multiple_of(3) {
                // Part of the first and of the last block.
                let (head, tail) = (rng(&mut s) % 4 * 512, rng(&mut s) % 4 * 512 + 512);
                offset += head;
                len -= head + tail;
            }
            Request {
                time: i as f64 * 0.001,
                op: if rng(&mut s) % 100 < write_share {
                    Op::Write
                } else {
                    Op::Read
                },
                offset,
                len,
                tenant: 0,
                fs: Default::default(),
            }
        })
        .collect()
}

/// The first `n` requests of data/wsrch-small.trace, folded into `size` bytes.
fn wsrch(n: usize, size: u64) -> Vec<Request> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/wsrch-small.trace");
    let opts = TraceOptions {
        format: "mqsim".into(),
        ..Default::default()
    };
    trace::open(&path, &opts)
        .unwrap()
        .take(n)
        .map(|r| {
            let mut r = r.unwrap();
            r.len = r.len.max(512);
            if r.offset + r.len > size {
                r.offset %= size - r.len + 1;
            }
            r.tenant = 0;
            r
        })
        .collect()
}

/// `reqs` through the counted stack of `s` (members of `MEMBER` bytes).
fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    let mut s = s.clone();
    s.array.as_mut().unwrap().disk_size = Some(crate::stack::spec::NumOrStr::Int(MEMBER));
    let mut st = build(&s, Executor::Count, None).unwrap();
    for r in reqs {
        st.count_request(r).unwrap();
    }
    st.count_finish().unwrap();
    let mut out = st.result("count");
    out.finish();
    out
}

/// `reqs` through the stack on real bytes (writes carry a pattern), then a FLUSH.
fn real(st: &RealStack, reqs: &[Request]) -> StackResult {
    for r in reqs {
        let mut buf = vec![0u8; r.len as usize];
        match r.op {
            Op::Read => st.read(r.offset, &mut buf).unwrap(),
            Op::Write => {
                buf.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = (r.offset as usize + i) as u8 ^ 0x5a);
                st.write(r.offset, &buf, false).unwrap()
            }
        }
    }
    st.flush().unwrap();
    st.result()
}

/// Every layer's decisions and the array's operations by cause agree.
fn assert_same(c: &StackResult, r: &StackResult, what: &str) {
    assert_eq!(c.layers.len(), r.layers.len(), "{what}");
    for (a, b) in c.layers.iter().zip(&r.layers) {
        let key = |l: &crate::stack::result::LayerReport| {
            (
                l.accesses,
                l.hits,
                l.misses,
                l.read_hits,
                l.dirty_evictions,
                l.flushed_blocks,
                l.fetched_blocks,
                l.written_below_blocks,
            )
        };
        assert_eq!(key(a), key(b), "{what}: layer {}", a.name);
    }
    let (ca, ra) = (c.array.as_ref().unwrap(), r.array.as_ref().unwrap());
    assert_eq!(ca.ops_by_cause, ra.ops_by_cause, "{what}: array operations by cause");
    assert_eq!(c.devices, r.devices, "{what}: per disk");
    assert_eq!(c.requests, r.requests, "{what}");
}

fn assert_resident(st: &RealStack) {
    for (policy, store) in st.residency() {
        assert_eq!(policy, store, "a layer's store holds what its policy holds");
    }
}

#[test]
fn counted_and_real_decide_alike_over_levels_policies_and_write_modes() {
    let cases: Vec<(&str, u32, String)> = vec![
        ("raid5", 4, cache("lru", 64, "back")),
        ("raid5", 4, cache("arc", 48, "through")),
        ("raid6", 5, cache("lru", 40, "around")),
        ("raid6", 5, cache("2q", 64, "back")),
        ("raid10", 4, cache("lfu", 32, "back")),
        ("raid1", 2, cache("clock", 32, "through")),
        // Two layers stacked: a small write-back over a larger write-through.
        ("raid5", 4, cache("lru", 24, "back") + &cache("arc", 96, "through")),
        ("raid5", 3, cache("s3fifo", 32, "back") + &cache("lru", 64, "back")),
        // Writes are not cache accesses: they drop a cached copy.
        (
            "raid5",
            4,
            "[[cache]]\npolicy = \"lru\"\nsize = 64\nreads_only = true\n".to_string(),
        ),
    ];
    for (i, (level, disks, caches)) in cases.iter().enumerate() {
        let s = spec(&stack_text(level, *disks, caches), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_array(dir.path(), &s);
        let size = a.size_bytes();
        for (name, reqs) in [
            ("wsrch", wsrch(1500, size)),
            ("zipf", synthetic(7 + i as u64, 1500, size.min(2 << 20), 40, true)),
        ] {
            let st = RealStack::new(&s, a.clone()).unwrap();
            let r = real(&st, &reqs);
            let c = counted(&s, &reqs);
            assert!(
                c.layers[0].hits > 0 && c.layers[0].misses > 0,
                "{name}: a test that exercises the cache"
            );
            assert_same(&c, &r, &format!("{level} {caches} {name}"));
            assert_eq!(r.executor, "real");
            assert_resident(&st);
        }
    }
}

#[test]
fn vdf_lfu_with_a_failed_member_decides_as_the_counted_run() {
    let text = stack_text("raid5", 4, &cache("vdf-lfu", 48, "back"));
    let s = spec(&text, &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    a.fail(1).unwrap();
    let reqs = synthetic(3, 2000, 2 << 20, 30, false);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let r = real(&st, &reqs);
    let c = counted(&spec(&text, &["array.failed=[1]"]), &reqs);
    assert_same(&c, &r, "vdf-lfu degraded");
    // The failure changes what VDF-LFU keeps: the healthy run differs.
    let healthy = counted(&s, &reqs);
    assert_ne!(healthy.layers[0].hits, r.layers[0].hits, "VDF-LFU saw no failure");
}

#[test]
fn a_member_failed_while_the_stack_runs_changes_vdf_as_in_the_counted_run() {
    let text = stack_text("raid5", 4, &cache("vdf-lfu", 48, "through"));
    let s = spec(&text, &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    let reqs = synthetic(11, 3000, 2 << 20, 20, false);
    let st = RealStack::new(&s, a.clone()).unwrap();
    // `real fail` while served acts on the open array, as here.
    for (i, r) in reqs.iter().enumerate() {
        if i == 1000 {
            a.fail(2).unwrap();
        }
        let mut buf = vec![0u8; r.len as usize];
        match r.op {
            Op::Read => st.read(r.offset, &mut buf).unwrap(),
            Op::Write => st.write(r.offset, &buf, false).unwrap(),
        }
    }
    st.flush().unwrap();
    let r = st.result();
    let c = counted(&spec(&text, &["array.failed=[2]", "array.fail_at=\"1000req\""]), &reqs);
    assert_same(&c, &r, "vdf-lfu, member failed at request 1000");
    let healthy = counted(&s, &reqs);
    assert_ne!(healthy.layers[0].hits, r.layers[0].hits, "VDF-LFU saw no failure");
}

/// A seeded read/write workload (partial blocks included) through `st`,
/// checked against `image` read by read.
fn verify_workload(st: &RealStack, image: &mut [u8], seed: u64, n: usize, span: u64) {
    let mut s = seed;
    for r in synthetic(seed, n, span, 50, true) {
        let (o, l) = (r.offset as usize, r.len as usize);
        match r.op {
            Op::Write => {
                let data: Vec<u8> = (0..l).map(|_| rng(&mut s) as u8).collect();
                if rng(&mut s).is_multiple_of(10) {
                    st.write_zeroes(r.offset, r.len, false).unwrap();
                    image[o..o + l].fill(0);
                } else {
                    st.write(r.offset, &data, rng(&mut s).is_multiple_of(20)).unwrap();
                    image[o..o + l].copy_from_slice(&data);
                }
            }
            Op::Read => {
                let mut buf = vec![0u8; l];
                st.read(r.offset, &mut buf).unwrap();
                if buf != image[o..o + l] {
                    let bad = (0..l).find(|&i| buf[i] != image[o + i]).unwrap();
                    panic!(
                        "seed {seed}: read of {l} bytes at {o} differs from the reference at byte {}",
                        o + bad
                    );
                }
            }
        }
        if rng(&mut s).is_multiple_of(200) {
            st.flush().unwrap();
        }
    }
}

/// After a FLUSH the array alone (the stack bypassed) holds the reference.
fn assert_array_holds(a: &RealArray, image: &[u8], span: u64) {
    let mut buf = vec![0u8; span as usize];
    a.read(0, &mut buf).unwrap();
    assert!(
        buf == image[..span as usize],
        "the array alone differs from the reference after FLUSH"
    );
}

#[test]
fn every_read_returns_the_reference_healthy_degraded_and_during_a_rebuild() {
    for write in ["back", "through", "around", "reads-only"] {
        let top = match write {
            "reads-only" => "[[cache]]\npolicy = \"lru\"\nsize = 40\nreads_only = true\n".to_string(),
            w => cache("lru", 40, w),
        };
        let caches = top + &cache("arc", 80, "back");
        let s = spec(&stack_text("raid5", 4, &caches), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_array(dir.path(), &s);
        let span = 1 << 20;
        let mut image = vec![0u8; a.size_bytes() as usize];
        let st = RealStack::new(&s, a.clone()).unwrap();
        verify_workload(&st, &mut image, 1, 1500, span);
        assert_resident(&st);
        st.flush().unwrap();
        assert_array_holds(&a, &image, span);
        // Degraded.
        a.fail(1).unwrap();
        verify_workload(&st, &mut image, 2, 1500, span);
        st.flush().unwrap();
        assert_array_holds(&a, &image, span);
        // During a rebuild (slow enough to overlap the workload).
        a.replace(1).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let a2 = a.clone();
            let h = sc.spawn(move || {
                let opts = RebuildOptions {
                    min_kbps: 2000,
                    max_kbps: 4000,
                    ..Default::default()
                };
                a2.rebuild(&opts, &stop).unwrap()
            });
            verify_workload(&st, &mut image, 3, 1500, span);
            assert!(h.join().unwrap().finished);
        });
        verify_workload(&st, &mut image, 4, 500, span);
        st.flush().unwrap();
        assert_array_holds(&a, &image, span);
        assert_resident(&st);
    }
}

#[test]
fn a_write_back_cache_loses_only_what_no_flush_covered() {
    // Writes, a FLUSH, more writes, then the process "dies": the stack is
    // dropped without a flush, the array closed as a crash leaves it.
    let s = spec(&stack_text("raid5", 4, &cache("lru", 256, "back")), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let mut image = vec![0u8; 1 << 20];
    verify_workload(&st, &mut image, 9, 800, 1 << 20);
    st.flush().unwrap();
    let flushed = image.clone();
    let mut s2 = 99;
    for i in 0..64u64 {
        st.write(i * 4096, &vec![rng(&mut s2) as u8 | 1; 4096], false).unwrap();
    }
    drop(st);
    drop(Arc::try_unwrap(a).ok().unwrap());
    let a = Arc::new(RealArray::open(dir.path(), OpenConfig::default()).unwrap());
    let mut buf = vec![0u8; 1 << 20];
    a.read(0, &mut buf).unwrap();
    assert!(buf == flushed, "what the last FLUSH covered reads back");
}

#[test]
fn the_real_executor_refuses_what_it_cannot_honour_by_key() {
    let refused = [
        ("[tier]\nsize = 64\n", "tier"),
        ("", "array.f"),
        ("", "cache.0.prefetch"),
        ("", "cache.0.write_buffer"),
        ("", "cache.0.policy"),
        ("", "array.stripe_cache"),
        ("", "replay.warmup"),
        ("", "replay.warmup"),
    ];
    let sets: [&[&str]; 8] = [
        &[],
        &["array.failed=[1]", "array.fail_at=\"10req\""],
        &["cache.0.prefetch=\"readahead\"", "cache.0.readahead=\"64KiB\""],
        &["cache.0.write_buffer=\"64KiB\""],
        &["cache.0.policy=\"opt\""],
        &["array.stripe_cache=256"],
        &["replay.warmup=\"100req\""],
        &["replay.warmup=5"],
    ];
    for ((extra, key), sets) in refused.iter().zip(sets) {
        let text = stack_text("raid5", 4, &(cache("lru", 16, "back") + extra));
        let s = spec(&text, sets);
        let e = super::stack::check_real(&s).unwrap_err().to_string();
        assert!(e.contains("stack.toml") && e.contains(key), "{key}: {e}");
        if *key == "tier" {
            assert!(e.contains("does not run the SSD tier yet"), "{e}");
        }
    }
}

#[test]
fn base_allocation_reports_a_block_held_dirty_in_a_cache_as_data() {
    use crate::nbd::{Export, STATE_HOLE, STATE_ZERO};
    let s = spec(&stack_text("raid5", 4, &cache("lru", 64, "back")), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    st.write(10 * 4096 + 512, &[7u8; 1024], false).unwrap();
    let hz = STATE_HOLE | STATE_ZERO;
    // Only in the cache: the array alone still says hole.
    assert_eq!(a.allocation(0, 64 * 4096), vec![(64 * 4096, true)]);
    let ext = Export::extents(&st, 0, 64 * 4096).unwrap();
    assert_eq!(ext, vec![(10 * 4096, hz), (4096, 0), (53 * 4096, hz)]);
    let ext = Export::extents(&st, 10 * 4096 + 100, 8000).unwrap();
    assert_eq!(ext, vec![(4096 - 100, 0), (8000 - 3996, hz)]);
}

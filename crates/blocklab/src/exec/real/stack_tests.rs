//! A stack on real bytes: its decisions are a counted run's (counted ≡
//! real), every read returns what a reference image holds, a FLUSH leaves
//! the array alone holding it, and fault-aware caches see the real array.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::rebuild::RebuildOptions;
use super::stack::{array_config, RealStack};
use super::{OpenConfig, RealArray};
use crate::stack::result::StackResult;
use crate::stack::spec::StackSpec;
use crate::stack::test_util::{self, parse_spec};
use crate::trace::{self, Op, Request, TraceOptions};

pub(super) const MEMBER: u64 = 4 << 20;

fn spec(text: &str, sets: &[&str]) -> StackSpec {
    parse_spec(text, sets, "stack.toml", PathBuf::new()).unwrap()
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
pub(super) fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    let mut s = s.clone();
    s.array.as_mut().unwrap().disk_size = Some(crate::stack::spec::NumOrStr::Int(MEMBER));
    test_util::counted(&s, reqs, None)
}

/// `reqs` through the stack on real bytes (writes carry a pattern), then a FLUSH.
pub(super) fn real(st: &RealStack, reqs: &[Request]) -> StackResult {
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

/// The counted run `c` and the real one `r` (through `st`) of a stack with
/// an SSD tier decided alike: the tier's counts, its SSD operations, every
/// layer's figures, and what `st` holds is resident.
fn assert_tier_alike(c: &StackResult, r: &StackResult, st: &RealStack, what: &str) {
    let (ct, rt) = (c.tier.as_ref().unwrap(), r.tier.as_ref().unwrap());
    assert_eq!(ct.counts, rt.counts, "{what}: the tier's counts");
    assert_eq!(
        (ct.ssd_read_ops, ct.ssd_write_ops),
        (rt.ssd_read_ops, rt.ssd_write_ops),
        "{what}: SSD operations"
    );
    assert_same(c, r, what);
    assert_resident(st);
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
        ("[tier]\nsize = \"10%\"\n", "tier.size"),
        ("", "array.f"),
        ("", "cache.0.prefetch_buffer"),
        ("", "cache.0.write_buffer"),
        ("", "cache.0.policy"),
        ("", "array.stripe_cache"),
        ("", "replay.warmup"),
        ("", "replay.warmup"),
    ];
    let sets: [&[&str]; 8] = [
        &[],
        &["array.failed=[1]", "array.fail_at=\"10req\""],
        &["cache.0.prefetch=\"readahead\"", "cache.0.prefetch_buffer=\"64KiB\""],
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
        if *key == "tier.size" {
            assert!(e.contains("a share needs a pass over a trace"), "{e}");
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

// ---- The SSD tier on a real cache device (clean policies) ----

/// A `[tier]` table: `size` frames, write policy `policy`, more keys in `extra`.
fn tier(policy: &str, size: u64, extra: &str) -> String {
    format!("[tier]\nsize = {size}\nwrite_policy = \"{policy}\"\nmodel = \"const:0.1\"\n{extra}")
}

/// The real array of `s` in `dir` and the cache device of its tier, as
/// `real create --stack` lays them out.
fn real_tier_array(dir: &Path, s: &StackSpec) -> Arc<RealArray> {
    let a = real_array(dir, s);
    let frames = super::tier_store::frames(s).unwrap().unwrap();
    super::tier_store::create(dir, frames, 4096, a.uuid()).unwrap();
    a
}

#[test]
fn counted_and_real_decide_alike_with_an_ssd_tier() {
    let cases: Vec<(&str, u32, String)> = vec![
        ("raid5", 4, tier("wt", 96, "")),
        ("raid5", 4, cache("lru", 32, "back") + &tier("wt", 128, "")),
        ("raid6", 5, cache("arc", 48, "through") + &tier("ro", 96, "")),
        ("raid5", 4, tier("wa", 64, "promote_after = 2\n")),
        (
            "raid10",
            4,
            cache("lru", 24, "back") + &tier("wt", 80, "sequential_cutoff = \"32KiB\"\n"),
        ),
        ("raid5", 3, cache("lru", 32, "back") + &tier("pt", 64, "")),
        ("raid5", 4, tier("wb", 96, "")),
        ("raid6", 5, cache("lru", 32, "back") + &tier("wo", 80, "")),
        (
            "raid5",
            4,
            tier("wb", 64, "clean_high = 0.5\nclean_low = 0.25\nflush = true\n"),
        ),
        ("raid5", 4, cache("arc", 32, "through") + &tier("adaptive", 96, "")),
    ];
    for (i, (level, disks, layers)) in cases.iter().enumerate() {
        let s = spec(&stack_text(level, *disks, layers), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_tier_array(dir.path(), &s);
        let size = a.size_bytes();
        for (name, reqs) in [
            ("wsrch", wsrch(1500, size)),
            ("zipf", synthetic(17 + i as u64, 1500, size.min(2 << 20), 40, true)),
        ] {
            let what = format!("{level} {layers} {name}");
            let st = RealStack::new(&s, a.clone()).unwrap();
            let r = real(&st, &reqs);
            let c = counted(&s, &reqs);
            let ct = c.tier.as_ref().unwrap();
            if !layers.contains("\"pt\"") {
                assert!(
                    ct.counts.read_hits > 0 && ct.counts.array_reads > 0,
                    "{what}: a test that exercises the tier"
                );
            }
            assert_tier_alike(&c, &r, &st, &what);
        }
    }
}

#[test]
fn every_read_through_a_tier_returns_the_reference_healthy_and_degraded() {
    for policy in ["wt", "ro", "wa", "pt", "wb", "wo", "adaptive"] {
        for above in ["", "back"] {
            let layers = match above {
                "" => tier(policy, 48, ""),
                w => cache("lru", 24, w) + &tier(policy, 64, ""),
            };
            let s = spec(&stack_text("raid5", 4, &layers), &[]);
            let dir = tempfile::tempdir().unwrap();
            let a = real_tier_array(dir.path(), &s);
            let span = 1 << 20;
            let mut image = vec![0u8; a.size_bytes() as usize];
            let st = RealStack::new(&s, a.clone()).unwrap();
            // A write-back tier keeps dirty blocks past a FLUSH (journaled):
            // the array alone holds everything only once they are written back.
            let back = ["wb", "wo", "adaptive"].contains(&policy);
            verify_workload(&st, &mut image, 5, 800, span);
            assert_resident(&st);
            st.flush().unwrap();
            if !back {
                assert_array_holds(&a, &image, span);
            }
            a.fail(2).unwrap();
            verify_workload(&st, &mut image, 6, 800, span);
            st.flush().unwrap();
            if !back {
                assert_array_holds(&a, &image, span);
            }
            assert_resident(&st);
            let t = st.result().tier.unwrap();
            if policy != "pt" {
                assert!(t.counts.read_hits > 0, "{policy} {above}: the tier served reads");
            }
            if back {
                assert!(t.dirty_blocks > 0, "{policy} {above}: the tier held dirty blocks");
            }
            // After a crash (degraded), the dirty blocks go back at open.
            let a = crash(dir.path(), st, a);
            let st = RealStack::new(&s, a.clone()).unwrap();
            assert_eq!(st.tier_recovered > 0, back, "{policy} {above}");
            assert_array_holds(&a, &image, span);
        }
    }
}

#[test]
fn the_cache_device_is_never_read_for_a_block_overwritten_elsewhere() {
    let s = spec(&stack_text("raid5", 4, &tier("wt", 64, "")), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_tier_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let old = vec![0xa1u8; 4096];
    st.write(5 * 4096, &old, false).unwrap();
    let mut buf = vec![0u8; 4096];
    st.read(5 * 4096, &mut buf).unwrap();
    assert_eq!(buf, old);
    assert_eq!(st.result().tier.unwrap().counts.read_hits, 1, "served by the tier");
    drop(st);
    // The cache device still holds the old contents...
    let img = std::fs::read(dir.path().join(super::tier_store::TIER_FILE)).unwrap();
    assert!(
        img.chunks_exact(4096).any(|c| c == &old[..]),
        "the frame holds the old copy"
    );
    // ...when the block is overwritten behind the stack's back (the array
    // served alone, between two runs of the stack).
    let new = vec![0x5eu8; 4096];
    a.write(5 * 4096, &new, false).unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    st.read(5 * 4096, &mut buf).unwrap();
    assert_eq!(buf, new, "the tier's map starts empty: its stale frame is not returned");
    // And a read-only tier drops its copy on a write through the stack.
    drop(st);
    let s = spec(&stack_text("raid5", 4, &tier("ro", 64, "")), &[]);
    let st = RealStack::new(&s, a.clone()).unwrap();
    st.read(9 * 4096, &mut buf).unwrap(); // filled into the tier
    st.write(9 * 4096, &old, false).unwrap();
    st.read(9 * 4096, &mut buf).unwrap();
    assert_eq!(buf, old, "the write reached the array; the tier's copy was dropped");
    let t = st.result().tier.unwrap();
    assert_eq!((t.counts.read_hits, t.counts.array_reads), (0, 2));
}

#[test]
fn a_cache_device_of_the_wrong_size_or_missing_is_one_error_naming_it() {
    let s = spec(&stack_text("raid5", 4, &tier("wt", 64, "")), &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_array(dir.path(), &s);
    let e = RealStack::new(&s, a.clone()).err().unwrap().to_string();
    assert!(e.contains("tier.img") && e.contains("real create --stack"), "{e}");
    super::tier_store::create(dir.path(), 32, 4096, a.uuid()).unwrap();
    let e = RealStack::new(&s, a.clone()).err().unwrap().to_string();
    assert!(e.contains("tier.img") && e.contains("tier.size"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn real_create_with_a_tier_lays_out_its_cache_device() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, stack_text("raid5", 4, &tier("wt", 100, ""))).unwrap();
    let arr = dir.path().join("arr");
    let (_, notes) = super::stack::create_stack(&arr, &file, Some(MEMBER), false, &[]).unwrap();
    let len = std::fs::metadata(arr.join(super::tier_store::TIER_FILE)).unwrap().len();
    assert_eq!(len, 100 * 4096);
    assert!(notes.iter().any(|n| n.contains("tier.model: ignored")), "{notes:?}");
    for (extra, key) in [
        ("size = \"10%\"\n", "tier.size"),
        ("size = \"unlimited\"\n", "tier.size"),
    ] {
        let text = stack_text("raid5", 4, &format!("[tier]\n{extra}"));
        let s = spec(&text, &[]);
        let e = super::stack::check_real(&s).unwrap_err().to_string();
        assert!(e.contains("stack.toml") && e.contains(key), "{key}: {e}");
    }
    // `--tenants` appends [[tenant]] tables to the stack kept in DIR.
    let arr2 = dir.path().join("arr2");
    let file2 = dir.path().join("t.toml");
    std::fs::write(&file2, stack_text("raid5", 4, "").replace("\"ignore\"", "\"concat\"")).unwrap();
    let ts = [
        ("a b".to_string(), "1MiB".to_string()),
        ("c\"d".to_string(), "2MiB".to_string()),
    ];
    super::stack::create_stack(&arr2, &file2, Some(MEMBER), false, &ts).unwrap();
    let kept = spec(
        &std::fs::read_to_string(arr2.join(super::stack::STACK_FILE)).unwrap(),
        &[],
    );
    assert_eq!(
        kept.tenant.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["a b", "c\"d"]
    );
    let e = super::stack::create_stack(
        &dir.path().join("arr3"),
        &arr2.join("stack.toml"),
        Some(MEMBER),
        false,
        &ts,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--tenants"), "{e}");
    // Every partitioner runs (the tenants are the stack's; here one).
    for p in ["static", "centaur", "eci"] {
        let text = stack_text("raid5", 4, &tier("wb", 64, &format!("partitioner = \"{p}\"\n")));
        let text = text.replace("\"ignore\"", "\"concat\"");
        super::stack::check_real(&spec(&text, &[])).unwrap();
    }
}

/// A write-back tier large enough to keep everything: what was written
/// stays dirty in the cache device, the array alone does not hold it.
fn wb_tier_stack(dir: &Path) -> (StackSpec, Arc<RealArray>) {
    let s = spec(
        &stack_text("raid5", 4, &(cache("lru", 32, "back") + &tier("wb", 512, ""))),
        &[],
    );
    let a = real_tier_array(dir, &s);
    (s, a)
}

/// The process dies: the stack dropped without a FLUSH, the array as a
/// crash leaves it; then opened again.
fn crash(dir: &Path, st: RealStack, a: Arc<RealArray>) -> Arc<RealArray> {
    drop(st);
    drop(Arc::try_unwrap(a).ok().unwrap());
    Arc::new(RealArray::open(dir, OpenConfig::default()).unwrap())
}

fn array_bytes(a: &RealArray, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    a.read(0, &mut buf).unwrap();
    buf
}

#[test]
fn a_write_back_tier_keeps_every_flushed_write_across_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (s, a) = wb_tier_stack(dir.path());
    let span = 1 << 20;
    let st = RealStack::new(&s, a.clone()).unwrap();
    let mut image = vec![0u8; a.size_bytes() as usize];
    verify_workload(&st, &mut image, 21, 1200, span);
    st.flush().unwrap();
    let flushed = image[..span as usize].to_vec();
    // Unflushed writes, acknowledged: they may be lost, nothing else may.
    let late = |i: u64| vec![(i as u8) | 0x81; 4096];
    for i in 0..64u64 {
        st.write(i * 4096, &late(i), false).unwrap();
    }
    let a = crash(dir.path(), st, a);
    assert!(
        array_bytes(&a, span as usize) != flushed,
        "a test where the tier held flushed writes the array alone did not"
    );
    let st = RealStack::new(&s, a.clone()).unwrap();
    assert!(st.tier_recovered > 0, "dirty blocks found at open");
    let check = |got: &[u8], what: &str| {
        for b in 0..span / 4096 {
            let r = (b * 4096) as usize..((b + 1) * 4096) as usize;
            let ok = got[r.clone()] == flushed[r.clone()] || (b < 64 && got[r] == late(b)[..]);
            assert!(ok, "{what}: block {b} holds neither its flushed nor a later write");
        }
    };
    // Written back at open: the array alone holds them, and so does the stack.
    check(&array_bytes(&a, span as usize), "the array after the tier's write-back");
    let mut buf = vec![0u8; span as usize];
    st.read(0, &mut buf).unwrap();
    check(&buf, "read through the stack");
    // A second crash right away finds nothing more to write back.
    let a = crash(dir.path(), st, a);
    let st = RealStack::new(&s, a.clone()).unwrap();
    assert_eq!(st.tier_recovered, 0);
}

#[test]
fn a_torn_or_crafted_tier_journal_is_lost_for_the_cache_never_wrong_bytes() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (s, a) = wb_tier_stack(dir.path());
    let log = dir.path().join(super::tier_journal::JOURNAL_FILE);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let (one, two) = (vec![0x11u8; 4096], vec![0x22u8; 4096]);
    st.write(3 * 4096, &one, false).unwrap();
    st.flush().unwrap();
    let after_first = std::fs::metadata(&log).unwrap().len();
    st.write(3 * 4096, &two, false).unwrap();
    st.write(4 * 4096, &two, false).unwrap();
    st.flush().unwrap();
    let a = crash(dir.path(), st, a);
    // The second commit torn (the crash hit its append): the first one holds.
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    let len = f.metadata().unwrap().len();
    assert!(len > after_first);
    f.set_len(len - 5).unwrap();
    // Garbage after it, and a record with a checksum that does not match.
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(&[0xee; 300]).unwrap();
    drop(f);
    let st = RealStack::new(&s, a.clone()).unwrap();
    assert_eq!(st.tier_recovered, 1, "block 3 of the first commit");
    let mut buf = vec![0u8; 8192];
    st.read(3 * 4096, &mut buf).unwrap();
    assert_eq!(&buf[..4096], &one[..], "the last complete commit's contents");
    assert_eq!(
        &buf[4096..],
        &[0u8; 4096][..],
        "block 4 lost for the cache (never committed)"
    );
    // A journal that is not this tier's: one error naming it.
    let a = crash(dir.path(), st, a);
    std::fs::write(&log, b"not a journal at all, 24+ bytes long").unwrap();
    let e = RealStack::new(&s, a.clone()).err().unwrap().to_string();
    assert!(
        e.contains("tier.log") && e.contains("not a journal of this tier"),
        "{e}"
    );
}

#[test]
fn a_write_not_admitted_after_its_block_was_evicted_dirty_is_not_undone_by_the_destage() {
    // A write-back tier of 2 frames that promotes at the 3rd miss once half full.
    let s = spec(
        &stack_text("raid5", 4, &tier("wb", 2, "promote_after = 3\npromote_trigger = 0.5\n")),
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let a = real_tier_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let fill = |v: u8| vec![v; 4096];
    st.write(4096, &fill(1), false).unwrap(); // block 1: admitted, dirty (the LRU)
    for _ in 0..3 {
        st.write(2 * 4096, &fill(2), false).unwrap(); // block 2: admitted at the 3rd
    }
    for _ in 0..2 {
        st.write(0, &fill(3), false).unwrap(); // block 0: two misses not admitted
    }
    // Blocks 0 and 1 in one write: block 0 is admitted and evicts dirty
    // block 1 (its old contents staged for the destage), whose new contents
    // are not admitted and go to the array before that destage.
    let mut new = fill(4);
    new.extend(fill(5));
    st.write(0, &new, false).unwrap();
    let mut buf = vec![0u8; 8192];
    st.read(0, &mut buf).unwrap();
    assert!(buf[..4096] == new[..4096], "block 0");
    assert!(
        buf[4096..] == new[4096..],
        "block 1 reads its newest contents, not the destage's older ones"
    );
    let t = st.result().tier.unwrap();
    assert_eq!(t.counts.destaged, 1, "the scenario: block 1 destaged");
    st.flush().unwrap();
    let mut buf = vec![0u8; 4096];
    a.read(4096, &mut buf).unwrap();
    assert!(buf == fill(5), "the array holds block 1's newest contents");
}

#[test]
fn a_tier_journal_from_another_array_of_the_same_geometry_is_refused_never_written_back() {
    let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (s, a) = wb_tier_stack(here.path());
    let (_, b) = wb_tier_stack(there.path());
    let st = RealStack::new(&s, b.clone()).unwrap();
    st.write(0, &[0x5au8; 4096], false).unwrap();
    st.flush().unwrap();
    let b = crash(there.path(), st, b);
    let log = super::tier_journal::JOURNAL_FILE;
    std::fs::copy(there.path().join(log), here.path().join(log)).unwrap();
    let e = RealStack::new(&s, a.clone()).err().unwrap().to_string();
    assert!(
        e.contains("tier.log") && e.contains("not a journal of this tier"),
        "{e}"
    );
    assert_eq!(
        array_bytes(&a, 4096),
        vec![0u8; 4096],
        "the other array's block not written here"
    );
    // Its own array still takes it back.
    assert_eq!(RealStack::new(&s, b).unwrap().tier_recovered, 1);
}

#[test]
fn a_tier_removed_from_the_stack_file_or_its_stack_file_removed_is_cleaned_first() {
    for no_stack_file in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (s, a) = wb_tier_stack(dir.path());
        let st = RealStack::new(&s, a.clone()).unwrap();
        let data = vec![0x77u8; 8192];
        st.write(4096, &data, false).unwrap();
        st.flush().unwrap();
        let a = crash(dir.path(), st, a);
        assert_ne!(array_bytes(&a, 12288)[4096..], data[..], "the tier alone holds them");
        if no_stack_file {
            // Served as a plain array: the journal is written back at load.
            assert!(RealStack::load(dir.path(), &a).unwrap().is_none());
        } else {
            let plain = spec(&stack_text("raid5", 4, &cache("lru", 32, "back")), &[]);
            assert_eq!(RealStack::new(&plain, a.clone()).unwrap().tier_recovered, 2);
        }
        assert_eq!(array_bytes(&a, 12288)[4096..], data[..], "flushed writes kept");
        // Cleaned: the tier put back finds nothing more to write back.
        assert_eq!(RealStack::new(&s, a).unwrap().tier_recovered, 0);
    }
}

/// A served stack is replayed through its server (any number of requests
/// outstanding: the server serializes them), so a rebuild can run in the
/// server meanwhile; the layers' figures are the server's, and the rebuild
/// reports its start and end on the Unix clock the replay's log uses.
#[test]
fn a_served_stack_is_replayed_through_its_server_while_it_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, stack_text("raid5", 4, &cache("vdf-lru", 64, "through"))).unwrap();
    let d = dir.path().join("arr");
    super::stack::create_stack(&d, &file, Some(MEMBER), false, &[]).unwrap();
    let tr = dir.path().join("t.csv");
    let reqs = synthetic(3, 600, 3 * MEMBER, 20, false);
    let mut text = String::from("timestamp,op,offset,size\n");
    for r in &reqs {
        let op = if r.op == Op::Read { "R" } else { "W" };
        text.push_str(&format!("{:.4},{op},{},{}\n", r.time, r.offset, r.len));
    }
    std::fs::write(&tr, text).unwrap();
    super::control::fail(&d, 1).unwrap();
    super::control::replace(&d, 1).unwrap();
    let s = super::control::serve(
        &d,
        &super::control::ServeOptions {
            listen: "127.0.0.1:0".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let o = super::replay::ReplayOptions {
        traces: vec![tr.display().to_string()],
        format: "csv".into(),
        replay: "closed".into(),
        outstanding: 8,
        ..Default::default()
    };
    let (r, rb) = std::thread::scope(|sc| {
        let replay = sc.spawn(|| super::stack_replay::replay_dir(&d, &o).unwrap());
        let opts = RebuildOptions {
            min_kbps: 1_000_000,
            max_kbps: 1_000_000,
            ..Default::default()
        };
        let rb = super::control::rebuild(&d, &opts, &AtomicBool::new(false)).unwrap();
        (replay.join().unwrap(), rb)
    });
    assert_eq!(r["target"], "nbd");
    assert_eq!((r["requests"].as_u64(), r["errors"].as_u64()), (Some(600), Some(0)));
    assert!(rb.finished && rb.started_unix_s > 0.0 && rb.started_unix_s <= rb.finished_unix_s);
    // The server's stack saw every block the replay asked for.
    let st = super::stack::stack_status(&d).unwrap().unwrap();
    let blocks: u64 = reqs
        .iter()
        .map(|r| (r.offset + r.len).div_ceil(4096) - r.offset / 4096)
        .sum();
    assert_eq!(st["layers"][0]["accesses"].as_u64(), Some(blocks));
    s.shutdown().unwrap();
    // The rebuilt member is consistent with the rest.
    let c = super::control::check(&d, false).unwrap();
    assert_eq!((c.mismatches, c.degraded_skipped), (0, 0));
}

/// A served stack with tenants has no default export: `real replay DIR`
/// refuses it in one line naming the exports, rather than sending every
/// tenant's requests to the first tenant's export.
#[test]
fn a_served_stack_with_tenants_is_not_replayed_into_one_export() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, tenant_stack(&cache("lru", 16, "through"))).unwrap();
    let d = dir.path().join("arr");
    super::stack::create_stack(&d, &file, Some(MEMBER), false, &[]).unwrap();
    let tr = dir.path().join("t.csv");
    std::fs::write(&tr, "0.001,W,0,4096,1\n0.002,R,0,4096,2\n").unwrap();
    let s = super::control::serve(
        &d,
        &super::control::ServeOptions {
            listen: "127.0.0.1:0".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let o = super::replay::ReplayOptions {
        traces: vec![tr.display().to_string()],
        format: "csv".into(),
        replay: "closed".into(),
        ..Default::default()
    };
    let e = super::stack_replay::replay_dir(&d, &o).unwrap_err().to_string();
    s.shutdown().unwrap();
    assert!(
        e.contains(&d.display().to_string()) && e.contains("web, db, log") && !e.contains('\n'),
        "{e}"
    );
    // Not served, the same trace goes to each request's tenant.
    let r = super::stack_replay::replay_dir(&d, &o).unwrap();
    assert_eq!(r["real"]["tenants"][1]["writes"]["requests"].as_u64(), Some(1), "{r}");
}

// ---- Tenants: one volume each (`[[tenant]]`), the tier's partitioners ----

/// Three tenants' volumes (4 KiB blocks): 1 MiB, 768 KiB and 1 MiB, laid out
/// by `concat` at stack blocks 0, 256 and 512.
const TENANTS: &str = "[[tenant]]\nname = \"web\"\nsize = \"1MiB\"\n\
                       [[tenant]]\nname = \"db\"\nsize = \"768KiB\"\n\
                       [[tenant]]\nname = \"log\"\nsize = \"1MiB\"\n";

fn tenant_stack(layers: &str) -> String {
    format!(
        "tenant_map = \"concat\"\n{TENANTS}{layers}\n[array]\nraid = \"raid5\"\ndisks = 4\nchunk = \"16KiB\"\n\
         [device]\nmodel = \"const:1\"\n"
    )
}

/// Per-tenant traces merged by time, as `blocklab run` merges them: tenant
/// t's request i at `i ms + t × 0.1 ms`; the tenants differ (a read-mostly
/// skewed one, a write-heavy one that re-writes, a mixed one).
fn tenant_requests(n: usize, seed: u64) -> Vec<Request> {
    let sizes = [1u64 << 20, 768 << 10, 1 << 20];
    let shares = [10, 70, 40];
    let mut all = Vec::new();
    for (t, (&size, &w)) in sizes.iter().zip(&shares).enumerate() {
        for (i, mut r) in synthetic(seed + t as u64, n, size, w, t == 2).into_iter().enumerate() {
            r.tenant = t as u32;
            r.time = i as f64 * 0.001 + t as f64 * 0.0001;
            all.push(r);
        }
    }
    all.sort_by(|a, b| a.time.total_cmp(&b.time));
    all
}

/// `reqs` through the stack on real bytes, each to its tenant's volume at
/// its trace time (as `real replay` issues them), then a FLUSH.
fn real_tenants(st: &RealStack, reqs: &[Request]) -> StackResult {
    for r in reqs {
        let mut buf = vec![0u8; r.len as usize];
        match r.op {
            Op::Read => st.read_at(r.tenant, Some(r.time), r.offset, &mut buf).unwrap(),
            Op::Write => {
                buf.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = (r.offset as usize + i) as u8 ^ r.tenant as u8);
                st.write_at(r.tenant, Some(r.time), r.offset, &buf, false).unwrap()
            }
        }
    }
    st.flush().unwrap();
    st.result()
}

#[test]
fn counted_and_real_decide_alike_per_tenant_with_every_partitioner() {
    let win = "window_s = 0.25\ninitial_blocks = 16\nsolver = \"exact\"\n";
    let cases: Vec<String> = vec![
        tier("wb", 96, &format!("partitioner = \"centaur\"\n{win}")),
        tier("adaptive", 96, &format!("partitioner = \"eci\"\ntheta = 0.3\n{win}")),
        tier("wb", 72, &format!("partitioner = \"eci\"\n{win}")),
        tier("wt", 90, "partitioner = \"static\"\n"),
        cache("lru", 24, "back") + &tier("wb", 80, &format!("partitioner = \"centaur\"\n{win}")),
        tier("wb", 64, "partitioner = \"global\"\n"),
    ];
    for (i, layers) in cases.iter().enumerate() {
        let s = spec(&tenant_stack(layers), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_tier_array(dir.path(), &s);
        let reqs = tenant_requests(1200, 31 + i as u64);
        let st = RealStack::new(&s, a.clone()).unwrap();
        assert_eq!(
            st.volumes()
                .iter()
                .map(|v| (v.name.as_str(), v.first, v.blocks))
                .collect::<Vec<_>>(),
            [("web", 0, 256), ("db", 256, 192), ("log", 512, 256)],
            "concat's places for the declared volumes"
        );
        let r = real_tenants(&st, &reqs);
        let vols = s.tenant_volumes().unwrap().unwrap();
        let c = test_util::counted(
            &{
                let mut s = s.clone();
                s.array.as_mut().unwrap().disk_size = Some(crate::stack::spec::NumOrStr::Int(MEMBER));
                s
            },
            &reqs,
            Some(&crate::stack::address::Survey::declared(&vols)),
        );
        let what = format!("case {i}: {layers}");
        let (ct, rt) = (c.tier.as_ref().unwrap(), r.tier.as_ref().unwrap());
        assert!(
            ct.counts.read_hits > 0 && ct.counts.array_reads > 0 && ct.tenants.len() == 3,
            "{what}: a test that exercises the tier's tenants"
        );
        if layers.contains("centaur") || layers.contains("eci") {
            assert!(ct.windows >= 4, "{what}: partitions re-sized several times");
            let allocs: std::collections::BTreeSet<u64> = ct
                .timeline
                .iter()
                .flat_map(|w| w.tenants.iter().map(|t| t.allocated_blocks))
                .collect();
            assert!(allocs.len() > 2, "{what}: the partitions changed size");
        }
        assert_eq!(ct.tenants, rt.tenants, "{what}: per tenant");
        assert_eq!(ct.timeline, rt.timeline, "{what}: every window's decisions");
        assert_tier_alike(&c, &r, &st, &what);
        assert_eq!(r.tenant_map, "concat");
    }
}

#[test]
fn tenants_volumes_are_apart_and_bounded() {
    let s = spec(
        &tenant_stack(&tier("wb", 64, "partitioner = \"centaur\"\nwindow_s = 0.01\n")),
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let a = real_tier_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    // Each tenant writes its own pattern over its whole volume, in turns.
    let sizes = [1u64 << 20, 768 << 10, 1 << 20];
    let pat = |t: u32, off: u64| -> u8 { (off / 512) as u8 ^ (0x11 * (t as u8 + 1)) };
    let mut clock = 0.0;
    for round in 0..3u64 {
        for (t, &size) in sizes.iter().enumerate() {
            let t = t as u32;
            let mut off = round * 4096;
            while off + 8192 <= size {
                let buf: Vec<u8> = (0..8192u64).map(|i| pat(t, off + i)).collect();
                clock += 0.001;
                st.write_at(t, Some(clock), off, &buf, false).unwrap();
                off += 3 * 8192;
            }
        }
    }
    st.flush().unwrap();
    // Every tenant reads back only its own bytes (zeroes where it never wrote).
    for (t, &size) in sizes.iter().enumerate() {
        let t = t as u32;
        let mut buf = vec![0u8; size as usize];
        st.read_at(t, None, 0, &mut buf).unwrap();
        for (i, chunk) in buf.chunks(512).enumerate() {
            let b = chunk[0];
            assert!(
                b == 0 || b == pat(t, i as u64 * 512),
                "tenant {t} byte {}: {b}",
                i * 512
            );
        }
        assert!(buf.iter().any(|&b| b != 0));
    }
    // Past a volume's end: refused, not another tenant's bytes.
    let mut b = vec![0u8; 4096];
    assert!(st.read_at(1, None, (768 << 10) - 2048, &mut b).is_err());
    assert!(st.read_at(3, None, 0, &mut b).is_err(), "no tenant 3");
    assert_eq!(st.volume_size(1), 768 << 10);
}

#[test]
fn declared_volumes_past_the_array_are_refused_by_key() {
    let text = tenant_stack(&tier("wb", 64, "")).replace("size = \"768KiB\"", "size = \"64MiB\"");
    let s = spec(&text, &[]);
    let dir = tempfile::tempdir().unwrap();
    let a = real_tier_array(dir.path(), &s);
    let e = RealStack::new(&s, a).err().expect("refused").to_string();
    assert!(e.contains("tenant.1.size") && e.contains("the array has"), "{e}");
    for (bad, key) in [("size = \"1000\"", "tenant.0.size"), ("name = \"db\"", "tenant.2.name")] {
        let t = tenant_stack("").replacen(
            if key == "tenant.0.size" {
                "size = \"1MiB\""
            } else {
                "name = \"log\""
            },
            bad,
            1,
        );
        let e = parse_spec(&t, &[], "stack.toml", PathBuf::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{e}");
    }
    let e = parse_spec(&tenant_stack(""), &["tenant_map=key"], "stack.toml", PathBuf::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("tenant_map") && e.contains("concat"), "{e}");
}

#[test]
fn a_partitioned_write_back_tier_keeps_every_flushed_write_of_every_tenant_across_a_crash() {
    for p in ["centaur", "eci"] {
        let layers = cache("lru", 16, "back")
            + &tier(
                "wb",
                96,
                &format!("partitioner = \"{p}\"\nwindow_s = 0.05\ninitial_blocks = 24\nsolver = \"exact\"\n"),
            );
        let s = spec(&tenant_stack(&layers), &[]);
        let dir = tempfile::tempdir().unwrap();
        let a = real_tier_array(dir.path(), &s);
        let st = RealStack::new(&s, a.clone()).unwrap();
        let sizes = [1usize << 20, 768 << 10, 1 << 20];
        let mut image: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
        let mut seed = 99u64;
        let mut clock = 0.0;
        // Writes and re-reads of skewed blocks, a FLUSH every 100 requests:
        // windows close, partitions shrink and destage dirty blocks between.
        for i in 0..1500u64 {
            let t = (rng(&mut seed) % 3) as usize;
            let blocks = sizes[t] as u64 / 4096;
            let u = rng(&mut seed) % 1000;
            let b = (u * u / 1000) * blocks / 1000;
            clock += 0.001;
            if rng(&mut seed).is_multiple_of(3) {
                let mut buf = vec![0u8; 4096];
                st.read_at(t as u32, Some(clock), b * 4096, &mut buf).unwrap();
                assert_eq!(
                    buf[..],
                    image[t][(b * 4096) as usize..][..4096],
                    "{p}: tenant {t} block {b}"
                );
            } else {
                let buf = vec![(i as u8) | 1; 4096];
                st.write_at(t as u32, Some(clock), b * 4096, &buf, false).unwrap();
                image[t][(b * 4096) as usize..][..4096].copy_from_slice(&buf);
            }
            if i % 100 == 99 {
                st.flush().unwrap();
            }
        }
        st.flush().unwrap();
        let flushed = image.clone();
        let t = st.result().tier.unwrap();
        assert!(
            t.windows > 10 && t.counts.destaged > 0,
            "{p}: partitions re-sized, dirty blocks destaged"
        );
        assert!(t.dirty_blocks > 0, "{p}: the tier holds dirty blocks at the crash");
        // Acknowledged, not flushed: may be lost, nothing else may.
        let late = vec![0xeeu8; 4096];
        for b in 0..16u64 {
            st.write_at((b % 3) as u32, Some(clock), b * 4096, &late, false)
                .unwrap();
        }
        let a = crash(dir.path(), st, a);
        let st = RealStack::new(&s, a.clone()).unwrap();
        assert!(st.tier_recovered > 0, "{p}: dirty blocks found at open");
        for (t, want) in flushed.iter().enumerate() {
            let mut got = vec![0u8; want.len()];
            st.read_at(t as u32, None, 0, &mut got).unwrap();
            for b in 0..want.len() / 4096 {
                let r = b * 4096..(b + 1) * 4096;
                let late_ok = b < 16 && b % 3 == t && got[r.clone()] == late[..];
                assert!(
                    got[r.clone()] == want[r] || late_ok,
                    "{p}: tenant {t} block {b} lost a flushed write"
                );
            }
        }
    }
}

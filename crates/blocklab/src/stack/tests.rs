//! Tests of the composed stack: hand-computed timelines, counted against
//! timed, write-back against a brute-force model, the RGR examples of the VDF
//! paper on MD arrays.

use std::path::PathBuf;

use proptest::prelude::*;

use super::address::AddressMap;
use super::build::{build, Executor};
use super::layer::{Exec, Io};
use super::recording::{const_disk, Recording};
use super::result::StackResult;
use super::runtime::{Composed, LayerFactory};
use super::spec::{Origin, StackSpec, TenantMap};
use super::test_util;
use crate::array::plan::Cause;
use crate::timed::executor::ExecConfig;
use crate::timed::replay::{run, vec_source, Discipline, ReplayConfig};
use crate::trace::{Op, Request};

fn spec(text: &str) -> StackSpec {
    StackSpec::from_str_with(
        text,
        &[],
        Origin {
            file: "t.toml".into(),
            dir: PathBuf::new(),
        },
    )
    .unwrap()
}

fn rq(t_ms: f64, op: Op, block: u64) -> Request {
    Request {
        time: t_ms / 1e3,
        op,
        offset: block * 4096,
        len: 4096,
        tenant: 0,
        fs: Default::default(),
    }
}

fn open() -> ReplayConfig {
    ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig::default(),
    }
}

/// Counted run of a spec over requests.
fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    test_util::counted(s, reqs, None)
}

/// Timed (open) run of a spec over requests.
fn timed(s: &StackSpec, reqs: &[Request]) -> StackResult {
    test_util::timed(s, reqs, None, Discipline::Open { speedup: 1.0 })
}

const ONE_DISK: &str = "tenant_map = \"ignore\"\n[device]\nmodel = \"const:10\"\n";

fn with_cache(policy: &str, size: u64, write: &str, hit_ms: f64) -> StackSpec {
    spec(&format!(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"{policy}\"\nsize = {size}\nwrite = \"{write}\"\nhit_ms = {hit_ms}\n[device]\nmodel = \"const:10\"\n"
    ))
}

#[test]
fn a_hit_on_a_block_still_in_flight_waits_for_its_fetch() {
    // Constant 10 ms disk, 1 ms hits. Block 0 at 0 ms misses (10 ms); again at
    // 2 ms: a hit, but its fetch ends at 10 ms (8 ms); again at 20 ms: 1 ms.
    let s = with_cache("lru", 4, "back", 1.0);
    let r = timed(&s, &[rq(0.0, Op::Read, 0), rq(2.0, Op::Read, 0), rq(20.0, Op::Read, 0)]);
    let resp = r.response.unwrap();
    assert!((resp.avg_ms - (10.0 + 8.0 + 1.0) / 3.0).abs() < 1e-9, "{resp:?}");
    assert_eq!(resp.max_ms, 10.0);
    assert_eq!(r.layers[0].hits, 2);
    assert_eq!(r.devices[0].ops, 1);
}

#[test]
fn write_back_destages_on_eviction_in_the_background() {
    // One-block cache, 0.5 ms hits. A write of block 0 at 0 ms stays in the
    // cache (0.5 ms). A read of block 1 at 1 ms misses and evicts dirty block
    // 0: the fetch (queued first) ends at 11 ms; the destage runs after it
    // (21 ms) and delays no request. The run ends with block 1 clean.
    let s = with_cache("lru", 1, "back", 0.5);
    let r = timed(&s, &[rq(0.0, Op::Write, 0), rq(1.0, Op::Read, 1)]);
    let resp = r.response.as_ref().unwrap();
    assert_eq!(resp.writes.avg_ms, 0.5);
    assert_eq!(resp.reads.avg_ms, 10.0);
    assert_eq!(r.timing.as_ref().unwrap().sim_time_ms, 21.0);
    assert_eq!((r.layers[0].dirty_evictions, r.layers[0].flushed_blocks), (1, 0));
    assert_eq!((r.devices[0].reads, r.devices[0].writes), (1, 1));
    // Write-through: the write waits for the disk; nothing is left to destage.
    let s = with_cache("lru", 1, "through", 0.5);
    let r = timed(&s, &[rq(0.0, Op::Write, 0), rq(1.0, Op::Read, 1)]);
    let resp = r.response.as_ref().unwrap();
    assert_eq!(resp.writes.avg_ms, 10.0);
    assert_eq!(resp.reads.avg_ms, 19.0, "queued behind the write until 10 ms");
    assert_eq!(r.layers[0].dirty_evictions, 0);
    // Write-around: the write goes to the disk and is not cached: the read of
    // block 0 at 30 ms misses.
    let s = with_cache("lru", 4, "around", 0.5);
    let r = timed(&s, &[rq(0.0, Op::Write, 0), rq(30.0, Op::Read, 0)]);
    assert_eq!((r.layers[0].hits, r.layers[0].misses), (0, 2));
    assert_eq!((r.devices[0].reads, r.devices[0].writes), (1, 1));
}

#[test]
fn the_final_flush_writes_back_dirty_blocks_after_the_last_request() {
    // Blocks 4, 5, 6 written at 0 ms stay dirty; at the end they go to the
    // disk as one contiguous write (10 ms), after the requests (0.5 ms).
    let s = with_cache("lru", 8, "back", 0.5);
    let w = Request {
        len: 3 * 4096,
        ..rq(0.0, Op::Write, 4)
    };
    let r = timed(&s, &[w]);
    assert_eq!(r.response.as_ref().unwrap().avg_ms, 0.5);
    assert_eq!(r.layers[0].flushed_blocks, 3);
    assert_eq!((r.devices[0].writes, r.devices[0].write_blocks), (1, 24));
    assert_eq!(r.timing.unwrap().sim_time_ms, 10.5);
    let by = &r.devices[0];
    assert_eq!(by.reads, 0);
}

#[test]
fn reads_only_layers_pass_writes_and_drop_stale_copies() {
    let mut s = with_cache("lru", 8, "back", 0.0);
    s.cache[0].reads_only = true;
    let reqs = [rq(0.0, Op::Read, 1), rq(20.0, Op::Write, 1), rq(40.0, Op::Read, 1)];
    let r = counted(&s, &reqs);
    assert_eq!(
        (r.layers[0].accesses, r.layers[0].hits),
        (2, 0),
        "the write dropped the cached copy"
    );
    assert_eq!((r.devices[0].reads, r.devices[0].writes), (2, 1));
}

#[test]
fn without_layers_a_stack_is_its_target() {
    let s = spec(ONE_DISK);
    let reqs = [
        rq(0.0, Op::Read, 0),
        rq(2.0, Op::Read, 1),
        rq(4.0, Op::Write, 2),
        rq(30.0, Op::Read, 100),
    ];
    let r = timed(&s, &reqs);
    // Constant 10 ms, arrivals 0, 2, 4, 30 ms: responses 10, 18, 26, 10.
    assert_eq!(r.response.unwrap().avg_ms, 16.0);
    assert_eq!(r.block_accesses, 4);
}

/// A stack of one cache layer (from `s`) over a recording target.
fn recorded(s: &StackSpec) -> (Composed, std::sync::Arc<std::sync::Mutex<Vec<Io>>>) {
    let ios = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = ios.clone();
    let target = Recording::new(const_disk, true, false, move |io: &Io, _: &dyn Exec| {
        seen.lock().unwrap().push(*io)
    });
    // The layers exactly as `build` makes them, over this target.
    let factory: LayerFactory = super::build::layer_factory(s, None, None).unwrap();
    let addr = AddressMap::new(TenantMap::Ignore, 4096, None).unwrap();
    (Composed::new(Box::new(target), factory, addr, None).unwrap(), ios)
}

/// Brute force: LRU with dirty bits; returns the destaged blocks in order
/// (evictions, then the final flush in address order).
fn brute_write_back(cap: usize, ops: &[(bool, u64)]) -> Vec<u64> {
    let mut lru: Vec<(u64, bool)> = Vec::new(); // most recent last
    let mut out = Vec::new();
    for &(write, b) in ops {
        if let Some(i) = lru.iter().position(|e| e.0 == b) {
            let mut e = lru.remove(i);
            e.1 |= write;
            lru.push(e);
            continue;
        }
        if lru.len() == cap {
            let (v, dirty) = lru.remove(0);
            if dirty {
                out.push(v);
            }
        }
        lru.push((b, write));
    }
    let mut rest: Vec<u64> = lru.iter().filter(|e| e.1).map(|e| e.0).collect();
    rest.sort_unstable();
    out.extend(rest);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every dirty block reaches the disk once per dirty eviction plus once at
    /// the final flush; nothing else is written, nothing written is lost.
    #[test]
    fn write_back_loses_and_duplicates_nothing(
        ops in prop::collection::vec((any::<bool>(), 0u64..24), 1..200),
        cap in 1u64..12,
    ) {
        let s = with_cache("lru", cap, "back", 0.0);
        let (mut st, ios) = recorded(&s);
        for (i, &(w, b)) in ops.iter().enumerate() {
            st.count_request(&rq(i as f64, if w { Op::Write } else { Op::Read }, b)).unwrap();
        }
        st.count_finish().unwrap();
        let ios = ios.lock().unwrap();
        let destaged: Vec<u64> = ios
            .iter()
            .filter(|io| io.cause == Cause::Destage)
            .flat_map(|io| io.first..io.first + io.nblocks)
            .collect();
        prop_assert_eq!(&destaged, &brute_write_back(cap as usize, &ops));
        // Only destages write; reads are the misses of reads.
        prop_assert!(ios.iter().all(|io| io.op == Op::Read || io.cause == Cause::Destage));
        // Nothing lost: the last write of every block is followed by a destage of it.
        for (i, &(w, b)) in ops.iter().enumerate() {
            if w && !ops[i + 1..].iter().any(|&(w2, b2)| w2 && b2 == b) {
                prop_assert!(destaged.contains(&b));
            }
        }
        let r = st.result("count");
        prop_assert_eq!(r.layers[0].dirty_evictions + r.layers[0].flushed_blocks, destaged.len() as u64);
    }

    /// The same requests counted and in time (open replay) hit and miss on
    /// the same blocks and evict the same dirty blocks, in every write mode,
    /// with and without prefetch (fetch unit, read-ahead, CSP).
    #[test]
    fn counted_and_timed_agree_on_every_layer(
        ops in prop::collection::vec((any::<bool>(), 0u64..40, 1u64..4), 1..150),
        cap in 1u64..16,
        write in prop::sample::select(vec!["back", "through", "around"]),
        policy in prop::sample::select(vec!["lru", "arc", "s3fifo", "vdf-lru", "lfu"]),
        prefetch in prop::sample::select(vec![
            "",
            "fetch_unit = \"16KiB\"\n",
            "prefetch = \"readahead\"\nreadahead = \"8KiB\"\n",
            "prefetch = \"csp\"\ncsp_segment = \"8KiB\"\n",
        ]),
    ) {
        let reqs: Vec<Request> = ops.iter().enumerate().map(|(i, &(w, b, n))| Request {
            len: n * 4096,
            ..rq(i as f64 * 3.0, if w { Op::Write } else { Op::Read }, b)
        }).collect();
        let text = format!(
            "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"{policy}\"\nsize = {cap}\nwrite = \"{write}\"\nhit_ms = 0.2\n{prefetch}\
             [[cache]]\npolicy = \"lru\"\nsize = {}\n\
             [array]\nraid = 5\ndisks = 4\nfailed = [1]\ndisk_size = \"1MiB\"\nwrap = true\n[device]\nmodel = \"toy:base=2,cyl=0.01,spc=64\"\n",
            cap * 2
        );
        let s = spec(&text);
        let c = counted(&s, &reqs);
        let t = timed(&s, &reqs);
        prop_assert_eq!(&c.layers, &t.layers);
        let (ca, ta) = (c.array.unwrap(), t.array.unwrap());
        prop_assert_eq!(ca.surviving_reads, ta.surviving_reads);
        prop_assert_eq!(ca.surviving_writes, ta.surviving_writes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// With an SSD tier (any partitioner, write policy, production option)
    /// under a host cache: the same requests counted and in time make the
    /// same decisions in every layer and the tier, and the same I/O reaches
    /// the array and the SSD.
    #[test]
    fn counted_and_timed_agree_with_a_tier(
        ops in prop::collection::vec((any::<bool>(), 0u32..4, 0u64..40, 1u64..4), 1..150),
        size in 1u64..48,
        partitioner in prop::sample::select(vec!["global", "static", "centaur", "eci"]),
        policy in prop::sample::select(vec!["wb", "wt", "ro", "wa", "wo", "adaptive"]),
        extra in prop::sample::select(vec![
            "", "promote_after = 2\npromote_trigger = 0.5\n", "sequential_cutoff = 8192\n",
            "clean_high = 0.5\nclean_low = 0.2\n", "flush = true\n",
        ]),
        host in any::<bool>(),
    ) {
        let reqs: Vec<Request> = ops.iter().enumerate().map(|(i, &(w, t, b, n))| Request {
            len: n * 4096,
            tenant: t,
            ..rq(i as f64 * 3.0, if w { Op::Write } else { Op::Read }, b)
        }).collect();
        let host = if host { "[[cache]]\npolicy = \"lru\"\nsize = 6\nhit_ms = 0.05\n" } else { "" };
        let s = spec(&format!(
            "tenant_map = \"concat\"\n{host}[tier]\nsize = {size}\npartitioner = \"{partitioner}\"\nwrite_policy = \"{policy}\"\n\
             window_s = 0.05\ninitial_blocks = 5\ntheta = 0.4\nmodel = \"toy:base=0.1,cyl=0,spc=64\"\n{extra}\
             [array]\nraid = 5\ndisks = 4\ndisk_size = \"1MiB\"\nwrap = true\n[device]\nmodel = \"toy:base=2,cyl=0.01,spc=64\"\n"
        ));
        let needs = super::address::SurveyNeeds { tenants: true, ..Default::default() };
        let sv = super::address::survey(reqs.iter().copied().map(Ok), s.tenant_map, 4096, needs).unwrap();
        let mut st = build(&s, Executor::Count, Some(&sv)).unwrap();
        for r in &reqs {
            st.count_request(r).unwrap();
        }
        st.count_finish().unwrap();
        let c = st.result("count");
        let mut st = build(&s, Executor::Timed, Some(&sv)).unwrap();
        let rep = run(&mut st, &mut [vec_source(reqs.clone())], &open()).unwrap();
        let mut t = st.result("timed");
        t.add_timed(&rep);
        t.finish();
        prop_assert_eq!(&c.layers, &t.layers);
        let mut tt = t.tier.clone().unwrap();
        tt.timed_performance_per_cost = None;
        prop_assert_eq!(c.tier.as_ref().unwrap(), &tt);
        let (ca, ta) = (c.array.as_ref().unwrap(), t.array.as_ref().unwrap());
        prop_assert_eq!(ca.surviving_reads, ta.surviving_reads);
        prop_assert_eq!(ca.surviving_writes, ta.surviving_writes);
        prop_assert_eq!(&ca.ops_by_cause, &ta.ops_by_cause);
        let ssd = tt.ssd_disk as usize;
        prop_assert_eq!(ssd, 4);
        let (cs, ts) = (&c.devices[ssd], &t.devices[ssd]);
        prop_assert_eq!((cs.reads, cs.writes, cs.read_blocks, cs.write_blocks), (ts.reads, ts.writes, ts.read_blocks, ts.write_blocks));
        prop_assert!(ts.busy_ms.is_some());
    }
}

/// The examples of the VDF paper (Figure 1, Algorithm 1) as stacks over MD's
/// RAID-5 with one-block chunks, where block b of stripe 0 sits on disk b
/// (the placement the hand-worked numbers assume).
fn rgr_stack(policy: &str, cap: u64, disks: u32, failed: &[u32], fail_at: Option<&str>) -> StackSpec {
    let fail_at = fail_at.map(|f| format!("fail_at = \"{f}\"\n")).unwrap_or_default();
    spec(&format!(
        "tenant_map = \"key\"\n[[cache]]\npolicy = \"{policy}\"\nsize = {cap}\nmerge_misses = false\n\
         [array]\nraid = 5\ndisks = {disks}\nchunk = 4096\nfailed = {failed:?}\nallow_loss = true\n{fail_at}\
         [device]\nmodel = \"const:0\"\n"
    ))
}

fn reads(blocks: &[u64]) -> Vec<Request> {
    blocks
        .iter()
        .enumerate()
        .map(|(i, &b)| rq(i as f64 * 1e3, Op::Read, b))
        .collect()
}

fn surviving(r: &StackResult) -> (u64, u64) {
    let a = r.array.as_ref().unwrap();
    (a.surviving_reads, a.surviving_writes)
}

#[test]
fn figure_1_misses_cost_n_minus_1_on_the_failed_disk() {
    for (block, want) in [(0u64, 4u64), (1, 1)] {
        let r = counted(&rgr_stack("lru", 4, 5, &[0], None), &reads(&[block]));
        assert_eq!(surviving(&r), (want, 0));
        assert_eq!(r.array.unwrap().rgr, want as f64);
    }
}

#[test]
fn vdf_lru_keeps_the_lost_block() {
    // 3 disks, disk 0 failed (MP 2), cache 2: blocks 0 (disk 0), 1, 4 (disk 1).
    let seq = [0, 1, 4, 0, 1, 4];
    let lru = counted(&rgr_stack("lru", 2, 3, &[0], None), &reads(&seq));
    assert_eq!((lru.layers[0].misses, surviving(&lru).0), (6, 8));
    let vdf = counted(&rgr_stack("vdf-lru", 2, 3, &[0], None), &reads(&seq));
    assert_eq!((vdf.layers[0].misses, surviving(&vdf).0), (6, 8));
    // A loop over block 0 (failed disk, MP 4 with 5 disks) and three surviving
    // blocks, cache of 2: LRU misses everything (8 misses on block 0 cost 4
    // each, 22 others cost 1: 54). VDF-LRU never evicts block 0 once cached.
    let seq: Vec<u64> = (0..30).map(|i| [0, 1, 2, 3][i % 4]).collect();
    let lru = counted(&rgr_stack("lru", 2, 5, &[0], None), &reads(&seq));
    assert_eq!((lru.layers[0].misses, surviving(&lru).0), (30, 54));
    let vdf = counted(&rgr_stack("vdf-lru", 2, 5, &[0], None), &reads(&seq));
    assert_eq!((vdf.layers[0].misses, surviving(&vdf).0), (23, 4 + 22));
    let lfu = counted(&rgr_stack("vdf-lfu", 2, 5, &[0], None), &reads(&seq));
    assert!(surviving(&lfu).0 < 54);
}

#[test]
fn fail_at_switches_mid_run() {
    // 4 disks: blocks 13 and 17 are on disk 1. Misses 0..9 cost 1 each;
    // after the failure at request 10, 13 and 17 cost 3.
    let seq: Vec<u64> = (0..20).collect();
    let r = counted(&rgr_stack("lru", 4, 4, &[1], Some("10req")), &reads(&seq));
    assert_eq!(surviving(&r).0, 10 + 8 + 2 * 3);
    // At 9.5 s of the trace's clock (requests are 1 s apart): the same.
    let r = counted(&rgr_stack("lru", 4, 4, &[1], Some("9.5s")), &reads(&seq));
    assert_eq!(surviving(&r).0, 24);
    assert_eq!(r.array.unwrap().failed, vec![1]);
}

#[test]
fn write_backs_cost_md_plans() {
    // Writes of blocks 1, 0, 1 (4 disks, disk 0 failed) into a cache of 4:
    // the flush writes block 0 (failed disk: reconstruct-write, 2 reads + 1
    // parity write) and block 1 (read-modify-write: 2 reads, 2 writes).
    let w = |i: f64, b: u64| rq(i, Op::Write, b);
    let r = counted(&rgr_stack("lru", 4, 4, &[0], None), &[w(0.0, 1), w(1.0, 0), w(2.0, 1)]);
    assert_eq!(surviving(&r), (2 + 2, 2 + 1));
    assert_eq!(r.layers[0].flushed_blocks, 2);
}

#[test]
fn the_miss_trace_names_blocks_of_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.csv");
    let mut s = rgr_stack("lru", 4, 4, &[], None);
    s.cache[0].miss_trace = Some(out.to_string_lossy().into_owned());
    let reqs = vec![
        Request {
            len: 8192,
            tenant: 2,
            ..rq(500.0, Op::Read, 10)
        },
        Request {
            tenant: 2,
            ..rq(1000.0, Op::Read, 10)
        },
        Request {
            tenant: 2,
            ..rq(2000.0, Op::Read, 3)
        },
    ];
    counted(&s, &reqs);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text,
        "timestamp,op,offset,size,tenant\n0.5,R,40960,8192,2\n2,R,12288,4096,2\n"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// No failed disk, reads only: every miss costs one read, so RGR is the
    /// miss ratio, for every policy.
    #[test]
    fn no_failure_rgr_is_the_miss_ratio(seq in prop::collection::vec(0u64..400, 1..300), cap in 1u64..64, n in 3u32..9) {
        let reqs = reads(&seq.iter().map(|b| b * 7).collect::<Vec<_>>());
        for p in ["lru", "lfu", "vdf-lru", "vdf-lfu", "gds", "vdf-clock", "vdf-arc"] {
            let r = counted(&rgr_stack(p, cap, n, &[], None), &reqs);
            prop_assert_eq!(surviving(&r), (r.layers[0].misses, 0));
            prop_assert_eq!(r.array.unwrap().rgr, r.layers[0].miss_ratio);
        }
    }

    /// A cache that holds every block never evicts: every policy pays the
    /// same (cold misses only), fault-aware or not.
    #[test]
    fn a_cache_holding_everything_makes_policies_equal(seq in prop::collection::vec(0u64..200, 1..200), n in 3u32..9) {
        let reqs = reads(&seq.iter().map(|b| b * 5).collect::<Vec<_>>());
        let base = surviving(&counted(&rgr_stack("lru", 200, n, &[0], None), &reqs));
        for p in ["lfu", "vdf-lru", "vdf-lfu", "gds"] {
            prop_assert_eq!(surviving(&counted(&rgr_stack(p, 200, n, &[0], None), &reqs)), base);
        }
    }

    /// What fault-aware policies believe a miss costs is what the array's
    /// read plan costs.
    #[test]
    fn penalties_are_the_plans_costs(block in 0u64..100_000, n in 3u32..9, f in 0u32..9) {
        let s = rgr_stack("vdf-lru", 4, n, &[f % n], None);
        let st = build(&s, Executor::Count, None).unwrap();
        let faults = st.faults().unwrap();
        let r = counted(&s, &reads(&[block]));
        prop_assert_eq!(faults.penalty(block) as u64, surviving(&r).0);
    }
}

#[test]
fn deterministic_json() {
    let s = spec(
        "[[cache]]\npolicy = \"arc\"\nsize = 32\n[array]\nraid = 6\ndisks = 6\nfailed = [2]\ndisk_size = \"4MiB\"\nwrap = true\n\
         [array.rebuild]\nwindow = 2\n[device]\nmodel = \"toy:base=1,cyl=0.01,spc=64\"\n",
    );
    let reqs: Vec<Request> = (0..300u64)
        .map(|i| Request {
            len: 4096 * (1 + i % 3),
            ..rq(
                i as f64 * 0.7,
                if i % 5 == 0 { Op::Write } else { Op::Read },
                (i * 7919) % 3000,
            )
        })
        .collect();
    let mut survey = super::address::Survey::default();
    survey.extents.insert(0, 3000);
    let run_once = || {
        let mut st = build(&s, Executor::Timed, Some(&survey)).unwrap();
        let rep = run(&mut st, &mut [vec_source(reqs.clone())], &open()).unwrap();
        let mut out = st.result("timed");
        out.add_timed(&rep);
        out.finish();
        out.to_json()
    };
    let a = run_once();
    assert_eq!(a, run_once());
    assert!(a.contains("\"rebuild\""));
}

#[test]
fn a_rebuild_after_a_failure_mid_run_starts_at_after_it() {
    // RAID-5 of 3 constant 10 ms disks, 4 chunk rows per member. Disk 0
    // fails before the second request (100 ms); the spare arrives 1000 ms
    // later and 4 rows of (10 ms parallel reads + 10 ms write) take 80 ms.
    let s = spec(
        "tenant_map = \"ignore\"\n[array]\nraid = 5\ndisks = 3\nfailed = [0]\nfail_at = \"1req\"\ndisk_size = \"256KiB\"\n\
         [array.rebuild]\nat = 1000\nwindow = 1\n[device]\nmodel = \"const:10\"\n",
    );
    let reqs = [rq(0.0, Op::Read, 16), rq(100.0, Op::Read, 16)];
    let r = timed(&s, &reqs);
    let rb = r.rebuild.as_ref().unwrap();
    assert_eq!((rb.start_ms, rb.rebuild_ms, rb.finished), (1100.0, 80.0, true));
    assert_eq!(r.timing.unwrap().sim_time_ms, 1180.0);
    assert!(r.array.unwrap().failed.is_empty(), "the rebuilt spare is a member");
    // Counted: the same rebuild I/O, at once, 1100 ms into the trace.
    let c = counted(&s, &reqs);
    let cb = c.rebuild.unwrap();
    assert_eq!(
        (cb.start_ms, cb.rebuild_reads, cb.rebuild_writes),
        (1100.0, rb.rebuild_reads, rb.rebuild_writes)
    );
}

// ---- warm-up in requests -------------------------------------------------

/// What a warm-up must leave out: the additive counters of a run.
fn tallies(r: &StackResult) -> (u64, u64, u64, u64, u64, (u64, u64)) {
    let l = &r.layers[0];
    (r.requests, l.accesses, l.hits, l.misses, l.fetched_blocks, surviving(r))
}

fn minus(
    a: (u64, u64, u64, u64, u64, (u64, u64)),
    b: (u64, u64, u64, u64, u64, (u64, u64)),
) -> (u64, u64, u64, u64, u64, (u64, u64)) {
    (
        a.0 - b.0,
        a.1 - b.1,
        a.2 - b.2,
        a.3 - b.3,
        a.4 - b.4,
        (a.5 .0 - b.5 .0, a.5 .1 - b.5 .1),
    )
}

#[test]
fn warm_up_of_two_requests_measures_the_third_as_a_hit() {
    // Reads of blocks 0, 1, 0 (1 s apart) on a degraded 5-disk RAID-5 with
    // a 2-block LRU, `warmup = "2req"`: only the third is measured, a hit
    // (no surviving read); without the warm-up block 0 costs 4 reads (disk 0
    // failed) and block 1 one.
    let mut s = rgr_stack("lru", 2, 5, &[0], None);
    s.replay.warmup = super::spec::NumOrStr::Str("2req".into());
    let reqs = reads(&[0, 1, 0]);
    for r in [counted(&s, &reqs), timed(&s, &reqs)] {
        assert_eq!(tallies(&r), (1, 1, 1, 0, 0, (0, 0)), "{}", r.executor);
    }
    let t = timed(&s, &reqs);
    assert_eq!(t.response.as_ref().unwrap().reads.requests, 1);
    s.replay.warmup = super::spec::NumOrStr::Int(0);
    assert_eq!(tallies(&counted(&s, &reqs)), (3, 3, 1, 2, 2, (5, 0)));
}

#[test]
fn warm_up_key_takes_seconds_or_requests() {
    let base = "tenant_map = \"ignore\"\n[device]\nmodel = \"const:1\"\n";
    let parse = |v: &str| StackSpec::from_str_with(base, &[format!("replay.warmup={v}")], Origin::default());
    use super::spec::Warmup;
    assert_eq!(parse("1.5").unwrap().replay.warmup(), Warmup::Secs(1.5));
    assert_eq!(parse("\"2s\"").unwrap().replay.warmup(), Warmup::Secs(2.0));
    assert_eq!(parse("\"1000req\"").unwrap().replay.warmup(), Warmup::Requests(1000));
    for bad in ["\"x\"", "-1", "\"-3req\""] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains("key `replay.warmup`") && e.contains("1000req"), "{bad}: {e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A warm-up of k requests measures what a run of the tail measures with
    /// the cache (and the fault-aware policy's state) left as the first k
    /// requests left it: the whole run's counters less those of a run of the
    /// first k requests alone. Counted and timed alike; timed responses
    /// count the tail only.
    #[test]
    fn warm_up_measures_the_tail_of_a_prefilled_cache(
        seq in prop::collection::vec(0u64..60, 1..150),
        cap in 1u64..16,
        k in 0usize..150,
        n in 3u32..7,
        policy in prop::sample::select(vec!["lru", "arc", "vdf-lru", "vdf-arc", "vdf-lfu"]),
    ) {
        let k = k.min(seq.len());
        let reqs = reads(&seq.iter().map(|b| b * 3).collect::<Vec<_>>());
        let s = rgr_stack(policy, cap, n, &[0], None);
        let want = minus(tallies(&counted(&s, &reqs)), tallies(&counted(&s, &reqs[..k])));
        let mut w = s.clone();
        w.replay.warmup = super::spec::NumOrStr::Str(format!("{k}req"));
        prop_assert_eq!(tallies(&counted(&w, &reqs)), want);
        let t = timed(&w, &reqs);
        prop_assert_eq!(tallies(&t), want);
        prop_assert_eq!(t.response.as_ref().unwrap().reads.requests, (seq.len() - k) as u64);
    }
}

// ---- MD's stripe cache ----------------------------------------------------

#[test]
fn stripe_cache_reconstructs_a_stripe_once_counted_and_timed() {
    // 5-disk RAID-5, one-block chunks, disk 0 failed, a 1-block host LRU.
    // Stripe 3 holds blocks 12..15, parity on disk 1 (left-symmetric), block
    // 15 on disk 0. Reads 15, 12, 15: without the stripe cache 4 + 1 + 4
    // surviving reads; with it the first reconstruction reads the stripe's
    // 4 other pages once and both later reads are served from it.
    let reqs = reads(&[15, 12, 15]);
    let mut s = rgr_stack("lru", 1, 5, &[0], None);
    assert_eq!(surviving(&counted(&s, &reqs)), (9, 0));
    s.array.as_mut().unwrap().stripe_cache = 256;
    assert_eq!(surviving(&counted(&s, &reqs)), (4, 0));
    let t = timed(&s, &reqs);
    assert_eq!(surviving(&t), (4, 0));
    // The host cache still misses 3 times: the stripe cache is below it.
    assert_eq!(t.layers[0].misses, 3);
    // No failure: reads bypass it (MD's chunk-aligned reads).
    let mut healthy = rgr_stack("lru", 1, 5, &[], None);
    healthy.array.as_mut().unwrap().stripe_cache = 256;
    assert_eq!(surviving(&counted(&healthy, &reqs)), (3, 0));
}

#[test]
fn stripe_cache_is_for_parity_arrays_only() {
    let base = "tenant_map = \"ignore\"\n[array]\nraid = 1\ndisks = 2\n[device]\nmodel = \"const:1\"\n";
    let e = StackSpec::from_str_with(base, &["array.stripe_cache=16".into()], Origin::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("key `array.stripe_cache`"), "{e}");
}

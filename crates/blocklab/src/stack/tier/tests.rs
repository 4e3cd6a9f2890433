//! Tests of the SSD tier: identities of an unlimited SSD, LRU against the
//! stack distances, partitions within the SSD, no dirty block lost, a
//! pass-through tier is no tier, hand-worked timelines.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use crate::analysis::reuse::{History, ReuseTracker};
use crate::analysis::stats::AccessClass;
use crate::array::plan::Cause;
use crate::stack::address::{survey, AddressMap, Survey, SurveyNeeds};
use crate::stack::build::{build, layer_factory, Executor};
use crate::stack::layer::{Exec, Io};
use crate::stack::recording::{const_disk, Recording};
use crate::stack::result::StackResult;
use crate::stack::runtime::Composed;
use crate::stack::spec::{Origin, StackSpec, TenantMap};
use crate::stack::tier::report::TierReport;
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

fn spec_err(text: &str) -> String {
    StackSpec::from_str_with(
        text,
        &[],
        Origin {
            file: "t.toml".into(),
            dir: PathBuf::new(),
        },
    )
    .unwrap_err()
    .to_string()
}

/// One 4 KiB block of `tenant` at `t` seconds.
fn rq(t: f64, op: Op, tenant: u32, block: u64) -> Request {
    Request {
        time: t,
        op,
        offset: block * 4096,
        len: 4096,
        tenant,
        fs: Default::default(),
    }
}

/// A stack of `[tier]` lines over one constant 10 ms disk (tenants `key`).
fn tier_stack(tier: &str) -> StackSpec {
    spec(&format!(
        "tenant_map = \"concat\"\n[tier]\n{tier}\n[device]\nmodel = \"const:10\"\n"
    ))
}

fn survey_of(s: &StackSpec, reqs: &[Request]) -> Survey {
    let needs = SurveyNeeds {
        unique: true,
        tenants: true,
        ..Default::default()
    };
    survey(reqs.iter().copied().map(Ok), s.tenant_map, s.block_size(), needs).unwrap()
}

fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    let sv = survey_of(s, reqs);
    crate::stack::test_util::counted(s, reqs, Some(&sv))
}

fn timed(s: &StackSpec, reqs: &[Request]) -> StackResult {
    let sv = survey_of(s, reqs);
    let mut st = build(s, Executor::Timed, Some(&sv)).unwrap();
    let cfg = ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig::default(),
    };
    let rep = run(&mut st, &mut [vec_source(reqs.to_vec())], &cfg).unwrap();
    let mut out = st.result("timed");
    out.add_timed(&rep);
    out.finish();
    out
}

fn tier(r: &StackResult) -> &TierReport {
    r.tier.as_ref().unwrap()
}

/// Access classes of a request sequence, per (tenant, block).
fn classes(reqs: &[Request]) -> [u64; 6] {
    let mut last = std::collections::HashMap::new();
    let mut c = [0u64; 6];
    for r in reqs {
        let w = r.op == Op::Write;
        let k = match AccessClass::of(last.insert((r.tenant, r.offset / 4096), w), w) {
            AccessClass::ColdRead => 0,
            AccessClass::ColdWrite => 1,
            AccessClass::Rar => 2,
            AccessClass::Raw => 3,
            AccessClass::War => 4,
            AccessClass::Waw => 5,
        };
        c[k] += 1;
    }
    c
}

fn random_reqs(ops: &[(bool, u32, u64)], dt: f64) -> Vec<Request> {
    ops.iter()
        .enumerate()
        .map(|(i, &(w, t, b))| rq(i as f64 * dt, if w { Op::Write } else { Op::Read }, t, b))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// An SSD that holds everything: write-back writes every cold access and
    /// every re-write to the SSD and nothing to the array; read-only writes
    /// cold reads and reads after writes (the write dropped the copy);
    /// write-through writes what write-back does and every write to the array.
    #[test]
    fn identities_of_an_unlimited_ssd(ops in prop::collection::vec((any::<bool>(), 0u32..3, 0u64..30), 1..300)) {
        let reqs = random_reqs(&ops, 1.0);
        let [cr, cw, rar, raw, war, waw] = classes(&reqs);
        for partitioner in ["global", "static", "centaur", "eci"] {
            let wb = counted(&tier_stack(&format!("size = \"unlimited\"\npartitioner = \"{partitioner}\"\ninitial_blocks = 100000\nwindow_s = 1e9")), &reqs);
            let t = tier(&wb);
            prop_assert_eq!(t.counts.ssd_writes, cr + cw + war + waw);
            prop_assert_eq!(t.counts.read_hits, rar + raw);
            prop_assert_eq!(t.counts.hits, rar + raw + war + waw);
            prop_assert_eq!(t.counts.array_writes, 0);
            prop_assert_eq!(t.counts.array_reads, cr);
            // Every block written stays dirty.
            let written: std::collections::HashSet<(u32, u64)> =
                reqs.iter().filter(|r| r.op == Op::Write).map(|r| (r.tenant, r.offset)).collect();
            prop_assert_eq!(t.dirty_blocks, written.len() as u64);
        }
        let ro = counted(&tier_stack("size = \"unlimited\"\nwrite_policy = \"ro\""), &reqs);
        let t = tier(&ro);
        prop_assert_eq!(t.counts.ssd_writes, cr + raw);
        prop_assert_eq!(t.counts.read_hits, rar);
        prop_assert_eq!(t.counts.array_writes, cw + war + waw);
        prop_assert_eq!(ro.devices[0].writes, cw + war + waw, "one array write per block written");
        let wt = counted(&tier_stack("size = \"unlimited\"\nwrite_policy = \"wt\""), &reqs);
        let t = tier(&wt);
        prop_assert_eq!(t.counts.ssd_writes, cr + cw + war + waw);
        prop_assert_eq!(t.counts.read_hits, rar + raw);
        prop_assert_eq!(t.counts.array_writes, cw + war + waw);
        prop_assert_eq!(t.dirty_blocks, 0);
    }

    /// One write-back LRU partition of c blocks hits a read iff its stack
    /// distance (over every access) is at most c: the URD histogram is the
    /// read-hit curve (the research note's E4).
    #[test]
    fn a_write_back_lru_hits_reads_within_its_size(
        ops in prop::collection::vec((any::<bool>(), 0u32..1, 0u64..40), 1..300),
        c in 1u64..40,
    ) {
        let reqs = random_reqs(&ops, 1.0);
        let mut tr = ReuseTracker::new(true, History::All);
        let mut want = 0;
        for r in &reqs {
            let u = tr.access(0, r.offset / 4096, r.op == Op::Write).unwrap();
            if r.op == Op::Read && u.distance.is_some_and(|d| d <= c) {
                want += 1;
            }
        }
        let r = counted(&tier_stack(&format!("size = {c}")), &reqs);
        prop_assert_eq!(tier(&r).counts.read_hits, want);
    }

    /// Whatever the partitioner and the solver, the partitions never hold
    /// more than the SSD, at every request.
    #[test]
    fn partitions_fit_the_ssd(
        ops in prop::collection::vec((any::<bool>(), 0u32..5, 0u64..50), 1..250),
        size in 1u64..60,
        partitioner in prop::sample::select(vec!["static", "centaur", "eci", "global"]),
        solver in prop::sample::select(vec!["exact", "greedy"]),
        initial in 0u64..30,
    ) {
        let reqs = random_reqs(&ops, 0.5);
        let s = tier_stack(&format!(
            "size = {size}\npartitioner = \"{partitioner}\"\nsolver = \"{solver}\"\nwindow_s = 7\ninitial_blocks = {initial}\nwrite_policy = \"adaptive\""
        ));
        let sv = survey_of(&s, &reqs);
        let mut st = build(&s, Executor::Count, Some(&sv)).unwrap();
        for r in &reqs {
            st.count_request(r).unwrap();
            let out = st.result("count");
            let t = tier(&out);
            prop_assert!(t.allocated_blocks <= size, "{} > {size}", t.allocated_blocks);
            let held: u64 = t.tenants.iter().map(|x| x.held_blocks).sum();
            prop_assert!(held <= size);
            for x in &t.tenants {
                if partitioner != "global" {
                    prop_assert!(x.held_blocks <= x.allocated_blocks);
                }
            }
            for w in &t.timeline {
                prop_assert!(w.allocated_blocks <= size);
            }
        }
        let out = st.result("count");
        prop_assert!(tier(&out).mean_allocated_blocks <= size as f64 + 1e-9);
    }
}

/// The stack of `s` over a target recording every Io that reaches the
/// bottom, with the index of the request being served (the final flush:
/// `usize::MAX`).
type Recorded = (Composed, Arc<Mutex<Vec<(usize, Io)>>>, Arc<Mutex<usize>>);

fn recorded(s: &StackSpec, sv: &Survey) -> Recorded {
    let ios = Arc::new(Mutex::new(Vec::new()));
    let at = Arc::new(Mutex::new(0));
    let (seen, now) = (ios.clone(), at.clone());
    let target = Recording::new(const_disk, true, false, move |io: &Io, _: &dyn Exec| {
        let at = *now.lock().unwrap();
        seen.lock().unwrap().push((at, *io));
    });
    let factory = layer_factory(s, Some(sv), None).unwrap();
    let addr = AddressMap::new(s.tenant_map, s.block_size(), Some(sv)).unwrap();
    (Composed::new(Box::new(target), factory, addr, None).unwrap(), ios, at)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Partitions shrink and grow every window, policies switch, cleaning
    /// runs: the last write of every block still reaches the array (here at
    /// the latest by the final flush), and every destage is counted.
    #[test]
    fn no_dirty_block_is_lost(
        ops in prop::collection::vec((any::<bool>(), 0u32..4, 0u64..24), 1..250),
        size in 1u64..40,
        partitioner in prop::sample::select(vec!["centaur", "eci", "static", "global"]),
        policy in prop::sample::select(vec!["wb", "adaptive", "wo"]),
        clean in any::<bool>(),
        cache_above in any::<bool>(),
    ) {
        let reqs = random_reqs(&ops, 0.5);
        let clean = if clean { "clean_high = 0.5\nclean_low = 0.25\n" } else { "" };
        let above = if cache_above { "[[cache]]\npolicy = \"lru\"\nsize = 3\n" } else { "" };
        let s = spec(&format!(
            "tenant_map = \"concat\"\n{above}[tier]\nsize = {size}\npartitioner = \"{partitioner}\"\nwindow_s = 5\n\
             initial_blocks = 4\nwrite_policy = \"{policy}\"\ntheta = 0.3\nflush = true\n{clean}[device]\nmodel = \"const:1\"\n"
        ));
        let sv = survey_of(&s, &reqs);
        let (mut st, ios, at) = recorded(&s, &sv);
        let addr = AddressMap::new(s.tenant_map, 4096, Some(&sv)).unwrap();
        for (i, r) in reqs.iter().enumerate() {
            *at.lock().unwrap() = i;
            st.count_request(r).unwrap();
        }
        *at.lock().unwrap() = usize::MAX;
        st.count_finish().unwrap();
        let ios = ios.lock().unwrap();
        for (i, r) in reqs.iter().enumerate() {
            if r.op != Op::Write {
                continue;
            }
            let b = addr.io(r).unwrap().first;
            let later = reqs[i + 1..].iter().any(|x| x.op == Op::Write && addr.io(x).unwrap().first == b);
            if later {
                continue;
            }
            prop_assert!(
                ios.iter().any(|(j, io)| *j >= i && io.op == Op::Write && io.first <= b && b < io.first + io.nblocks),
                "the last write of block {} (request {}) never reached the array", b, i
            );
        }
        let out = st.result("count");
        let t = tier(&out);
        prop_assert_eq!(t.dirty_blocks, 0);
        let destaged: u64 = ios
            .iter()
            .filter(|(_, io)| io.cause == Cause::Destage && io.op == Op::Write)
            .map(|(_, io)| io.nblocks)
            .sum();
        let above_destaged = out.layers.first().map_or(0, |l| l.dirty_evictions + l.flushed_blocks);
        // Destages of the cache above pass through the tier, which may keep them.
        prop_assert!(destaged >= t.counts.destaged);
        prop_assert!(destaged <= t.counts.destaged + above_destaged);
    }

    /// A pass-through tier is no tier: the same operations reach the disk.
    #[test]
    fn a_pass_through_tier_is_transparent(
        ops in prop::collection::vec((any::<bool>(), 0u32..3, 0u64..30, 1u64..4), 1..150),
    ) {
        let reqs: Vec<Request> = ops.iter().enumerate().map(|(i, &(w, t, b, n))| Request {
            len: n * 4096,
            ..rq(i as f64, if w { Op::Write } else { Op::Read }, t, b)
        }).collect();
        let bare = spec("tenant_map = \"concat\"\n[device]\nmodel = \"const:1\"\n");
        let pt = spec("tenant_map = \"concat\"\n[tier]\nsize = 100\nwrite_policy = \"pt\"\n[device]\nmodel = \"const:1\"\n");
        let (a, b) = (counted(&bare, &reqs), counted(&pt, &reqs));
        prop_assert_eq!(&a.devices[0], &b.devices[0]);
        prop_assert_eq!(tier(&b).counts.ssd_writes + tier(&b).counts.hits, 0);
    }
}

#[test]
fn hand_worked_timeline_of_write_back_and_read_only() {
    // SSD 0.5 ms, disk 10 ms, requests far apart. Tenant 0 write-back: a read
    // miss (10 ms, then a fill in the background), a read hit (0.5), a write
    // of a new block (0.5 ms, dirty). Tenant 1 read-only: the same requests,
    // and its write goes to the disk (10 ms).
    let s = spec(
        "tenant_map = \"concat\"\n[tier]\nsize = 10\npartitioner = \"static\"\nmodel = \"const:0.5\"\n\
         tenant_write_policy = { \"1\" = \"ro\" }\n[device]\nmodel = \"const:10\"\n",
    );
    let mut reqs = Vec::new();
    for t in 0..2u32 {
        let at = t as f64 * 10.0;
        reqs.push(rq(at, Op::Read, t, 5));
        reqs.push(rq(at + 1.0, Op::Read, t, 5));
        reqs.push(rq(at + 2.0, Op::Write, t, 6));
    }
    let r = timed(&s, &reqs);
    let resp = r.response.as_ref().unwrap();
    assert_eq!(resp.reads.avg_ms, (10.0 + 0.5) / 2.0);
    assert_eq!(resp.writes.avg_ms, (0.5 + 10.0) / 2.0);
    let t = tier(&r);
    assert_eq!(
        (t.tenants[0].write_policy.as_str(), t.tenants[1].write_policy.as_str()),
        ("wb", "ro")
    );
    assert_eq!((t.tenants[0].counts.ssd_writes, t.tenants[1].counts.ssd_writes), (2, 1));
    assert_eq!((t.tenants[0].dirty_blocks, t.tenants[1].counts.array_writes), (1, 1));
    assert_eq!((t.tenants[0].allocated_blocks, t.tenants[1].allocated_blocks), (5, 5));
    // The latency model says the same with its constants (0.1 / 7 ms).
    assert_eq!(t.tenants[1].latency.write_latency_ms, 7.0);
    assert!((t.tenants[0].latency.latency_ms - (7.0 + 0.1 + 0.1) / 3.0).abs() < 1e-12);
    // The SSD is a device: disk 1, two fills and a write, two hits read.
    let ssd = &r.devices[1];
    assert_eq!((t.ssd_disk, ssd.reads, ssd.writes), (1, 2, 3));
    assert!(ssd.busy_ms.unwrap() > 0.0);
    // Every figure has its own key in the JSON (flattened parts must not collide).
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let j = &v["tier"]["tenants"][0];
    assert_eq!((j["reads"].as_u64(), j["read_requests"].as_u64()), (Some(2), Some(2)));
    assert_eq!((j["writes"].as_u64(), j["write_requests"].as_u64()), (None, Some(1)));
    assert_eq!(v["tier"]["reads"].as_u64(), Some(4));
    // Counted: the same decisions.
    let c = counted(&s, &reqs);
    let mut a = tier(&c).clone();
    let mut b = t.clone();
    a.timed_performance_per_cost = None;
    b.timed_performance_per_cost = None;
    assert_eq!(a, b);
}

#[test]
fn the_papers_eq2_charges_no_write_by_its_policy() {
    // Each tenant: a read miss, a read hit, a write of a new block; tenant 0
    // writes back, tenant 1 is read-only. Eq. 2 per block access, h = read
    // hits / accesses = 1/3: (0.1 + 2 x 7) / 3 = 4.7 ms for both, since the
    // write costs T_HDD whatever the policy. Our per-request model charges
    // the written-back write 0.1 ms: (7 + 0.1 + 0.1) / 3 = 2.4 ms against
    // (7 + 0.1 + 7) / 3 = 4.7 ms.
    let s = spec(
        "tenant_map = \"concat\"\n[tier]\nsize = 10\npartitioner = \"static\"\n\
         tenant_write_policy = { \"1\" = \"ro\" }\n[device]\nmodel = \"const:10\"\n",
    );
    let mut reqs = Vec::new();
    for t in 0..2u32 {
        let at = t as f64 * 10.0;
        reqs.push(rq(at, Op::Read, t, 5));
        reqs.push(rq(at + 1.0, Op::Read, t, 5));
        reqs.push(rq(at + 2.0, Op::Write, t, 6));
    }
    let r = counted(&s, &reqs);
    let t = tier(&r);
    let eq2 = (0.1 + 2.0 * 7.0) / 3.0;
    for x in &t.tenants {
        assert!((x.eq2_latency_ms - eq2).abs() < 1e-12, "tenant {}", x.tenant);
    }
    assert!((t.eq2_latency_ms - eq2).abs() < 1e-12);
    assert!((t.tenants[0].latency.latency_ms - 7.2 / 3.0).abs() < 1e-12);
    assert!((t.tenants[1].latency.latency_ms - 14.1 / 3.0).abs() < 1e-12);
    // Performance per cost: the same cost under either model, 1 / latency over it.
    for x in t.tenants.iter() {
        let eq2_cost = 1.0 / x.eq2_latency_ms / x.eq2_performance_per_cost.unwrap();
        let ours_cost = 1.0 / x.latency.latency_ms / x.performance_per_cost.unwrap();
        assert!((eq2_cost / ours_cost - 1.0).abs() < 1e-12);
    }
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert!(v["tier"]["eq2_latency_ms"].is_number());
    assert!(v["tier"]["tenants"][1]["eq2_performance_per_cost"].is_number());
}

#[test]
fn a_hit_on_a_block_being_fetched_waits_for_the_fetch() {
    // Block 5 missed at 0 ms (10 ms disk); read again at 2 ms: it waits for
    // the fetch (until 10 ms), then reads the SSD behind the fill that the
    // fetch started (0.5 + 0.5 ms): 9 ms; at 30 ms an SSD hit (0.5 ms).
    let s = tier_stack("size = 10\nmodel = \"const:0.5\"");
    let reqs = [
        rq(0.0, Op::Read, 0, 5),
        rq(0.002, Op::Read, 0, 5),
        rq(0.030, Op::Read, 0, 5),
    ];
    let r = timed(&s, &reqs);
    let resp = r.response.unwrap();
    assert!((resp.avg_ms - (10.0 + 9.0 + 0.5) / 3.0).abs() < 1e-9, "{resp:?}");
    assert_eq!(r.devices[1].reads, 2);
}

#[test]
fn eci_gives_no_space_to_a_tenant_that_only_rewrites() {
    // Paper's Fig. 5 sequence as tenant 0 (TRD 5, URD 2) and a tenant 1
    // that only re-writes (URD 0), window 10 s; then window 2 re-reads.
    let mut reqs = Vec::new();
    let fig5 = [
        (false, 2),
        (false, 3),
        (false, 4),
        (false, 5),
        (true, 1),
        (true, 2),
        (false, 1),
    ];
    for (i, &(w, b)) in fig5.iter().enumerate() {
        reqs.push(rq(i as f64, if w { Op::Write } else { Op::Read }, 0, b));
    }
    for i in 0..6u64 {
        reqs.push(rq(i as f64 + 0.5, Op::Write, 1, i % 3));
    }
    reqs.sort_by(|a, b| a.time.partial_cmp(&b.time).unwrap());
    reqs.push(rq(12.0, Op::Read, 0, 9));
    let run = |p: &str| {
        counted(
            &tier_stack(&format!(
                "size = 100\npartitioner = \"{p}\"\nwindow_s = 10\ninitial_blocks = 50"
            )),
            &reqs,
        )
    };
    let eci = run("eci");
    let w = &tier(&eci).timeline[0];
    let alloc: Vec<(u32, u64, Option<u64>)> = w
        .tenants
        .iter()
        .map(|t| (t.tenant, t.allocated_blocks, t.want))
        .collect();
    assert_eq!(alloc, vec![(0, 2, Some(2)), (1, 0, Some(0))]);
    let centaur = run("centaur");
    let w = &tier(&centaur).timeline[0];
    let alloc: Vec<(u32, u64)> = w.tenants.iter().map(|t| (t.tenant, t.allocated_blocks)).collect();
    assert_eq!(alloc, vec![(0, 5), (1, 3)]);
    // Before the window closed both had 50 blocks; after it ECI holds 2 + 0.
    assert_eq!(tier(&eci).allocated_blocks, 2);
    assert_eq!(tier(&eci).tenants[1].allocated_blocks, 0);
    // Tenant 1's dirty blocks went to the array when its partition went to 0.
    assert_eq!(tier(&eci).tenants[1].counts.destaged, 3);
    assert_eq!(tier(&eci).tenants[1].held_blocks, 0);
}

#[test]
fn eci_sequential_share_gives_no_space_to_a_sequential_tenant() {
    // Window 1 (10 s): tenant 0 reads blocks 0 1 2 3 0 1 2 3, one request
    // each: 6 of 8 requests continue the one before, and the re-read of 0
    // sees 4 distinct blocks (URD 4). Tenant 1 reads 9 3 9 3: none
    // continues, URD 2. A request at 12 s closes the window.
    let mut reqs = Vec::new();
    for (i, b) in [0u64, 1, 2, 3, 0, 1, 2, 3].into_iter().enumerate() {
        reqs.push(rq(i as f64, Op::Read, 0, b));
    }
    for (i, b) in [9u64, 3, 9, 3].into_iter().enumerate() {
        reqs.push(rq(i as f64 + 0.5, Op::Read, 1, b));
    }
    reqs.sort_by(|a, b| a.time.partial_cmp(&b.time).unwrap());
    reqs.push(rq(12.0, Op::Read, 1, 9));
    let wants = |extra: &str| {
        let r = counted(
            &tier_stack(&format!(
                "size = 100\npartitioner = \"eci\"\nwindow_s = 10\ninitial_blocks = 50\n{extra}"
            )),
            &reqs,
        );
        let w = &tier(&r).timeline[0];
        w.tenants.iter().map(|t| (t.tenant, t.want)).collect::<Vec<_>>()
    };
    assert_eq!(wants(""), vec![(0, Some(4)), (1, Some(2))]);
    // 6 / 8 = 0.75 sequential: at or above 0.7 tenant 0 is a sequential VM.
    assert_eq!(wants("sequential_share = 0.7"), vec![(0, Some(0)), (1, Some(2))]);
    assert_eq!(wants("sequential_share = 0.8"), vec![(0, Some(4)), (1, Some(2))]);
    let base = "tenant_map = \"key\"\n[device]\nmodel = \"const:1\"\n[tier]\nsize = 10\n";
    for bad in ["0", "1.5"] {
        let e = spec_err(&format!("{base}sequential_share = {bad}"));
        assert!(e.starts_with("t.toml: key `tier.sequential_share`"), "{e}");
    }
}

#[test]
fn adaptive_turns_a_rewriting_tenant_read_only() {
    // Tenant 0 re-writes (r = 5/6 >= 0.5): read-only from window 1 on, its
    // later writes go to the disk; tenant 1 re-reads: write-back.
    let mut reqs = Vec::new();
    for i in 0..6u64 {
        reqs.push(rq(i as f64, Op::Write, 0, 0));
        reqs.push(rq(i as f64 + 0.5, Op::Read, 1, 0));
    }
    reqs.push(rq(11.0, Op::Write, 0, 1));
    reqs.push(rq(11.5, Op::Write, 1, 1));
    let r = counted(
        &tier_stack("size = 100\npartitioner = \"static\"\nwindow_s = 10\nwrite_policy = \"adaptive\""),
        &reqs,
    );
    let t = tier(&r);
    assert_eq!(t.timeline[0].tenants[0].write_policy, "ro");
    assert_eq!(t.timeline[0].tenants[1].write_policy, "wb");
    assert_eq!((t.tenants[0].read_only_windows, t.tenants[1].read_only_windows), (1, 0));
    assert_eq!(t.tenants[0].counts.array_writes, 1, "the write after the switch");
    assert_eq!(
        t.tenants[0].dirty_blocks, 1,
        "the block written back before the switch stays dirty"
    );
    assert_eq!(t.tenants[1].counts.array_writes, 0);
}

#[test]
fn promotion_and_sequential_cutoff() {
    // NHIT 2 with trigger 0: a block enters at its second miss.
    let reqs: Vec<Request> = [1u64, 1, 1, 2, 2]
        .iter()
        .enumerate()
        .map(|(i, &b)| rq(i as f64, Op::Read, 0, b))
        .collect();
    let r = counted(&tier_stack("size = 10\npromote_after = 2\npromote_trigger = 0"), &reqs);
    assert_eq!(
        (
            tier(&r).counts.read_hits,
            tier(&r).counts.ssd_writes,
            tier(&r).counts.bypassed
        ),
        (1, 2, 2)
    );
    // A sequential read of 8 requests of 16 KiB with a 32 KiB cutoff: the
    // first two are cached (32 KiB is not more than the cutoff), the rest bypass.
    let reqs: Vec<Request> = (0..8u64)
        .map(|i| Request {
            len: 4 * 4096,
            ..rq(i as f64, Op::Read, 0, 4 * i)
        })
        .collect();
    let r = counted(&tier_stack("size = 100\nsequential_cutoff = \"32KiB\""), &reqs);
    assert_eq!((tier(&r).counts.ssd_writes, tier(&r).counts.bypassed), (8, 24));
}

#[test]
fn cleaning_keeps_dirty_blocks_under_the_high_watermark() {
    // 10 blocks, high 0.5 / low 0.2: the 6th dirty block triggers cleaning
    // down to 2 (the oldest four go to the disk), and so on.
    let reqs: Vec<Request> = (0..10u64).map(|b| rq(b as f64, Op::Write, 0, b)).collect();
    let r = counted(&tier_stack("size = 10\nclean_high = 0.5\nclean_low = 0.2"), &reqs);
    let t = tier(&r);
    assert!(t.dirty_blocks <= 5);
    assert_eq!(t.counts.destaged, 10 - t.dirty_blocks);
    assert_eq!(t.counts.array_writes, t.counts.destaged);
    assert_eq!(
        r.devices[0].write_blocks,
        8 * t.counts.destaged,
        "sectors of the single disk"
    );
    assert_eq!(t.counts.ssd_writes, 10);
}

#[test]
fn tier_keys_are_checked() {
    let base = "tenant_map = \"key\"\n[device]\nmodel = \"const:1\"\n[tier]\n";
    let e = spec_err(&format!("{base}size = 10\npartitioner = \"lru\""));
    assert!(
        e.starts_with("t.toml: key `tier.partitioner`: unknown partitioner `lru`"),
        "{e}"
    );
    let e = spec_err(&format!("{base}size = 10\nwrite_policy = \"sideways\""));
    assert!(
        e.starts_with("t.toml: key `tier.write_policy`: unknown write policy"),
        "{e}"
    );
    let e = spec_err(&format!("{base}size = 10\ntenant_write_policy = {{ \"x\" = \"ro\" }}"));
    assert!(e.starts_with("t.toml: key `tier.tenant_write_policy.x`"), "{e}");
    let e = spec_err(&format!("{base}size = 10\nclean_high = 0.3\nclean_low = 0.5"));
    assert!(e.starts_with("t.toml: key `tier.clean_low`"), "{e}");
    let e = spec_err(&format!("{base}size = 10\ntheta = 2"));
    assert!(e.starts_with("t.toml: key `tier.theta`"), "{e}");
    let e = spec_err(&format!("{base}size = 0"));
    assert!(e.starts_with("t.toml: key `tier.size`"), "{e}");
    let e = spec_err(&format!("{base}size = 10\nsolver = \"magic\""));
    assert!(e.starts_with("t.toml: key `tier.solver`"), "{e}");
    let e = spec_err(&format!("{base}size = 10\nwindow_s = 0"));
    assert!(e.starts_with("t.toml: key `tier.window_s`"), "{e}");
    let e = spec_err(&format!("{base}size = 10\nsize_blocks = 3"));
    assert!(e.starts_with("t.toml: key `tier.size_blocks`: unknown field"), "{e}");
    let e =
        spec_err("tenant_map = \"ignore\"\n[device]\nmodel = \"const:1\"\n[tier]\nsize = 10\npartitioner = \"eci\"\n");
    assert!(
        e.starts_with("t.toml: key `tier.partitioner`: tenants need their own volumes"),
        "{e}"
    );
    // The timed executor needs the SSD's model, large enough.
    let s = tier_stack("size = 10");
    let sv = survey_of(&s, &[rq(0.0, Op::Read, 0, 0)]);
    let mut st = build(&s, Executor::Timed, Some(&sv)).unwrap();
    let cfg = ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig::default(),
    };
    let e = run(&mut st, &mut [vec_source(vec![rq(0.0, Op::Read, 0, 0)])], &cfg)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("t.toml: key `tier.model`"), "{e}");
    let s = tier_stack("size = \"1GiB\"\nmodel = \"toy:base=1,cap=1000\"");
    let mut st = build(&s, Executor::Timed, Some(&sv)).unwrap();
    let e = run(&mut st, &mut [vec_source(vec![rq(0.0, Op::Read, 0, 0)])], &cfg)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("t.toml: key `tier.size`"), "{e}");
}

#[test]
fn deterministic_json_with_a_tier() {
    let s = spec(
        "tenant_map = \"concat\"\n[[cache]]\npolicy = \"lru\"\nsize = 16\n[tier]\nsize = 64\npartitioner = \"eci\"\nwindow_s = 20\n\
         initial_blocks = 10\nwrite_policy = \"adaptive\"\nmodel = \"../../examples/disks/ssd.toml\"\nclean_high = 0.6\nclean_low = 0.3\n\
         [array]\nraid = 5\ndisks = 4\ndisk_size = \"8MiB\"\nwrap = true\n[device]\nmodel = \"toy:base=1,cyl=0.01,spc=64\"\n",
    );
    let mut s = s;
    s.origin.dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let reqs: Vec<Request> = (0..400u64)
        .map(|i| Request {
            len: 4096 * (1 + i % 3),
            ..rq(
                i as f64 * 0.3,
                if i % 3 == 0 { Op::Write } else { Op::Read },
                (i % 4) as u32,
                (i * 7919) % 200,
            )
        })
        .collect();
    let a = timed(&s, &reqs).to_json();
    assert_eq!(a, timed(&s, &reqs).to_json());
    assert!(
        a.contains("\"tier\":{\"size\":64,\"partitioner\":\"eci\""),
        "{}",
        &a[..200.min(a.len())]
    );
    let c = counted(&s, &reqs).to_json();
    assert_eq!(c, counted(&s, &reqs).to_json());
}

#[test]
fn the_tenant_of_a_block_comes_from_the_address_map() {
    // `concat`: a destage of the host cache above carries no request; the
    // tier still files it under the right tenant.
    let s = spec(
        "tenant_map = \"concat\"\n[[cache]]\npolicy = \"lru\"\nsize = 1\n[tier]\nsize = 10\npartitioner = \"static\"\n\
         [device]\nmodel = \"const:1\"\n",
    );
    let reqs = [
        rq(0.0, Op::Write, 7, 3),
        rq(1.0, Op::Read, 9, 3),
        rq(2.0, Op::Read, 9, 4),
    ];
    let r = counted(&s, &reqs);
    let t = tier(&r);
    let by: Vec<(u32, u64, u64)> = t
        .tenants
        .iter()
        .map(|x| (x.tenant, x.counts.accesses, x.counts.ssd_writes))
        .collect();
    // Tenant 7: the destage of its dirty block 3 (evicted by tenant 9's read).
    assert_eq!(by, vec![(7, 1, 1), (9, 2, 2)]);
    let _ = TenantMap::Concat;
}

#[test]
fn write_around_write_only_and_pass_through() {
    // Block 1: write, read, write, read. Block 2: read, read.
    let reqs: Vec<Request> = [(true, 1), (false, 1), (true, 1), (false, 1), (false, 2), (false, 2)]
        .iter()
        .enumerate()
        .map(|(i, &(w, b))| rq(i as f64, if w { Op::Write } else { Op::Read }, 0, b))
        .collect();
    let run = |p: &str| {
        let r = counted(&tier_stack(&format!("size = 10\nwrite_policy = \"{p}\"")), &reqs);
        let t = tier(&r).counts;
        (t.hits, t.read_hits, t.ssd_writes, t.array_writes)
    };
    // Write-around: the first write is not allocated; the read fills; the
    // second write updates the copy and the array; the read hits; block 2
    // fills and hits.
    assert_eq!(run("wa"), (3, 2, 3, 2));
    // Write-only: writes kept dirty, read misses not filled (block 2 misses twice).
    assert_eq!(run("wo"), (3, 2, 2, 0));
    // Pass-through: nothing reaches the SSD.
    assert_eq!(run("pt"), (0, 0, 0, 2));
    // Write-back, for reference: both writes and the fill of block 2.
    assert_eq!(run("wb"), (4, 3, 3, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The tier takes, window by window, exactly the decisions that the
    /// offline `trace partition` plan takes on the same requests: the wishes,
    /// the solver's allocations, ECI's write policies.
    #[test]
    fn the_tier_decides_what_the_partition_plan_does(
        ops in prop::collection::vec((any::<bool>(), 0u32..4, 0u64..40), 1..250),
        size in 1u64..80,
        theta in 0.0f64..1.0,
    ) {
        use crate::analysis::partition_plan::{PartitionPlan, PlanOptions};
        let reqs = random_reqs(&ops, 0.5);
        let mut plan = PartitionPlan::new(PlanOptions {
            window: Some(9.0),
            capacity: Some(size),
            theta,
            ..Default::default()
        }).unwrap();
        for r in &reqs {
            plan.add(r).unwrap();
        }
        let plan = plan.finish(0).unwrap();
        for scheme in ["centaur", "eci"] {
            let s = tier_stack(&format!(
                "size = {size}\npartitioner = \"{scheme}\"\nwindow_s = 9\nwrite_policy = \"adaptive\"\ntheta = {theta}"
            ));
            let r = counted(&s, &reqs);
            let t = tier(&r);
            // The plan also closes the last window, which the tier never sees end.
            prop_assert_eq!(t.timeline.len() + 1, plan.windows.len());
            for (w, p) in t.timeline.iter().zip(&plan.windows) {
                let d = if scheme == "centaur" { &p.centaur } else { &p.eci };
                prop_assert_eq!(w.window, p.window);
                prop_assert_eq!(w.feasible, d.feasible);
                prop_assert_eq!(w.allocated_blocks, d.allocated);
                for a in &d.tenants {
                    let x = w.tenants.iter().find(|x| x.tenant == a.tenant).unwrap();
                    prop_assert_eq!((x.allocated_blocks, x.want), (a.blocks, Some(a.want)));
                }
                for pol in &p.write_policies {
                    let x = w.tenants.iter().find(|x| x.tenant == pol.tenant).unwrap();
                    prop_assert_eq!(x.write_policy.as_str(), pol.write_policy.name());
                }
            }
        }
    }
}

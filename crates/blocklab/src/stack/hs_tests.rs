//! Tests of Hsu–Smith's optimizations in the stack: hand-computed timelines
//! on toy devices (the vectors of `../shared/research/hsu-smith.md` §e.2),
//! CSP through the stack, the write buffer's marks, age limit and full
//! buffer, opportunistic read-ahead handed to the cache, warm-up,
//! short-stroking; and properties: exactly-once destages, the data a read
//! returns (a version oracle over the device's service log), counted
//! against timed, determinism.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use rustc_hash::FxHashMap;

use super::address::{AddressMap, Survey};
use super::build::{build, layer_factory, Executor};
use super::layer::{Exec, Io, Target};
use super::recording::Recording;
use super::result::StackResult;
use super::runtime::Composed;
use super::spec::{Origin, StackSpec, TenantMap};
use crate::array::plan::{Cause, DiskOpKind};
use crate::device::toy::ToyDisk;
use crate::device::{DevRequest, DeviceModel, Dispatch, FreeRun, Opportunism, TimeSplit};
use crate::error::Result;
use crate::timed::executor::ExecConfig;
use crate::timed::replay::{run, vec_source, Discipline, ReplayConfig};
use crate::trace::{Op, Request};

fn spec(text: &str) -> StackSpec {
    spec_with(text, &[])
}

fn spec_with(text: &str, sets: &[&str]) -> StackSpec {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    StackSpec::from_str_with(
        text,
        &sets,
        Origin {
            file: "t.toml".into(),
            dir: PathBuf::new(),
        },
    )
    .unwrap()
}

/// A request of `blocks` blocks at block `block`, `t_ms` into the trace.
fn req(t_ms: f64, op: Op, block: u64, blocks: u64) -> Request {
    Request {
        time: t_ms / 1e3,
        op,
        offset: block * 4096,
        len: blocks * 4096,
        tenant: 0,
        fs: Default::default(),
    }
}

/// Open replay with the spec's scheduler, queue depth and warm-up.
fn open_cfg(s: &StackSpec) -> ReplayConfig {
    let depth = s.device.queue_depth;
    ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig {
            scheduler: s.device.scheduler.clone(),
            queue_depth: if depth == 0 { usize::MAX } else { depth },
            warmup_ns: crate::timed::engine::secs_to_ns(s.replay.warmup_secs()),
            ..Default::default()
        },
    }
}

fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    super::test_util::counted(s, reqs, None)
}

fn timed_with(s: &StackSpec, reqs: &[Request], survey: Option<&Survey>) -> StackResult {
    let mut st = build(s, Executor::Timed, survey).unwrap();
    let rep = run(&mut st, &mut [vec_source(reqs.to_vec())], &open_cfg(s)).unwrap();
    let mut out = st.result("timed");
    out.add_timed(&rep);
    out.finish();
    out
}

fn timed(s: &StackSpec, reqs: &[Request]) -> StackResult {
    timed_with(s, reqs, None)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// A one-device stack: `cache` keys of one `[[cache]]` (LRU of 1000 blocks) over `model`.
fn one_layer(cache: &str, model: &str) -> StackSpec {
    spec(&format!(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 1000\n{cache}\n[device]\nmodel = \"{model}\"\n"
    ))
}

/// 5 ms a request plus 0.01 ms a sector: 4 KiB costs 5.08 ms, 32 KiB 5.64, 64 KiB 6.28.
const TOY: &str = "toy:base=5,cyl=0,sector=0.01";

#[test]
fn large_fetch_unit_reads_the_aligned_unit_and_waits_for_all_of_it() {
    // A read of block 20 fetches blocks 16..31 (one 128-sector operation,
    // 6.28 ms); block 31 at 10 ms is then a hit.
    let s = one_layer("fetch_unit = \"64KiB\"", TOY);
    let r = timed(&s, &[req(0.0, Op::Read, 20, 1), req(10.0, Op::Read, 31, 1)]);
    let resp = r.response.as_ref().unwrap();
    assert!(close(resp.reads.avg_ms, 3.14), "{resp:?}");
    assert!(close(resp.reads.max_ms, 6.28));
    let d = &r.devices[0];
    assert_eq!((d.reads, d.read_blocks), (1, 128));
    let l = &r.layers[0];
    assert_eq!(
        (l.read_requests, l.read_request_misses, l.prefetched_blocks),
        (2, 1, 15)
    );
    // Average read service time: read busy time over read requests.
    assert!(close(d.read_busy_ms.unwrap() / 2.0, 3.14));
}

#[test]
fn read_ahead_is_a_second_io_that_holds_up_the_next_miss() {
    // Reads at 0 (block 0), 6 (block 256), 20 ms (block 1), 32 KiB read-ahead:
    // the first misses (5.08); its read-ahead runs 5.08..10.72 and the second
    // miss waits for it (10.72 + 5.08 = 15.80: 9.80 ms); block 1 then hits.
    let s = one_layer("prefetch = \"readahead\"\nreadahead = \"32KiB\"", TOY);
    let r = timed(
        &s,
        &[
            req(0.0, Op::Read, 0, 1),
            req(6.0, Op::Read, 256, 1),
            req(20.0, Op::Read, 1, 1),
        ],
    );
    let resp = r.response.as_ref().unwrap();
    assert!(close(resp.reads.avg_ms, (5.08 + 9.80) / 3.0), "{resp:?}");
    assert!(close(resp.reads.max_ms, 9.80));
    let l = &r.layers[0];
    assert_eq!((l.read_requests, l.read_request_misses), (3, 2));
    assert_eq!((l.prefetch_ops, l.prefetched_blocks), (2, 16));
    let d = &r.devices[0];
    assert!(close(d.busy_ms.unwrap(), 21.44));
    assert!(close(d.read_busy_ms.unwrap() / 3.0, 21.44 / 3.0));
    assert!(close(r.timing.as_ref().unwrap().sim_time_ms, 21.44));
}

#[test]
fn csp_vectors_through_the_stack() {
    // 64 sequential 4 KiB reads, 16 KiB segments: misses at 0, 36 K, 136 K
    // with 32, 96 and 256 KiB of prefetch; 32 sequential 8 KiB reads with
    // 8 KiB segments: 0, 24 K, 96 K with 16, 64 and 208 KiB.
    for (size, seg, n, prefetched) in [(1u64, "16KiB", 64u64, 8 + 24 + 64), (2, "8KiB", 32, 4 + 16 + 52)] {
        let s = one_layer(&format!("prefetch = \"csp\"\ncsp_segment = \"{seg}\""), TOY);
        let reqs: Vec<Request> = (0..n).map(|i| req(i as f64 * 20.0, Op::Read, i * size, size)).collect();
        let c = counted(&s, &reqs);
        let l = &c.layers[0];
        assert_eq!((l.read_requests, l.read_request_misses), (n, 3));
        assert_eq!((l.prefetch_ops, l.prefetched_blocks), (3, prefetched));
        // The same decisions in time (nothing waits long enough to differ).
        assert_eq!(timed(&s, &reqs).layers, c.layers);
    }
}

fn wb(keys: &str) -> StackSpec {
    one_layer(
        &format!("write_buffer = \"32KiB\"\nhigh_mark = 0.5\nlow_mark = 0.25\n{keys}"),
        "const:5",
    )
}

#[test]
fn write_buffer_destages_past_the_high_mark_as_one_contiguous_write() {
    // 8 blocks, marks 0.5 / 0.25. Writes of blocks 0..4 at 0..4 ms complete
    // at once; the fifth puts 5/8 > 0.5 dirty: one destage of blocks 0..4
    // (the least recently written block 0 and its contiguous dirty run),
    // 4..9 ms, after which nothing is dirty (below the low mark).
    let s = wb("max_age_s = 0");
    let w: Vec<Request> = (0..5).map(|i| req(i as f64, Op::Write, i, 1)).collect();
    let r = timed(&s, &w);
    let resp = r.response.as_ref().unwrap();
    assert_eq!((resp.writes.requests, resp.writes.max_ms), (5, 0.0));
    let b = &r.write_buffers[0];
    assert_eq!((b.destages, b.destaged_blocks, b.flushed_blocks), (1, 5, 0));
    assert_eq!((r.devices[0].writes, r.devices[0].write_blocks), (1, 40));
    assert!(close(r.timing.as_ref().unwrap().sim_time_ms, 9.0));
    // A read of block 100 at 5 ms waits for the destage in service: 9 ms.
    let mut with_read = w.clone();
    with_read.push(req(5.0, Op::Read, 100, 1));
    let r = timed(&s, &with_read);
    assert!(close(r.response.as_ref().unwrap().reads.avg_ms, 9.0));
    // Writes of 0, 1, 2, 0, 3, 4: the destage at 5 ms (LRW block 1) still
    // writes 0..4 in one operation: 1 physical write for 6 logical ones.
    let order = [0u64, 1, 2, 0, 3, 4];
    let w: Vec<Request> = order
        .iter()
        .enumerate()
        .map(|(i, &b)| req(i as f64, Op::Write, b, 1))
        .collect();
    let r = timed(&s, &w);
    let b = &r.write_buffers[0];
    assert_eq!(
        (b.write_requests, b.rewrites, b.destages, b.destaged_blocks),
        (6, 1, 1, 5)
    );
    assert!(close(b.write_miss_ratio, 1.0 / 6.0));
    // Counted, the same destage happens (it completes at once).
    let c = counted(&s, &w);
    assert_eq!(c.write_buffers[0].destages, 1);
}

#[test]
fn write_buffer_age_limit_destages_old_data() {
    // One write at 0 with a 30 s age limit and nothing else: destaged at
    // 30.000 s, done at 30.005 s. Without the limit the final flush writes
    // it at once (done at 5 ms).
    let r = timed(&wb("max_age_s = 30"), &[req(0.0, Op::Write, 3, 1)]);
    assert!(close(r.timing.as_ref().unwrap().sim_time_ms, 30_005.0));
    let b = &r.write_buffers[0];
    assert_eq!((b.age_destages, b.destages, b.flushed_blocks), (1, 1, 0));
    let r = timed(&wb("max_age_s = 0"), &[req(0.0, Op::Write, 3, 1)]);
    assert!(close(r.timing.as_ref().unwrap().sim_time_ms, 5.0));
    assert_eq!(r.write_buffers[0].flushed_blocks, 1);
    // Counted: checked when the next request comes (at 40 s).
    let c = counted(
        &wb("max_age_s = 30"),
        &[req(0.0, Op::Write, 3, 1), req(40_000.0, Op::Read, 9, 1)],
    );
    assert_eq!(
        (c.write_buffers[0].age_destages, c.write_buffers[0].flushed_blocks),
        (1, 0)
    );
}

#[test]
fn a_full_write_buffer_makes_the_write_wait_for_a_destage() {
    // Two blocks, high mark 1 (the process never starts on its own). The
    // third write finds no room: block 0 (least recently written) is
    // destaged as a normal request, 2..7 ms, and the write waits for it (5
    // ms). At the end blocks 10 and 20 are flushed: 7..12, 12..17 ms.
    let s = one_layer(
        "write_buffer = \"8KiB\"\nhigh_mark = 1.0\nlow_mark = 0.5\nmax_age_s = 0",
        "const:5",
    );
    let r = timed(
        &s,
        &[
            req(0.0, Op::Write, 0, 1),
            req(1.0, Op::Write, 10, 1),
            req(2.0, Op::Write, 20, 1),
        ],
    );
    let resp = r.response.as_ref().unwrap();
    assert!(close(resp.writes.avg_ms, 5.0 / 3.0), "{resp:?}");
    let b = &r.write_buffers[0];
    assert_eq!((b.full_waits, b.destages, b.flushed_blocks), (1, 3, 2));
    assert!(close(r.timing.as_ref().unwrap().sim_time_ms, 17.0));
}

#[test]
fn reads_of_buffered_blocks_are_served_by_the_buffer() {
    // Block 7 written at 0, read at 1 ms (a hit in the buffer, 0 ms); a read
    // of blocks 6..8 at 2 ms reads only 6 and 8 below.
    let s = wb("max_age_s = 0");
    let r = timed(
        &s,
        &[
            req(0.0, Op::Write, 7, 1),
            req(1.0, Op::Read, 7, 1),
            req(2.0, Op::Read, 6, 3),
        ],
    );
    let b = &r.write_buffers[0];
    assert_eq!((b.read_hits, b.read_requests_served), (2, 1));
    assert_eq!((r.devices[0].reads, r.devices[0].read_blocks), (2, 16));
    assert_eq!(r.response.as_ref().unwrap().reads.p50_ms, 0.0);
}

#[test]
fn preemptible_read_ahead_fills_the_cache_while_the_device_idles() {
    // Toy device: 5 ms + 0.01 ms a sector; 128 KiB (256 sectors) of
    // read-ahead past the demand read.
    // * 0 ms: block 0 misses (5.08 ms); read-ahead from sector 8 at 5.08.
    // * 6 ms: the pull finds sectors 8..~99 read: blocks 1..11; block 40
    //   misses and stops the read-ahead (5.08 ms, 6..11.08); read-ahead
    //   from sector 328 runs to 584 (11.08..13.64): blocks 41..72.
    // * 20 and 21 ms: blocks 5 and 45 are hits on blocks read ahead.
    let reqs = [
        req(0.0, Op::Read, 0, 1),
        req(6.0, Op::Read, 40, 1),
        req(20.0, Op::Read, 5, 1),
        req(21.0, Op::Read, 45, 1),
    ];
    let s = one_layer("preemptible_readahead = \"128KiB\"", TOY);
    let r = timed(&s, &reqs);
    let resp = r.response.as_ref().unwrap();
    assert!(close(resp.reads.avg_ms, 2.0 * 5.08 / 4.0), "{resp:?}");
    let l = &r.layers[0];
    assert_eq!((l.read_request_misses, l.opportunistic_blocks), (2, 11 + 32));
    assert_eq!(r.devices[0].ops, 2, "read-ahead is not a request of the device");
    // Into a prefetch buffer instead (64 blocks: all fit): the two hits are
    // buffer hits, moved to the cache.
    let s = one_layer("preemptible_readahead = \"128KiB\"\nprefetch_buffer = \"256KiB\"", TOY);
    let r = timed(&s, &reqs);
    let l = &r.layers[0];
    assert_eq!(
        (l.prefetch_buffer_blocks, l.prefetch_buffer_hits, l.read_hits),
        (64, 2, 2)
    );
    // Counted runs have no idle time: nothing is read opportunistically.
    let c = counted(&s, &reqs);
    assert_eq!(
        (c.layers[0].opportunistic_blocks, c.layers[0].read_request_misses),
        (0, 4)
    );
}

#[test]
fn device_time_splits_into_seek_rotation_transfer_and_overhead() {
    // Toy: 5 ms base (overhead), 0.01 ms a cylinder (64 sectors each), 0.01
    // ms a sector. Block 80 is sector 640, cylinder 10: seek 0.1, transfer
    // 0.08, overhead 5.
    let s = spec("tenant_map = \"ignore\"\n[device]\nmodel = \"toy:base=5,cyl=0.01,spc=64,sector=0.01\"\n");
    let r = timed(&s, &[req(0.0, Op::Read, 80, 1)]);
    let d = &r.devices[0];
    assert!(close(d.seek_ms.unwrap(), 0.1));
    assert!(close(d.transfer_ms.unwrap(), 0.08));
    assert!(close(d.overhead_ms.unwrap(), 5.0));
    assert_eq!(d.rotation_ms, Some(0.0));
    let sum = d.seek_ms.unwrap() + d.rotation_ms.unwrap() + d.transfer_ms.unwrap() + d.overhead_ms.unwrap();
    assert!(close(sum, d.busy_ms.unwrap()));
}

#[test]
fn warm_up_requests_are_served_but_not_measured() {
    // Constant 10 ms device, reads of blocks 0, 1, 0 at 0, 1 s and 2 s with a
    // 1.5 s warm-up: the third is the only one measured (a hit: 0 ms), and
    // the counters start with it.
    let s = spec_with(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 10\n[device]\nmodel = \"const:10\"\n",
        &["replay.warmup=1.5"],
    );
    let reqs = [
        req(0.0, Op::Read, 0, 1),
        req(1000.0, Op::Read, 1, 1),
        req(2000.0, Op::Read, 0, 1),
    ];
    let r = timed(&s, &reqs);
    let resp = r.response.as_ref().unwrap();
    assert_eq!((resp.reads.requests, resp.reads.max_ms), (1, 0.0));
    assert_eq!((r.requests, r.layers[0].accesses, r.layers[0].hits), (1, 1, 1));
    assert_eq!(r.devices[0].ops, 0);
    let c = counted(&s, &reqs);
    assert_eq!(
        (c.requests, c.layers[0].accesses, c.layers[0].hits, c.devices[0].ops),
        (1, 1, 1, 0)
    );
}

#[test]
fn short_stroking_and_shares_of_the_storage_used() {
    // Half of a 1000-sector device holds data: sector 600 is out of it.
    let s = spec("tenant_map = \"ignore\"\n[device]\nmodel = \"toy:cap=1000\"\nshort_stroke = 0.5\n");
    let mut st = build(&s, Executor::Timed, None).unwrap();
    let e = run(
        &mut st,
        &mut [vec_source(vec![req(0.0, Op::Read, 75, 1)])],
        &open_cfg(&s),
    )
    .unwrap_err();
    assert!(e.to_string().contains("beyond the device's 500 sectors"), "{e}");
    // 1 % of the storage used: the trace's volume reaches block 99,999.
    let s = one_layer("", "const:1");
    let mut s = s;
    s.cache[0].size = super::spec::NumOrStr::Str("1%used".into());
    let mut survey = Survey::default();
    survey.extents.insert(0, 100_000);
    let r = timed_with(&s, &[req(0.0, Op::Read, 0, 1)], Some(&survey));
    assert_eq!(r.layers[0].cache_blocks, 1000);
}

#[test]
fn constant_occupancy_spreads_the_addresses_in_1_mib_units() {
    // Spread by 3 over a 5000-sector device: stack unit 0 (sectors
    // 0..2048) stays at 0, unit 1 (block 256 = sector 2048) lands at device
    // unit 3, sector 6144, beyond the device.
    let text = "tenant_map = \"ignore\"\n[device]\nmodel = \"toy:cap=5000\"\nscale_addresses = 3\n";
    let s = spec(text);
    let mut st = build(&s, Executor::Timed, None).unwrap();
    run(
        &mut st,
        &mut [vec_source(vec![req(0.0, Op::Read, 100, 1)])],
        &open_cfg(&s),
    )
    .unwrap();
    let mut st = build(&s, Executor::Timed, None).unwrap();
    let e = run(
        &mut st,
        &mut [vec_source(vec![req(0.0, Op::Read, 256, 1)])],
        &open_cfg(&s),
    )
    .unwrap_err();
    assert!(e.to_string().contains("at device sector 6144"), "{e}");
    // Unspread, the same request is on the device.
    let s = spec(&text.replace("scale_addresses = 3", "scale_addresses = 1"));
    let mut st = build(&s, Executor::Timed, None).unwrap();
    run(
        &mut st,
        &mut [vec_source(vec![req(0.0, Op::Read, 256, 1)])],
        &open_cfg(&s),
    )
    .unwrap();
    // A factor below 1, and a spread array, are errors naming the key.
    let e = StackSpec::from_str_with(text, &["device.scale_addresses=0.5".into()], Origin::default()).unwrap_err();
    assert!(e.to_string().contains("key `device.scale_addresses`"), "{e}");
    let sets = ["array.raid=0".into(), "array.disks=2".into()];
    let e = StackSpec::from_str_with(text, &sets, Origin::default()).unwrap_err();
    assert!(e.to_string().contains("key `device.scale_addresses`"), "{e}");
}

#[test]
fn the_feedback_reference_keeps_the_traced_addresses() {
    // Spread by 3 on a 20,000-sector device, a read at stack sector 4096
    // (unit 2) lands at device sector 12,288; the traced system of the
    // feedback replay (a 5000-sector device) holds it where the trace says.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    std::fs::write(&trace, "timestamp,op,offset,size\n0.0,R,0,4096\n0.001,R,2097152,4096\n").unwrap();
    let text = "tenant_map = \"ignore\"\n[replay]\nmode = \"feedback\"\nreference = \"toy:cap=5000\"\n\
                [device]\nmodel = \"toy:cap=20000\"\nscale_addresses = 3\n";
    let r = super::run::run(
        &spec(text),
        &[super::run::TraceInput::new(trace.to_string_lossy(), "csv")],
        Executor::Timed,
    )
    .unwrap();
    assert_eq!(r.requests, 2);
}

#[test]
fn bad_keys_name_the_key() {
    let base = "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 10\n[device]\nmodel = \"const:1\"\n";
    let err = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        StackSpec::from_str_with(base, &sets, Origin::default())
            .unwrap_err()
            .to_string()
    };
    assert!(err(&["cache.0.fetch_unit=6000"]).contains("key `cache.0.fetch_unit`"));
    assert!(err(&["cache.0.prefetch=sideways"]).contains("key `cache.0.prefetch`"));
    assert!(err(&["cache.0.prefetch=csp", "cache.0.csp_trigger=0"]).contains("key `cache.0.csp_trigger`"));
    assert!(err(&["cache.0.low_mark=0.9", "cache.0.high_mark=0.5"]).contains("key `cache.0.low_mark`"));
    assert!(err(&["cache.0.write_buffer=1MiB", "cache.0.write=through"]).contains("key `cache.0.write_buffer`"));
    assert!(err(&["cache.0.policy=opt", "cache.0.prefetch=readahead"]).contains("key `cache.0.policy`"));
    assert!(err(&["cache.0.size=0%used"]).contains("key `cache.0.size`"));
    assert!(err(&["device.short_stroke=0"]).contains("key `device.short_stroke`"));
    assert!(err(&["replay.warmup=-1"]).contains("key `replay.warmup`"));
    let e = err(&["cache.0.jit_seek=true", "array.raid=0", "array.disks=2"]);
    assert!(e.contains("key `cache.0.jit_seek`") && e.contains("one device"), "{e}");
}

#[test]
fn a_prefetch_waits_for_a_write_of_its_blocks_still_in_flight() {
    // One block per cylinder (toy, 1 ms + 0.01 ms a cylinder), SSTF. A read
    // of block 500 keeps the device busy; a write of blocks 90..100 starts
    // a destage of them (idle class); a read of block 80 misses and reads
    // ahead blocks 81..144. After the read, SSTF would take the read-ahead
    // (1 cylinder away) before the destage (10): it would read the old
    // blocks 90..100 and the cache would keep them after the buffer lets
    // them go. The read-ahead waits for the destage instead.
    let s = spec(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 1000\nwrite_buffer = \"256KiB\"\n\
         high_mark = 0.1\nlow_mark = 0.0\nmax_age_s = 0\nprefetch = \"readahead\"\nreadahead = \"256KiB\"\n\
         [device]\nmodel = \"const:1\"\nscheduler = \"sstf\"\n",
    );
    let (mut st, (_, served)) = logged_stack(&s, "toy:base=1,cyl=0.01,spc=8,sector=0", true);
    let reqs = vec![
        req(0.0, Op::Read, 500, 1),
        req(0.1, Op::Write, 90, 11),
        req(0.2, Op::Read, 80, 1),
        req(100.0, Op::Read, 95, 1),
    ];
    run(&mut st, &mut [vec_source(reqs)], &open_cfg(&s)).unwrap();
    let log = served.lock().unwrap();
    let order: Vec<(bool, u64)> = log.iter().map(|s| (s.write, s.lbn / 8)).collect();
    let w = order.iter().position(|&o| o == (true, 90)).expect("the destage");
    let p = order.iter().position(|&o| o == (false, 81)).expect("the read-ahead");
    assert!(w < p, "{order:?}");
    let r = st.result("timed");
    assert_eq!(
        r.layers[0].read_hits, 1,
        "block 95 is a hit (on the data read after the destage)"
    );
}

// ---- properties ------------------------------------------------------------

/// What a device served: start, arrival, demand class, kind, sectors.
#[derive(Debug, Clone, Copy)]
struct Served {
    start_ms: f64,
    arrived_ms: f64,
    demand: bool,
    write: bool,
    lbn: u64,
    sectors: u64,
}

/// A device model that logs every service (a toy underneath).
struct Logged {
    inner: ToyDisk,
    log: Arc<Mutex<Vec<Served>>>,
}

impl DeviceModel for Logged {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        self.inner.service(now_ms, req)
    }
    fn serve(&mut self, now_ms: f64, req: &DevRequest, d: &Dispatch) -> f64 {
        self.log.lock().unwrap().push(Served {
            start_ms: now_ms,
            arrived_ms: d.arrived_ms,
            demand: d.demand,
            write: req.kind == DiskOpKind::Write,
            lbn: req.lbn,
            sectors: req.sectors as u64,
        });
        self.inner.serve(now_ms, req, d)
    }
    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
        self.inner.positioning_estimate(now_ms, req)
    }
    fn cylinder(&self, lbn: u64) -> u64 {
        self.inner.cylinder(lbn)
    }
    fn capacity_sectors(&self) -> u64 {
        self.inner.capacity_sectors()
    }
    fn last_split(&self) -> Option<TimeSplit> {
        self.inner.last_split()
    }
    fn set_opportunism(&mut self, o: Opportunism) -> bool {
        self.inner.set_opportunism(o)
    }
    fn advance_idle(&mut self, until_ms: f64) {
        self.inner.advance_idle(until_ms)
    }
    fn take_free(&mut self, out: &mut Vec<FreeRun>) {
        self.inner.take_free(out)
    }
}

type Logs = (Arc<Mutex<Vec<(Io, f64)>>>, Arc<Mutex<Vec<Served>>>);

/// The stack of `s` over a logged toy device `toy`, recording what reaches it.
fn logged_stack(s: &StackSpec, toy: &str, timed: bool) -> (Composed, Logs) {
    let ios = Arc::new(Mutex::new(Vec::new()));
    let served = Arc::new(Mutex::new(Vec::new()));
    let (log, toy) = (served.clone(), toy.to_string());
    let make: Box<dyn Fn() -> Result<Box<dyn DeviceModel>> + Send> = Box::new(move || {
        let inner = ToyDisk::parse(&toy).expect("a toy model")?;
        Ok(Box::new(Logged {
            inner,
            log: log.clone(),
        }) as Box<dyn DeviceModel>)
    });
    // Every Io reaching the bottom, in order, with when it was planned (ms).
    let seen = ios.clone();
    let target = Recording::new(make, false, true, move |io: &Io, exec: &dyn Exec| {
        seen.lock().unwrap().push((*io, exec.now() as f64 / 1e6))
    });
    let factory = layer_factory(s, None, target.capacity_blocks()).unwrap();
    let addr = AddressMap::new(TenantMap::Ignore, 4096, None).unwrap();
    let mut st = Composed::new(Box::new(target), factory, addr, None).unwrap();
    if timed {
        st.opportunism = super::build::opportunism(s).unwrap();
    }
    (st, (ios, served))
}

/// Requests from `(write, block, blocks)` triples, one every `gap_ms`.
fn trace(ops: &[(bool, u64, u64)], gap_ms: f64) -> Vec<Request> {
    ops.iter()
        .enumerate()
        .map(|(i, &(w, b, n))| req(i as f64 * gap_ms, if w { Op::Write } else { Op::Read }, b, n))
        .collect()
}

/// A stack with a write buffer over a read cache with read-ahead or CSP.
fn buffered_spec(
    buf: u64,
    high: f64,
    low: f64,
    prefetch: &str,
    cache: u64,
    opportunistic: bool,
    sched: &str,
) -> StackSpec {
    let pra = if opportunistic {
        "preemptible_readahead = \"16KiB\"\nprefetch_buffer = \"32KiB\"\n"
    } else {
        ""
    };
    spec(&format!(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = {cache}\nwrite_buffer = {}\nhigh_mark = {high}\n\
         low_mark = {low}\nmax_age_s = 0.05\n{prefetch}\n{pra}[device]\nmodel = \"const:1\"\nqueue_depth = 2\n\
         scheduler = \"{sched}\"\n",
        buf * 4096
    ))
}

fn prefetch_keys() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "",
        "prefetch = \"readahead\"\nreadahead = \"8KiB\"",
        "prefetch = \"csp\"\ncsp_segment = \"8KiB\"\ncsp_max = \"32KiB\"",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Counted: every destage writes blocks dirtied since their last
    /// destage (exactly once per destage); the last write of every block
    /// reaches the disk; the buffer's figures count what reached the disk.
    #[test]
    fn every_buffered_write_is_destaged_once_and_none_is_lost(
        ops in prop::collection::vec((any::<bool>(), 0u64..40, 1u64..4), 1..150),
        buf in 1u64..16,
        (high, low) in (0.0f64..1.0).prop_flat_map(|h| (Just(h), 0.0..=h)),
        pf in prefetch_keys(),
    ) {
        let s = buffered_spec(buf, high, low, pf, 8, false, "fcfs");
        let (mut st, (ios, _)) = logged_stack(&s, "const:1", false);
        // Blocks written by users since each block's last destage.
        let mut dirty: FxHashMap<u64, bool> = FxHashMap::default();
        let mut seen = 0;
        for r in trace(&ops, 1.0) {
            if r.op == Op::Write {
                for b in r.offset / 4096..(r.offset + r.len) / 4096 {
                    dirty.insert(b, true);
                }
            }
            st.count_request(&r).unwrap();
            let log = ios.lock().unwrap();
            for (io, _) in &log[seen..] {
                if io.cause == Cause::Destage {
                    for b in io.first..io.first + io.nblocks {
                        prop_assert_eq!(dirty.insert(b, false), Some(true), "block {} destaged without a new write", b);
                    }
                }
            }
            seen = log.len();
        }
        st.count_finish().unwrap();
        let log = ios.lock().unwrap();
        let mut written = 0;
        for (io, _) in &log[seen..] {
            prop_assert_eq!(io.cause, Cause::Destage);
            for b in io.first..io.first + io.nblocks {
                prop_assert_eq!(dirty.insert(b, false), Some(true));
            }
        }
        prop_assert!(dirty.values().all(|&d| !d), "a write never reached the disk");
        for (io, _) in log.iter().filter(|(io, _)| io.op == Op::Write) {
            written += io.nblocks;
        }
        let r = st.result("count");
        let b = &r.write_buffers[0];
        prop_assert_eq!(b.destaged_blocks, written);
        prop_assert!(b.flushed_blocks <= b.destaged_blocks);
    }

    /// In time, with read-ahead / CSP and the device's own read-ahead, FCFS
    /// or SSTF: a version oracle over the device's service log. Each write
    /// the device serves carries, per block, the last user write issued
    /// before it arrived (destages take the buffer's data when issued).
    /// Then: every demand read at the device returns data at least as new as
    /// the last write issued before it (the buffer never lets a read of newer
    /// data go below); a
    /// prefetch never reads data older than a write already sent below
    /// when it was asked for (the cache, which that write passed, would keep
    /// a stale copy); no destage writes a version already written (exactly
    /// once per destage); the device ends with the last write of every
    /// block; every request completes.
    #[test]
    fn reads_return_the_latest_data_and_the_disk_ends_with_every_write(
        ops in prop::collection::vec((any::<bool>(), 0u64..40, 1u64..4), 1..120),
        buf in 1u64..16,
        (high, low) in (0.0f64..1.0).prop_flat_map(|h| (Just(h), 0.0..=h)),
        pf in prefetch_keys(),
        cache in 1u64..24,
        opportunistic in any::<bool>(),
        gap in prop::sample::select(vec![0.37f64, 1.13, 2.9]),
        sched in prop::sample::select(vec!["fcfs", "sstf"]),
    ) {
        let s = buffered_spec(buf, high, low, pf, cache, opportunistic, sched);
        let reqs = trace(&ops, gap);
        let (mut st, (planned, served)) = logged_stack(&s, "toy:base=0.713,cyl=0.0137,spc=16,sector=0.0031", true);
        let rep = run(&mut st, &mut [vec_source(reqs.clone())], &open_cfg(&s)).unwrap();
        prop_assert_eq!(rep.requests, reqs.len() as u64);
        // Generation of block b at time t: user writes of b issued by then.
        let mut writes: FxHashMap<u64, Vec<f64>> = FxHashMap::default();
        for r in &reqs {
            if r.op == Op::Write {
                for b in r.offset / 4096..(r.offset + r.len) / 4096 {
                    writes.entry(b).or_default().push(r.time * 1e3);
                }
            }
        }
        let gen = |b: u64, t: f64| writes.get(&b).map_or(0, |v| v.iter().filter(|&&w| w <= t + 1e-9).count());
        let served = served.lock().unwrap();
        let planned = planned.lock().unwrap();
        // When a read the device serves was asked for (at the latest: the
        // earliest plan of that range before it arrived; its wait for
        // writes in flight may have delayed the arrival).
        let asked = |sv: &Served| {
            planned
                .iter()
                .filter(|(io, t)| {
                    io.op == Op::Read && io.first * 8 == sv.lbn && io.nblocks * 8 == sv.sectors && *t <= sv.arrived_ms + 1e-9
                })
                .map(|&(_, t)| t)
                .fold(sv.arrived_ms, f64::min)
        };
        // The newest version sent below for block b before time t.
        let sent = |b: u64, t: f64| {
            served
                .iter()
                .filter(|w| w.write && w.arrived_ms < t - 1e-9 && w.lbn / 8 <= b && b < (w.lbn + w.sectors) / 8)
                .map(|w| gen(b, w.arrived_ms))
                .max()
                .unwrap_or(0)
        };
        let mut disk: FxHashMap<u64, usize> = FxHashMap::default();
        for sv in served.iter() {
            for b in sv.lbn / 8..(sv.lbn + sv.sectors) / 8 {
                let now = gen(b, sv.arrived_ms);
                let on_disk = disk.get(&b).copied().unwrap_or(0);
                if sv.write {
                    prop_assert!(now > on_disk, "block {} destaged again without a newer write", b);
                    disk.insert(b, now);
                } else if sv.demand {
                    // A write issued after the read may overlap it: either data is right.
                    prop_assert!(on_disk >= now, "demand read of block {} at {} ms returns old data", b, sv.start_ms);
                } else {
                    prop_assert!(on_disk >= sent(b, asked(sv)), "prefetch of block {} at {} ms reads old data", b, sv.start_ms);
                }
            }
        }
        for (b, v) in &writes {
            prop_assert_eq!(disk.get(b).copied().unwrap_or(0), v.len(), "block {} lost its last write", b);
        }
    }

    /// Counted and timed runs make the same prefetch decisions (read-ahead,
    /// CSP, fetch unit, prefetch buffer) whatever the timing.
    #[test]
    fn counted_and_timed_agree_with_prefetch(
        ops in prop::collection::vec((any::<bool>(), 0u64..60, 1u64..4), 1..150),
        cap in 1u64..24,
        write in prop::sample::select(vec!["back", "through", "around"]),
        pf in prop::sample::select(vec![
            "prefetch = \"readahead\"\nreadahead = \"8KiB\"",
            "prefetch = \"csp\"\ncsp_segment = \"8KiB\"\ncsp_max = \"32KiB\"",
            "fetch_unit = \"16KiB\"",
            "prefetch = \"readahead\"\nprefetch_buffer = \"16KiB\"\nprefetch_buffer_holds = \"all\"",
        ]),
    ) {
        let s = spec(&format!(
            "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = {cap}\nwrite = \"{write}\"\n{pf}\n\
             [device]\nmodel = \"toy:base=1.3,cyl=0.01,spc=64\"\nscheduler = \"sstf\"\n"
        ));
        let reqs = trace(&ops, 0.9);
        prop_assert_eq!(counted(&s, &reqs).layers, timed(&s, &reqs).layers);
    }
}

#[test]
fn a_hsu_smith_stack_on_a_disk_is_deterministic() {
    let model = format!(
        "{}/../../examples/disks/hsu-smith/ultrastar-73lzx-9.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let s = spec(&format!(
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = \"2MiB\"\nprefetch = \"csp\"\n\
         prefetch_buffer = \"1MiB\"\npreemptible_readahead = \"128KiB\"\nread_any_free_blocks = true\njit_seek = true\n\
         write_buffer = \"512KiB\"\n[replay]\nwarmup = 0.05\n[device]\nmodel = \"{model}\"\n"
    ));
    let reqs: Vec<Request> = (0..400u64)
        .map(|i| {
            let b = if i % 3 == 0 { (i * 7919) % 200_000 } else { 1000 + i * 2 };
            req(
                i as f64 * 1.7,
                if i % 4 == 0 { Op::Write } else { Op::Read },
                b,
                1 + i % 3,
            )
        })
        .collect();
    let once = || {
        let r = timed(&s, &reqs);
        r.to_json()
    };
    let a = once();
    assert_eq!(a, once());
    let r: serde_json::Value = serde_json::from_str(&a).unwrap();
    let l = &r["layers"][0];
    assert!(l["opportunistic_blocks"].as_u64().unwrap() > 0, "{l}");
    assert!(l["prefetched_blocks"].as_u64().unwrap() > 0, "{l}");
    let d = &r["devices"][0];
    assert!(
        d["rotation_ms"].as_f64().unwrap() > 0.0 && d["seek_ms"].as_f64().unwrap() > 0.0,
        "{d}"
    );
}

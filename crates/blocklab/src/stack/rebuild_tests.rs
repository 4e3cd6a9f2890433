//! The rebuild orders and `array.fit = "scale"` in the stack: the keys of
//! `[array.rebuild]`, counted against timed, the `disk run` flags.

use std::path::PathBuf;

use super::address::Survey;
use super::build::{build, Executor};
use super::result::StackResult;
use super::spec::{Fit, StackSpec};
use super::target::scale_block;
use super::test_util::{self, counted, parse_spec};
use crate::timed::disk_run::{stack_spec, RunOptions};
use crate::timed::executor::ExecConfig;
use crate::timed::replay::{run, vec_source, Discipline, ReplayConfig};
use crate::trace::{Op, Request};

fn parse(text: &str, sets: &[&str]) -> crate::error::Result<StackSpec> {
    parse_spec(text, sets, "r.toml", PathBuf::new())
}

/// RAID-5 of 4 constant 2 ms disks, 32 rows of 64 KiB per member, disk 1 lost.
const BASE: &str = "tenant_map = \"ignore\"\n[array]\nraid = 5\ndisks = 4\nfailed = [1]\ndisk_size = \"2MiB\"\n\
                    [array.rebuild]\nat = 0.0\n[device]\nmodel = \"const:2\"\n";

fn err(sets: &[&str]) -> String {
    parse(BASE, sets).unwrap_err().to_string()
}

#[test]
fn rebuild_keys_defaults_and_overrides() {
    let s = parse(BASE, &[]).unwrap();
    let r = s.array.as_ref().unwrap().rebuild.clone().unwrap();
    assert_eq!(
        (r.order.as_str(), r.idle.as_str(), r.throttle, r.priority.clone()),
        ("md", "simple", None, None)
    );
    assert_eq!(
        (r.pro.threads, r.pro.slice_ms, r.pro.count.as_str(), r.dor.lead),
        (8, 1000.0, "all", 8)
    );
    assert_eq!(r.interval, 1000.0);
    assert_eq!(s.fit(), Fit::None);
    let s = parse(
        BASE,
        &[
            "array.rebuild.order=pro-dor",
            "array.rebuild.idle=md2611",
            "array.rebuild.pro.zone=4MiB",
            "array.rebuild.pro.count=lost",
            "array.rebuild.throttle=true",
            "array.rebuild.priority=same",
            "array.rebuild.map_unit=256KiB",
            "array.fit=scale",
        ],
    )
    .unwrap();
    let r = s.array.as_ref().unwrap().rebuild.clone().unwrap();
    assert_eq!(
        (r.order.as_str(), r.idle.as_str(), r.throttle),
        ("pro-dor", "md2611", Some(true))
    );
    assert_eq!(s.fit(), Fit::Scale);
    assert_eq!(parse(BASE, &["array.wrap=true"]).unwrap().fit(), Fit::Wrap);
}

#[test]
fn rebuild_key_errors_name_the_key() {
    let e = err(&["array.rebuild.order=fifo"]);
    assert_eq!(
        e,
        "r.toml: key `array.rebuild.order`: unknown rebuild order `fifo`; valid: md, pro, dor, pro-dor, live"
    );
    assert!(
        err(&["array.rebuild.idle=never"]).starts_with("r.toml: key `array.rebuild.idle`: unknown rebuild idle rule")
    );
    assert!(err(&["array.rebuild.priority=high"]).starts_with("r.toml: key `array.rebuild.priority`"));
    assert!(err(&["array.rebuild.map_unit=96KiB"]).contains("not a positive multiple of the chunk"));
    assert!(err(&["array.rebuild.pro.zone=4KiB"]).starts_with("r.toml: key `array.rebuild.pro.zone`"));
    assert!(err(&["array.rebuild.pro.slice_ms=0"]).starts_with("r.toml: key `array.rebuild.pro.slice_ms`"));
    assert!(err(&["array.rebuild.pro.count=some"]).starts_with("r.toml: key `array.rebuild.pro.count`"));
    assert!(err(&["array.rebuild.pro.zones=3"]).starts_with("r.toml: key `array.rebuild.pro.zones`: unknown field"));
    assert!(err(&["array.rebuild.dor.lead=0"]).starts_with("r.toml: key `array.rebuild.dor.lead`"));
    assert!(err(&["array.fit=squeeze"]).starts_with("r.toml: key `array.fit`: unknown address fit"));
    assert!(err(&["array.fit=scale", "array.wrap=true"]).contains("contradicts `array.wrap = true`"));
}

fn reads(n: u64, every_ms: f64, blocks: u64) -> Vec<Request> {
    (0..n)
        .map(|i| Request {
            time: i as f64 * every_ms / 1e3,
            op: if i % 5 == 4 { Op::Write } else { Op::Read },
            offset: (i * 37 % blocks) * 4096,
            len: 8192,
            tenant: 0,
            fs: Default::default(),
        })
        .collect()
}

fn timed(s: &StackSpec, reqs: &[Request], survey: Option<&Survey>) -> StackResult {
    test_util::timed(s, reqs, survey, Discipline::Open { speedup: 1.0 })
}

#[test]
fn counted_and_timed_agree_on_every_orders_work() {
    // The rebuild after the trace (both executors see the same degraded
    // array for every request): the same operations per cause, the
    // rebuild's own included, for every order.
    let reqs = reads(200, 5.0, 3 * 32 * 16 - 2);
    for order in crate::rebuild::ORDERS {
        let s = parse(
            BASE,
            &[&format!("array.rebuild.order={order}"), "array.rebuild.at=5000"],
        )
        .unwrap();
        let c = counted(&s, &reqs, None);
        let t = timed(&s, &reqs, None);
        let (ca, ta) = (c.array.unwrap(), t.array.unwrap());
        assert_eq!(ca.ops_by_cause, ta.ops_by_cause, "{order}");
        let (cr, tr) = (c.rebuild.unwrap(), t.rebuild.unwrap());
        assert_eq!(
            (cr.rebuild_reads, cr.rebuild_writes, cr.rebuild_rows, cr.order.as_str()),
            (tr.rebuild_reads, tr.rebuild_writes, tr.rebuild_rows, *order)
        );
        assert!(tr.finished && ta.failed.is_empty() && ca.failed.is_empty());
    }
}

#[test]
fn fit_scale_maps_the_span_onto_the_array_and_keeps_order() {
    // A span of 10,000 blocks onto an array of 1,000: block b → ⌊b / 10⌋,
    // pulled back so that a request ends inside the array.
    assert_eq!(scale_block(0, 1, 10_000, 1_000), 0);
    assert_eq!(scale_block(5_005, 1, 10_000, 1_000), 500);
    assert_eq!(scale_block(9_999, 4, 10_000, 1_000), 996);
    // A span smaller than the array is stretched over it.
    assert_eq!(scale_block(700, 2, 800, 1_000), 875);
    assert_eq!(scale_block(799, 2, 800, 1_000), 998);
    let pairs: Vec<u64> = (0..10_000)
        .step_by(97)
        .map(|b| scale_block(b, 1, 10_000, 1_000))
        .collect();
    assert!(pairs.windows(2).all(|w| w[0] <= w[1]), "monotone: near stays near");
}

#[test]
fn a_trace_larger_than_the_array_runs_with_fit_scale() {
    // Requests up to block 40,000 on an array of 3 × 512 blocks.
    let reqs: Vec<Request> = (0..50)
        .map(|i| Request {
            time: i as f64 * 0.01,
            op: Op::Read,
            offset: i * 800 * 4096,
            len: 4096,
            tenant: 0,
            fs: Default::default(),
        })
        .collect();
    let mut survey = Survey::default();
    survey.extents.insert(0, 49 * 800 + 1);
    let none = parse(BASE, &[]).unwrap();
    let mut st = build(&none, Executor::Timed, None).unwrap();
    let cfg = ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig::default(),
    };
    assert!(run(&mut st, &mut [vec_source(reqs.clone())], &cfg)
        .unwrap_err()
        .to_string()
        .contains("beyond the array"));
    // The rebuild after the trace: both executors see the degraded array.
    let s = parse(BASE, &["array.fit=scale", "array.rebuild.at=100000"]).unwrap();
    let t = timed(&s, &reqs, Some(&survey));
    assert_eq!(t.requests, 50);
    // Counted and timed place the requests alike.
    let c = counted(&s, &reqs, Some(&survey));
    assert_eq!(c.array.unwrap().ops_by_cause, t.array.unwrap().ops_by_cause);
    assert!(
        build(&s, Executor::Timed, None).is_err(),
        "scale needs a pass over the trace"
    );
}

#[test]
fn disk_run_flags_are_the_stack_keys() {
    let mut o = RunOptions {
        model: "const:1".into(),
        raid: Some("5".into()),
        failed: vec![0],
        rebuild: true,
        rebuild_order: "pro".into(),
        rebuild_idle: "md6".into(),
        fit: Some("scale".into()),
        ..Default::default()
    };
    let s = stack_spec(&o).unwrap();
    let r = s.array.as_ref().unwrap().rebuild.clone().unwrap();
    assert_eq!((r.order.as_str(), r.idle.as_str(), s.fit()), ("pro", "md6", Fit::Scale));
    o.rebuild_order = "lifo".into();
    assert_eq!(
        stack_spec(&o).unwrap_err().to_string(),
        "--rebuild-order: unknown rebuild order `lifo`; valid: md, pro, dor, pro-dor, live"
    );
    o.rebuild_order = "md".into();
    o.rebuild_idle = "often".into();
    assert!(stack_spec(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--rebuild-idle: unknown"));
    o.rebuild_idle = "simple".into();
    o.fit = Some("fold".into());
    assert!(stack_spec(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--fit: unknown address fit"));
}

/// A finished rebuild leaves `failed` empty: `rebuilt` names the disks that
/// failed and came back, so a summary need not say "failed none"; and every
/// result states the tenant map and the address fit it ran with.
#[test]
fn result_names_rebuilt_disks_and_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.csv");
    std::fs::write(&t, "timestamp,op,offset,size\n0.0,R,0,4096\n0.001,R,65536,4096\n").unwrap();
    let traces = [crate::stack::TraceInput::new(t.to_string_lossy(), "csv")];
    for exec in [Executor::Count, Executor::Timed] {
        let r = crate::stack::run::run(&parse(BASE, &[]).unwrap(), &traces, exec).unwrap();
        let a = r.array.as_ref().unwrap();
        assert!(a.failed.is_empty(), "{exec:?}");
        assert_eq!(a.rebuilt, vec![1], "{exec:?}");
        assert!(r.rebuild.as_ref().unwrap().finished);
        assert_eq!((r.tenant_map.as_str(), r.fit.as_str()), ("ignore", "none"));
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!((&json["tenant_map"], &json["fit"]), (&"ignore".into(), &"none".into()));
        assert_eq!(json["array"]["rebuilt"], serde_json::json!([1]));
    }
    let no_rebuild = parse(BASE, &["tenant_map=\"concat\"", "array.fit=\"scale\""]).unwrap();
    let mut no_rebuild = no_rebuild;
    no_rebuild.array.as_mut().unwrap().rebuild = None;
    let r = crate::stack::run::run(&no_rebuild, &traces, Executor::Count).unwrap();
    let a = r.array.as_ref().unwrap();
    assert_eq!((a.failed.clone(), a.rebuilt.clone()), (vec![1], vec![]));
    assert_eq!((r.tenant_map.as_str(), r.fit.as_str()), ("concat", "scale"));
}

/// A RAID-5 of `disks` constant disks with 2 MiB members, its span of
/// `span` stack blocks stretched over it (`fit = "scale"`).
fn stretched(
    disks: u32,
    span: u64,
) -> super::target::ArrayStack<impl Fn() -> crate::error::Result<Box<dyn crate::device::DeviceModel>> + Send> {
    use crate::array::{Array, ArrayConfig, Level};
    let mut cfg = ArrayConfig::new(Level::Raid5, disks);
    cfg.disk_bytes = 2 << 20;
    let make = || crate::device::load_model("const:1");
    super::target::ArrayStack::new(Array::new(cfg).unwrap(), make, false)
        .unwrap()
        .scaled(span)
}

/// The (disk, disk block) a read of `n` blocks at `first` touches, block by block.
fn read_places(t: &mut dyn super::layer::Target, first: u64, n: u64) -> Vec<(u32, u64)> {
    use super::layer::{AtOnce, Io};
    use crate::array::plan::Cause;
    let plan = t
        .plan(&Io::blocks(Op::Read, first, n, Cause::User), &AtOnce::default())
        .unwrap();
    let mut v: Vec<(u32, u64)> = plan
        .disk_ops()
        .flat_map(|o| (o.block..o.block + o.nblocks as u64).map(move |b| (o.disk, b)))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn stretched_span_places_a_request_chunk_by_chunk() {
    // 4 disks × 32 rows of 16-block chunks: 1,536 blocks; a span of 100
    // stack blocks is stretched 15.36 times, chunk by chunk: stack chunk s
    // lands on array chunk ⌊s · 16 · 15.36 / 16⌋ = ⌊15.36 s⌋.
    assert_eq!(super::target::stretch_block(0, 100, 1536, 16), 0);
    assert_eq!(super::target::stretch_block(17, 100, 1536, 16), 15 * 16 + 1);
    assert_eq!(super::target::stretch_block(99, 100, 1536, 16), 92 * 16 + 3);
    // A read of stack blocks 14..18 crosses a stack chunk: two pieces, at
    // array blocks 14, 15 (chunk 0) and 240, 241 (chunk 15), each where a
    // read of that block alone goes.
    let mut t = stretched(4, 100);
    let whole = read_places(&mut t, 14, 4);
    let mut alone: Vec<(u32, u64)> = (14..18).flat_map(|b| read_places(&mut t, b, 1)).collect();
    alone.sort_unstable();
    assert_eq!(whole, alone);
    assert_eq!(whole.len(), 4);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// With `fit = "scale"` stretching the span, every block of a request
    /// lands where it lands when it starts a request of its own, and the
    /// fault-aware caches (`Target::faults`) see it on that disk: a cached
    /// block has one place, whatever request fetched it. (Stretching only a
    /// request's first block put its later blocks elsewhere.)
    #[test]
    fn stretched_blocks_have_one_place(disks in 3u32..7, span in 1u64..2560, first in 0u64..2560, n in 1u64..40) {
        // Capacity 32 rows × 16 blocks × (disks - 1); spans up to it.
        let span = 1 + span % (512 * (disks as u64 - 1));
        let first = first % span;
        let n = n.min(span - first);
        let mut t = stretched(disks, span);
        let faults = super::layer::Target::faults(&t).unwrap();
        let whole = read_places(&mut t, first, n);
        let mut alone = Vec::new();
        for b in first..first + n {
            let p = read_places(&mut t, b, 1);
            proptest::prop_assert_eq!(p.len(), 1);
            proptest::prop_assert_eq!(faults.disk_of(b), p[0].0, "block {}", b);
            alone.extend(p);
        }
        alone.sort_unstable();
        proptest::prop_assert_eq!(whole, alone);
    }
}

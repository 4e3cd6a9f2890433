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

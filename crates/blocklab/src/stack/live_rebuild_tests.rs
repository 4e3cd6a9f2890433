//! The `live` rebuild order in the stack: its keys, a live map from a file,
//! counted against timed, determinism, the `disk run` flags.

use std::path::PathBuf;

use super::build::{build, Executor};
use super::result::StackResult;
use super::spec::StackSpec;
use super::test_util::{self, parse_spec};
use crate::dgraid::run::{live, LiveParams};
use crate::timed::disk_run::{stack_spec, RunOptions};
use crate::timed::replay::Discipline;
use crate::trace::{Op, Request};

/// RAID-10 near-2 of 4 seeking toy disks, 64 rows of 64 KiB per member
/// (4 MiB, 1,024 blocks), disk 2 lost, a live rebuild of 30 % spread.
const BASE: &str = "tenant_map = \"ignore\"\n[array]\nraid = 10\ndisks = 4\nfailed = [2]\ndisk_size = \"4MiB\"\n\
                    [array.rebuild]\norder = \"live\"\nlive_frac = 0.3\nlive_layout = \"spread\"\n\
                    [device]\nmodel = \"toy:base=1,cyl=0.01\"\n";

fn parse_in(text: &str, sets: &[&str], dir: PathBuf) -> crate::error::Result<StackSpec> {
    parse_spec(text, sets, "l.toml", dir)
}

fn parse(sets: &[&str]) -> crate::error::Result<StackSpec> {
    parse_in(BASE, sets, PathBuf::new())
}

fn err(sets: &[&str]) -> String {
    parse(sets).unwrap_err().to_string()
}

fn reads(n: u64, every_ms: f64) -> Vec<Request> {
    (0..n)
        .map(|i| Request {
            time: i as f64 * every_ms / 1e3,
            op: Op::Read,
            offset: (i * 37 % 2000) * 4096,
            len: 8192,
            tenant: 0,
            fs: Default::default(),
        })
        .collect()
}

fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    test_util::counted(s, reqs, None)
}

fn timed(s: &StackSpec, reqs: &[Request]) -> StackResult {
    test_util::timed(s, reqs, None, Discipline::Open { speedup: 1.0 })
}

#[test]
fn live_keys_and_their_errors() {
    let r = parse(&[]).unwrap().array.unwrap().rebuild.unwrap();
    assert_eq!(
        (r.live_frac, r.live_layout.as_str(), r.live_map),
        (Some(0.3), "spread", None)
    );
    assert_eq!(
        err(&["array.rebuild.live_frac=1.5"]),
        "l.toml: key `array.rebuild.live_frac`: must be in [0, 1], got 1.5"
    );
    assert!(err(&["array.rebuild.live_layout=scattered"])
        .starts_with("l.toml: key `array.rebuild.live_layout`: unknown live layout `scattered`"));
    assert!(err(&["array.rebuild.live_max_io=6KiB"]).starts_with("l.toml: key `array.rebuild.live_max_io`"));
    assert!(err(&["array.rebuild.live_unit=0"]).starts_with("l.toml: key `array.rebuild.live_unit`"));
    assert!(err(&["array.rebuild.order=md"])
        .starts_with("l.toml: key `array.rebuild.live_frac`: only the `live` order copies live blocks"));
    assert!(err(&["array.rebuild.live_map=\"m.json\""]).contains("not both"));
    let mut none = BASE.replace("live_frac = 0.3\n", "");
    assert!(parse_in(&none, &[], PathBuf::new())
        .unwrap_err()
        .to_string()
        .starts_with("l.toml: key `array.rebuild.order`: `live` needs its live blocks"));
    none = BASE.replace("raid = 10", "raid = 5");
    assert!(parse_in(&none, &[], PathBuf::new())
        .unwrap_err()
        .to_string()
        .contains("`live` copies live blocks from a mirror: raid1 or raid10, not raid5"));
    // A map that is not there: the key and the file are named at build.
    let s = parse_in(
        &BASE.replace("live_frac = 0.3\n", "live_map = \"none.json\"\n"),
        &[],
        "/nowhere".into(),
    )
    .unwrap();
    let e = build(&s, Executor::Timed, None).err().unwrap().to_string();
    assert!(
        e.starts_with("l.toml: key `array.rebuild.live_map`") && e.contains("/nowhere/none.json"),
        "{e}"
    );
}

#[test]
fn a_live_map_file_is_the_share_it_holds() {
    // `dgraid live --json` of a synthetic 30 % spread member: the same
    // rebuild as the share itself, in both executors.
    let dir = tempfile::tempdir().unwrap();
    let members = live(&LiveParams {
        live_frac: Some(0.3),
        layout: "spread".into(),
        disk_blocks: 1024,
        disks: 4,
        ..LiveParams::default()
    })
    .unwrap();
    std::fs::write(dir.path().join("map.json"), serde_json::to_string(&members).unwrap()).unwrap();
    let text = BASE.replace("live_frac = 0.3\n", "live_map = \"map.json\"\n");
    let from_map = parse_in(&text, &[], dir.path().to_path_buf()).unwrap();
    let share = parse(&[]).unwrap();
    for exec in [Executor::Count, Executor::Timed] {
        let run = |s: &StackSpec| match exec {
            Executor::Count => counted(s, &[]),
            Executor::Timed => timed(s, &[]),
        };
        let (m, f) = (run(&from_map).rebuild.unwrap(), run(&share).rebuild.unwrap());
        // The spread in 32 KiB runs (8 blocks): whole runs live, same count of units.
        let units = timed(&parse(&["array.rebuild.live_unit=\"32KiB\""]).unwrap(), &[])
            .rebuild
            .unwrap();
        assert_eq!(units.order_stats["live_blocks"], 8 * (0.3f64 * 128.0).round() as u64);
        assert!(units.order_stats["extents"] < 50);
        assert_eq!(m, f, "{exec:?}");
        assert_eq!(m.order_stats["live_blocks"], 307);
        assert_eq!(m.rebuild_write_blocks, 307);
    }
}

#[test]
fn counted_and_timed_agree_and_runs_repeat() {
    // The rebuild after the trace (both executors see the same degraded
    // array for every request): the same operations per cause, the
    // rebuild's included; a second timed run is byte-identical.
    let reqs = reads(300, 4.0);
    for layout in ["compact", "spread"] {
        let s = parse(&[&format!("array.rebuild.live_layout={layout}"), "array.rebuild.at=5000"]).unwrap();
        let (c, t) = (counted(&s, &reqs), timed(&s, &reqs));
        let (ca, ta) = (c.array.clone().unwrap(), t.array.clone().unwrap());
        assert_eq!(ca.ops_by_cause, ta.ops_by_cause, "{layout}");
        let (cr, tr) = (c.rebuild.unwrap(), t.rebuild.clone().unwrap());
        assert_eq!(
            (
                cr.rebuild_reads,
                cr.rebuild_write_blocks,
                cr.rebuild_rows,
                &cr.order_stats
            ),
            (
                tr.rebuild_reads,
                tr.rebuild_write_blocks,
                tr.rebuild_rows,
                &tr.order_stats
            ),
            "{layout}"
        );
        assert!(tr.finished && ta.failed.is_empty());
        assert_eq!(tr.rebuild_write_blocks, 307);
        let again = timed(&s, &reqs);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            serde_json::to_string(&again).unwrap()
        );
    }
}

#[test]
fn user_writes_during_a_live_rebuild_are_copied() {
    // Writes while the rebuild runs to blocks of the lost member not yet in
    // sync are planned degraded; the order copies them after (late blocks).
    let reqs: Vec<Request> = (0..400)
        .map(|i| Request {
            time: i as f64 * 0.0005,
            op: Op::Write,
            offset: (i * 53 % 2048) * 4096,
            len: 4096,
            tenant: 0,
            fs: Default::default(),
        })
        .collect();
    let s = parse(&["array.rebuild.live_layout=compact"]).unwrap();
    let t = timed(&s, &reqs).rebuild.unwrap();
    assert!(t.finished);
    assert!(t.order_stats["late_blocks"] > 0, "{:?}", t.order_stats);
    assert_eq!(
        t.order_stats["copied_blocks"], t.rebuild_write_blocks,
        "every copy is counted once"
    );
    // Every live block once, and every late block once per time it was
    // found written out of sync.
    assert_eq!(t.rebuild_write_blocks, 307 + t.order_stats["late_blocks"]);
}

#[test]
fn disk_run_live_flags() {
    let mut o = RunOptions {
        model: "const:1".into(),
        raid: Some("raid1".into()),
        disks: 2,
        failed: vec![0],
        rebuild: true,
        live_frac: Some(0.4),
        live_layout: "spread".into(),
        ..Default::default()
    };
    let r = stack_spec(&o).unwrap().array.unwrap().rebuild.unwrap();
    assert_eq!(
        (r.order.as_str(), r.live_frac, r.live_layout.as_str()),
        ("live", Some(0.4), "spread")
    );
    o.live_frac = Some(-0.1);
    assert_eq!(
        stack_spec(&o).unwrap_err().to_string(),
        "--live-frac: must be in [0, 1], got -0.1"
    );
    o.live_frac = Some(0.4);
    o.live_layout = "random".into();
    assert!(stack_spec(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--live-layout: unknown live layout"));
    o.live_layout = "compact".into();
    o.rebuild_order = "dor".into();
    assert!(stack_spec(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--live-frac: only the `live` order"));
    o.rebuild_order = "md".into();
    o.rebuild = false;
    assert!(stack_spec(&o).unwrap_err().to_string().contains("need a rebuild"));
    o.rebuild = true;
    o.raid = Some("raid5".into());
    o.disks = 4;
    assert!(stack_spec(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--rebuild-order: `live` copies live blocks from a mirror"));
}

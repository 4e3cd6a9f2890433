//! Every trace in `<repo>/../shared/traces` parses with its format, with the
//! record counts of the traces' README. Skipped when that folder is absent
//! (the environment variable BLOCKLAB_SHARED may point at another `shared`).

use blocklab::analysis::stats::trace_stats;
use blocklab::trace::{open, sniff::sniff, Op, Request, TraceOptions};
use std::path::PathBuf;

fn shared() -> Option<PathBuf> {
    let dir = match std::env::var_os("BLOCKLAB_SHARED") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    let traces = dir.join("traces");
    if traces.is_dir() {
        Some(traces)
    } else {
        eprintln!("skipping: {} not found", traces.display());
        None
    }
}

fn opts(format: &str) -> TraceOptions {
    TraceOptions {
        format: format.into(),
        ..Default::default()
    }
}

fn read_all(path: &std::path::Path, format: &str) -> Vec<Request> {
    open(path, &opts(format))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// (file, format, requests, reads, what auto-detection gives: Some(format) or None for "ambiguous, asks for --format")
const TRACES: &[(&str, &str, u64, u64, Option<&str>)] = &[
    (
        "cloudphysics/cloudPhysicsIO.csv",
        "cloudphysics",
        113_872,
        46_974,
        Some("cloudphysics"),
    ),
    (
        "cloudphysics/cloudPhysicsIO.vscsi",
        "vscsi",
        113_872,
        46_974,
        Some("vscsi"),
    ),
    (
        "cloudphysics/w106.lbn_u32le.xz",
        "lbn32",
        5_292_456,
        5_292_456,
        Some("lbn32"),
    ),
    (
        "tencent_cbs/cloud_storage-sample.bz2",
        "tencent",
        50_000,
        24_521,
        Some("tencent"),
    ),
    (
        "tencent_cbs/tencent.cut.per_50k.most_rand_iops.537.trace",
        "tencent-cut",
        50_000,
        41_036,
        Some("tencent-cut"),
    ),
    (
        "tencent_cbs/tencent.cut.per_50k.most_size_thpt.222.trace",
        "tencent-cut",
        50_000,
        41_638,
        Some("tencent-cut"),
    ),
    (
        "tencent_cbs/tencent.cut.per_50k.rw_60_40.490.trace",
        "tencent-cut",
        50_000,
        30_012,
        Some("tencent-cut"),
    ),
    (
        "tencent_cbs/tencent.cut.per_50k.rw_65_35.211.trace",
        "tencent-cut",
        50_000,
        32_961,
        Some("tencent-cut"),
    ),
    (
        "tencent_cbs/tencent.cut.per_50k.rw_75_25.379.trace",
        "tencent-cut",
        50_000,
        37_885,
        Some("tencent-cut"),
    ),
    (
        "msr_cambridge/msr.cut.per_10k.most_thpt_rand_iops.1006.trace",
        "msr-cut",
        10_000,
        8_316,
        None,
    ),
    (
        "msr_cambridge/msr.cut.per_10k.rw_20_80.105.trace",
        "msr-cut",
        10_000,
        2_020,
        None,
    ),
    (
        "msr_cambridge/msr.cut.per_10k.rw_40_60.1370.trace",
        "msr-cut",
        10_000,
        4_054,
        None,
    ),
    (
        "msr_cambridge/msr-cambridge1-sample.csv",
        "msr",
        1_000,
        508,
        Some("msr"),
    ),
    // 24,783 records: the README's 24,782 is `wc -l`, which misses the last line (no final newline).
    ("mqsim_umass_like/wsrch-small.trace", "mqsim", 24_783, 24_779, None),
    ("mqsim_umass_like/tpcc-small.trace", "mqsim", 6_999, 4_381, None),
    ("hp_hplajw_1992/ajw.1week.srt", "hpsrt", 44_519, 13_040, Some("hpsrt")),
    (
        "hp_hplajw_1992/ajw.1week.converted.csv",
        "hpsrt-csv",
        44_519,
        13_040,
        Some("hpsrt-csv"),
    ),
    (
        "systor17/systor17-traces-sample.csv.gz",
        "systor",
        999,
        0,
        Some("systor"),
    ),
    (
        "systor17/systor17-additional-sample.csv.gz",
        "systor",
        999,
        0,
        Some("systor"),
    ),
    (
        "blktrace/apress_hadoop_blkparse.txt",
        "blkparse",
        15_524,
        80,
        Some("blkparse"),
    ),
];

#[test]
fn every_shared_trace_parses_with_its_counts() {
    let Some(dir) = shared() else { return };
    let mut systor_reads = 0;
    for &(file, format, requests, reads, auto) in TRACES {
        let path = dir.join(file);
        let mut n = 0u64;
        let mut r = 0u64;
        for req in open(&path, &opts(format)).unwrap_or_else(|e| panic!("{e}")) {
            let req = req.unwrap_or_else(|e| panic!("{e}"));
            n += 1;
            r += (req.op == Op::Read) as u64;
        }
        assert_eq!(n, requests, "{file}: requests");
        if format == "systor" {
            systor_reads += r;
        } else {
            assert_eq!(r, reads, "{file}: reads");
        }
        match (auto, sniff(&path)) {
            (Some(f), Ok(g)) => assert_eq!(f, g, "{file}: auto"),
            (None, Err(e)) => assert!(
                e.to_string().contains("ambiguous") && e.to_string().contains(format),
                "{file}: {e}"
            ),
            (want, got) => panic!("{file}: auto gave {got:?}, expected {want:?}"),
        }
    }
    assert_eq!(systor_reads, 1_526, "systor reads");
}

#[test]
fn hpsrt_binary_agrees_with_its_csv_rendering() {
    let Some(dir) = shared() else { return };
    let bin = read_all(&dir.join("hp_hplajw_1992/ajw.1week.srt"), "hpsrt");
    let csv = read_all(&dir.join("hp_hplajw_1992/ajw.1week.converted.csv"), "hpsrt-csv");
    assert_eq!(bin.len(), csv.len());
    for (i, (a, b)) in bin.iter().zip(&csv).enumerate() {
        assert_eq!(
            (a.op, a.offset, a.len, a.tenant),
            (b.op, b.offset, b.len, b.tenant),
            "record {i}"
        );
        assert!((a.time - b.time).abs() < 1e-6, "record {i}: {} vs {}", a.time, b.time);
    }
    // Two disks, 7 days.
    assert_eq!(bin.iter().map(|r| r.tenant).max(), Some(1));
    assert!(bin.last().unwrap().time > 6.9 * 86400.0);
}

#[test]
fn vscsi_agrees_with_cloudphysics_csv() {
    let Some(dir) = shared() else { return };
    let bin = read_all(&dir.join("cloudphysics/cloudPhysicsIO.vscsi"), "vscsi");
    let csv = read_all(&dir.join("cloudphysics/cloudPhysicsIO.csv"), "cloudphysics");
    assert_eq!(bin.len(), csv.len());
    for (i, (a, b)) in bin.iter().zip(&csv).enumerate() {
        assert_eq!((a.op, a.offset, a.len), (b.op, b.offset, b.len), "record {i}");
        // The CSV keeps whole seconds of the µs timestamps.
        assert_eq!(a.time.floor(), b.time, "record {i}");
    }
}

#[test]
fn stats_of_shared_traces() {
    let Some(dir) = shared() else { return };
    // README: w106 has 275,171 unique blocks.
    let s = trace_stats(&dir.join("cloudphysics/w106.lbn_u32le.xz"), &opts("lbn32"), 4096).unwrap();
    assert_eq!(s.unique_blocks, 275_171);
    assert_eq!(s.block_accesses, 5_292_456);
    assert_eq!(s.classes.cold_read, 275_171);
    // README: 2,038 volumes in the Tencent sample.
    let s = trace_stats(
        &dir.join("tencent_cbs/cloud_storage-sample.bz2"),
        &opts("tencent"),
        4096,
    )
    .unwrap();
    assert_eq!(s.tenants, 2_038);
    // README: the MSR sample spans 127 s.
    let s = trace_stats(&dir.join("msr_cambridge/msr-cambridge1-sample.csv"), &opts("msr"), 4096).unwrap();
    assert_eq!(s.span.round(), 127.0, "{}", s.span);
    assert_eq!(s.start, Some(0.0));
    // The wsrch sample spans 60 s over 6 devices.
    let s = trace_stats(&dir.join("mqsim_umass_like/wsrch-small.trace"), &opts("mqsim"), 4096).unwrap();
    assert_eq!(s.tenants, 6);
    assert!((s.span - 60.0).abs() < 0.1, "{}", s.span);
    // blkparse dispatch events: 78 reads, 92 writes.
    let mut o = opts("blkparse");
    o.blkparse_event = 'D';
    let s = trace_stats(&dir.join("blktrace/apress_hadoop_blkparse.txt"), &o, 4096).unwrap();
    assert_eq!((s.reads, s.writes), (78, 92));
}

/// TRD / URD sizes at 8 KiB per tenant, summed over tenants, as computed
/// independently for the research note (`../shared/research/eci-ssd-tier.md`, E2).
#[test]
fn reuse_sizes_of_the_research_note() {
    use blocklab::analysis::reuse::{reuse_trace, ReuseOptions};
    let Some(dir) = shared() else { return };
    let opts8 = ReuseOptions {
        block_size: 8192,
        per_tenant: true,
        ..Default::default()
    };
    // (file, format, trd, urd, trd p99, urd p99)
    let cases: &[(&str, &str, u64, u64, Option<(u64, u64)>)] = &[
        (
            "msr_cambridge/msr-cambridge1-sample.csv",
            "msr",
            881,
            373,
            Some((302, 302)),
        ),
        (
            "msr_cambridge/msr.cut.per_10k.rw_20_80.105.trace",
            "msr-cut",
            4389,
            1339,
            Some((2726, 940)),
        ),
        (
            "msr_cambridge/msr.cut.per_10k.rw_40_60.1370.trace",
            "msr-cut",
            4958,
            4852,
            Some((2861, 3553)),
        ),
        (
            "msr_cambridge/msr.cut.per_10k.most_thpt_rand_iops.1006.trace",
            "msr-cut",
            15642,
            15642,
            Some((15641, 15641)),
        ),
        (
            "cloudphysics/cloudPhysicsIO.csv",
            "cloudphysics",
            135_496,
            134_825,
            None,
        ),
        ("tencent_cbs/cloud_storage-sample.bz2", "tencent", 73_908, 40_523, None),
        ("systor17/systor17-additional-sample.csv.gz", "systor", 2091, 1835, None),
        ("systor17/systor17-traces-sample.csv.gz", "systor", 3756, 1720, None),
    ];
    for &(file, format, trd, urd, p99) in cases {
        let r = reuse_trace(&dir.join(file), &opts(format), &opts8).unwrap();
        assert_eq!((r.totals.trd_size, r.totals.urd_size), (trd, urd), "{file}");
        if let Some(p) = p99 {
            assert_eq!((r.totals.trd_p99_size, r.totals.urd_p99_size), p, "{file}");
        }
    }
    // The Tencent sample: 2,038 volumes, 1,730 of them with no read reuse.
    let r = reuse_trace(
        &dir.join("tencent_cbs/cloud_storage-sample.bz2"),
        &opts("tencent"),
        &opts8,
    )
    .unwrap();
    assert_eq!(r.tenants.len(), 2038);
    assert_eq!(r.tenants.iter().filter(|t| t.urd_size == 0).count(), 1730);
    // The MSR sample is hm_0: tenant (hm = host 1) · 256 + disk 0.
    let r = reuse_trace(
        &dir.join("msr_cambridge/msr-cambridge1-sample.csv"),
        &opts("msr"),
        &opts8,
    )
    .unwrap();
    assert_eq!(r.tenants[0].tenant, Some(256));
}

//! `blocklab disk run MODEL --trace TRACE --format FORMAT` without the Python
//! front end (not a test; no assertions): the engine's share of the whole
//! process, and an FNV-1a digest of the whole report, so that two builds can
//! be shown to agree bit for bit (the timed bench against DiskSim).
//!
//! `cargo run --release -p blocklab --example disk_run -- MODEL TRACE FORMAT [ROUNDS]`

use std::time::Instant;

use blocklab::timed::disk_run::{self, RunOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let rounds: usize = a(3).parse().unwrap_or(1);
    let o = RunOptions {
        model: a(0).into(),
        traces: vec![a(1).into()],
        format: if a(2).is_empty() { "auto".into() } else { a(2).into() },
        ..Default::default()
    };
    for _ in 0..rounds {
        let t = Instant::now();
        let whole = disk_run::run(&o).unwrap();
        let wall = t.elapsed().as_secs_f64();
        let json = whole.to_json();
        let report = &whole.report;
        let digest = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        println!(
            "{wall:.3} s wall, {} requests, {} events, mean response {:.4} ms, report {digest:016x}",
            report.requests, report.events, report.avg_response_ms
        );
    }
}

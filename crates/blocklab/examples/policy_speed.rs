//! The counted simulator's speed on one cell, without the Python process: the
//! `cache` command's engine call on an oracleGeneral file, for profiling a
//! policy (`perf record`). Not a test; no assertions.
//!
//! `cargo run --release -p blocklab --example policy_speed -- TRACE POLICY SIZE`
//! `cargo run --release -p blocklab --example policy_speed -- --synth TRACE ACCESSES UNIVERSE`

use std::path::Path;
use std::time::Instant;

use blocklab::cache::sim::{simulate_trace, SimConfig};
use blocklab::trace::blocks::BlockOptions;
use blocklab::trace::synth;
use blocklab::trace::TraceOptions;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    if a(0) == "--synth" {
        let n: u64 = a(2).parse().expect("ACCESSES");
        let u: u64 = a(3).parse().expect("UNIVERSE");
        synth::write_zipf_oracle(Path::new(a(1)), n, u, 1.0, 42, 1).unwrap();
        return;
    }
    let cfg = SimConfig {
        trace: TraceOptions {
            format: "oracle".into(),
            ..TraceOptions::default()
        },
        blocks: BlockOptions::default(),
        policies: a(1).into(),
        sizes: a(2).into(),
    };
    let t = Instant::now();
    let report = simulate_trace(Path::new(a(0)), &cfg, &mut |_| Ok(())).unwrap();
    let secs = t.elapsed().as_secs_f64();
    for c in &report.cells {
        println!(
            "{} {} hits {} misses {} miss_ratio {:?} wall {secs:.3} s",
            c.policy, c.cache_blocks, c.hits, c.misses, c.miss_ratio
        );
    }
}

//! The overload bench's engine side (not a test; no assertions): replay a
//! Zipf trace at 1,000 requests/s, which outpaces the disks, on one disk
//! (`disk run --wrap`) or on a stack file, and print the wall time.
//!
//! `cargo run --release -p blocklab --example overload -- TRACE disk MODEL [SCHEDULER]`
//! `cargo run --release -p blocklab --example overload -- TRACE stack STACK.toml`
//! `cargo run --release -p blocklab --example overload -- --synth TRACE ACCESSES`

use std::path::Path;
use std::time::Instant;

use blocklab::stack::{StackSpec, TraceInput};
use blocklab::timed::disk_run::{self, RunOptions};
use blocklab::trace::synth;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    if a(0) == "--synth" {
        let n: u64 = a(2).parse().expect("ACCESSES");
        let keys = synth::zipf_keys(n, 2_000_000, 0.9, 42).unwrap();
        synth::write_native_csv(Path::new(a(1)), &keys, 4096).unwrap();
        return;
    }
    let t = Instant::now();
    let report = match a(1) {
        "disk" => {
            let o = RunOptions {
                model: a(2).into(),
                traces: vec![a(0).into()],
                format: "csv".into(),
                wrap: true,
                scheduler: if a(3).is_empty() { "fcfs".into() } else { a(3).into() },
                ..Default::default()
            };
            disk_run::run(&o).unwrap().report
        }
        "stack" => {
            let spec = StackSpec::load(Path::new(a(2)), &[]).unwrap();
            let traces = [TraceInput::new(a(0), "csv")];
            blocklab::stack::run::run_timed(&spec, &traces).unwrap().0
        }
        other => panic!("unknown mode `{other}`"),
    };
    let wall = t.elapsed().as_secs_f64();
    // FNV-1a of the whole report: two builds agree bit for bit iff these do.
    let json = serde_json::to_string(&report).unwrap();
    let digest = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    println!(
        "{wall:.3} s wall, {} requests, {} events, mean response {:.1} ms, max outstanding {}, report {digest:016x}",
        report.requests, report.events, report.avg_response_ms, report.max_outstanding
    );
}

//! Speed of the timed simulation: 100,000 random 4 KiB reads on one Seagate
//! Cheetah 9LP (DiskSim's validated model). Plain timing (one run per case
//! after a warm-up), printed as a table and as JSON lines for BENCHMARKS.md;
//! `python benches/run.py timed` also replays the open case from a trace
//! file, whole process, beside DiskSim 4.0 built on the same machine.
//!
//! `cargo bench -p blocklab --bench timed`. The model is looked up in
//! `$BLOCKLAB_SHARED/disk-models/disksim-valid/` (default `<repo>/../shared`),
//! falling back to `examples/disks/ultrastar-73lzx.toml`.

use std::path::PathBuf;
use std::time::Instant;

use blocklab::device::toy::ToyDisk;
use blocklab::device::{self, DeviceModel};
use blocklab::timed::executor::ExecConfig;
use blocklab::timed::replay::{run, vec_source, Discipline, ReplayConfig, SingleDisk};
use blocklab::trace::{Op, Request};

const N: usize = 100_000;

fn model_path() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("BLOCKLAB_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared"));
    let parv = shared.join("disk-models/disksim-valid/cheetah9LP.parv");
    if parv.exists() {
        parv
    } else {
        repo.join("examples/disks/ultrastar-73lzx.toml")
    }
}

/// Uniformly random 4 KiB-aligned reads over the disk; exponential
/// inter-arrival times of mean `gap_ms` (seeded xorshift: deterministic).
fn workload(capacity_sectors: u64, gap_ms: f64) -> Vec<Request> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let slots = capacity_sectors / 8;
    let mut t = 0.0;
    (0..N)
        .map(|_| {
            let u = ((next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            t += -gap_ms * u.ln() / 1000.0;
            Request {
                time: t,
                op: Op::Read,
                offset: (next() % slots) * 8 * 512,
                len: 4096,
                tenant: 0,
                fs: Default::default(),
            }
        })
        .collect()
}

/// CPU time of this process in seconds (Linux `/proc/self/schedstat`, ns);
/// on a shared machine it is the fairer measure than wall time.
fn cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

fn case(name: &str, make: &(dyn Fn() -> Box<dyn DeviceModel> + Sync), reqs: &[Request], d: Discipline, sched: &str) {
    let cfg = ReplayConfig {
        discipline: d,
        exec: ExecConfig {
            scheduler: sched.into(),
            ..Default::default()
        },
    };
    let go = || {
        let mut st = SingleDisk::new(|| Ok(make()), false).unwrap();
        let (t, c) = (Instant::now(), cpu_secs());
        let r = run(&mut st, &mut [vec_source(reqs.to_vec())], &cfg).unwrap();
        let wall = t.elapsed().as_secs_f64();
        (wall, c.zip(cpu_secs()).map(|(a, b)| b - a).unwrap_or(wall), r)
    };
    go(); // warm-up
    let (wall, secs, r) = go();
    println!(
        "{name:44} wall {wall:7.3} s  cpu {secs:7.3} s  {:>10.0} events/cpu-s  {:>9.0} req/cpu-s  avg resp {:7.3} ms  service {:6.3} ms  util {:.3}",
        r.events as f64 / secs,
        r.requests as f64 / secs,
        r.avg_response_ms,
        r.avg_service_ms,
        r.utilization
    );
    println!(
        "{{\"case\": \"{name}\", \"wall_s\": {wall:.4}, \"cpu_s\": {secs:.4}, \"events\": {}, \"events_per_cpu_s\": {:.0}, \"requests\": {}, \"avg_response_ms\": {:.4}, \"avg_service_ms\": {:.4}}}",
        r.events,
        r.events as f64 / secs,
        r.requests,
        r.avg_response_ms,
        r.avg_service_ms
    );
}

fn main() {
    let path = model_path();
    let p2 = path.clone();
    let load = move || device::load(&p2).expect("drive model loads");
    let cap = load().capacity_sectors();
    println!("model {} ({} sectors); {N} random 4 KiB reads", path.display(), cap);
    let reqs = workload(cap, 10.0);
    case(
        "closed N=1 fcfs (back to back)",
        &load,
        &reqs,
        Discipline::Closed {
            outstanding: 1,
            think_ms: 0.0,
        },
        "fcfs",
    );
    case(
        "open, exp. arrivals mean 10 ms, fcfs",
        &load,
        &reqs,
        Discipline::Open { speedup: 1.0 },
        "fcfs",
    );
    case(
        "closed N=16 satf",
        &load,
        &reqs,
        Discipline::Closed {
            outstanding: 16,
            think_ms: 0.0,
        },
        "satf",
    );
    case(
        "feedback (2 passes) n=2",
        &load,
        &reqs,
        Discipline::Feedback {
            cpu_speedup: Some(2.0),
            window: 64,
        },
        "fcfs",
    );
    let toy = || Box::new(ToyDisk::constant(5.0)) as Box<dyn DeviceModel>;
    case(
        "engine only: constant 5 ms device, closed N=1",
        &toy,
        &reqs,
        Discipline::Closed {
            outstanding: 1,
            think_ms: 0.0,
        },
        "fcfs",
    );
}

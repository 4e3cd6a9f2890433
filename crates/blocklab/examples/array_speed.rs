//! Rough speed of plan building + counted execution (not a test; no assertions).
//! `cargo run --release -p blocklab --example array_speed`

use blocklab::array::{Array, ArrayConfig, Level};
use blocklab::exec::count::CountExecutor;
use std::time::Instant;

fn main() {
    let n = 1_000_000u64;
    for (level, disks, failed) in [
        (Level::Raid5, 5, None),
        (Level::Raid5, 5, Some(0)),
        (Level::Raid6, 6, Some(1)),
    ] {
        let mut a = Array::new(ArrayConfig::new(level, disks)).unwrap();
        if let Some(f) = failed {
            a.fail(f).unwrap();
        }
        let mut ex = CountExecutor::new(disks);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let t = Instant::now();
        let mut penalty = 0u64;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let block = x % (1 << 28);
            penalty += a.read_penalty(block).unwrap_or(0) as u64;
            let plan = if i % 4 == 3 {
                a.plan_write(block, 1)
            } else {
                a.plan_read(block, 1)
            };
            ex.run(&plan);
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "{:?} {} disks failed {:?}: {:.0} ns per (penalty + plan + count), {} disk reads, {} writes, penalty sum {}",
            level, disks, failed, dt / n as f64 * 1e9, ex.total_reads(), ex.total_writes(), penalty
        );
    }
}

//! Time the disk model alone: 100,000 random 4 KiB reads on one drive,
//! back to back (`cargo run --release --example disk_bench -- PATH.parv`).
use std::path::Path;
use std::time::Instant;

use blocklab::array::plan::DiskOpKind;
use blocklab::device::{load, DevRequest};

fn main() {
    let path = std::env::args().nth(1).expect("model path");
    let mut d = load(Path::new(&path)).expect("load");
    let cap = d.capacity_sectors() - 8;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let t0 = Instant::now();
    let mut now = 0.0;
    for _ in 0..100_000 {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let lbn = (r % (cap / 8)) * 8;
        now += d.service(
            now,
            &DevRequest {
                kind: DiskOpKind::Read,
                lbn,
                sectors: 8,
            },
        );
    }
    let el = t0.elapsed().as_secs_f64();
    println!(
        "100000 reads, mean service {:.3} ms, wall {:.3} s ({:.0} requests/s)",
        now / 100_000.0,
        el,
        100_000.0 / el
    );
}

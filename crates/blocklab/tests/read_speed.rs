//! Reader throughput (not a test of correctness, and it asserts no timing):
//! `cargo test --release -p blocklab --test read_speed -- --ignored --nocapture`.

use blocklab::analysis::stats::trace_stats;
use blocklab::trace::{open, oracle, TraceOptions};
use std::io::Write;
use std::time::Instant;

#[test]
#[ignore]
fn reader_throughput() {
    const N: u64 = 2_000_000;
    let dir = tempfile::tempdir().unwrap();
    let mut x: u64 = 88172645463325252;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let csv = dir.path().join("t.csv");
    let mq = dir.path().join("t.mqsim");
    let ora = dir.path().join("t.oracle");
    {
        let mut c = std::io::BufWriter::new(std::fs::File::create(&csv).unwrap());
        let mut m = std::io::BufWriter::new(std::fs::File::create(&mq).unwrap());
        let mut o = std::io::BufWriter::new(std::fs::File::create(&ora).unwrap());
        writeln!(c, "timestamp,op,offset,size,tenant").unwrap();
        for i in 0..N {
            let r = next();
            let blk = r % 1_000_000;
            writeln!(
                c,
                "{},{},{},{},{}",
                i as f64 * 1e-4,
                if r & 1 == 0 { 'R' } else { 'W' },
                blk * 4096,
                4096,
                r % 4
            )
            .unwrap();
            writeln!(m, "{} {} {} 8 {}", i * 100_000, r % 4, blk * 8, r & 1).unwrap();
            oracle::write_record(&mut o, i as u32, blk, 4096, -1).unwrap();
        }
    }
    for (path, format) in [(&csv, "csv"), (&mq, "mqsim"), (&ora, "oracle")] {
        let opts = TraceOptions {
            format: format.into(),
            ..Default::default()
        };
        let t = Instant::now();
        let mut n = 0u64;
        for r in open(path, &opts).unwrap() {
            r.unwrap();
            n += 1;
        }
        let read = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let s = trace_stats(path, &opts, 4096).unwrap();
        let st = t.elapsed().as_secs_f64();
        assert_eq!(n, N);
        assert_eq!(s.requests, N);
        println!(
            "{format:7} read {:6.1} M requests/s   stats {:6.1} M requests/s",
            N as f64 / read / 1e6,
            N as f64 / st / 1e6
        );
    }
}

//! Criterion benches of the counted cache simulator (filled by the cache work).
use criterion::{criterion_group, criterion_main, Criterion};

fn lru(c: &mut Criterion) {
    use blocklab::cache::{build, Access, NEVER};
    let mut x: u64 = 1;
    let blocks: Vec<u64> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 20_000
        })
        .collect();
    c.bench_function("lru 100k accesses", |b| {
        b.iter(|| {
            let mut p = build("lru", 5_000).unwrap();
            let mut hits = 0;
            for &blk in &blocks {
                hits += p.access(&Access { block: blk, next_use: NEVER, write: false }) as u64;
            }
            hits
        })
    });
}

criterion_group!(benches, lru);
criterion_main!(benches);

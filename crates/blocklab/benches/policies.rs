//! Criterion benches of the counted cache simulator: access throughput of
//! every policy on a seeded Zipf(1.0) trace, and of the exact MRC.
//! `cargo bench -p blocklab --bench policies`.
use blocklab::analysis::mrc::{curve_of, Method};
use blocklab::cache::sim::next_uses_in_place;
use blocklab::cache::{build, Access, POLICIES};
use blocklab::trace::synth::zipf_keys;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const ACCESSES: u64 = 1_000_000;
const UNIVERSE: u64 = 100_000;
const CACHE: usize = 10_000;

fn trace() -> Vec<Access> {
    let keys = zipf_keys(ACCESSES, UNIVERSE, 1.0, 42).expect("valid Zipf parameters");
    let mut next = keys.clone();
    next_uses_in_place(&mut next);
    keys.iter()
        .zip(next)
        .map(|(&block, next_use)| Access {
            block,
            next_use,
            write: false,
        })
        .collect()
}

fn policies(c: &mut Criterion) {
    let accesses = trace();
    let mut g = c.benchmark_group("policy access");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for &name in POLICIES {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut p = build(name, CACHE).expect("known policy");
                accesses.iter().map(|a| p.access(a) as u64).sum::<u64>()
            })
        });
    }
    g.finish();
}

fn mrc(c: &mut Criterion) {
    let keys = zipf_keys(ACCESSES, UNIVERSE, 1.0, 42).expect("valid Zipf parameters");
    let mut g = c.benchmark_group("mrc");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for (label, method) in [("exact", Method::Exact), ("shards 0.01", Method::ShardsRate(0.01))] {
        g.bench_function(label, |b| {
            b.iter(|| curve_of(keys.iter().map(|&k| Ok(k)), method).expect("curve").accesses)
        });
    }
    g.finish();
}

criterion_group!(benches, policies, mrc);
criterion_main!(benches);

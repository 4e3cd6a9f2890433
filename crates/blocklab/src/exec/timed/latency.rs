//! Response times of one class of requests and their percentiles, as every
//! executor reports them (the timed executor's `metrics`, the real
//! executor's `replay`).
//!
//! Mean, minimum and maximum are exact. Percentiles are nearest-rank: the
//! `p` percentile of `n` responses is the value of rank ⌈p·n⌉ (at least 1)
//! in ascending order. They are exact (nanoseconds) while a run has at most
//! [`EXACT_LIMIT`] responses: the values are kept. Past that the values go
//! into an HDR histogram of 1 µs resolution and 4 significant digits (an
//! error below 0.01 %, fixed memory whatever the run's length), whose bucket
//! midpoint is reported — clamped to the exact `[min, max]`, so that no
//! percentile ever lies outside the responses measured. (Three significant
//! digits at bucket midpoints put p95 and p99 above the maximum and made
//! close cells of a sweep report the same p99.)

use hdrhistogram::Histogram;

use super::engine::{ns_to_ms, Ns};

/// Responses kept exactly (8 bytes each) before the histogram takes over.
pub const EXACT_LIMIT: usize = 100_000;

/// Significant digits of the histogram (see the module comment).
const SIGNIFICANT_DIGITS: u8 = 4;

/// Response times of one class: exact mean, min, max; exact percentiles for
/// small runs, an HDR histogram for long ones.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// Every response while there are at most [`EXACT_LIMIT`] of them.
    exact: Vec<Ns>,
    /// The responses in µs once there were more (then `exact` is empty).
    hist: Option<Histogram<u64>>,
    count: u64,
    sum_ns: u128,
    min_ns: Ns,
    max_ns: Ns,
}

fn new_histogram() -> Histogram<u64> {
    // Values in µs from 1 µs to 10^4 s (longer responses are clamped; the
    // maximum stays exact).
    Histogram::new_with_bounds(1, 10_000_000_000, SIGNIFICANT_DIGITS).expect("valid histogram bounds")
}

/// µs, rounded to nearest, at least 1 (the histogram's unit).
fn to_us(ns: Ns) -> u64 {
    ((ns + 500) / 1000).max(1)
}

/// Nearest rank (1-based) of percentile `p` (a fraction) among `n` values,
/// in integer arithmetic so that 0.95 · 20 is rank 19, not 20.
fn rank(p: f64, n: u64) -> u64 {
    let per_million = (p.clamp(0.0, 1.0) * 1e6).round() as u128;
    ((per_million * n as u128).div_ceil(1_000_000) as u64).clamp(1, n)
}

impl Latencies {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&mut self, ns: Ns) {
        if self.count == 0 {
            self.min_ns = ns;
        }
        self.count += 1;
        self.sum_ns += ns as u128;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        match self.hist.as_mut() {
            Some(h) => h.saturating_record(to_us(ns)),
            None => {
                self.exact.push(ns);
                if self.exact.len() > EXACT_LIMIT {
                    self.spill();
                }
            }
        }
    }

    /// Move the kept values into the histogram.
    fn spill(&mut self) {
        let mut h = new_histogram();
        for &v in &self.exact {
            h.saturating_record(to_us(v));
        }
        self.exact = Vec::new();
        self.hist = Some(h);
    }

    /// Add the responses of `o` (another worker's, say).
    pub fn merge(&mut self, o: &Latencies) {
        if o.count == 0 {
            return;
        }
        self.min_ns = if self.count == 0 {
            o.min_ns
        } else {
            self.min_ns.min(o.min_ns)
        };
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        if self.hist.is_none() && o.hist.is_none() && self.exact.len() + o.exact.len() <= EXACT_LIMIT {
            self.exact.extend_from_slice(&o.exact);
            return;
        }
        if self.hist.is_none() {
            self.spill();
        }
        let h = self.hist.as_mut().expect("spilled");
        match &o.hist {
            Some(oh) => h.add(oh).expect("same bounds"),
            None => o.exact.iter().for_each(|&v| h.saturating_record(to_us(v))),
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the percentiles are exact (the values were kept).
    pub fn is_exact(&self) -> bool {
        self.hist.is_none()
    }

    pub fn mean_ms(&self) -> f64 {
        if self.count > 0 {
            self.sum_ns as f64 / self.count as f64 / 1e6
        } else {
            0.0
        }
    }

    pub fn min_ms(&self) -> f64 {
        ns_to_ms(self.min_ns)
    }

    pub fn max_ms(&self) -> f64 {
        ns_to_ms(self.max_ns)
    }

    /// The percentiles `ps` (fractions, e.g. 0.99) in ms; 0 for each when
    /// there are no responses.
    pub fn quantiles_ms(&self, ps: &[f64]) -> Vec<f64> {
        if self.count == 0 {
            return vec![0.0; ps.len()];
        }
        match &self.hist {
            None => {
                let mut v = self.exact.clone();
                v.sort_unstable();
                ps.iter()
                    .map(|&p| ns_to_ms(v[rank(p, self.count) as usize - 1]))
                    .collect()
            }
            Some(h) => ps
                .iter()
                .map(|&p| {
                    let mid_ns = h.median_equivalent(h.value_at_quantile(p)).saturating_mul(1000);
                    ns_to_ms(mid_ns.clamp(self.min_ns, self.max_ns))
                })
                .collect(),
        }
    }

    /// One percentile in ms (see [`quantiles_ms`](Self::quantiles_ms)).
    pub fn quantile_ms(&self, p: f64) -> f64 {
        self.quantiles_ms(&[p])[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Nearest rank by brute force: the smallest value with at least p·n of
    /// the values at or below it.
    fn brute_force(values: &[Ns], p: f64) -> Ns {
        let mut v = values.to_vec();
        v.sort_unstable();
        let n = v.len() as f64;
        *v.iter()
            .find(|&&x| v.iter().filter(|&&y| y <= x).count() as f64 >= (p * n) - 1e-9)
            .unwrap()
    }

    #[test]
    fn hand_worked_small_run() {
        // 20 responses: 1, 2, ..., 19 ms and one of 135.833 ms.
        // p50: rank 10 -> 10 ms; p95: rank 19 -> 19 ms; p99: rank ⌈19.8⌉ = 20
        // -> the maximum, 135.833 ms exactly (3 significant digits at bucket
        // midpoints gave 135.872 ms, above the maximum).
        let mut l = Latencies::new();
        for ms in 1..=19u64 {
            l.record(ms * 1_000_000);
        }
        l.record(135_833_000);
        assert!(l.is_exact());
        assert_eq!(
            l.quantiles_ms(&[0.5, 0.95, 0.99, 1.0]),
            vec![10.0, 19.0, 135.833, 135.833]
        );
        assert_eq!(l.quantile_ms(0.01), 1.0); // rank ⌈0.2⌉ = 1
        assert_eq!((l.min_ms(), l.max_ms()), (1.0, 135.833));
        assert!((l.mean_ms() - 16.29165).abs() < 1e-12); // (190 + 135.833) / 20
    }

    #[test]
    fn close_runs_have_different_p99() {
        // Two runs whose p99 differ by 10 µs at 135 ms: 3 significant
        // digits put both in one 64 µs bucket.
        let run = |tail_ns: Ns| {
            let mut l = Latencies::new();
            for i in 0..1000u64 {
                l.record(if i < 980 { 1_000_000 } else { tail_ns });
            }
            l.quantile_ms(0.99)
        };
        assert_eq!(run(135_840_000), 135.84);
        assert_eq!(run(135_850_000), 135.85);
    }

    #[test]
    fn empty_reports_zeros() {
        let l = Latencies::new();
        assert_eq!(l.quantiles_ms(&[0.5, 0.99]), vec![0.0, 0.0]);
        assert_eq!((l.count(), l.mean_ms(), l.max_ms()), (0, 0.0, 0.0));
    }

    #[test]
    fn long_runs_use_the_histogram_within_min_and_max() {
        let mut l = Latencies::new();
        // A response just above a bucket's lower edge as the only slow one:
        // the bucket midpoint would lie above it.
        for _ in 0..EXACT_LIMIT {
            l.record(1_000_000);
        }
        l.record(135_833_000);
        assert!(!l.is_exact());
        assert_eq!(l.quantile_ms(1.0), 135.833);
        assert_eq!(l.quantile_ms(0.5), 1.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Small runs: exact nearest-rank percentiles, within [min, max].
        #[test]
        fn exact_percentiles_are_nearest_rank(values in prop::collection::vec(1u64..1_000_000_000, 1..300),
                                              p in 0.0f64..=1.0) {
            let mut l = Latencies::new();
            values.iter().for_each(|&v| l.record(v));
            let got = l.quantile_ms(p);
            prop_assert_eq!(got, ns_to_ms(brute_force(&values, p)));
            prop_assert!(got >= l.min_ms() && got <= l.max_ms());
        }

        /// Long runs (values in the histogram, merged from parts or not):
        /// every percentile within [min, max] and within 0.01 % (+ 1 µs) of
        /// the exact one.
        #[test]
        fn histogram_percentiles_within_min_max(values in prop::collection::vec(1u64..200_000_000_000, 1..200),
                                               split in 0usize..200, p in 0.0f64..=1.0) {
            let (mut a, mut b) = (Latencies::new(), Latencies::new());
            a.spill();
            let split = split.min(values.len());
            values[..split].iter().for_each(|&v| a.record(v));
            values[split..].iter().for_each(|&v| b.record(v));
            a.merge(&b);
            prop_assert!(!a.is_exact());
            prop_assert_eq!(a.count(), values.len() as u64);
            let got = a.quantile_ms(p);
            let min = *values.iter().min().unwrap();
            let max = *values.iter().max().unwrap();
            prop_assert!(got >= ns_to_ms(min) && got <= ns_to_ms(max), "{} not in [{}, {}]", got, min, max);
            let want = ns_to_ms(brute_force(&values, p));
            prop_assert!((got - want).abs() <= want * 1e-4 + 1e-3, "{} vs {}", got, want);
        }
    }
}

//! What a timed run measures: response times (mean, maximum and
//! percentiles as `latency` takes them), per-device busy time (the Hsu–Smith
//! "service time": the arm is busy from the start of positioning to the end
//! of the transfer), utilization, queue lengths, outstanding requests, and a
//! per-interval time series for plots. Everything serializes to JSON.

use serde::Serialize;

use super::engine::{ns_to_ms, Ns};
use super::latency::Latencies;
use super::queue::DeviceStats;

/// One interval of the time series.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Point {
    /// Start of the interval (ms of simulated time).
    pub t_ms: f64,
    pub issued: u64,
    pub completed: u64,
    /// Mean response time of the requests completed in the interval (0 if none).
    pub avg_response_ms: f64,
    /// Busy fraction of the devices during the interval (mean over devices).
    pub utilization: f64,
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    issued: u64,
    completed: u64,
    resp_ns: u128,
    busy_ns: u128,
}

/// Per-device summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceReport {
    pub ops: u64,
    pub busy_ms: f64,
    /// Mean busy time per operation at this device.
    pub avg_service_ms: f64,
    pub utilization: f64,
    /// Time-averaged number of requests waiting (not in service).
    pub mean_queue: f64,
    pub max_queue: u64,
    /// Busy time split: moving the arm, waiting for rotation, media
    /// transfer, and the rest (command overhead, bus, waits for the
    /// mechanism); they sum to `busy_ms` (a model that does not split its
    /// time reports it all as overhead).
    pub seek_ms: f64,
    pub rotation_ms: f64,
    pub transfer_ms: f64,
    pub overhead_ms: f64,
    /// Busy time of read operations.
    pub read_busy_ms: f64,
    /// Mean time of this device's operations from their arrival in its
    /// queue to their completion (waiting included).
    pub avg_response_ms: f64,
}

/// Response times of one class of requests (all, reads, writes).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ResponseSummary {
    /// Requests with a response time (unreadable ones excluded).
    pub requests: u64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Response times of one class (see [`Latencies`] for how percentiles are
/// taken).
struct Responses {
    lat: Latencies,
}

impl Responses {
    fn new() -> Self {
        Responses { lat: Latencies::new() }
    }

    fn record(&mut self, r: Ns) {
        self.lat.record(r);
    }

    /// The response time at each percentile 1, 2, ..., 100 (ms; the 100th is
    /// the exact maximum): the distribution as a CDF. Empty without requests.
    fn cdf_ms(&self) -> Vec<f64> {
        if self.lat.count() == 0 {
            return Vec::new();
        }
        let ps: Vec<f64> = (1..100).map(|i| i as f64 / 100.0).collect();
        let mut v = self.lat.quantiles_ms(&ps);
        v.push(self.lat.max_ms());
        v
    }

    fn mean_ms(&self) -> f64 {
        self.lat.mean_ms()
    }

    fn max_ms(&self) -> f64 {
        self.lat.max_ms()
    }

    fn summary(&self) -> ResponseSummary {
        let q = self.lat.quantiles_ms(&[0.50, 0.95, 0.99]);
        ResponseSummary {
            requests: self.lat.count(),
            avg_ms: self.mean_ms(),
            p50_ms: q[0],
            p95_ms: q[1],
            p99_ms: q[2],
            max_ms: self.max_ms(),
        }
    }
}

/// The result of a timed run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub replay: String,
    pub scheduler: String,
    pub streams: usize,
    /// Requests completed (all requests of the traces).
    pub requests: u64,
    /// Requests whose plan could not produce the data (too many failed disks);
    /// they are counted in `requests` but not in the response times.
    pub unreadable: u64,
    pub avg_response_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_response_ms: f64,
    /// Device busy time per request (Hsu–Smith "service time"), summed over devices.
    pub avg_service_ms: f64,
    /// Mean device utilization: busy time / simulated time.
    pub utilization: f64,
    /// Simulated time from 0 (first arrival) to the last completion.
    pub sim_time_ms: f64,
    /// Simulated time measured: from the end of the warm-up (0 without
    /// one) to the last completion (what rates per second divide by).
    pub measured_ms: f64,
    pub mean_outstanding: f64,
    pub max_outstanding: u64,
    /// Requests whose trace timestamp went backwards (issued at once instead).
    pub out_of_order: u64,
    /// `replay.sort`: the requests the reader's reorder moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<crate::trace::order::Reordered>,
    /// Engine events handled.
    pub events: u64,
    pub devices: Vec<DeviceReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<Vec<Point>>,
    /// Response times of reads and of writes.
    pub reads: ResponseSummary,
    pub writes: ResponseSummary,
    /// The background rebuild, when one ran (`--rebuild`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<super::rebuild::RebuildReport>,
    /// Percentiles 1..=100 of all response times (the stack result's
    /// `response.cdf_ms`; not part of this report's own JSON).
    #[serde(skip)]
    pub cdf_ms: Vec<f64>,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report always serializes")
    }
}

/// Collects the measurements during a run.
pub struct Recorder {
    all: Responses,
    reads: Responses,
    writes: Responses,
    /// Every completed request (warm-up included).
    count: u64,
    /// Completed requests past the warm-up.
    measured: u64,
    /// Start of the measured period (the end of the warm-up, else 0).
    start: Ns,
    unreadable: u64,
    outstanding: u64,
    max_outstanding: u64,
    outstanding_area: u128,
    last_change: Ns,
    interval_ns: Option<Ns>,
    buckets: Vec<Bucket>,
}

impl Recorder {
    pub fn new(interval_ns: Option<Ns>) -> Self {
        Recorder {
            all: Responses::new(),
            reads: Responses::new(),
            writes: Responses::new(),
            count: 0,
            measured: 0,
            start: 0,
            unreadable: 0,
            outstanding: 0,
            max_outstanding: 0,
            outstanding_area: 0,
            last_change: 0,
            interval_ns: interval_ns.filter(|&i| i > 0),
            buckets: Vec::new(),
        }
    }

    fn bucket(&mut self, t: Ns) -> Option<&mut Bucket> {
        let i = (t / self.interval_ns?) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, Bucket::default());
        }
        Some(&mut self.buckets[i])
    }

    fn account(&mut self, now: Ns) {
        self.outstanding_area += self.outstanding as u128 * now.saturating_sub(self.last_change) as u128;
        self.last_change = now;
    }

    pub fn issue(&mut self, now: Ns) {
        self.account(now);
        self.outstanding += 1;
        self.max_outstanding = self.max_outstanding.max(self.outstanding);
        if let Some(b) = self.bucket(now) {
            b.issued += 1;
        }
    }

    /// The warm-up is over at `now`: queue lengths and the measured period
    /// start afresh (requests of the warm-up still in flight are counted in
    /// the outstanding ones, not in the response times).
    pub fn restart(&mut self, now: Ns) {
        self.account(now);
        self.outstanding_area = 0;
        self.max_outstanding = self.outstanding;
        self.start = now;
    }

    /// A request of the warm-up completed: no response time.
    pub fn complete_unmeasured(&mut self, now: Ns) {
        self.account(now);
        self.outstanding -= 1;
        self.count += 1;
    }

    /// A user request issued at `start` completed now; `write` says which
    /// class it belongs to.
    pub fn complete(&mut self, now: Ns, start: Ns, unreadable: bool, write: bool) {
        self.account(now);
        self.outstanding -= 1;
        self.count += 1;
        self.measured += 1;
        if unreadable {
            self.unreadable += 1;
            return;
        }
        let r = now - start;
        self.all.record(r);
        if write {
            self.writes.record(r)
        } else {
            self.reads.record(r)
        }
        if let Some(b) = self.bucket(now) {
            b.completed += 1;
            b.resp_ns += r as u128;
        }
    }

    /// A device is busy over [start, start + dur): spread over the intervals.
    pub fn busy(&mut self, start: Ns, dur: Ns) {
        let Some(iv) = self.interval_ns else { return };
        let (mut t, end) = (start, start + dur);
        while t < end {
            let next = (t / iv + 1) * iv;
            let upto = next.min(end);
            if let Some(b) = self.bucket(t) {
                b.busy_ns += (upto - t) as u128;
            }
            t = upto;
        }
    }

    pub fn completed(&self) -> u64 {
        self.count
    }

    /// Summarize; `end` is the time of the last completion.
    pub fn report(&mut self, end: Ns, devices: &[DeviceStats], events: u64) -> Report {
        self.account(end);
        let end = end.max(self.start);
        let span = (end - self.start).max(1) as f64;
        let measured_span = end > self.start;
        let total_busy: u128 = devices.iter().map(|d| d.busy_ns as u128).sum();
        let devs: Vec<DeviceReport> = devices
            .iter()
            .map(|d| DeviceReport {
                ops: d.ops,
                busy_ms: ns_to_ms(d.busy_ns),
                avg_service_ms: if d.ops > 0 {
                    ns_to_ms(d.busy_ns) / d.ops as f64
                } else {
                    0.0
                },
                utilization: if measured_span { d.busy_ns as f64 / span } else { 0.0 },
                mean_queue: if measured_span { d.queue_area as f64 / span } else { 0.0 },
                max_queue: d.max_queue,
                seek_ms: ns_to_ms(d.seek_ns),
                rotation_ms: ns_to_ms(d.rotation_ns),
                transfer_ms: ns_to_ms(d.transfer_ns),
                overhead_ms: ns_to_ms(d.overhead_ns),
                read_busy_ms: ns_to_ms(d.read_busy_ns),
                avg_response_ms: if d.completed > 0 {
                    d.response_ns as f64 / 1e6 / d.completed as f64
                } else {
                    0.0
                },
            })
            .collect();
        let ndev = devices.len().max(1) as f64;
        let timeseries = self.interval_ns.map(|iv| {
            self.buckets
                .iter()
                .enumerate()
                .map(|(i, b)| Point {
                    t_ms: ns_to_ms(i as u64 * iv),
                    issued: b.issued,
                    completed: b.completed,
                    avg_response_ms: if b.completed > 0 {
                        b.resp_ns as f64 / b.completed as f64 / 1e6
                    } else {
                        0.0
                    },
                    utilization: b.busy_ns as f64 / (iv as f64 * ndev),
                })
                .collect()
        });
        // One sort of the responses for the three percentiles.
        let all = self.all.summary();
        Report {
            replay: String::new(),
            scheduler: String::new(),
            streams: 0,
            requests: self.measured,
            unreadable: self.unreadable,
            avg_response_ms: self.all.mean_ms(),
            p50_ms: all.p50_ms,
            p95_ms: all.p95_ms,
            p99_ms: all.p99_ms,
            max_response_ms: self.all.max_ms(),
            avg_service_ms: if self.measured > 0 {
                total_busy as f64 / self.measured as f64 / 1e6
            } else {
                0.0
            },
            utilization: if measured_span {
                total_busy as f64 / span / ndev
            } else {
                0.0
            },
            sim_time_ms: ns_to_ms(end),
            measured_ms: ns_to_ms(end - self.start),
            mean_outstanding: if measured_span {
                self.outstanding_area as f64 / span
            } else {
                0.0
            },
            max_outstanding: self.max_outstanding,
            out_of_order: 0,
            reordered: None,
            events,
            devices: devs,
            timeseries,
            reads: self.reads.summary(),
            writes: self.writes.summary(),
            rebuild: None,
            cdf_ms: self.all.cdf_ms(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_spreads_over_intervals() {
        let mut r = Recorder::new(Some(10));
        r.busy(5, 20); // [5,25): 5 in [0,10), 10 in [10,20), 5 in [20,30)
        let rep = r.report(
            30,
            &[DeviceStats {
                ops: 1,
                busy_ns: 20,
                ..Default::default()
            }],
            0,
        );
        let u: Vec<f64> = rep.timeseries.unwrap().iter().map(|p| p.utilization).collect();
        assert_eq!(u, vec![0.5, 1.0, 0.5]);
    }

    #[test]
    fn response_stats() {
        let mut r = Recorder::new(None);
        for (s, e) in [(0u64, 1_000_000u64), (0, 3_000_000)] {
            r.issue(s);
            r.complete(e, s, false, false);
        }
        let rep = r.report(3_000_000, &[], 0);
        assert_eq!(rep.requests, 2);
        assert_eq!(rep.avg_response_ms, 2.0);
        assert_eq!(rep.max_response_ms, 3.0);
        assert!((rep.p99_ms - 3.0).abs() < 0.01, "{} {}", rep.p99_ms, rep.p50_ms);
        assert!((rep.p50_ms - 1.0).abs() < 0.01);
        // 2 outstanding for 1 ms, 1 for 2 ms, over 3 ms.
        assert!((rep.mean_outstanding - 4.0 / 3.0).abs() < 1e-12);
    }

    /// The report's percentiles of a hand-worked run: 20 writes of 1..=19 ms
    /// and one of 135.833 ms (the issue's maximum). Nearest rank: p50 is
    /// rank 10, p95 rank 19, p99 rank 20 (the maximum) — never above it.
    #[test]
    fn write_percentiles_are_exact_and_within_max() {
        let mut r = Recorder::new(None);
        let mut t = 0;
        for resp in (1..=19u64).map(|ms| ms * 1_000_000).chain([135_833_000]) {
            r.issue(t);
            r.complete(t + resp, t, false, true);
            t += resp;
        }
        let rep = r.report(t, &[], 0);
        let w = &rep.writes;
        assert_eq!((w.requests, w.max_ms), (20, 135.833));
        assert_eq!((w.p50_ms, w.p95_ms, w.p99_ms), (10.0, 19.0, 135.833));
        assert_eq!((rep.p50_ms, rep.p95_ms, rep.p99_ms), (10.0, 19.0, 135.833));
        assert_eq!(rep.cdf_ms[98], 135.833);
    }

    #[test]
    fn cdf_has_each_percentile_and_the_exact_maximum() {
        let mut r = Responses::new();
        assert!(r.cdf_ms().is_empty());
        // 1, 2, ..., 200 ms (+0.3 ms on the last, which only the exact maximum keeps).
        for i in 1..=200u64 {
            r.record(i * 1_000_000 + if i == 200 { 300_000 } else { 0 });
        }
        let cdf = r.cdf_ms();
        assert_eq!(cdf.len(), 100);
        for (k, v) in cdf[..99].iter().enumerate() {
            // percentile k+1 of 1..=200 ms is 2(k+1) ms (the next value when q·n rounds up);
            // HDR at 3 significant digits is within 0.1 %.
            let want = 2.0 * (k + 1) as f64;
            assert!(
                *v >= want * (1.0 - 1e-3) && *v <= (want + 1.0) * (1.0 + 1e-3),
                "p{}: {v} vs {want}",
                k + 1
            );
        }
        assert_eq!(cdf[99], 200.3);
        assert!(cdf.windows(2).all(|w| w[0] <= w[1]));
    }
}

//! Hand-computed timelines of the timed executor and the replay disciplines.

use super::engine::Ns;
use super::executor::{ExecConfig, Step, TimedExecutor};
use super::replay::*;
use crate::array::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use crate::device::toy::ToyDisk;
use crate::device::{DevRequest, DeviceModel};
use crate::trace::{Op, Request};

const MS: Ns = 1_000_000;

fn rq(t_ms: f64, lbn: u64, tenant: u32) -> Request {
    Request {
        time: t_ms / 1000.0,
        op: Op::Read,
        offset: lbn * 512,
        len: 512,
        tenant,
        fs: Default::default(),
    }
}

fn toy(d: ToyDisk) -> impl Stack {
    SingleDisk::new(move || Ok(Box::new(d.clone()) as Box<dyn DeviceModel>), false).unwrap()
}

fn cfg(d: Discipline) -> ReplayConfig {
    ReplayConfig {
        discipline: d,
        exec: ExecConfig::default(),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Response times in completion order, via the executor's steps.
fn responses(reqs: &[Request], disc: Discipline, dev: ToyDisk) -> super::Report {
    let mut st = toy(dev);
    run(&mut st, &mut [vec_source(reqs.to_vec())], &cfg(disc)).unwrap()
}

#[test]
fn open_loop_constant_service_queueing() {
    // Constant 10 ms; arrivals 0, 2, 4, 30 ms. Starts 0, 10, 20, 30;
    // completions 10, 20, 30, 40; responses 10, 18, 26, 10 (mean 16).
    let reqs = [rq(0.0, 0, 0), rq(2.0, 1, 0), rq(4.0, 2, 0), rq(30.0, 3, 0)];
    let r = responses(&reqs, Discipline::Open { speedup: 1.0 }, ToyDisk::constant(10.0));
    assert_eq!(r.requests, 4);
    assert!(close(r.avg_response_ms, 16.0));
    assert!(close(r.max_response_ms, 26.0));
    assert!(close(r.sim_time_ms, 40.0));
    assert!(close(r.utilization, 1.0));
    assert!(close(r.avg_service_ms, 10.0));
    // Waiting: 1 during [2,4), 2 during [4,10), 1 during [10,20): 24 ms·req / 40 ms.
    assert!(close(r.devices[0].mean_queue, 0.6));
    assert_eq!(r.devices[0].max_queue, 2);
    // In flight: 1,2,3,2,1,1 over [0,2,4,10,20,30,40): 64 / 40.
    assert!(close(r.mean_outstanding, 1.6));
    assert_eq!(r.max_outstanding, 3);
    assert!((r.p50_ms - 10.0).abs() < 0.02 || (r.p50_ms - 18.0).abs() < 0.02);
    assert!((r.p99_ms - 26.0).abs() < 0.03);
}

#[test]
fn open_loop_speedup_halves_interarrivals() {
    // Speed-up 2: arrivals 0, 1, 2, 15 ms; starts 0, 10, 20, 30;
    // responses 10, 19, 28, 25 (mean 20.5).
    let reqs = [rq(0.0, 0, 0), rq(2.0, 1, 0), rq(4.0, 2, 0), rq(30.0, 3, 0)];
    let r = responses(&reqs, Discipline::Open { speedup: 2.0 }, ToyDisk::constant(10.0));
    assert!(close(r.avg_response_ms, 20.5));
    assert!(close(r.sim_time_ms, 40.0));
}

#[test]
fn open_loop_times_are_relative_to_the_first_request() {
    let reqs = [rq(1000.0, 0, 0), rq(1005.0, 1, 0)];
    let r = responses(&reqs, Discipline::Open { speedup: 1.0 }, ToyDisk::constant(10.0));
    // Arrivals 0 and 5: responses 10 and 15; the run lasts 20 ms.
    assert!(close(r.avg_response_ms, 12.5));
    assert!(close(r.sim_time_ms, 20.0));
    assert!(close(r.utilization, 1.0));
}

#[test]
fn closed_loop_one_outstanding_is_back_to_back_service() {
    // Linear toy: 1 ms + 0.5 ms per cylinder moved, 1000 sectors per cylinder.
    // Cylinders 0, 5, 1, 9 from head 0: services 1, 3.5, 3, 5 back to back,
    // whatever the timestamps say.
    let reqs = [
        rq(0.0, 0, 0),
        rq(100.0, 5000, 0),
        rq(200.0, 1000, 0),
        rq(900.0, 9000, 0),
    ];
    let r = responses(
        &reqs,
        Discipline::Closed {
            outstanding: 1,
            think_ms: 0.0,
        },
        ToyDisk::linear(1.0, 0.5, 1000),
    );
    assert_eq!(r.requests, 4);
    assert!(close(r.avg_response_ms, 12.5 / 4.0));
    assert!(close(r.sim_time_ms, 12.5));
    assert!(close(r.utilization, 1.0));
    assert!(close(r.avg_service_ms, 12.5 / 4.0));
    assert_eq!(r.max_outstanding, 1);
    assert!(close(r.max_response_ms, 5.0));
}

#[test]
fn closed_loop_two_outstanding_queues() {
    // Constant 10 ms, N = 2: requests 0,1 at t=0 (responses 10, 20); 2 issued at
    // 10 (done 30, response 20), 3 issued at 20 (done 40, response 20).
    let reqs = [rq(0.0, 0, 0), rq(0.0, 1, 0), rq(0.0, 2, 0), rq(0.0, 3, 0)];
    let r = responses(
        &reqs,
        Discipline::Closed {
            outstanding: 2,
            think_ms: 0.0,
        },
        ToyDisk::constant(10.0),
    );
    assert!(close(r.avg_response_ms, 17.5));
    assert_eq!(r.max_outstanding, 2);
}

#[test]
fn closed_loop_think_time_delays_each_next_issue() {
    // Constant 10 ms, N = 1, think 3 ms: R0 0–10, R1 13–23, R2 26–36. Every
    // response is the bare 10 ms service; the run ends at the last
    // completion (no wake after it), utilization 30/36.
    let reqs = [rq(0.0, 0, 0), rq(0.0, 1, 0), rq(0.0, 2, 0)];
    let r = responses(
        &reqs,
        Discipline::Closed {
            outstanding: 1,
            think_ms: 3.0,
        },
        ToyDisk::constant(10.0),
    );
    assert_eq!(r.requests, 3);
    assert!(close(r.avg_response_ms, 10.0));
    assert!(close(r.sim_time_ms, 36.0));
    assert!(close(r.utilization, 30.0 / 36.0));
    // N = 2, think 5: R0 0–10, R1 10–20 (queued), R2 issued 15 → 20–30
    // (response 15), R3 issued 25 → 30–40 (response 15): mean (10+20+15+15)/4.
    let reqs = [rq(0.0, 0, 0), rq(0.0, 1, 0), rq(0.0, 2, 0), rq(0.0, 3, 0)];
    let r = responses(
        &reqs,
        Discipline::Closed {
            outstanding: 2,
            think_ms: 5.0,
        },
        ToyDisk::constant(10.0),
    );
    assert!(close(r.avg_response_ms, 15.0));
    assert!(close(r.sim_time_ms, 40.0));
}

#[test]
fn feedback_two_request_chain() {
    // Traced system: constant 10 ms. R0 at 0 (done 10), R1 at 15: parent R0,
    // think 5 ms. Replayed on a 4 ms disk: R0 done at 4, R1 issued at 4 + 5 = 9,
    // done at 13. Open loop would have issued R1 at 15.
    let reqs = vec![rq(0.0, 0, 0), rq(15.0, 1, 0)];
    let mut reference = toy(ToyDisk::constant(10.0));
    let mut fast = toy(ToyDisk::constant(4.0));
    let fb = Discipline::Feedback {
        cpu_speedup: Some(1.0),
        window: ISSUE_WINDOW,
    };
    let r = run_with_reference(
        &mut fast,
        Some(&mut reference),
        &mut [vec_source(reqs.clone())],
        &cfg(fb),
    )
    .unwrap();
    assert_eq!(r.requests, 2);
    assert!(close(r.sim_time_ms, 13.0));
    assert!(close(r.avg_response_ms, 4.0));
    assert!(close(r.utilization, 8.0 / 13.0));

    // Infinitely fast processor: think 5 ms becomes 5 ms · (1 − f(0.005 s)).
    let fb = Discipline::Feedback {
        cpu_speedup: None,
        window: ISSUE_WINDOW,
    };
    let mut reference = toy(ToyDisk::constant(10.0));
    let r = run_with_reference(&mut fast, Some(&mut reference), &mut [vec_source(reqs)], &cfg(fb)).unwrap();
    let f: f64 = 1.0 / (0.0857 * 0.005 + 0.0105) / 100.0; // 0.91503...
    let think_ms = (5.0 * (1.0 - f) * 1e6).round() / 1e6;
    assert!(
        close(r.sim_time_ms, 4.0 + think_ms + 4.0),
        "{} vs {}",
        r.sim_time_ms,
        8.0 + think_ms
    );
}

#[test]
fn feedback_request_issued_before_any_completion_has_no_parent() {
    // Traced: 10 ms disk; R0 at 0, R1 at 5 (R0 not yet done: no parent, offset
    // 5 ms), R2 at 30 (last completion before it: R1 at 20; think 10 ms).
    // On a 2 ms disk: R0 0→2, R1 5→7, R2 7+10 = 17→19.
    let reqs = vec![rq(0.0, 0, 0), rq(5.0, 1, 0), rq(30.0, 2, 0)];
    let mut reference = toy(ToyDisk::constant(10.0));
    let mut fast = toy(ToyDisk::constant(2.0));
    let fb = Discipline::Feedback {
        cpu_speedup: Some(1.0),
        window: ISSUE_WINDOW,
    };
    let r = run_with_reference(&mut fast, Some(&mut reference), &mut [vec_source(reqs)], &cfg(fb)).unwrap();
    assert!(close(r.sim_time_ms, 19.0));
    assert!(close(r.avg_response_ms, 2.0));
}

#[test]
fn feedback_dependencies_are_per_tenant() {
    // Traced 10 ms disk. Tenant 0: R0 at 0 (done 10). Tenant 1: R1 at 1 (queued,
    // done 20). Tenant 0: R2 at 25: the last completion of *its* tenant is R0
    // (at 10), think 15 — not R1 (at 20). On a 1 ms disk: R0 0→1, R1 1→2,
    // R2 at 1 + 15 = 16 → 17.
    let reqs = vec![rq(0.0, 0, 0), rq(1.0, 1, 1), rq(25.0, 2, 0)];
    let mut reference = toy(ToyDisk::constant(10.0));
    let mut fast = toy(ToyDisk::constant(1.0));
    let fb = Discipline::Feedback {
        cpu_speedup: Some(1.0),
        window: ISSUE_WINDOW,
    };
    let r = run_with_reference(&mut fast, Some(&mut reference), &mut [vec_source(reqs)], &cfg(fb)).unwrap();
    assert!(close(r.sim_time_ms, 17.0));
}

#[test]
fn feedback_window_limits_run_ahead() {
    // Window 1: a request cannot issue before its predecessor in the trace.
    // Traced 10 ms disk: R0 at 0, R1 at 1 (no parent, offset 1 ms), R2 at 2 (no
    // parent). Replayed on a 10 ms disk with R0 as the only... all issue at
    // their offsets 0, 1, 2 ms, in trace order; same result as open loop.
    let reqs = vec![rq(0.0, 0, 0), rq(1.0, 1, 0), rq(2.0, 2, 0)];
    let fb = Discipline::Feedback {
        cpu_speedup: Some(1.0),
        window: 1,
    };
    let r = responses(&reqs, fb, ToyDisk::constant(10.0));
    let o = responses(&reqs, Discipline::Open { speedup: 1.0 }, ToyDisk::constant(10.0));
    assert!(close(r.avg_response_ms, o.avg_response_ms));
    assert!(close(r.sim_time_ms, 30.0));
}

#[test]
fn feedback_on_the_traced_system_reproduces_open_loop() {
    // Replaying on the system that produced the completion times, with the
    // think times kept, every request is issued at its original time.
    let reqs = random_trace(500, 7, 3);
    let o = responses(
        &reqs,
        Discipline::Open { speedup: 1.0 },
        ToyDisk::linear(0.5, 0.01, 100),
    );
    let f = responses(
        &reqs,
        Discipline::Feedback {
            cpu_speedup: Some(1.0),
            window: ISSUE_WINDOW,
        },
        ToyDisk::linear(0.5, 0.01, 100),
    );
    assert_eq!(o.avg_response_ms, f.avg_response_ms);
    assert_eq!(o.sim_time_ms, f.sim_time_ms);
    assert_eq!(o.devices, f.devices);
}

#[test]
fn feedback_merges_independent_streams() {
    // Two traces, each a two-request chain like `feedback_two_request_chain`
    // but replayed on the traced 10 ms disk: streams interleave on one disk.
    let a = vec![rq(0.0, 0, 0), rq(15.0, 1, 0)];
    let b = vec![rq(0.0, 100, 0), rq(25.0, 101, 0)];
    let mut st = toy(ToyDisk::constant(10.0));
    let fb = Discipline::Feedback {
        cpu_speedup: Some(1.0),
        window: ISSUE_WINDOW,
    };
    let r = run(&mut st, &mut [vec_source(a), vec_source(b)], &cfg(fb)).unwrap();
    // Pass 1 (open): A0 0→10, B0 0→20 (queued), A1 15: last A completion A0@10,
    // think 5; B1 25: last B completion B0@20, think 5. A1 starts 20→30, B1 30→40.
    // Pass 2 reproduces it: 4 requests, ends at 40.
    assert_eq!(r.requests, 4);
    assert_eq!(r.streams, 2);
    assert!(close(r.sim_time_ms, 40.0));
}

#[test]
fn speed_up_formula_at_hand_computed_points() {
    // f(x) = 1/(0.0857 x + 0.0105) percent.
    // x = 1 s: 1/0.0962 = 10.395010395 % -> n = 2: 1 - 0.05197505 = 0.94802495.
    assert!((cpu_fraction(1.0) - 0.10395010395).abs() < 1e-10);
    assert!((speed_up_interval(1.0, Some(2.0)) - 0.948024948).abs() < 1e-8);
    assert!((speed_up_interval(1.0, None) - 0.896049896).abs() < 1e-8);
    // x = 0.1 s: 1/0.01907 = 52.4383849 % -> n = 2: 0.1 (1 - 0.2621919) = 0.07378081.
    assert!((speed_up_interval(0.1, Some(2.0)) - 0.0737808076).abs() < 1e-9);
    assert!((speed_up_interval(0.1, None) - 0.0475616151).abs() < 1e-9);
    // x = 10 s: 1/0.8675 = 1.15273775 % -> n = 4: 10 (1 - 0.75 · 0.0115273775).
    assert!((speed_up_interval(10.0, Some(4.0)) - 9.913544669).abs() < 1e-8);
    // n = 1 changes nothing; x = 0 stays 0; never negative.
    assert_eq!(speed_up_interval(0.0, None), 0.0);
    assert!((speed_up_interval(0.37, Some(1.0)) - 0.37).abs() < 1e-15);
    assert!((cpu_fraction(0.0) - 1.0 / 1.05).abs() < 1e-12);
}

// ---- schedulers --------------------------------------------------------

/// Completion order (tags) of plans all submitted at time 0.
fn order(dev: Box<dyn DeviceModel>, sched: &str, depth: usize, lbns: &[u64]) -> Vec<u64> {
    let cfg = ExecConfig {
        scheduler: sched.into(),
        queue_depth: depth,
        ..Default::default()
    };
    let mut ex = TimedExecutor::new(vec![dev], cfg).unwrap();
    for (i, &l) in lbns.iter().enumerate() {
        let mut p = IoPlan::default();
        p.push(
            Action::Disk(DiskOp {
                disk: 0,
                kind: DiskOpKind::Read,
                block: l,
                nblocks: 1,
                cause: Cause::User,
            }),
            &[],
        );
        ex.submit(p, i as u64).unwrap();
    }
    let mut out = Vec::new();
    while let Some(s) = ex.next_step() {
        if let Step::Done { tag, .. } = s {
            out.push(tag);
        }
    }
    out
}

/// Cylinders 5, 8, 2, 6, 1 (1000 sectors each); request 0 starts at once.
const CYLS: [u64; 5] = [5000, 8000, 2000, 6000, 1000];

#[test]
fn fcfs_serves_in_arrival_order() {
    assert_eq!(
        order(Box::new(ToyDisk::linear(1.0, 0.1, 1000)), "fcfs", usize::MAX, &CYLS),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn sstf_serves_nearest_cylinder() {
    // Head 5: 6 (d 1); head 6: 8 (d 2) vs 2 (d 4); head 8: 2 (d 6) vs 1 (d 7); then 1.
    assert_eq!(
        order(Box::new(ToyDisk::linear(1.0, 0.1, 1000)), "sstf", usize::MAX, &CYLS),
        vec![0, 3, 1, 2, 4]
    );
    // Equal distances (7 and 3 from 5): the earlier arrival wins.
    assert_eq!(
        order(
            Box::new(ToyDisk::linear(1.0, 0.1, 1000)),
            "sstf",
            usize::MAX,
            &[5000, 7000, 3000]
        ),
        vec![0, 1, 2]
    );
    assert_eq!(
        order(
            Box::new(ToyDisk::linear(1.0, 0.1, 1000)),
            "sstf",
            usize::MAX,
            &[5000, 3000, 7000]
        ),
        vec![0, 1, 2]
    );
}

#[test]
fn clook_sweeps_up_then_wraps_to_lowest() {
    // Head 5 going up: 6, 8; wrap: 1, then 2.
    assert_eq!(
        order(Box::new(ToyDisk::linear(1.0, 0.1, 1000)), "clook", usize::MAX, &CYLS),
        vec![0, 3, 1, 4, 2]
    );
}

/// A device whose positioning estimate is a fixed table, unrelated to the
/// cylinder distance, so that SATF and SSTF disagree.
struct TableDev;
impl DeviceModel for TableDev {
    fn service(&mut self, _: f64, _: &DevRequest) -> f64 {
        1.0
    }
    fn positioning_estimate(&self, _: f64, r: &DevRequest) -> f64 {
        match r.lbn / 1000 {
            8 => 0.5,
            1 => 1.0,
            6 => 2.0,
            2 => 3.0,
            _ => 9.0,
        }
    }
    fn cylinder(&self, lbn: u64) -> u64 {
        lbn / 1000
    }
    fn capacity_sectors(&self) -> u64 {
        1 << 20
    }
}

#[test]
fn satf_serves_shortest_positioning_estimate() {
    assert_eq!(
        order(Box::new(TableDev), "satf", usize::MAX, &CYLS),
        vec![0, 1, 4, 3, 2]
    );
    assert_eq!(
        order(Box::new(TableDev), "sptf", usize::MAX, &CYLS),
        vec![0, 1, 4, 3, 2]
    );
    // SSTF on the same device goes by cylinders instead.
    assert_eq!(
        order(Box::new(TableDev), "sstf", usize::MAX, &CYLS),
        vec![0, 3, 1, 2, 4]
    );
}

/// A toy disk that counts what the schedulers ask of it (cylinder lookups
/// and access-time estimates), the work a choice costs them.
struct Asked {
    disk: ToyDisk,
    asked: std::sync::Arc<std::sync::atomic::AtomicU64>,
}
impl Asked {
    fn count(&self) {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}
impl DeviceModel for Asked {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        self.disk.service(now_ms, req)
    }
    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
        self.count();
        self.disk.positioning_estimate(now_ms, req)
    }
    fn cylinder(&self, lbn: u64) -> u64 {
        self.count();
        self.disk.cylinder(lbn)
    }
    fn capacity_sectors(&self) -> u64 {
        self.disk.capacity_sectors()
    }
}

#[test]
fn a_deep_queue_does_not_make_each_choice_dearer() {
    // 4,000 requests arrive at once. A scan of the queue per choice asks
    // the device about every waiting request each time (n²/2 = 8 million
    // questions); ordered queues ask once per arrival and once per service
    // (the head's cylinder), SATF besides at most its window per choice.
    let n = 4000u64;
    let lbns: Vec<u64> = (0..n).map(|i| (i * 7919) % n * 1000).collect();
    for sched in ["sstf", "clook", "satf"] {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let dev = Asked {
            disk: ToyDisk::linear(1.0, 0.001, 1000),
            asked: asked.clone(),
        };
        let done = order(Box::new(dev), sched, usize::MAX, &lbns);
        assert_eq!(done.len() as u64, n);
        let window = if sched == "satf" {
            super::sched::DEFAULT_SATF_WINDOW as u64
        } else {
            0
        };
        let asked = asked.load(std::sync::atomic::Ordering::Relaxed);
        assert!(asked <= n * (2 + window), "{sched}: {asked} questions for {n} requests");
    }
}

#[test]
fn queue_depth_limits_what_the_scheduler_sees() {
    // Depth 2 (in service included): the device sees {8}, then {8, 2}: tie at
    // distance 3 from 5 -> 8 (earlier); then {2, 6} from 8 -> 6; {2, 1} from 6 -> 2; 1.
    assert_eq!(
        order(Box::new(ToyDisk::linear(1.0, 0.1, 1000)), "sstf", 2, &CYLS),
        vec![0, 1, 3, 2, 4]
    );
    // Depth 1 is FCFS whatever the scheduler.
    assert_eq!(
        order(Box::new(ToyDisk::linear(1.0, 0.1, 1000)), "sstf", 1, &CYLS),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn unknown_scheduler_is_an_error() {
    let e = TimedExecutor::new(
        vec![Box::new(ToyDisk::constant(1.0))],
        ExecConfig {
            scheduler: "elevator".into(),
            ..Default::default()
        },
    );
    assert!(e.err().unwrap().to_string().contains("valid: fcfs, sstf, clook, satf"));
}

// ---- plans --------------------------------------------------------------

#[test]
fn plan_nodes_wait_for_their_dependencies() {
    // Read disk 0 (3 ms) and disk 1 (5 ms), XOR (2 ms) after both, then write
    // disk 2 (4 ms): done at 5 + 2 + 4 = 11 ms.
    let devs: Vec<Box<dyn DeviceModel>> = vec![
        Box::new(ToyDisk::constant(3.0)),
        Box::new(ToyDisk::constant(5.0)),
        Box::new(ToyDisk::constant(4.0)),
    ];
    let mut ex = TimedExecutor::new(
        devs,
        ExecConfig {
            xor_ns: 2 * MS,
            ..Default::default()
        },
    )
    .unwrap();
    let op = |disk, kind| {
        Action::Disk(DiskOp {
            disk,
            kind,
            block: 0,
            nblocks: 8,
            cause: Cause::ParityUpdate,
        })
    };
    let mut p = IoPlan::default();
    let a = p.push(op(0, DiskOpKind::Read), &[]);
    let b = p.push(op(1, DiskOpKind::Read), &[]);
    let x = p.push(Action::Xor { units: 2 }, &[a, b]);
    p.push(op(2, DiskOpKind::Write), &[x]);
    ex.submit(p, 7).unwrap();
    // An unreadable plan completes at once and is counted apart.
    let mut u = IoPlan::default();
    u.push(Action::Unreadable { block: 3 }, &[]);
    ex.submit(u, 8).unwrap();
    let mut done = Vec::new();
    while let Some(s) = ex.next_step() {
        if let Step::Done {
            time, tag, unreadable, ..
        } = s
        {
            done.push((tag, time, unreadable));
        }
    }
    assert_eq!(done, vec![(8, 0, true), (7, 11 * MS, false)]);
    let r = ex.report();
    assert_eq!(r.requests, 2);
    assert_eq!(r.unreadable, 1);
    assert!(close(r.avg_response_ms, 11.0));
    assert_eq!(r.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), vec![1, 1, 1]);
    // Busy 3 + 5 + 4 ms over 11 ms on 3 devices.
    assert!(close(r.utilization, 12.0 / 33.0));
}

#[test]
fn out_of_capacity_is_an_error_unless_wrapped() {
    let d = ToyDisk {
        capacity: 100,
        ..ToyDisk::constant(1.0)
    };
    let d2 = d.clone();
    let reqs = vec![rq(0.0, 150, 0)];
    let mut st = SingleDisk::new(move || Ok(Box::new(d.clone()) as Box<dyn DeviceModel>), false).unwrap();
    let e = run(
        &mut st,
        &mut [vec_source(reqs.clone())],
        &cfg(Discipline::Open { speedup: 1.0 }),
    )
    .unwrap_err();
    assert!(e.to_string().contains("beyond the device"), "{e}");
    let mut st = SingleDisk::new(move || Ok(Box::new(d2.clone()) as Box<dyn DeviceModel>), true).unwrap();
    let r = run(
        &mut st,
        &mut [vec_source(reqs)],
        &cfg(Discipline::Open { speedup: 1.0 }),
    )
    .unwrap();
    assert_eq!(r.requests, 1);
}

#[test]
fn bad_discipline_parameters_are_errors() {
    let reqs = vec![rq(0.0, 1, 0)];
    for d in [
        Discipline::Open { speedup: 0.0 },
        Discipline::Open { speedup: f64::NAN },
        Discipline::Closed {
            outstanding: 0,
            think_ms: 0.0,
        },
        Discipline::Closed {
            outstanding: 1,
            think_ms: -1.0,
        },
        Discipline::Closed {
            outstanding: 1,
            think_ms: f64::INFINITY,
        },
        Discipline::Feedback {
            cpu_speedup: Some(-1.0),
            window: 64,
        },
        Discipline::Feedback {
            cpu_speedup: Some(1.0),
            window: 0,
        },
    ] {
        let mut st = toy(ToyDisk::constant(1.0));
        assert!(run(&mut st, &mut [vec_source(reqs.clone())], &cfg(d)).is_err());
    }
}

// ---- determinism and completeness ---------------------------------------

fn random_trace(n: usize, seed: u64, tenants: u32) -> Vec<Request> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += (next() % 20_000) as f64 * 1e-7 + 1e-7; // up to 2 ms apart, strictly increasing
            Request {
                time: t,
                op: if next() % 3 == 0 { Op::Write } else { Op::Read },
                offset: (next() % 1_000_000) * 512,
                len: 512 * (1 + next() % 16),
                tenant: (next() % tenants as u64) as u32,
                fs: Default::default(),
            }
        })
        .collect()
}

#[test]
fn two_runs_are_bit_identical() {
    let reqs = random_trace(2000, 42, 4);
    let go = || {
        let mut st = toy(ToyDisk {
            per_sector_ms: 0.01,
            ..ToyDisk::linear(0.3, 0.0005, 200)
        });
        let c = ReplayConfig {
            discipline: Discipline::Feedback {
                cpu_speedup: Some(3.0),
                window: ISSUE_WINDOW,
            },
            exec: ExecConfig {
                scheduler: "satf".into(),
                interval_ns: Some(50 * MS),
                ..Default::default()
            },
        };
        let r = run(
            &mut st,
            &mut [vec_source(reqs.clone()), vec_source(random_trace(300, 9, 1))],
            &c,
        )
        .unwrap();
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(go(), go());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn trace() -> impl Strategy<Value = Vec<Request>> {
        prop::collection::vec((0u32..50, 0u64..10_000, 1u64..64, 0u32..3, any::<bool>()), 1..60).prop_map(|v| {
            let mut t = 0.0;
            v.into_iter()
                .map(|(dt, lbn, secs, tenant, w)| {
                    t += dt as f64 * 1e-4;
                    Request {
                        time: t,
                        op: if w { Op::Write } else { Op::Read },
                        offset: lbn * 512,
                        len: secs * 512,
                        tenant,
                        fs: Default::default(),
                    }
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_request_completes(a in trace(), b in trace(), sched in 0usize..4, disc in 0usize..4, n in 1usize..4) {
            let d = match disc {
                0 => Discipline::Open { speedup: 1.5 },
                1 => Discipline::Closed { outstanding: n, think_ms: 0.0 },
                2 => Discipline::Feedback { cpu_speedup: Some(2.0), window: n },
                _ => Discipline::Feedback { cpu_speedup: None, window: ISSUE_WINDOW },
            };
            let c = ReplayConfig {
                discipline: d,
                exec: ExecConfig { scheduler: SCHEDS[sched].into(), queue_depth: n * 2, ..Default::default() },
            };
            let mut st = toy(ToyDisk::linear(0.5, 0.001, 100));
            let total = (a.len() + b.len()) as u64;
            let r = run(&mut st, &mut [vec_source(a), vec_source(b)], &c).unwrap();
            prop_assert_eq!(r.requests, total);
            prop_assert_eq!(r.devices[0].ops, total);
            prop_assert!(r.utilization <= 1.0 + 1e-9);
            prop_assert!(r.avg_response_ms >= 0.5 - 1e-9);
        }
    }

    const SCHEDS: [&str; 4] = ["fcfs", "sstf", "clook", "satf"];
}

// ---- arrays -------------------------------------------------------------

#[test]
fn degraded_raid5_read_waits_for_reconstruction() {
    use crate::array::{Array, ArrayConfig, Level};
    // RAID-5, 4 constant 10 ms disks, XOR 1 ms. A 4 KiB read of block 0 (on
    // disk 0): 10 ms normally; with disk 0 failed, the three survivors are
    // read in parallel (10 ms) and XORed (1 ms): 11 ms, 3 disk operations.
    let go = |failed: &[u32]| {
        let mut a = Array::new(ArrayConfig::new(Level::Raid5, 4)).unwrap();
        for &d in failed {
            a.fail(d).unwrap();
        }
        let disk0 = a.disk_of(0);
        let mut st = ArrayStack::new(
            a,
            || Ok(Box::new(ToyDisk::constant(10.0)) as Box<dyn DeviceModel>),
            false,
        )
        .unwrap();
        let c = ReplayConfig {
            discipline: Discipline::Open { speedup: 1.0 },
            exec: ExecConfig {
                xor_ns: MS,
                sectors_per_block: st.sectors_per_block(),
                ..Default::default()
            },
        };
        let req = Request {
            time: 0.0,
            op: Op::Read,
            offset: 0,
            len: 4096,
            tenant: 0,
            fs: Default::default(),
        };
        (disk0, run(&mut st, &mut [vec_source(vec![req])], &c).unwrap())
    };
    let (d0, normal) = go(&[]);
    assert!(close(normal.avg_response_ms, 10.0));
    assert_eq!(normal.devices.iter().map(|d| d.ops).sum::<u64>(), 1);
    let (_, degraded) = go(&[d0]);
    assert!(close(degraded.avg_response_ms, 11.0));
    assert_eq!(degraded.devices.iter().map(|d| d.ops).sum::<u64>(), 3);
    assert_eq!(degraded.devices[d0 as usize].ops, 0);
}

#[test]
fn feedback_speed_up_shrinks_think_times_but_not_parentless_offsets() {
    // Traced 10 ms disk: R0 at 0 (done 10), R1 at 5 (no parent, offset 5 ms),
    // R2 at 1010: last completion R1 at 20, think 990 ms. On a 1 ms disk with
    // an infinitely fast processor: R0 0→1, R1 at 5 (unchanged) → 6, R2 at
    // 6 + 990 ms · (1 − f(0.99 s)), f = 1/(0.0857·0.99 + 0.0105)/100.
    let reqs = vec![rq(0.0, 0, 0), rq(5.0, 1, 0), rq(1010.0, 2, 0)];
    let mut reference = toy(ToyDisk::constant(10.0));
    let mut fast = toy(ToyDisk::constant(1.0));
    let fb = Discipline::Feedback {
        cpu_speedup: None,
        window: ISSUE_WINDOW,
    };
    let r = run_with_reference(&mut fast, Some(&mut reference), &mut [vec_source(reqs)], &cfg(fb)).unwrap();
    let f: f64 = 1.0 / (0.0857 * 0.99 + 0.0105) / 100.0;
    let think_ns = (0.99 * (1.0 - f) * 1e9).round();
    assert!(close(r.sim_time_ms, 6.0 + think_ns / 1e6 + 1.0), "{}", r.sim_time_ms);
    assert!(close(r.avg_response_ms, 1.0));
}

#[test]
fn raid10_far_array_is_sized_like_md_and_reads_the_far_copy_when_degraded() {
    use crate::array::{Array, ArrayConfig, Level};
    // f2 on 4 toy disks of 8 blocks (4 KiB chunks = 1 block): stride 4 rows,
    // MD's raid10_size = ⌊8/2⌋·4/1 = 16 blocks. Block 15 lives on disk 3 row
    // 3 and disk 0 row 7 (the last row); block 16 is past the end.
    let make = || {
        let mut d = ToyDisk::constant(10.0);
        d.capacity = 8 * 8; // sectors
        Ok(Box::new(d) as Box<dyn DeviceModel>)
    };
    let mut cfg = ArrayConfig::new(Level::Raid10, 4);
    cfg.chunk_bytes = 4096;
    cfg.set_layout("f2").unwrap();
    cfg.disk_bytes = 8 * 4096;
    let mut a = Array::new(cfg).unwrap();
    a.fail(3).unwrap();
    let mut st = ArrayStack::new(a, make, false).unwrap();
    let req = |block: u64| Request {
        time: 0.0,
        op: Op::Read,
        offset: block * 4096,
        len: 4096,
        tenant: 0,
        fs: Default::default(),
    };
    let ex = TimedExecutor::new(st.devices().unwrap(), ExecConfig::default()).unwrap();
    let p = st.plan_request(&req(15), &ex).unwrap();
    let ops: Vec<(u32, u64)> = p.disk_ops().map(|o| (o.disk, o.block)).collect();
    assert_eq!(ops, vec![(0, 7)]);
    assert!(st
        .plan_request(&req(16), &ex)
        .unwrap_err()
        .to_string()
        .contains("beyond"));
    // A member size larger than the disk is refused.
    let mut cfg = ArrayConfig::new(Level::Raid10, 4);
    cfg.set_layout("f2").unwrap();
    cfg.disk_bytes = 1 << 30;
    let err = ArrayStack::new(Array::new(cfg).unwrap(), make, false)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("larger than the disk"), "{err}");
}

#[test]
fn mirror_reads_are_balanced_like_md_read_balance() {
    use crate::array::{Array, ArrayConfig, Level};
    // RAID-1 of 2 constant 10 ms disks, 4 KiB blocks (8 sectors each).
    let make = || Ok(Box::new(ToyDisk::constant(10.0)) as Box<dyn DeviceModel>);
    let mut st = ArrayStack::new(Array::new(ArrayConfig::new(Level::Raid1, 2)).unwrap(), make, false).unwrap();
    let exec = ExecConfig {
        sectors_per_block: 8,
        ..ExecConfig::default()
    };
    let read = |block: u64| Request {
        time: 0.0,
        op: Op::Read,
        offset: block * 4096,
        len: 4096,
        tenant: 0,
        fs: Default::default(),
    };
    let disk_of = |p: &IoPlan| p.disk_ops().map(|o| o.disk).collect::<Vec<_>>();
    let mut ex = TimedExecutor::new(st.devices().unwrap(), exec.clone()).unwrap();
    // Both idle, heads at 0: block 100 goes to the first copy (disk 0).
    let p = st.plan_request(&read(100), &ex).unwrap();
    assert_eq!(disk_of(&p), vec![0]);
    ex.submit(p, 0).unwrap();
    // Disk 0 busy, disk 1 idle: block 500 goes to disk 1.
    let p = st.plan_request(&read(500), &ex).unwrap();
    assert_eq!(disk_of(&p), vec![1]);
    ex.submit(p, 1).unwrap();
    // Block 101 continues disk 0's last access (sequential): disk 0, busy or not.
    let p = st.plan_request(&read(101), &ex).unwrap();
    assert_eq!(disk_of(&p), vec![0]);
    ex.submit(p, 2).unwrap();
    // Both busy: block 450 is nearer disk 1's head (501) than disk 0's (102).
    let p = st.plan_request(&read(450), &ex).unwrap();
    assert_eq!(disk_of(&p), vec![1]);
    // Writes still go to both copies.
    let write = Request {
        op: Op::Write,
        ..read(7)
    };
    assert_eq!(disk_of(&st.plan_request(&write, &ex).unwrap()), vec![0, 1]);

    // RAID-10: n2 prefers an idle disk; f2 always the lowest address (the
    // first copy, in the outer half), even when its disk is busy.
    let toy8 = || {
        let mut d = ToyDisk::constant(10.0);
        d.capacity = 64 * 8; // 64 blocks of 4 KiB
        Ok(Box::new(d) as Box<dyn DeviceModel>)
    };
    for (layout, expect) in [("n2", vec![0, 1, 0]), ("f2", vec![0, 0, 0])] {
        let mut cfg = ArrayConfig::new(Level::Raid10, 4);
        cfg.chunk_bytes = 4096;
        cfg.set_layout(layout).unwrap();
        cfg.disk_bytes = 64 * 4096;
        let mut st = ArrayStack::new(Array::new(cfg).unwrap(), toy8, false).unwrap();
        let mut ex = TimedExecutor::new(st.devices().unwrap(), exec.clone()).unwrap();
        // Block 0 three times: idle array; disk 0 busy; then, for n2, both
        // copies busy (disk 0's head at 1 is nearer than disk 1's, also at 1:
        // tie → first slot).
        let mut got = Vec::new();
        for t in 0..3 {
            let p = st.plan_request(&read(0), &ex).unwrap();
            got.extend(disk_of(&p));
            ex.submit(p, t).unwrap();
        }
        assert_eq!(got, expect, "{layout}");
    }

    // End to end: four simultaneous random reads on the mirror finish in
    // 20 ms (two per disk) instead of 40 ms on the first copy alone.
    let reqs: Vec<Request> = [3u64, 900, 40, 7000].iter().map(|&b| read(b)).collect();
    let mut st = ArrayStack::new(Array::new(ArrayConfig::new(Level::Raid1, 2)).unwrap(), make, false).unwrap();
    let r = run(
        &mut st,
        &mut [vec_source(reqs)],
        &ReplayConfig {
            discipline: Discipline::Open { speedup: 1.0 },
            exec,
        },
    )
    .unwrap();
    assert!(close(r.sim_time_ms, 20.0), "{}", r.sim_time_ms);
    assert!(close(r.avg_response_ms, 15.0));
}

// ---------- background rebuild ----------

mod rebuild {
    use super::*;
    use crate::array::{Array, ArrayConfig, Level};
    use crate::timed::rebuild::RebuildConfig;

    /// RAID-5 of 3 constant-service disks (`ms` per op), 64 KiB chunks,
    /// members of `rows` chunk rows, disk `failed` lost, rebuilt with `rc`.
    fn raid5_run(
        ms: f64,
        rows: u64,
        failed: u32,
        rc: Option<RebuildConfig>,
        reqs: Vec<Request>,
        disc: Discipline,
    ) -> super::super::Report {
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        a.fail(failed).unwrap();
        let mut st = ArrayStack::new(
            a,
            move || Ok(Box::new(ToyDisk::constant(ms)) as Box<dyn DeviceModel>),
            false,
        )
        .unwrap();
        if let Some(rc) = rc {
            st = st.with_rebuild(rc).unwrap();
        }
        let c = ReplayConfig {
            discipline: disc,
            exec: ExecConfig {
                sectors_per_block: st.sectors_per_block(),
                ..Default::default()
            },
        };
        run(&mut st, &mut [vec_source(reqs)], &c).unwrap()
    }

    fn open() -> Discipline {
        Discipline::Open { speedup: 1.0 }
    }

    fn rc(window: usize, min: u64, max: u64) -> RebuildConfig {
        RebuildConfig {
            start: 0,
            window,
            min_kbps: min,
            max_kbps: max,
            ..Default::default()
        }
    }

    #[test]
    fn idle_rebuild_at_unlimited_speed_is_rows_times_read_plus_write() {
        // Each row: read the 2 survivors in parallel (10 ms), XOR (0), write
        // the spare (10 ms); window 1: 4 rows × 20 ms = 80 ms.
        let r = raid5_run(10.0, 4, 0, Some(rc(1, 1000, u64::MAX)), vec![], open());
        let b = r.rebuild.as_ref().unwrap();
        assert!(b.finished);
        assert!(close(b.rebuild_ms, 80.0), "{}", b.rebuild_ms);
        assert_eq!((b.rebuild_rows, b.rebuild_reads, b.rebuild_writes), (4, 8, 4));
        assert_eq!((b.rebuild_read_blocks, b.rebuild_write_blocks), (8 * 16, 4 * 16));
        assert_eq!(b.pauses, 0);
        assert_eq!(r.requests, 0);
        assert!(close(r.sim_time_ms, 80.0));
        assert_eq!(r.devices.iter().map(|d| d.ops).sum::<u64>(), 12);
        assert_eq!(r.devices[0].ops, 4, "the spare is written once per row");
    }

    #[test]
    fn binding_max_speed_spaces_the_rows() {
        // 64 KiB rows, max 1600 KiB/s: a row may start every 40 ms. Row 0 at
        // 0 (done 20: speed 3200 > max, wait until 64/1600 s = 40 ms), row 1
        // at 40 (done 60, 128 KiB: wait until 80), row 2 at 80, row 3 at 120,
        // done 140.
        let r = raid5_run(10.0, 4, 0, Some(rc(1, 1000, 1600)), vec![], open());
        let b = r.rebuild.unwrap();
        assert!(close(b.rebuild_ms, 140.0), "{}", b.rebuild_ms);
        assert_eq!(b.pauses, 3);
        // Starting later shifts the whole rebuild.
        let mut late = rc(1, 1000, 1600);
        late.start = 1000 * MS;
        let r = raid5_run(10.0, 4, 0, Some(late), vec![], open());
        let b = r.rebuild.unwrap();
        assert!(close(b.rebuild_ms, 140.0) && close(r.sim_time_ms, 1140.0));
    }

    fn read(ms: f64, block: u64) -> Request {
        Request {
            time: ms / 1000.0,
            op: Op::Read,
            offset: block * 4096,
            len: 4096,
            tenant: 0,
            fs: Default::default(),
        }
    }

    #[test]
    fn rebuilt_rows_are_read_from_the_spare() {
        // No speed limit (min = max = ∞). Disk 0 lost; 64 KiB chunks = 16
        // blocks. At 0 the rebuild (scheduled first) reads row 0 on disks 1
        // and 2 (0..10) and writes disk 0 (10..20); a user read of block 16
        // (disk 1, row 0) waits behind it on disk 1: 10..20. Row 1 reads
        // 20..30. At 25 ms the user reads block 0 (disk 0, row 0 — rebuilt):
        // one read of the spare, 25..35, response 10 ms. Row 1's write waits
        // for it: 35..45; rows 2, 3: 45..65, 65..85.
        let free = rc(1, u64::MAX, u64::MAX);
        let r = raid5_run(
            10.0,
            4,
            0,
            Some(free.clone()),
            vec![read(0.0, 16), read(25.0, 0)],
            open(),
        );
        let b = r.rebuild.as_ref().unwrap();
        assert!(close(b.rebuild_ms, 85.0), "{}", b.rebuild_ms);
        assert!(close(r.avg_response_ms, 15.0), "{}", r.avg_response_ms);
        assert!(close(r.max_response_ms, 20.0));
        assert_eq!(r.devices.iter().map(|d| d.ops).sum::<u64>(), 12 + 2);
        assert_eq!(r.devices[0].ops, 5, "4 rebuild writes and the user's read of the spare");
        assert_eq!((b.user_during.requests, b.user_after.requests), (2, 0));
        let by = |c: &str| b.ops_by_cause.get(c).map(|o| (o.reads, o.writes));
        assert_eq!(by("user"), Some((2, 0)));
        assert_eq!(by("rebuild"), Some((8, 4)));
        assert_eq!(by("reconstruct-read"), None);
        // Block 96 (chunk 6: stripe 3, disk 0) is beyond the offset at 25 ms:
        // reconstructed from disks 1 and 2, the spare is not read.
        let r = raid5_run(10.0, 4, 0, Some(free), vec![read(0.0, 16), read(25.0, 96)], open());
        assert_eq!(r.devices.iter().map(|d| d.ops).sum::<u64>(), 12 + 1 + 2);
        assert_eq!(r.devices[0].ops, 4);
        let b = r.rebuild.unwrap();
        assert_eq!(b.ops_by_cause["reconstruct-read"].reads, 2);
        assert_eq!(b.ops_by_cause["user"].reads, 1);
    }

    #[test]
    fn user_io_throttles_the_rebuild_toward_min() {
        // Min 1000 KiB/s, no max. The user read at 0 (block 16, disk 1) ends
        // at 20 with row 0. At 20: 64 KiB / 20 ms = 3200 KiB/s > min and a
        // user request was issued 20 ms ago (< 500 ms: not idle): wait until
        // the speed is min, 64/1000 s = 64 ms. Row 1: 64..84; 128 KiB / 84 ms
        // > min, still busy: wait until 128 ms; row 2: 128..148; wait until
        // 192; row 3: 192..212.
        let r = raid5_run(10.0, 4, 0, Some(rc(1, 1000, u64::MAX)), vec![read(0.0, 16)], open());
        let b = r.rebuild.as_ref().unwrap();
        assert!(close(b.rebuild_ms, 212.0), "{}", b.rebuild_ms);
        assert_eq!(b.pauses, 3);
        // Past 500 ms of no user I/O the array is idle again: with the user
        // read at 0 and 40 rows, the rows after 500 ms go at full speed.
        let busy = raid5_run(10.0, 40, 0, Some(rc(1, 1000, u64::MAX)), vec![read(0.0, 16)], open());
        let idle = raid5_run(10.0, 40, 0, Some(rc(1, 1000, u64::MAX)), vec![], open());
        let (tb, ti) = (busy.rebuild.unwrap().rebuild_ms, idle.rebuild.unwrap().rebuild_ms);
        assert!(close(ti, 800.0), "{ti}");
        assert!(tb > ti && tb < ti + 500.0, "{tb} vs {ti}");
    }

    #[test]
    fn user_io_slows_the_rebuild_and_runs_are_deterministic() {
        // A random trace on a RAID-5 of 3 linear toy disks; window 4, MD's
        // default speeds. Addresses fold onto the small array.
        let reqs = random_trace(400, 7, 2);
        let go = |reqs: Vec<Request>| {
            let mut cfg = ArrayConfig::new(Level::Raid5, 3);
            cfg.disk_bytes = 64 * cfg.chunk_bytes;
            let mut a = Array::new(cfg).unwrap();
            a.fail(1).unwrap();
            let mk = || {
                Ok(Box::new(ToyDisk {
                    per_sector_ms: 0.005,
                    ..ToyDisk::linear(0.5, 0.0005, 200)
                }) as Box<dyn DeviceModel>)
            };
            let mut st = ArrayStack::new(a, mk, true)
                .unwrap()
                .with_rebuild(RebuildConfig::default())
                .unwrap();
            let c = ReplayConfig {
                discipline: open(),
                exec: ExecConfig {
                    sectors_per_block: st.sectors_per_block(),
                    ..Default::default()
                },
            };
            run(&mut st, &mut [vec_source(reqs)], &c).unwrap()
        };
        let with = go(reqs.clone());
        let without = go(vec![]);
        let (bw, bo) = (with.rebuild.clone().unwrap(), without.rebuild.clone().unwrap());
        assert!(bw.finished && bo.finished);
        assert_eq!(bw.rebuild_rows, 64);
        assert!(bw.rebuild_ms > bo.rebuild_ms, "{} vs {}", bw.rebuild_ms, bo.rebuild_ms);
        assert_eq!(with.requests, 400);
        assert_eq!(bw.user_during.requests + bw.user_after.requests, 400 - with.unreadable);
        assert_eq!(
            serde_json::to_string(&with).unwrap(),
            serde_json::to_string(&go(reqs)).unwrap()
        );
    }

    #[test]
    fn no_rebuild_keeps_the_report_unchanged() {
        let a = raid5_run(10.0, 4, 0, None, vec![read(0.0, 16), read(25.0, 0)], open());
        assert!(a.rebuild.is_none());
        assert!(!serde_json::to_string(&a).unwrap().contains("rebuild"));
        assert!(close(a.max_response_ms, 10.0));
    }

    #[test]
    fn rebuild_errors() {
        let mk = || Ok(Box::new(ToyDisk::constant(1.0)) as Box<dyn DeviceModel>);
        let mut cfg = ArrayConfig::new(Level::Raid0, 3);
        cfg.disk_bytes = 4 * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        a.fail(0).unwrap();
        assert!(ArrayStack::new(a, mk, false)
            .unwrap()
            .with_rebuild(RebuildConfig::default())
            .is_err());
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.disk_bytes = 4 * cfg.chunk_bytes;
        let a = Array::new(cfg).unwrap();
        assert!(ArrayStack::new(a.clone(), mk, false)
            .unwrap()
            .with_rebuild(RebuildConfig::default())
            .is_err());
        let mut a2 = a.clone();
        a2.fail(0).unwrap();
        a2.fail(1).unwrap();
        assert!(ArrayStack::new(a2, mk, false)
            .unwrap()
            .with_rebuild(RebuildConfig::default())
            .is_err());
        let mut a1 = a;
        a1.fail(0).unwrap();
        assert!(ArrayStack::new(a1, mk, false)
            .unwrap()
            .with_rebuild(rc(0, 1, 1))
            .is_err());
    }
}

#[test]
fn idle_class_waits_behind_normal_requests() {
    // Constant 10 ms device. A normal plan starts at once; an idle-class
    // plan and another normal plan arrive at the same time: the normal one
    // is served first (10..20 ms), the idle one last (20..30 ms).
    let mut ex = TimedExecutor::new(vec![Box::new(ToyDisk::constant(10.0))], ExecConfig::default()).unwrap();
    let one = |block: u64| {
        let mut p = IoPlan::default();
        p.push(
            Action::Disk(DiskOp {
                disk: 0,
                kind: DiskOpKind::Read,
                block,
                nblocks: 1,
                cause: Cause::User,
            }),
            &[],
        );
        p
    };
    ex.submit(one(0), 1).unwrap();
    let id = ex.reserve_id();
    ex.submit_idle_as(one(1), 2, id).unwrap();
    ex.submit(one(2), 3).unwrap();
    let mut done = Vec::new();
    while let Some(s) = ex.next_step() {
        match s {
            Step::Done { time, tag, .. } | Step::BgDone { time, tag } => done.push((tag, time)),
            _ => {}
        }
    }
    assert_eq!(done, vec![(1, 10_000_000), (3, 20_000_000), (2, 30_000_000)]);
    assert!(ex.is_done(id));
}

#[test]
fn released_writes_join_the_queue_before_the_device_chooses_when_asked() {
    // One disk, 10 ms per operation, C-LOOK. Plan 1 reads block 5000 then
    // writes it back (an RMW); plan 2 reads block 0, waiting from time 0.
    // At 10 ms the read completes. A block layer starts plan 2's read at
    // once (the write arrives to a busy disk: done at 30, plan 2 at 20).
    // DiskSim's driver lets the released write join first; C-LOOK from the
    // head's cylinder takes it (plan 1 done at 20), plan 2 after the wrap (30).
    let finish = |join: bool| {
        let mut ex = TimedExecutor::new(
            vec![Box::new(ToyDisk::constant(10.0))],
            ExecConfig {
                scheduler: "clook".into(),
                released_join_queue: join,
                ..Default::default()
            },
        )
        .unwrap();
        let op = |block, kind| {
            Action::Disk(DiskOp {
                disk: 0,
                kind,
                block,
                nblocks: 8,
                cause: Cause::User,
            })
        };
        let mut rmw = IoPlan::default();
        let r = rmw.push(op(5000, DiskOpKind::Read), &[]);
        rmw.push(op(5000, DiskOpKind::Write), &[r]);
        ex.submit(rmw, 1).unwrap();
        let mut other = IoPlan::default();
        other.push(op(0, DiskOpKind::Read), &[]);
        ex.submit(other, 2).unwrap();
        let mut done = Vec::new();
        while let Some(s) = ex.next_step() {
            if let Step::Done { time, tag, .. } = s {
                done.push((tag, time));
            }
        }
        done
    };
    assert_eq!(finish(false), vec![(2, 20 * MS), (1, 30 * MS)]);
    assert_eq!(finish(true), vec![(1, 20 * MS), (2, 30 * MS)]);
}

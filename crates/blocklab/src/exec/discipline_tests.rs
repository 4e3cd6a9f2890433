//! Each discipline against a fake clock, hand-worked: arrival times in,
//! issue and completion times out. The fake storage serves every request in
//! parallel (no queue) in a service time of its own, written in the
//! request's `offset` (ms; plus 100 in feedback's reference pass), so that
//! the timelines below follow from the discipline alone.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::*;
use crate::trace::Op;

const MS: Ns = 1_000_000;

fn rq(t_ms: f64, service_ms: u64) -> Request {
    Request {
        time: t_ms / 1000.0,
        op: Op::Read,
        offset: service_ms,
        len: 512,
        tenant: 0,
        fs: Default::default(),
    }
}

/// What the fake clock saw: `I` an issue, `D` a completion, with the tag
/// and the time in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    I(u64, f64),
    D(u64, f64),
}

#[derive(Default)]
struct FakeClock {
    now: Ns,
    pass: Option<Pass>,
    seq: u64,
    /// (time, order of arrival, is a completion, tag or token).
    queue: BinaryHeap<Reverse<(Ns, u64, bool, u64)>>,
    /// The measured pass's issues and completions.
    seen: Vec<Seen>,
    passes: Vec<(Pass, Ended)>,
}

impl FakeClock {
    fn push(&mut self, time: Ns, done: bool, id: u64) {
        self.seq += 1;
        self.queue.push(Reverse((time, self.seq, done, id)));
    }
    fn note(&mut self, s: Seen) {
        if self.pass == Some(Pass::Measured) {
            self.seen.push(s);
        }
    }
}

impl Clock for FakeClock {
    fn begin(&mut self, pass: Pass) -> Result<()> {
        assert!(self.queue.is_empty());
        self.pass = Some(pass);
        self.now = 0;
        Ok(())
    }
    /// A time already past wakes at once (after what is due now).
    fn wake_at(&mut self, time: Ns, token: u64) {
        self.push(time.max(self.now), false, token);
    }
    fn issue(&mut self, req: &Request, _base: f64, tag: u64) -> Result<()> {
        let extra = if self.pass == Some(Pass::Reference) { 100 } else { 0 };
        self.push(self.now + (req.offset + extra) * MS, true, tag);
        self.note(Seen::I(tag, self.now as f64 / 1e6));
        Ok(())
    }
    fn next(&mut self) -> Result<Option<Event>> {
        let Some(Reverse((time, _, done, id))) = self.queue.pop() else {
            return Ok(None);
        };
        assert!(time >= self.now, "time goes forward");
        self.now = time;
        Ok(Some(if done {
            self.note(Seen::D(id, time as f64 / 1e6));
            Event::Done { time, tag: id }
        } else {
            Event::Wake { time, token: id }
        }))
    }
    fn end(&mut self, ended: Ended) -> Result<()> {
        assert!(self.queue.is_empty(), "every request completed");
        self.passes.push((self.pass.unwrap(), ended));
        Ok(())
    }
}

fn run(streams: Vec<Vec<Request>>, d: Discipline) -> FakeClock {
    let mut clock = FakeClock::default();
    let mut sources: Vec<Source> = streams.into_iter().map(vec_source).collect();
    replay(&mut clock, &mut sources, &d).unwrap();
    clock
}

use Seen::{D, I};

/// Open at speed-up 2: arrivals 0, 10, 20 ms are due at 0, 5, 10 whatever
/// the storage does (services 15, 4, 15 ms); 1 completes before 0.
#[test]
fn open_issues_at_trace_times_over_the_speedup() {
    let c = run(
        vec![vec![rq(0.0, 15), rq(10.0, 4), rq(20.0, 15)]],
        Discipline::Open { speedup: 2.0 },
    );
    assert_eq!(
        c.seen,
        [I(0, 0.0), I(1, 5.0), D(1, 9.0), I(2, 10.0), D(0, 15.0), D(2, 25.0)]
    );
    assert_eq!(
        c.passes,
        [(
            Pass::Measured,
            Ended {
                issued: 3,
                out_of_order: 0
            }
        )]
    );
}

/// Two open streams, each from its own first request (100 s and 0 s): tags
/// are j·2 + s. A time that goes back is issued at once and counted.
#[test]
fn open_streams_start_at_their_first_request_and_count_times_that_go_back() {
    let c = run(
        vec![
            vec![rq(100_000.0, 1), rq(100_003.0, 1)],
            vec![rq(0.0, 1), rq(2.0, 1), rq(1.0, 1)],
        ],
        Discipline::Open { speedup: 1.0 },
    );
    assert_eq!(
        c.seen,
        [
            I(0, 0.0),
            I(1, 0.0),
            D(0, 1.0),
            D(1, 1.0),
            I(3, 2.0),
            I(5, 2.0),
            I(2, 3.0),
            D(3, 3.0),
            D(5, 3.0),
            D(2, 4.0)
        ]
    );
    assert_eq!(
        c.passes[0].1,
        Ended {
            issued: 5,
            out_of_order: 1
        }
    );
}

/// Closed, one outstanding, 2 ms of think time: services 10, 5, 10 ms.
#[test]
fn closed_one_issues_each_request_a_think_time_after_the_previous_completes() {
    let c = run(
        vec![vec![rq(0.0, 10), rq(0.0, 5), rq(50.0, 10)]],
        Discipline::Closed {
            outstanding: 1,
            think_ms: 2.0,
        },
    );
    assert_eq!(
        c.seen,
        [I(0, 0.0), D(0, 10.0), I(1, 12.0), D(1, 17.0), I(2, 19.0), D(2, 29.0)]
    );
}

/// Closed, two outstanding, no think time: services 10, 3, 5, 1 ms. Trace
/// times are ignored; each completion issues the next request at once.
#[test]
fn closed_two_keeps_two_in_flight() {
    let c = run(
        vec![vec![rq(0.0, 10), rq(100.0, 3), rq(200.0, 5), rq(300.0, 1)]],
        Discipline::Closed {
            outstanding: 2,
            think_ms: 0.0,
        },
    );
    assert_eq!(
        c.seen,
        [
            I(0, 0.0),
            I(1, 0.0),
            D(1, 3.0),
            I(2, 3.0),
            D(2, 8.0),
            I(3, 8.0),
            D(3, 9.0),
            D(0, 10.0)
        ]
    );
}

/// Feedback: the reference pass replays at trace times 0, 112, 114 ms with
/// services 110, 102, 102 ms: 0 completes at 110, so 1 (issued at 112) and
/// 2 (at 114) both depend on it, with think times 2 and 4 ms. Measured
/// (services 10, 2, 2 ms): 0 at 0, done at 10; 1 at 12, 2 at 14.
#[test]
fn feedback_issues_a_think_time_after_the_parent_completes() {
    let reqs = vec![rq(0.0, 10), rq(112.0, 2), rq(114.0, 2)];
    let c = run(
        vec![reqs.clone()],
        Discipline::Feedback {
            cpu_speedup: Some(1.0),
            window: 64,
        },
    );
    assert_eq!(
        c.seen,
        [I(0, 0.0), D(0, 10.0), I(1, 12.0), I(2, 14.0), D(1, 14.0), D(2, 16.0)]
    );
    assert_eq!(
        c.passes.iter().map(|p| p.0).collect::<Vec<_>>(),
        [Pass::Reference, Pass::Measured]
    );
    // Infinitely fast: each think time x becomes x[1 − f(x)].
    let c = run(
        vec![reqs],
        Discipline::Feedback {
            cpu_speedup: None,
            window: 64,
        },
    );
    let at = |x_ms: f64| (10 * MS + secs_to_ns(speed_up_interval(x_ms / 1e3, None))) as f64 / 1e6;
    assert_eq!(c.seen[2], I(1, at(2.0)));
    assert_eq!(c.seen[3], I(2, at(4.0)));
    assert!(at(2.0) < 10.2);
}

/// Feedback's window: with a window of 1, request 1 (no parent of its own in
/// the reference: it was issued before 0 completed) still waits until 0 was
/// issued; with its offset of 5 ms it goes at 5 ms, not before.
#[test]
fn feedback_without_a_parent_keeps_its_offset_and_waits_for_the_window() {
    let c = run(
        vec![vec![rq(0.0, 10), rq(5.0, 1), rq(200.0, 1)]],
        Discipline::Feedback {
            cpu_speedup: Some(1.0),
            window: 1,
        },
    );
    // Reference: 0 done at 110, 1 at 106; 2 issued at 200 after 0's
    // completion (handled last): parent 0, think 90 ms. Measured: 0 done at 10.
    assert_eq!(
        c.seen,
        [I(0, 0.0), I(1, 5.0), D(1, 6.0), D(0, 10.0), I(2, 100.0), D(2, 101.0)]
    );
}

#[test]
fn settings_that_make_no_replay_are_refused() {
    let mut clock = FakeClock::default();
    let mut none: Vec<Source> = Vec::new();
    let e = replay(&mut clock, &mut none, &Discipline::Open { speedup: 1.0 }).unwrap_err();
    assert!(e.to_string().contains("no trace"), "{e}");
    let mut one = vec![vec_source(vec![rq(0.0, 1)])];
    for (d, want) in [
        (Discipline::Open { speedup: 0.0 }, "speed-up"),
        (
            Discipline::Closed {
                outstanding: 0,
                think_ms: 0.0,
            },
            "outstanding",
        ),
        (
            Discipline::Feedback {
                cpu_speedup: Some(1.0),
                window: 0,
            },
            "window",
        ),
    ] {
        let e = replay(&mut clock, &mut one, &d).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

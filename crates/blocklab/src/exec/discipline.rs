//! Trace replay disciplines — when each request of a trace is issued —
//! written once over a [`Clock`]: simulated time in the timed executor
//! (`timed::replay`: its event queue), the wall clock in the real one
//! (`exec::real::wall_clock`: worker threads, or the stack served inline).
//!
//! * **open** — at its trace timestamp (relative to the stream's first
//!   request) divided by `speedup`, whatever the storage does.
//! * **closed** — `outstanding` requests per stream are kept in flight; a
//!   completion issues the stream's next request after a fixed think time
//!   (`think_ms`, 0: at once; timestamps ignored).
//! * **feedback** — Hsu & Smith, "The performance impact of I/O optimizations
//!   and disk improvements", IBM J. R&D 48(2), 2004, §3 "Modeling timing
//!   effects":
//!   > "we consider a request to be dependent on the last completed request,
//!   > and we issue a request only after its parent request has completed."
//!   > "We maintain an issue window of 64 requests. A request within this
//!   > window is issued when the request on which it is dependent completes
//!   > and the think time has elapsed."
//!   > "To account for multiprocessing workloads, we merge multiple traces to
//!   > form a workload with several independent streams of I/O, each obeying
//!   > the dependence relationship described above."
//!
//!   Our block traces do not record completion times, so (as the paper
//!   allows: "the original completion times") they come from a first pass:
//!   an open-loop replay of the trace at its own timestamps on the same
//!   storage ([`Pass::Reference`]). In that pass, request j's parent is the
//!   request of the same stream and tenant whose completion was handled last
//!   before j was issued (a completion at the very same instant counts if the
//!   clock handed it out first), and its think time is
//!   `issue(j) − completion(parent)`; a request issued before any completion
//!   of its stream and tenant has no parent and keeps its offset from the
//!   stream's start (the speed-up below applies to intervals after a
//!   completion only). In the second, measured pass, j is issued at
//!   `completion'(parent) + g(think)` where g is the processor speed-up
//!   transform below, but never before it enters the window: the window
//!   holds the 64 oldest not-yet-issued requests of each stream, in trace
//!   order (one window per stream keeps streams independent).
//!
//! Processor speed-up (same paper, "Workloads and traces"): "the processor
//! utilization during the intervals between the issuance of an I/O and the
//! last I/O completion is related to the length of the interval by a
//! function of the form f(x) = 1/(ax + b), where a = 0.0857 and b = 0.0105.
//! To model a processor that is n times faster than the one in the traced
//! system, we would scale only the system processing time by n, leaving the
//! user portion of the think time unchanged. Specifically, we would replace
//! an interval of length x with one of length x[1 - f(x) + f(x)/n]. [...] in
//! the limit when systems are infinitely fast [...] x[1 - f(x)]."
//! With x in seconds, 1/(ax + b) exceeds 1 for every x below 11.6 s (it is 95
//! at x = 0), so it cannot be a fraction; it is the utilization in percent
//! (95.2 % for very short intervals, 10.4 % at 1 s, 1.2 % at 10 s), and we
//! use f(x) = 1/(ax + b) / 100, capped at 1.
//!
//! Every request of every stream completes before a pass returns.
//!
//! Memory: open and closed replay stream the trace. Feedback keeps, per
//! request, its parent, think time and completion time (24 bytes) between
//! the two passes, and reads the trace twice.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::timed::engine::{secs_to_ns, Ns};
use crate::trace::Request;

pub const HS_A: f64 = 0.0857;
pub const HS_B: f64 = 0.0105;
pub const ISSUE_WINDOW: usize = 64;

/// Hsu–Smith processor utilization over an interval of `x_s` seconds
/// (a fraction; see the module comment for the percent reading).
pub fn cpu_fraction(x_s: f64) -> f64 {
    (1.0 / (HS_A * x_s + HS_B) / 100.0).min(1.0)
}

/// The interval `x_s` (seconds) on a processor `n` times faster
/// (`None`: infinitely fast): x[1 − f(x) + f(x)/n], or x[1 − f(x)].
pub fn speed_up_interval(x_s: f64, n: Option<f64>) -> f64 {
    let f = cpu_fraction(x_s);
    match n {
        Some(n) => x_s * (1.0 - f + f / n),
        None => x_s * (1.0 - f),
    }
}

/// When requests are issued.
#[derive(Debug, Clone, PartialEq)]
pub enum Discipline {
    Open {
        speedup: f64,
    },
    /// `think_ms`: delay between a completion and the next issue.
    Closed {
        outstanding: usize,
        think_ms: f64,
    },
    /// `cpu_speedup`: the processor speed-up n (1 keeps the think times);
    /// `None`: infinitely fast.
    Feedback {
        cpu_speedup: Option<f64>,
        window: usize,
    },
}

pub const REPLAYS: &[&str] = &["open", "closed", "feedback"];

impl Discipline {
    pub fn name(&self) -> &'static str {
        match self {
            Discipline::Open { .. } => "open",
            Discipline::Closed { .. } => "closed",
            Discipline::Feedback { .. } => "feedback",
        }
    }

    /// Settings that make no replay are refused.
    pub fn check(&self) -> Result<()> {
        match self {
            Discipline::Open { speedup } if !(speedup.is_finite() && *speedup > 0.0) => Err(Error::config(format!(
                "speed-up must be a positive number, got {speedup}"
            ))),
            Discipline::Closed { outstanding: 0, .. } => Err(Error::config("outstanding requests must be at least 1")),
            Discipline::Closed { think_ms, .. } if !(think_ms.is_finite() && *think_ms >= 0.0) => Err(Error::config(
                format!("think time must be a non-negative number of ms, got {think_ms}"),
            )),
            Discipline::Feedback {
                cpu_speedup: Some(n), ..
            } if !(n.is_finite() && *n > 0.0) => Err(Error::config(format!(
                "processor speed-up must be a positive number, got {n}"
            ))),
            Discipline::Feedback { window: 0, .. } => Err(Error::config("issue window must be at least 1")),
            _ => Ok(()),
        }
    }
}

/// A source of one stream: opens (or re-opens, for a second pass) the trace.
pub type Source<'a> = Box<dyn FnMut() -> Result<Box<dyn Iterator<Item = Result<Request>> + Send>> + 'a>;

/// A source over requests held in memory (tests, small synthetic runs).
pub fn vec_source<'a>(reqs: Vec<Request>) -> Source<'a> {
    Box::new(move || Ok(Box::new(reqs.clone().into_iter().map(Ok)) as Box<dyn Iterator<Item = Result<Request>> + Send>))
}

/// Which pass of a run a clock is asked to begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Feedback's first pass, standing for the traced system: it only
    /// yields the dependencies; its figures are not the run's (and the timed
    /// executor starts no rebuild in it).
    Reference,
    /// The pass whose figures are the run's.
    Measured,
}

/// What a discipline reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A wake-up asked for with [`Clock::wake_at`].
    Wake { time: Ns, token: u64 },
    /// The request issued under `tag` completed.
    Done { time: Ns, tag: u64 },
}

/// How a pass ended, for the clock's own checks and figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    pub issued: u64,
    /// Open loop: requests whose due time was before the previous one's.
    pub out_of_order: u64,
}

/// Time and storage as a discipline sees them. Times are ns since the pass
/// began.
pub trait Clock {
    /// Start a pass (fresh devices in simulated time; a new time origin).
    fn begin(&mut self, pass: Pass) -> Result<()>;
    /// Hand out `Event::Wake { time, token }` at `time`.
    fn wake_at(&mut self, time: Ns, token: u64);
    /// Issue `req` now, under `tag` (its completion comes back as
    /// `Event::Done { tag }`); `base` is its stream's first trace time.
    fn issue(&mut self, req: &Request, base: f64, tag: u64) -> Result<()>;
    /// The next event, in time order; `None` when nothing is left to happen.
    fn next(&mut self) -> Result<Option<Event>>;
    /// The pass is over: every request issued has completed.
    fn end(&mut self, ended: Ended) -> Result<()>;
}

/// Parent and think time of one request, from the first feedback pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dep {
    pub parent: Option<u64>,
    pub think_ns: Ns,
}

/// Replay `sources` (one independent stream each) with discipline `d` on
/// `clock`: one pass, or two for feedback.
pub fn replay(clock: &mut dyn Clock, sources: &mut [Source], d: &Discipline) -> Result<()> {
    d.check()?;
    if sources.is_empty() {
        return Err(Error::config("no trace to replay"));
    }
    match d {
        Discipline::Open { speedup } => {
            clock.begin(Pass::Measured)?;
            let ended = open(clock, sources, *speedup, None)?;
            clock.end(ended)
        }
        Discipline::Closed { outstanding, think_ms } => {
            clock.begin(Pass::Measured)?;
            let ended = closed(clock, sources, *outstanding, secs_to_ns(think_ms / 1e3))?;
            clock.end(ended)
        }
        Discipline::Feedback { cpu_speedup, window } => {
            let mut deps: Vec<Vec<Dep>> = vec![Vec::new(); sources.len()];
            clock.begin(Pass::Reference)?;
            let ended = open(clock, sources, 1.0, Some(&mut deps))?;
            clock.end(ended)?;
            clock.begin(Pass::Measured)?;
            let ended = feedback(clock, sources, &deps, *cpu_speedup, *window)?;
            clock.end(ended)
        }
    }
}

/// A request's identity in flight: stream `s`, index `j` in the stream.
#[inline]
fn tag(s: usize, j: u64, nsrc: usize) -> u64 {
    j * nsrc as u64 + s as u64
}
#[inline]
fn untag(t: u64, nsrc: usize) -> (usize, u64) {
    ((t % nsrc as u64) as usize, t / nsrc as u64)
}

struct Stream {
    it: Box<dyn Iterator<Item = Result<Request>> + Send>,
    next: Option<Request>,
    base: f64,
    pulled: u64,
}

impl Stream {
    fn open(src: &mut Source) -> Result<Self> {
        let mut it = src()?;
        let next = it.next().transpose()?;
        let base = next.map(|r| r.time).unwrap_or(0.0);
        Ok(Stream {
            it,
            next,
            base,
            pulled: 0,
        })
    }
    /// Take the current request (index `pulled`) and read the following one.
    fn take(&mut self) -> Result<Option<(u64, Request)>> {
        let Some(r) = self.next else { return Ok(None) };
        self.next = self.it.next().transpose()?;
        self.pulled += 1;
        Ok(Some((self.pulled - 1, r)))
    }
}

fn open_streams(sources: &mut [Source]) -> Result<Vec<Stream>> {
    sources.iter_mut().map(Stream::open).collect()
}

/// Open loop. With `deps`, also records each request's parent and think time.
fn open(
    clock: &mut dyn Clock,
    sources: &mut [Source],
    speedup: f64,
    mut deps: Option<&mut Vec<Vec<Dep>>>,
) -> Result<Ended> {
    let n = sources.len();
    let mut streams = open_streams(sources)?;
    let at = |st: &Stream, r: &Request| secs_to_ns((r.time - st.base) / speedup);
    for (s, st) in streams.iter().enumerate() {
        if let Some(r) = &st.next {
            clock.wake_at(at(st, r), s as u64);
        }
    }
    // (stream, tenant) -> last completed request.
    let mut last_done: FxHashMap<(usize, u32), (u64, Ns)> = FxHashMap::default();
    let mut tenants: FxHashMap<u64, u32> = FxHashMap::default();
    let mut ended = Ended::default();
    while let Some(event) = clock.next()? {
        match event {
            Event::Wake { time, token } => {
                let s = token as usize;
                let (j, r) = streams[s].take()?.expect("wake of an exhausted stream");
                clock.issue(&r, streams[s].base, tag(s, j, n))?;
                ended.issued += 1;
                if let Some(d) = deps.as_deref_mut() {
                    let dep = match last_done.get(&(s, r.tenant)) {
                        Some(&(p, c)) => Dep {
                            parent: Some(p),
                            think_ns: time.saturating_sub(c),
                        },
                        None => Dep {
                            parent: None,
                            think_ns: time,
                        },
                    };
                    d[s].push(dep);
                    tenants.insert(tag(s, j, n), r.tenant);
                }
                if let Some(nr) = streams[s].next {
                    let t = at(&streams[s], &nr);
                    if t < time {
                        ended.out_of_order += 1;
                    }
                    clock.wake_at(t, s as u64);
                }
            }
            Event::Done { time, tag: t } => {
                if deps.is_some() {
                    let (s, j) = untag(t, n);
                    let tenant = tenants.remove(&t).unwrap_or(0);
                    last_done.insert((s, tenant), (j, time));
                }
            }
        }
    }
    Ok(ended)
}

/// Closed loop: `outstanding` per stream, each completion issuing the
/// stream's next request `think` ns later.
fn closed(clock: &mut dyn Clock, sources: &mut [Source], outstanding: usize, think: Ns) -> Result<Ended> {
    let n = sources.len();
    let mut streams = open_streams(sources)?;
    // Requests taken from a stream and waiting out their think time, in
    // order (the think time is constant, so wakes come back in this order).
    let mut thinking: Vec<VecDeque<(u64, Request)>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut ended = Ended::default();
    for (s, st) in streams.iter_mut().enumerate() {
        for _ in 0..outstanding {
            if let Some((j, r)) = st.take()? {
                clock.issue(&r, st.base, tag(s, j, n))?;
                ended.issued += 1;
            }
        }
    }
    while let Some(event) = clock.next()? {
        match event {
            Event::Done { time, tag: t } => {
                let (s, _) = untag(t, n);
                if let Some((j, r)) = streams[s].take()? {
                    if think == 0 {
                        clock.issue(&r, streams[s].base, tag(s, j, n))?;
                        ended.issued += 1;
                    } else {
                        clock.wake_at(time.saturating_add(think), tag(s, j, n));
                        thinking[s].push_back((j, r));
                    }
                }
            }
            Event::Wake { token, .. } => {
                let (s, _) = untag(token, n);
                let (j, r) = thinking[s].pop_front().expect("wake without a thinking request");
                clock.issue(&r, streams[s].base, tag(s, j, n))?;
                ended.issued += 1;
            }
        }
    }
    Ok(ended)
}

#[derive(Clone, Copy, PartialEq)]
enum WState {
    WaitParent,
    Scheduled,
    Issued,
}

struct WEntry {
    j: u64,
    req: Request,
    dep: Dep,
    state: WState,
}

/// Hsu–Smith feedback: the measured pass over the dependencies `deps`.
fn feedback(
    clock: &mut dyn Clock,
    sources: &mut [Source],
    deps: &[Vec<Dep>],
    cpu: Option<f64>,
    window: usize,
) -> Result<Ended> {
    let n = sources.len();
    let mut streams = open_streams(sources)?;
    let think = |d: &Dep| -> Ns {
        match cpu {
            Some(1.0) => d.think_ns,
            _ => secs_to_ns(speed_up_interval(d.think_ns as f64 / 1e9, cpu)),
        }
    };
    let mut done_at: Vec<Vec<Ns>> = deps.iter().map(|d| vec![Ns::MAX; d.len()]).collect();
    let mut windows: Vec<VecDeque<WEntry>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut ended = Ended::default();

    // Fill stream s's window, scheduling entries whose parent is known.
    let refill =
        |s: usize, clock: &mut dyn Clock, st: &mut Stream, w: &mut VecDeque<WEntry>, done_at: &[Ns]| -> Result<()> {
            while w.len() < window {
                let Some((j, req)) = st.take()? else { break };
                let dep = *deps[s]
                    .get(j as usize)
                    .ok_or_else(|| Error::config("trace changed between the two feedback passes (more requests)"))?;
                let mut e = WEntry {
                    j,
                    req,
                    dep,
                    state: WState::WaitParent,
                };
                // No parent: the request waits for no I/O, only for the trace's
                // clock; it keeps its original offset (no speed-up applies).
                let at = match dep.parent {
                    None => Some(dep.think_ns),
                    Some(p) => Some(done_at[p as usize])
                        .filter(|&c| c != Ns::MAX)
                        .map(|c| c.saturating_add(think(&dep))),
                };
                if let Some(t) = at {
                    clock.wake_at(t, tag(s, j, n));
                    e.state = WState::Scheduled;
                }
                w.push_back(e);
            }
            Ok(())
        };
    for s in 0..n {
        refill(s, clock, &mut streams[s], &mut windows[s], &done_at[s])?;
    }
    while let Some(event) = clock.next()? {
        match event {
            Event::Wake { token, .. } => {
                let (s, j) = untag(token, n);
                let w = &mut windows[s];
                let e = w
                    .iter_mut()
                    .find(|e| e.j == j)
                    .expect("wake of a request outside the window");
                e.state = WState::Issued;
                let req = e.req;
                clock.issue(&req, streams[s].base, token)?;
                ended.issued += 1;
                while w.front().is_some_and(|e| e.state == WState::Issued) {
                    w.pop_front();
                }
                refill(s, clock, &mut streams[s], &mut windows[s], &done_at[s])?;
            }
            Event::Done { time, tag: t } => {
                let (s, j) = untag(t, n);
                done_at[s][j as usize] = time;
                for e in windows[s].iter_mut() {
                    if e.state == WState::WaitParent && e.dep.parent == Some(j) {
                        e.state = WState::Scheduled;
                        clock.wake_at(time.saturating_add(think(&e.dep)), tag(s, e.j, n));
                    }
                }
            }
        }
    }
    let expected: u64 = deps.iter().map(|d| d.len() as u64).sum();
    if ended.issued != expected {
        return Err(Error::config(format!(
            "trace changed between the two feedback passes ({} requests, expected {expected})",
            ended.issued
        )));
    }
    Ok(ended)
}

#[cfg(test)]
#[path = "discipline_tests.rs"]
mod tests;

//! Trace replay disciplines: when each request of a trace is issued.
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
//!   storage. In that pass, request j's parent is the request of the same
//!   stream and tenant whose completion was handled last before j was issued
//!   (a completion at the very same nanosecond counts if the engine handled
//!   it first), and its think time is `issue(j) − completion(parent)`; a
//!   request issued before any completion of its stream and tenant has no
//!   parent and keeps its offset from the stream's start (the speed-up below
//!   applies to intervals after a completion only). In the second,
//!   measured pass, j is issued at `completion'(parent) + g(think)` where g is
//!   the processor speed-up transform below, but never before it enters the
//!   window: the window holds the 64 oldest not-yet-issued requests of each
//!   stream, in trace order (one window per stream keeps streams independent).
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
//! Every request of every stream completes before a run returns.
//!
//! Memory: open and closed replay stream the trace. Feedback keeps, per
//! request, its parent, think time and completion time (24 bytes) between
//! the two passes, and reads the trace twice.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::engine::{secs_to_ns, Ns};
use super::executor::{ExecConfig, Step, TimedExecutor};
use super::metrics::Report;
use super::rebuild::RebuildReport;
use crate::device::DeviceModel;
use crate::error::{Error, Result};
use crate::stack::address::AddressMap;
use crate::stack::layer::Target;
use crate::stack::spec::TenantMap;
pub use crate::stack::target::{sector_range, ArrayStack, SingleDisk};
use crate::trace::{Op, Request};

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

impl Discipline {
    pub fn name(&self) -> &'static str {
        match self {
            Discipline::Open { .. } => "open",
            Discipline::Closed { .. } => "closed",
            Discipline::Feedback { .. } => "feedback",
        }
    }

    fn check(&self) -> Result<()> {
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

pub const REPLAYS: &[&str] = &["open", "closed", "feedback"];

/// The storage under the replayer: the devices, and what happens to a
/// request (a composed stack, `crate::stack`, or a bare target).
pub trait Stack {
    /// Fresh devices (each pass of a run starts from new devices, and the
    /// stack forgets what it knew of the old ones).
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>>;
    /// 512-byte sectors per block of the plans the stack submits.
    fn sectors_per_block(&self) -> u64;
    /// Issue one user request now: submit its plan to `ex` under `tag` (its
    /// completion comes back as `Step::Done { tag }`); `ex` also shows the
    /// devices' load (for choices such as which mirror to read).
    fn issue(&mut self, req: &Request, tag: u64, ex: &mut TimedExecutor) -> Result<()>;
    /// Start background work (rebuild) on the fresh devices of a pass.
    fn start_background(&mut self, _ex: &mut TimedExecutor) -> Result<()> {
        Ok(())
    }
    /// React to a background step (`Step::BgWake` / `Step::BgDone`).
    fn background(&mut self, _step: Step, _ex: &mut TimedExecutor) -> Result<()> {
        Ok(())
    }
    /// Nothing is left to happen: start the work of the end of a run (a
    /// cache's final write-back). Returns whether anything was started.
    fn drain(&mut self, _ex: &mut TimedExecutor) -> Result<bool> {
        Ok(false)
    }
    /// A user request completed (for statistics split by background phase).
    fn user_done(&mut self, _time: Ns, _start: Ns, _unreadable: bool) {}
    /// What the background rebuild did in the last pass, if one ran.
    fn rebuild_report(&self) -> Option<RebuildReport> {
        None
    }
}

/// A bare target (one disk, an array) is a stack: requests go to it as
/// they are (tenants share its address space, as `tenant_map = "ignore"`).
impl<T: Target> Stack for T {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        Target::devices(self)
    }
    fn sectors_per_block(&self) -> u64 {
        Target::sectors_per_block(self)
    }
    fn issue(&mut self, req: &Request, tag: u64, ex: &mut TimedExecutor) -> Result<()> {
        let bs = Target::sectors_per_block(self) * 512;
        let io = AddressMap::new(TenantMap::Ignore, bs, None)?.io(req)?;
        let plan = self.plan(&io, &*ex)?;
        let id = ex.reserve_id();
        ex.submit_user(plan, tag, id, req.op == Op::Write)
    }
    fn start_background(&mut self, ex: &mut TimedExecutor) -> Result<()> {
        Target::start_background(self, ex)
    }
    fn background(&mut self, step: Step, ex: &mut TimedExecutor) -> Result<()> {
        Target::background(self, step, ex)
    }
    fn user_done(&mut self, time: Ns, start: Ns, unreadable: bool) {
        Target::user_done(self, time, start, unreadable)
    }
    fn rebuild_report(&self) -> Option<RebuildReport> {
        Target::rebuild_report(self)
    }
}

/// The next user step: background steps are handed to the stack on the way;
/// when nothing is left, the stack may start its end-of-run work.
fn next_user(ex: &mut TimedExecutor, stack: &mut dyn Stack) -> Result<Option<Step>> {
    loop {
        match ex.next_step() {
            None => {
                if !stack.drain(ex)? {
                    return Ok(None);
                }
            }
            Some(s) if s.is_background() => stack.background(s, ex)?,
            Some(s) => {
                if let Step::Done {
                    time,
                    start,
                    unreadable,
                    ..
                } = s
                {
                    stack.user_done(time, start, unreadable);
                }
                return Ok(Some(s));
            }
        }
    }
}

/// A source of one stream: opens (or re-opens, for a second pass) the trace.
pub type Source<'a> = Box<dyn FnMut() -> Result<Box<dyn Iterator<Item = Result<Request>> + Send>> + 'a>;

/// A source over requests held in memory (tests, small synthetic runs).
pub fn vec_source<'a>(reqs: Vec<Request>) -> Source<'a> {
    Box::new(move || Ok(Box::new(reqs.clone().into_iter().map(Ok)) as Box<dyn Iterator<Item = Result<Request>> + Send>))
}

#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub discipline: Discipline,
    pub exec: ExecConfig,
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

/// Parent and think time of one request, from the first feedback pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dep {
    pub parent: Option<u64>,
    pub think_ns: Ns,
}

/// Replay `sources` (one independent stream each) on `stack`.
pub fn run(stack: &mut dyn Stack, sources: &mut [Source], cfg: &ReplayConfig) -> Result<Report> {
    run_with_reference(stack, None, sources, cfg)
}

/// As [`run`]; in feedback mode the original completion times (hence the
/// dependencies and think times) come from an open-loop pass on `reference`
/// — the traced system — instead of `stack` itself.
pub fn run_with_reference(
    stack: &mut dyn Stack,
    reference: Option<&mut dyn Stack>,
    sources: &mut [Source],
    cfg: &ReplayConfig,
) -> Result<Report> {
    cfg.discipline.check()?;
    if sources.is_empty() {
        return Err(Error::config("no trace to replay"));
    }
    let mut report = match &cfg.discipline {
        Discipline::Open { speedup } => open_pass(stack, sources, &cfg.exec, *speedup, None)?,
        Discipline::Closed { outstanding, think_ms } => {
            closed(stack, sources, &cfg.exec, *outstanding, secs_to_ns(think_ms / 1e3))?
        }
        Discipline::Feedback { cpu_speedup, window } => {
            let mut deps: Vec<Vec<Dep>> = vec![Vec::new(); sources.len()];
            // Pass 1 only derives the dependencies; its metrics are discarded.
            match reference {
                Some(r) => open_pass(r, sources, &cfg.exec, 1.0, Some(&mut deps))?,
                None => open_pass(stack, sources, &cfg.exec, 1.0, Some(&mut deps))?,
            };
            feedback(stack, sources, &cfg.exec, &deps, *cpu_speedup, *window)?
        }
    };
    report.replay = cfg.discipline.name().into();
    report.streams = sources.len();
    report.rebuild = stack.rebuild_report();
    Ok(report)
}

/// The executor's settings for a pass on `stack` (its plans' block unit).
fn pass_config(stack: &dyn Stack, ecfg: &ExecConfig) -> ExecConfig {
    ExecConfig {
        sectors_per_block: stack.sectors_per_block(),
        ..ecfg.clone()
    }
}

/// Issue `r` (of a stream starting at trace time `base`), measured unless
/// it falls in the warm-up (the stream's first `warmup_ns` of trace time).
fn issue(stack: &mut dyn Stack, ex: &mut TimedExecutor, base: f64, r: &Request, tag: u64) -> Result<()> {
    let warmup = ex.warmup_ns();
    if warmup > 0 {
        ex.set_measuring(secs_to_ns((r.time - base).max(0.0)) >= warmup);
    }
    stack.issue(r, tag, ex)
}

fn check_all_done(ex: &TimedExecutor, issued: u64) -> Result<()> {
    if ex.in_flight() != 0 || ex.metrics.completed() != issued {
        return Err(Error::config(format!(
            "internal: {} of {} requests completed",
            ex.metrics.completed(),
            issued
        )));
    }
    Ok(())
}

/// Open loop. With `deps`, also records each request's parent and think time.
fn open_pass(
    stack: &mut dyn Stack,
    sources: &mut [Source],
    ecfg: &ExecConfig,
    speedup: f64,
    mut deps: Option<&mut Vec<Vec<Dep>>>,
) -> Result<Report> {
    let n = sources.len();
    let mut ex = TimedExecutor::new(stack.devices()?, pass_config(stack, ecfg))?;
    // The first feedback pass stands for the traced system: no rebuild there.
    if deps.is_none() {
        stack.start_background(&mut ex)?;
    }
    let mut streams = sources.iter_mut().map(Stream::open).collect::<Result<Vec<_>>>()?;
    let at = |st: &Stream, r: &Request| secs_to_ns((r.time - st.base) / speedup);
    for (s, st) in streams.iter().enumerate() {
        if let Some(r) = &st.next {
            ex.wake_at(at(st, r), s as u64);
        }
    }
    // (stream, tenant) -> last completed request.
    let mut last_done: FxHashMap<(usize, u32), (u64, Ns)> = FxHashMap::default();
    let mut tenants: FxHashMap<u64, u32> = FxHashMap::default();
    let (mut issued, mut out_of_order) = (0u64, 0u64);
    while let Some(step) = next_user(&mut ex, stack)? {
        match step {
            // `next_user` hands background steps to the stack.
            Step::BgWake { .. } | Step::BgDone { .. } => {}
            Step::Wake { time, token } => {
                let s = token as usize;
                let (j, r) = streams[s].take()?.expect("wake of an exhausted stream");
                issue(stack, &mut ex, streams[s].base, &r, tag(s, j, n))?;
                issued += 1;
                if let Some(d) = deps.as_deref_mut() {
                    let dep = match last_done.get(&(s, r.tenant)) {
                        Some(&(p, c)) => Dep {
                            parent: Some(p),
                            think_ns: time - c,
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
                        out_of_order += 1;
                    }
                    ex.wake_at(t, s as u64);
                }
            }
            Step::Done { time, tag: t, .. } => {
                if deps.is_some() {
                    let (s, j) = untag(t, n);
                    let tenant = tenants.remove(&t).unwrap_or(0);
                    last_done.insert((s, tenant), (j, time));
                }
            }
        }
    }
    check_all_done(&ex, issued)?;
    let mut rep = ex.report();
    rep.out_of_order = out_of_order;
    Ok(rep)
}

fn closed(
    stack: &mut dyn Stack,
    sources: &mut [Source],
    ecfg: &ExecConfig,
    outstanding: usize,
    think: Ns,
) -> Result<Report> {
    let n = sources.len();
    let mut ex = TimedExecutor::new(stack.devices()?, pass_config(stack, ecfg))?;
    stack.start_background(&mut ex)?;
    let mut streams = sources.iter_mut().map(Stream::open).collect::<Result<Vec<_>>>()?;
    // Requests taken from a stream and waiting out their think time, in
    // order (the think time is constant, so wakes come back in this order).
    let mut thinking: Vec<VecDeque<(u64, Request)>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut issued = 0u64;
    for (s, st) in streams.iter_mut().enumerate() {
        for _ in 0..outstanding {
            if let Some((j, r)) = st.take()? {
                issue(stack, &mut ex, st.base, &r, tag(s, j, n))?;
                issued += 1;
            }
        }
    }
    while let Some(step) = next_user(&mut ex, stack)? {
        match step {
            // `next_user` hands background steps to the stack.
            Step::BgWake { .. } | Step::BgDone { .. } => {}
            Step::Done { time, tag: t, .. } => {
                let (s, _) = untag(t, n);
                if let Some((j, r)) = streams[s].take()? {
                    if think == 0 {
                        issue(stack, &mut ex, streams[s].base, &r, tag(s, j, n))?;
                        issued += 1;
                    } else {
                        ex.wake_at(time.saturating_add(think), tag(s, j, n));
                        thinking[s].push_back((j, r));
                    }
                }
            }
            Step::Wake { token, .. } => {
                let (s, _) = untag(token, n);
                let (j, r) = thinking[s].pop_front().expect("wake without a thinking request");
                issue(stack, &mut ex, streams[s].base, &r, tag(s, j, n))?;
                issued += 1;
            }
        }
    }
    check_all_done(&ex, issued)?;
    Ok(ex.report())
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

fn feedback(
    stack: &mut dyn Stack,
    sources: &mut [Source],
    ecfg: &ExecConfig,
    deps: &[Vec<Dep>],
    cpu: Option<f64>,
    window: usize,
) -> Result<Report> {
    let n = sources.len();
    let mut ex = TimedExecutor::new(stack.devices()?, pass_config(stack, ecfg))?;
    stack.start_background(&mut ex)?;
    let mut streams = sources.iter_mut().map(Stream::open).collect::<Result<Vec<_>>>()?;
    let think = |d: &Dep| -> Ns {
        match cpu {
            Some(1.0) => d.think_ns,
            _ => secs_to_ns(speed_up_interval(d.think_ns as f64 / 1e9, cpu)),
        }
    };
    let mut done_at: Vec<Vec<Ns>> = deps.iter().map(|d| vec![Ns::MAX; d.len()]).collect();
    let mut windows: Vec<VecDeque<WEntry>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut issued = 0u64;

    // Fill stream s's window, scheduling entries whose parent is known.
    let refill =
        |s: usize, ex: &mut TimedExecutor, st: &mut Stream, w: &mut VecDeque<WEntry>, done_at: &[Ns]| -> Result<()> {
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
                    ex.wake_at(t, tag(s, j, n));
                    e.state = WState::Scheduled;
                }
                w.push_back(e);
            }
            Ok(())
        };
    for s in 0..n {
        refill(s, &mut ex, &mut streams[s], &mut windows[s], &done_at[s])?;
    }
    while let Some(step) = next_user(&mut ex, stack)? {
        match step {
            // `next_user` hands background steps to the stack.
            Step::BgWake { .. } | Step::BgDone { .. } => {}
            Step::Wake { token, .. } => {
                let (s, j) = untag(token, n);
                let w = &mut windows[s];
                let e = w
                    .iter_mut()
                    .find(|e| e.j == j)
                    .expect("wake of a request outside the window");
                e.state = WState::Issued;
                let req = e.req;
                issue(stack, &mut ex, streams[s].base, &req, token)?;
                issued += 1;
                while w.front().is_some_and(|e| e.state == WState::Issued) {
                    w.pop_front();
                }
                refill(s, &mut ex, &mut streams[s], &mut windows[s], &done_at[s])?;
            }
            Step::Done { time, tag: t, .. } => {
                let (s, j) = untag(t, n);
                done_at[s][j as usize] = time;
                for e in windows[s].iter_mut() {
                    if e.state == WState::WaitParent && e.dep.parent == Some(j) {
                        e.state = WState::Scheduled;
                        ex.wake_at(time.saturating_add(think(&e.dep)), tag(s, e.j, n));
                    }
                }
            }
        }
    }
    let expected: u64 = deps.iter().map(|d| d.len() as u64).sum();
    if issued != expected {
        return Err(Error::config(format!(
            "trace changed between the two feedback passes ({issued} requests, expected {expected})"
        )));
    }
    check_all_done(&ex, issued)?;
    Ok(ex.report())
}

//! Trace replay in simulated time: the disciplines of
//! `exec::discipline` (open, closed, Hsu–Smith feedback; described there)
//! over a [`Clock`] whose time is the timed executor's event queue, issuing
//! to a [`Stack`]. Each pass runs on fresh devices; a run's report is its
//! measured pass's.

use super::engine::{secs_to_ns, Ns};
use super::executor::{ExecConfig, Step, TimedExecutor};
use super::metrics::Report;
use super::rebuild::RebuildReport;
use crate::device::DeviceModel;
use crate::error::{Error, Result};
use crate::exec::discipline::{self, Clock, Ended, Event, Pass};
pub use crate::exec::discipline::{
    cpu_fraction, speed_up_interval, vec_source, Dep, Discipline, Source, HS_A, HS_B, ISSUE_WINDOW, REPLAYS,
};
use crate::stack::address::AddressMap;
use crate::stack::layer::Target;
use crate::stack::spec::TenantMap;
pub use crate::stack::target::{sector_range, ArrayStack, SingleDisk};
use crate::trace::{Op, Request};

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

#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub discipline: Discipline,
    pub exec: ExecConfig,
}

/// Replay `sources` (one independent stream each) on `stack`.
pub fn run(stack: &mut dyn Stack, sources: &mut [Source], cfg: &ReplayConfig) -> Result<Report> {
    run_with_reference(stack, None, sources, cfg)
}

/// As [`run`]; in feedback mode the original completion times (hence the
/// dependencies and think times) come from an open-loop pass on `reference`
/// — the traced system — instead of `stack` itself.
pub fn run_with_reference<'a>(
    stack: &'a mut dyn Stack,
    reference: Option<&'a mut dyn Stack>,
    sources: &mut [Source],
    cfg: &ReplayConfig,
) -> Result<Report> {
    let mut clock = SimClock {
        stack,
        reference,
        exec: &cfg.exec,
        on_reference: false,
        ex: None,
        report: None,
    };
    discipline::replay(&mut clock, sources, &cfg.discipline)?;
    let mut report = clock.report.take().expect("a replay ends with a measured pass");
    report.replay = cfg.discipline.name().into();
    report.streams = sources.len();
    report.rebuild = clock.stack.rebuild_report();
    Ok(report)
}

/// Simulated time: each pass a fresh [`TimedExecutor`] on fresh devices of
/// the stack (or, for feedback's reference pass, of the reference stack),
/// whose event queue orders wakes and completions.
struct SimClock<'a, 'c> {
    stack: &'a mut dyn Stack,
    reference: Option<&'a mut dyn Stack>,
    exec: &'c ExecConfig,
    /// The pass running is feedback's reference pass.
    on_reference: bool,
    ex: Option<TimedExecutor>,
    /// The report of the last pass.
    report: Option<Report>,
}

/// The stack a pass runs on: the reference stack in feedback's reference
/// pass, if there is one; else the stack.
fn pass_stack<'s, 'a>(
    stack: &'s mut &'a mut dyn Stack,
    reference: &'s mut Option<&'a mut dyn Stack>,
    on_reference: bool,
) -> &'s mut (dyn Stack + 'a) {
    match (reference, on_reference) {
        (Some(r), true) => &mut **r,
        _ => &mut **stack,
    }
}

impl<'a> SimClock<'a, '_> {
    /// The pass's stack and executor.
    fn parts(&mut self) -> (&mut (dyn Stack + 'a), &mut TimedExecutor) {
        let stack = pass_stack(&mut self.stack, &mut self.reference, self.on_reference);
        (stack, self.ex.as_mut().expect("a pass has begun"))
    }
}

impl Clock for SimClock<'_, '_> {
    fn begin(&mut self, pass: Pass) -> Result<()> {
        self.on_reference = pass == Pass::Reference;
        let exec = self.exec;
        let stack = pass_stack(&mut self.stack, &mut self.reference, self.on_reference);
        // The executor's settings for a pass on this stack (its plans' block unit).
        let cfg = ExecConfig {
            sectors_per_block: stack.sectors_per_block(),
            ..exec.clone()
        };
        let mut ex = TimedExecutor::new(stack.devices()?, cfg)?;
        // The reference pass stands for the traced system: no rebuild there.
        if pass == Pass::Measured {
            stack.start_background(&mut ex)?;
        }
        self.ex = Some(ex);
        Ok(())
    }

    fn wake_at(&mut self, time: Ns, token: u64) {
        self.ex.as_mut().expect("a pass has begun").wake_at(time, token);
    }

    /// Measured unless it falls in the warm-up (the stream's first
    /// `warmup_ns` of trace time).
    fn issue(&mut self, req: &Request, base: f64, tag: u64) -> Result<()> {
        let (stack, ex) = self.parts();
        let warmup = ex.warmup_ns();
        if warmup > 0 {
            ex.set_measuring(secs_to_ns((req.time - base).max(0.0)) >= warmup);
        }
        stack.issue(req, tag, ex)
    }

    /// The next user step: background steps are handed to the stack on the
    /// way; when nothing is left, the stack may start its end-of-run work.
    fn next(&mut self) -> Result<Option<Event>> {
        let (stack, ex) = self.parts();
        loop {
            match ex.next_step() {
                None => {
                    if !stack.drain(ex)? {
                        return Ok(None);
                    }
                }
                Some(s) if s.is_background() => stack.background(s, ex)?,
                Some(Step::Wake { time, token }) => return Ok(Some(Event::Wake { time, token })),
                Some(Step::Done {
                    time,
                    tag,
                    start,
                    unreadable,
                }) => {
                    stack.user_done(time, start, unreadable);
                    return Ok(Some(Event::Done { time, tag }));
                }
                Some(Step::BgWake { .. } | Step::BgDone { .. }) => unreachable!("background steps are handled above"),
            }
        }
    }

    fn end(&mut self, ended: Ended) -> Result<()> {
        let mut ex = self.ex.take().expect("a pass has begun");
        if ex.in_flight() != 0 || ex.metrics.completed() != ended.issued {
            return Err(Error::config(format!(
                "internal: {} of {} requests completed",
                ex.metrics.completed(),
                ended.issued
            )));
        }
        let mut report = ex.report();
        report.out_of_order = ended.out_of_order;
        self.report = Some(report);
        Ok(())
    }
}

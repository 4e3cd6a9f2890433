//! Background rebuild onto spares in simulated time (Linux MD's recovery).
//!
//! At `start` the failed disks of the array are replaced by fresh spares
//! ([`Array::start_recovery`]) and recovery walks the members' chunk rows in
//! order, one row per step ([`Array::plan_rebuild_row`]), keeping at most
//! `window` steps in flight. The recovery offset (MD's `recovery_offset`)
//! is the number of leading rows whose step has completed: user reads of
//! those rows read the spare, user writes to them write it; the other rows
//! stay degraded. When every row is done the spares become ordinary members.
//!
//! Speed limits, as MD's `md_do_sync`: before each step the recovery
//! measures its speed and, if the speed is above `min_kbps` and (above
//! `max_kbps` or the array is not idle), pauses. Exactly (see
//! `docs/timed.md`, "Rebuild"):
//!
//! * speed = KiB of rows completed since the oldest mark ÷ seconds since
//!   it (MD: `recovery_done = io_sectors − recovery_active`); a mark (time,
//!   KiB completed) is taken at the start and then at the first
//!   check at least 3 s after the previous mark, the last 10 kept (MD's
//!   SYNC_MARK_STEP = 3 s, SYNC_MARKS = 10). With no time elapsed since the
//!   mark the speed is 0 if nothing completed, else infinite. The check
//!   runs before every step (MD checks once per `window` sectors).
//! * idle = no user request in flight and none issued in the last 500 ms.
//! * pause: if speed > max, until the moment the speed would fall to max
//!   (mark time + KiB ÷ max); otherwise (busy array) until the earlier of
//!   that moment for min and now + 500 ms, then check again. MD sleeps a
//!   fixed 500 ms above max; when not idle older kernels also slept 500 ms
//!   and current ones wait until their in-flight recovery I/O has drained.
//!   MD's speed has `+1 s` in its denominator; we wait exactly as long as
//!   the rule needs, so a binding max gives a hand-computable rate.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Serialize;

use super::engine::{ns_to_ms, Ns};
use super::executor::TimedExecutor;
use crate::array::{Array, Cause, DiskOp, DiskOpKind};
use crate::error::{Error, Result};

/// MD's default `sync_speed_min` (KiB/s).
pub const MD_SPEED_MIN: u64 = 1000;
/// MD's default `sync_speed_max` (KiB/s).
pub const MD_SPEED_MAX: u64 = 200_000;
/// Default rebuild steps (chunk rows) in flight.
pub const DEFAULT_WINDOW: usize = 4;

const MARK_STEP: Ns = 3_000_000_000;
const MARKS: usize = 10;
const IDLE_NS: Ns = 500_000_000;
const RECHECK_NS: Ns = 500_000_000;

/// Rebuild settings (CLI `--rebuild-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildConfig {
    /// Simulated time at which the spares arrive and recovery starts.
    pub start: Ns,
    /// Rows in flight at most.
    pub window: usize,
    pub min_kbps: u64,
    pub max_kbps: u64,
}

impl Default for RebuildConfig {
    fn default() -> Self {
        RebuildConfig {
            start: 0,
            window: DEFAULT_WINDOW,
            min_kbps: MD_SPEED_MIN,
            max_kbps: MD_SPEED_MAX,
        }
    }
}

impl RebuildConfig {
    pub fn check(&self) -> Result<()> {
        if self.window == 0 {
            return Err(Error::config("the rebuild window must be at least 1 row"));
        }
        if self.max_kbps == 0 {
            return Err(Error::config("the maximum rebuild speed must be at least 1 KB/s"));
        }
        Ok(())
    }
}

/// Response times of user requests completed in one period.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Period {
    pub requests: u64,
    pub avg_response_ms: f64,
    pub max_response_ms: f64,
}

/// Disk operations of one cause.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct CauseOps {
    pub reads: u64,
    pub writes: u64,
}

/// What the rebuild did (the `rebuild` object of the JSON report).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RebuildReport {
    /// Disks rebuilt onto spares.
    pub disks: Vec<u32>,
    pub start_ms: f64,
    /// From the start to the completion of the last row (0 if unfinished).
    pub rebuild_ms: f64,
    pub finished: bool,
    /// Member chunk rows rebuilt.
    pub rebuild_rows: u64,
    pub rows_total: u64,
    pub row_kib: u64,
    /// Rebuild disk operations (all `Cause::Rebuild`).
    pub rebuild_reads: u64,
    pub rebuild_writes: u64,
    pub rebuild_read_blocks: u64,
    pub rebuild_write_blocks: u64,
    /// Every disk operation of the run (user requests' and the rebuild's)
    /// per cause: `user`, `reconstruct-read`, `parity-update`, `rebuild`.
    pub ops_by_cause: BTreeMap<String, CauseOps>,
    /// Times the speed rule paused the rebuild.
    pub pauses: u64,
    pub window: usize,
    pub min_kbps: u64,
    pub max_kbps: u64,
    /// Mean rebuild speed (KiB of member rebuilt per second).
    pub avg_kbps: f64,
    /// User requests completed before the spares arrived / while the
    /// rebuild ran / after it finished.
    pub user_before: Period,
    pub user_during: Period,
    pub user_after: Period,
}

#[derive(Debug, Default, Clone)]
struct Acc {
    n: u64,
    sum: u128,
    max: Ns,
}

impl Acc {
    fn period(&self) -> Period {
        Period {
            requests: self.n,
            avg_response_ms: if self.n > 0 {
                self.sum as f64 / self.n as f64 / 1e6
            } else {
                0.0
            },
            max_response_ms: ns_to_ms(self.max),
        }
    }
}

/// The recovery state machine, driven by background steps.
#[derive(Debug, Clone)]
pub struct Rebuilder {
    cfg: RebuildConfig,
    rows: u64,
    row_kib: u64,
    started: bool,
    next_row: u64,
    in_flight: usize,
    /// Completed rows above the offset (out of order with window > 1; at
    /// most `window` of them, so memory does not grow with the disk).
    ahead: BTreeSet<u64>,
    offset: u64,
    done_kib: u64,
    marks: VecDeque<(Ns, u64)>,
    paused: bool,
    end: Option<Ns>,
    rep: RebuildReport,
    before: Acc,
    during: Acc,
    after: Acc,
}

/// Token of the start wake-up; pause wake-ups use 1.
const START: u64 = 0;
const RESUME: u64 = 1;

impl Rebuilder {
    /// A rebuild of `array`'s failed disks; checks that it can be rebuilt.
    pub fn new(array: &Array, cfg: RebuildConfig) -> Result<Self> {
        cfg.check()?;
        let mut probe = array.clone();
        probe.start_recovery(array.failed())?;
        let rows = array
            .member_rows()
            .ok_or_else(|| Error::config("rebuild needs the member size"))?;
        let row_kib = array.chunk_blocks() * array.config().block_size / 1024;
        Ok(Rebuilder {
            rep: RebuildReport {
                disks: array.failed().to_vec(),
                start_ms: ns_to_ms(cfg.start),
                rows_total: rows,
                row_kib,
                window: cfg.window,
                min_kbps: cfg.min_kbps,
                max_kbps: cfg.max_kbps,
                ..Default::default()
            },
            cfg,
            rows,
            row_kib: row_kib.max(1),
            started: false,
            next_row: 0,
            in_flight: 0,
            ahead: BTreeSet::new(),
            offset: 0,
            done_kib: 0,
            marks: VecDeque::new(),
            paused: false,
            end: None,
            before: Acc::default(),
            during: Acc::default(),
            after: Acc::default(),
        })
    }

    /// Schedule the start (call at the beginning of a pass, on fresh devices).
    pub fn arm(&self, ex: &mut TimedExecutor) {
        ex.bg_wake_at(self.cfg.start, START);
    }

    fn count(&mut self, op: &DiskOp) {
        let name = match op.cause {
            Cause::User => "user",
            Cause::ReconstructRead => "reconstruct-read",
            Cause::ParityUpdate => "parity-update",
            Cause::Rebuild => "rebuild",
            Cause::Destage => "destage",
        };
        let e = self.rep.ops_by_cause.entry(name.to_string()).or_default();
        match op.kind {
            DiskOpKind::Read => e.reads += 1,
            DiskOpKind::Write => e.writes += 1,
        }
    }

    /// Count a disk operation of a user request's plan.
    pub fn count_user_op(&mut self, op: &DiskOp) {
        self.count(op);
    }

    /// A user request completed at `time` (issued at `start`).
    pub fn user_done(&mut self, time: Ns, start: Ns, unreadable: bool) {
        if unreadable {
            return;
        }
        let acc = if !self.started {
            &mut self.before
        } else if self.end.is_some() {
            &mut self.after
        } else {
            &mut self.during
        };
        let r = time - start;
        acc.n += 1;
        acc.sum += r as u128;
        acc.max = acc.max.max(r);
    }

    /// React to a background wake-up or completion.
    pub fn on_wake(&mut self, token: u64, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        if token == START {
            array.start_recovery(&self.rep.disks)?;
            self.started = true;
            self.marks.push_back((ex.now(), 0));
            if self.rows == 0 {
                self.finish(array, ex.now());
                return Ok(());
            }
        } else {
            self.paused = false;
        }
        self.pump(array, ex)
    }

    pub fn on_done(&mut self, row: u64, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        self.in_flight -= 1;
        self.done_kib += self.row_kib;
        self.ahead.insert(row);
        while self.ahead.remove(&self.offset) {
            self.offset += 1;
        }
        array.set_recovered_rows(self.offset);
        if self.offset == self.rows {
            self.finish(array, ex.now());
            return Ok(());
        }
        if !self.paused {
            self.pump(array, ex)?;
        }
        Ok(())
    }

    fn finish(&mut self, array: &mut Array, now: Ns) {
        array.finish_recovery();
        self.end = Some(now);
    }

    fn speed(&mut self, now: Ns) -> (f64, Ns, u64) {
        if let Some(&(t, _)) = self.marks.back() {
            if now >= t + MARK_STEP {
                self.marks.push_back((now, self.done_kib));
                if self.marks.len() > MARKS {
                    self.marks.pop_front();
                }
            }
        }
        let (mt, mk) = *self.marks.front().expect("a mark is taken at the start");
        let kib = self.done_kib - mk;
        let speed = if now == mt {
            if kib == 0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            kib as f64 / ((now - mt) as f64 / 1e9)
        };
        (speed, mt, kib)
    }

    fn pump(&mut self, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        if !self.started || self.end.is_some() {
            return Ok(());
        }
        while self.in_flight < self.cfg.window && self.next_row < self.rows {
            let now = ex.now();
            let (speed, mt, kib) = self.speed(now);
            let idle = ex.in_flight() == 0 && ex.last_user_issue().is_none_or(|t| now >= t + IDLE_NS);
            let min = self.cfg.min_kbps as f64;
            let max = self.cfg.max_kbps as f64;
            if speed > min && (speed > max || !idle) {
                // The moment the speed falls to `limit` with no new step.
                let at = |limit: f64| mt + (kib as f64 / limit * 1e9).ceil() as Ns;
                let until = if speed > max {
                    at(max)
                } else {
                    at(min).min(now + RECHECK_NS)
                };
                self.paused = true;
                self.rep.pauses += 1;
                ex.bg_wake_at(until.max(now + 1), RESUME);
                return Ok(());
            }
            let row = self.next_row;
            let plan = array.plan_rebuild_row(row);
            for op in plan.disk_ops() {
                self.count(op);
                match op.kind {
                    DiskOpKind::Read => {
                        self.rep.rebuild_reads += 1;
                        self.rep.rebuild_read_blocks += op.nblocks as u64;
                    }
                    DiskOpKind::Write => {
                        self.rep.rebuild_writes += 1;
                        self.rep.rebuild_write_blocks += op.nblocks as u64;
                    }
                }
            }
            ex.submit_background(plan, row)?;
            self.next_row += 1;
            self.in_flight += 1;
        }
        Ok(())
    }

    pub fn report(&self) -> RebuildReport {
        let mut r = self.rep.clone();
        r.rebuild_rows = self.offset.max(if self.end.is_some() { self.rows } else { 0 });
        r.finished = self.end.is_some();
        if let Some(e) = self.end {
            r.rebuild_ms = ns_to_ms(e - self.cfg.start);
            r.avg_kbps = if e > self.cfg.start {
                (self.rows * self.row_kib) as f64 / ((e - self.cfg.start) as f64 / 1e9)
            } else {
                0.0
            };
        }
        r.user_before = self.before.period();
        r.user_during = self.during.period();
        r.user_after = self.after.period();
        r
    }
}

//! Background rebuild onto spares in simulated time (Linux MD's recovery).
//!
//! At `start` the failed disks of the array are replaced by fresh spares
//! ([`Array::start_recovery`]) and a rebuild strategy
//! ([`crate::rebuild::Strategy`]; by default `md`, MD's sequential chunk
//! rows behind the recovery offset) issues the steps. The [`Rebuilder`]
//! paces them in time: at most `window` steps in flight, and before each
//! step MD's speed rule ([`pacing`]: `min_kbps` / `max_kbps`, marks, idle
//! test) may pause the rebuild until a background wake-up. When the
//! strategy has rebuilt every unit the spares become ordinary members.

pub mod pacing;

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Serialize;

use self::pacing::MdPacing;
use super::engine::{ns_to_ms, Ns};
use super::executor::TimedExecutor;
use crate::array::{Array, Cause, DiskOp, DiskOpKind, IoPlan};
use crate::error::{Error, Result};
use crate::rebuild::{Md, Strategy};

/// MD's default `sync_speed_min` (KiB/s).
pub const MD_SPEED_MIN: u64 = 1000;
/// MD's default `sync_speed_max` (KiB/s).
pub const MD_SPEED_MAX: u64 = 200_000;
/// Default rebuild steps (chunk rows) in flight.
pub const DEFAULT_WINDOW: usize = 4;

/// Rebuild settings (CLI `--rebuild-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildConfig {
    /// Simulated time at which the spares arrive and recovery starts.
    pub start: Ns,
    /// Rebuild steps in flight at most (rows, for `md`).
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

/// The recovery in time: drives a [`Strategy`] with background steps,
/// paced by MD's speed rule, and reports what happened.
#[derive(Debug)]
pub struct Rebuilder {
    cfg: RebuildConfig,
    rows: u64,
    row_kib: u64,
    strategy: Box<dyn Strategy>,
    pacing: MdPacing,
    started: bool,
    in_flight: usize,
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
    /// A rebuild of `array`'s failed disks in MD's order; checks that it can
    /// be rebuilt.
    pub fn new(array: &Array, cfg: RebuildConfig) -> Result<Self> {
        let rows = Self::rows_to_rebuild(array, &cfg)?;
        Ok(Self::build(array, cfg, rows, Box::new(Md::new(rows))))
    }

    /// A rebuild of `array`'s failed disks in `strategy`'s order (made for
    /// this array, e.g. by [`crate::rebuild::build`]).
    pub fn with_strategy(array: &Array, cfg: RebuildConfig, strategy: Box<dyn Strategy>) -> Result<Self> {
        let rows = Self::rows_to_rebuild(array, &cfg)?;
        Ok(Self::build(array, cfg, rows, strategy))
    }

    /// The member chunk rows, once `cfg` and the array are known to allow a rebuild.
    fn rows_to_rebuild(array: &Array, cfg: &RebuildConfig) -> Result<u64> {
        cfg.check()?;
        let mut probe = array.clone();
        probe.start_recovery(array.failed())?;
        array
            .member_rows()
            .ok_or_else(|| Error::config("rebuild needs the member size"))
    }

    fn build(array: &Array, cfg: RebuildConfig, rows: u64, strategy: Box<dyn Strategy>) -> Self {
        let row_kib = array.chunk_blocks() * array.config().block_size / 1024;
        Rebuilder {
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
            pacing: MdPacing::new(cfg.min_kbps, cfg.max_kbps),
            cfg,
            rows,
            row_kib: row_kib.max(1),
            strategy,
            started: false,
            in_flight: 0,
            paused: false,
            end: None,
            before: Acc::default(),
            during: Acc::default(),
            after: Acc::default(),
        }
    }

    /// The rebuild order's name (`md`, ...).
    pub fn order(&self) -> &'static str {
        self.strategy.name()
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

    /// A user request for array blocks `blocks` was planned as `plan` at
    /// `now`: counts its disk operations (as [`count_user_op`] does for each;
    /// call one or the other) and shows it to the strategy's access monitor
    /// ([`Strategy::observe_user`]).
    ///
    /// [`count_user_op`]: Self::count_user_op
    pub fn user_request(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, now: Ns) {
        for op in plan.disk_ops() {
            self.count(op);
        }
        self.strategy.observe_user(array, blocks, plan, now);
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
            self.pacing.start(ex.now());
            if self.strategy.is_finished() {
                self.finish(array, ex.now());
                return Ok(());
            }
        } else {
            self.paused = false;
        }
        self.pump(array, ex)
    }

    /// Background step `tag` completed.
    pub fn on_done(&mut self, tag: u64, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        self.in_flight -= 1;
        let rows = self.strategy.complete(tag, array, ex.now());
        self.pacing.rebuilt(rows * self.row_kib);
        if self.strategy.is_finished() {
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

    /// Issue the strategy's steps while the window and the speed rule allow.
    fn pump(&mut self, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        if !self.started || self.end.is_some() {
            return Ok(());
        }
        while self.in_flight < self.cfg.window && self.strategy.has_step() {
            let now = ex.now();
            if let Some(until) = self.pacing.check(now, ex) {
                self.paused = true;
                self.rep.pauses += 1;
                ex.bg_wake_at(until, RESUME);
                return Ok(());
            }
            let Some(step) = self.strategy.next_step(array, now) else {
                break;
            };
            for op in step.plan.disk_ops() {
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
            ex.submit_background(step.plan, step.tag)?;
            self.in_flight += 1;
        }
        Ok(())
    }

    pub fn report(&self) -> RebuildReport {
        let mut r = self.rep.clone();
        r.rebuild_rows = self
            .strategy
            .rebuilt_rows()
            .max(if self.end.is_some() { self.rows } else { 0 });
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::array::{ArrayConfig, Level};
    use crate::device::{toy::ToyDisk, DeviceModel};
    use crate::rebuild::RebuildStep;
    use crate::timed::{ExecConfig, Step};

    /// What the test order saw: steps completed in order, user ranges observed.
    #[derive(Debug, Default)]
    struct Seen {
        completed: Vec<u64>,
        user: Vec<Range<u64>>,
    }

    /// A second order behind the trait: rows from the last to the first;
    /// the array serves the spare only once all are done (it has no map).
    #[derive(Debug)]
    struct Backward {
        left: u64,
        rows: u64,
        done: u64,
        seen: Arc<Mutex<Seen>>,
    }

    impl Strategy for Backward {
        fn name(&self) -> &'static str {
            "backward"
        }
        fn has_step(&self) -> bool {
            self.left > 0
        }
        fn next_step(&mut self, array: &Array, _now: u64) -> Option<RebuildStep> {
            self.left = self.left.checked_sub(1)?;
            Some(RebuildStep {
                tag: self.left,
                plan: array.plan_rebuild_row(self.left),
            })
        }
        fn complete(&mut self, tag: u64, array: &mut Array, _now: u64) -> u64 {
            self.done += 1;
            self.seen.lock().unwrap().completed.push(tag);
            if self.done == self.rows {
                array.set_recovered_rows(self.rows);
            }
            1
        }
        fn is_finished(&self) -> bool {
            self.done == self.rows
        }
        fn rebuilt_rows(&self) -> u64 {
            if self.is_finished() {
                self.rows
            } else {
                0
            }
        }
        fn observe_user(&mut self, _array: &Array, blocks: Range<u64>, _plan: &IoPlan, _now: u64) {
            self.seen.lock().unwrap().user.push(blocks);
        }
    }

    #[test]
    fn the_pacing_drives_any_order() {
        // RAID-5 of 3 constant 10 ms disks, 4 rows, disk 0 lost, window 1,
        // no max: each row reads the 2 survivors (10 ms) then writes the
        // spare (10 ms), so 80 ms whatever the order — as md's timeline.
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.disk_bytes = 4 * cfg.chunk_bytes;
        let mut array = Array::new(cfg).unwrap();
        array.fail(0).unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let order = Backward {
            left: 4,
            rows: 4,
            done: 0,
            seen: seen.clone(),
        };
        let rc = RebuildConfig {
            window: 1,
            max_kbps: u64::MAX,
            ..Default::default()
        };
        let mut r = Rebuilder::with_strategy(&array, rc, Box::new(order)).unwrap();
        assert_eq!(r.order(), "backward");
        // A degraded read of block 0 (disk 0): counted and shown to the order.
        let plan = array.plan_read(0, 1);
        r.user_request(&array, 0..1, &plan, 0);
        let models = (0..3)
            .map(|_| Box::new(ToyDisk::constant(10.0)) as Box<dyn DeviceModel>)
            .collect();
        let mut ex = TimedExecutor::new(
            models,
            ExecConfig {
                sectors_per_block: 8,
                ..Default::default()
            },
        )
        .unwrap();
        r.arm(&mut ex);
        while let Some(step) = ex.next_step() {
            match step {
                Step::BgWake { token, .. } => r.on_wake(token, &mut array, &mut ex).unwrap(),
                Step::BgDone { tag, .. } => r.on_done(tag, &mut array, &mut ex).unwrap(),
                other => panic!("no user plan was submitted, got {other:?}"),
            }
        }
        let b = r.report();
        assert!(b.finished);
        assert_eq!(b.rebuild_ms, 80.0);
        assert_eq!(
            (b.rebuild_rows, b.rebuild_reads, b.rebuild_writes, b.pauses),
            (4, 8, 4, 0)
        );
        assert_eq!(b.ops_by_cause["reconstruct-read"].reads, 2);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.completed, [3, 2, 1, 0]);
        assert_eq!(seen.user, vec![Range { start: 0, end: 1 }]);
        assert!(array.failed().is_empty(), "the spare is a member");
    }
}

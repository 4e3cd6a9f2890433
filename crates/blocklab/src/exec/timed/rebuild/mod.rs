//! Background rebuild onto spares in simulated time (Linux MD's recovery,
//! and the other rebuild orders).
//!
//! At `start` the failed disks of the array are replaced by fresh spares
//! ([`Array::start_recovery`]) and a rebuild strategy
//! ([`crate::rebuild::Strategy`]: `md`, MD's sequential chunk rows behind
//! the recovery offset, by default; `pro`, `dor`, `pro-dor`) issues the
//! steps. The [`Rebuilder`] paces them in time: at most `window` steps in
//! flight (unless the order bounds its own, as DOR does), and before each
//! step MD's speed rule ([`crate::rebuild::pacing`], shared with the real executor:
//! `min_kbps` / `max_kbps`, marks, one of
//! three idle tests) may hold the rebuild back. Its I/O goes to the device
//! queues at the users' priority (MD) or in their idle class (DOR). When
//! the strategy has rebuilt every unit the spares become ordinary members.
//!
//! Besides the rebuild's own figures it measures what users see: response
//! times before, during and after the rebuild, and the reads of *lost
//! units* (data of a recovering disk): how many were served by the spare
//! (rebuilt already) rather than reconstructed, in total and per interval.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Serialize;

use super::engine::{ms_to_ns, ns_to_ms, Ns};
use super::executor::TimedExecutor;
use crate::array::{Array, Cause, DiskOp, DiskOpKind, IoPlan, Level};
use crate::error::{Error, Result};
pub use crate::rebuild::pacing::IdleRule;
use crate::rebuild::pacing::{Gate, MdPacing, PaceClock};
use crate::rebuild::{OrderParams, Strategy};

/// MD's default `sync_speed_min` (KiB/s).
pub const MD_SPEED_MIN: u64 = 1000;
/// MD's default `sync_speed_max` (KiB/s).
pub const MD_SPEED_MAX: u64 = 200_000;
/// Default rebuild steps (chunk rows) in flight.
pub const DEFAULT_WINDOW: usize = 4;
/// Default interval of the rebuild's time series (ms).
pub const DEFAULT_INTERVAL_MS: f64 = 1000.0;

/// Rebuild settings (CLI `--rebuild-*`, stack `[array.rebuild]`).
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildConfig {
    /// Simulated time at which the spares arrive and recovery starts.
    pub start: Ns,
    /// Rebuild steps in flight at most (rows, for `md` and `pro`).
    pub window: usize,
    pub min_kbps: u64,
    pub max_kbps: u64,
    /// The rebuild order (`md`, `pro`, `dor`, `pro-dor`) and its parameters.
    pub order: String,
    pub params: OrderParams,
    /// Which of MD's idle tests paces the rebuild.
    pub idle: IdleRule,
    /// Whether MD's speed rule paces the rebuild (None: the order's
    /// preference: yes for `md` and `pro`, no for `dor` and `pro-dor`).
    pub throttle: Option<bool>,
    /// Whether the rebuild's I/O is of the devices' idle class (None: the
    /// order's preference: no for `md` and `pro`, yes for the DOR orders).
    pub low_priority: Option<bool>,
    /// Member chunk rows per bit of the map of rebuilt units.
    pub map_unit_rows: u64,
    /// Interval of the time series (0: none).
    pub interval: Ns,
}

impl Default for RebuildConfig {
    fn default() -> Self {
        RebuildConfig {
            start: 0,
            window: DEFAULT_WINDOW,
            min_kbps: MD_SPEED_MIN,
            max_kbps: MD_SPEED_MAX,
            order: "md".into(),
            params: OrderParams::default(),
            idle: IdleRule::Simple,
            throttle: None,
            low_priority: None,
            map_unit_rows: 1,
            interval: ms_to_ns(DEFAULT_INTERVAL_MS),
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
        if self.map_unit_rows == 0 {
            return Err(Error::config("a unit of the rebuilt map must hold at least 1 row"));
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

/// User reads of lost units (blocks of a recovering disk's data) while the
/// rebuild ran, and how many the spare served.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LostReads {
    /// Blocks read whose data lives on a recovering disk.
    pub blocks: u64,
    /// Of those, blocks read from the spare (their row already rebuilt).
    pub from_spare: u64,
    /// from_spare / blocks (0 when none).
    pub share_from_spare: f64,
}

/// One interval of the rebuild's time series.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RebuildPoint {
    /// End of the interval (ms of simulated time).
    pub t_ms: f64,
    /// Rows rebuilt by then (fraction of the member).
    pub rebuilt_fraction: f64,
    /// Lost-unit blocks read during the interval, and those from the spare.
    pub lost_reads: u64,
    pub from_spare: u64,
    /// from_spare / lost_reads in the interval (None when no lost read).
    pub share_from_spare: Option<f64>,
    /// User requests completed in the interval and their mean response.
    pub completed: u64,
    pub avg_response_ms: f64,
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
    /// The rebuild order and how it was run: the idle test, whether MD's
    /// speed rule paced it, the priority of its I/O (`same` / `low`), and
    /// rows per bit of the map of rebuilt units.
    pub order: String,
    pub idle: String,
    pub throttled: bool,
    pub priority: String,
    pub map_unit_rows: u64,
    /// The order's own figures (PRO's zones and slices, DOR's streams).
    pub order_stats: BTreeMap<String, u64>,
    /// Times `md6` waited for the recovery I/O in flight to drain.
    pub drains: u64,
    /// Reads of lost units during the rebuild.
    pub lost_reads: LostReads,
    /// Per interval of the rebuild (empty when the interval is 0).
    pub series: Vec<RebuildPoint>,
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

/// The interval being accumulated for the time series.
#[derive(Debug, Default, Clone)]
struct Bin {
    lost: u64,
    spare: u64,
    done: u64,
    resp: u128,
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
    window: usize,
    low: bool,
    sectors_per_block: u64,
    started: bool,
    /// Steps in flight: tag → KiB of member they stand for, and the KiB
    /// they rebuild when the order counts its own (`live`).
    in_flight: BTreeMap<u64, (u64, Option<u64>)>,
    in_flight_kib: u64,
    paused: bool,
    end: Option<Ns>,
    rep: RebuildReport,
    before: Acc,
    during: Acc,
    after: Acc,
    bin: Bin,
    bin_end: Ns,
}

/// MD's speed rule runs on simulated time and sees the executor's user plans.
impl PaceClock for TimedExecutor {
    fn now(&self) -> Ns {
        TimedExecutor::now(self)
    }
    fn users_in_flight(&self) -> usize {
        self.in_flight()
    }
    fn last_user_issue(&self) -> Option<Ns> {
        TimedExecutor::last_user_issue(self)
    }
}

/// Token of the start wake-up; pause wake-ups use 1.
const START: u64 = 0;
const RESUME: u64 = 1;

impl Rebuilder {
    /// A rebuild of `array`'s failed disks in `cfg.order`; checks that it
    /// can be rebuilt.
    pub fn new(array: &Array, cfg: RebuildConfig) -> Result<Self> {
        let rows = Self::rows_to_rebuild(array, &cfg)?;
        let strategy = crate::rebuild::build_with(&cfg.order, array, &cfg.params)?;
        Ok(Self::build(array, cfg, rows, strategy))
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
        let throttled = cfg.throttle.unwrap_or(strategy.prefers_speed_rule());
        let low = cfg.low_priority.unwrap_or(strategy.prefers_low_priority());
        let parity = matches!(array.level(), Level::Raid4 | Level::Raid5 | Level::Raid6);
        let pacing = MdPacing::with_rule(
            cfg.idle,
            throttled,
            cfg.min_kbps,
            cfg.max_kbps,
            array.ndisks() as usize,
            parity,
        );
        let window = if strategy.self_limited() {
            usize::MAX
        } else {
            cfg.window
        };
        Rebuilder {
            rep: RebuildReport {
                disks: array.failed().to_vec(),
                start_ms: ns_to_ms(cfg.start),
                rows_total: rows,
                row_kib,
                window: cfg.window,
                min_kbps: cfg.min_kbps,
                max_kbps: cfg.max_kbps,
                order: strategy.name().to_string(),
                idle: cfg.idle.name().to_string(),
                throttled,
                priority: if low { "low" } else { "same" }.to_string(),
                map_unit_rows: cfg.map_unit_rows,
                ..Default::default()
            },
            pacing,
            window,
            low,
            sectors_per_block: (array.config().block_size / 512).max(1),
            bin_end: cfg.start.saturating_add(cfg.interval),
            cfg,
            rows,
            row_kib: row_kib.max(1),
            strategy,
            started: false,
            in_flight: BTreeMap::new(),
            in_flight_kib: 0,
            paused: false,
            end: None,
            before: Acc::default(),
            during: Acc::default(),
            after: Acc::default(),
            bin: Bin::default(),
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
        self.pacing
            .user_io(op.disk as usize, op.nblocks as u64 * self.sectors_per_block);
    }

    /// Whether the rebuild is running (started, not finished).
    fn running(&self) -> bool {
        self.started && self.end.is_none()
    }

    /// Close the intervals of the time series that end at or before `now`.
    fn roll(&mut self, now: Ns) {
        if self.cfg.interval == 0 || !self.started {
            return;
        }
        while now >= self.bin_end && self.end.is_none_or(|e| self.bin_end <= e) {
            let t = self.bin_end;
            self.flush_bin(t);
            self.bin_end = t.saturating_add(self.cfg.interval);
        }
    }

    fn flush_bin(&mut self, t: Ns) {
        let b = std::mem::take(&mut self.bin);
        self.rep.series.push(RebuildPoint {
            t_ms: ns_to_ms(t),
            rebuilt_fraction: if self.rows > 0 {
                self.strategy.rebuilt_rows() as f64 / self.rows as f64
            } else {
                1.0
            },
            lost_reads: b.lost,
            from_spare: b.spare,
            share_from_spare: (b.lost > 0).then(|| b.spare as f64 / b.lost as f64),
            completed: b.done,
            avg_response_ms: if b.done > 0 {
                b.resp as f64 / b.done as f64 / 1e6
            } else {
                0.0
            },
        });
    }

    /// A user request for array blocks `blocks` was planned as `plan` at
    /// `now`: counts its disk operations (as [`count_user_op`] does for each;
    /// call one or the other), counts its reads of lost units, and shows it
    /// to the strategy's access monitor ([`Strategy::observe_user`]).
    ///
    /// [`count_user_op`]: Self::count_user_op
    pub fn user_request(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, now: Ns) {
        for op in plan.disk_ops() {
            self.count_user_op(op);
        }
        if self.running() {
            self.roll(now);
            let reads_user = plan
                .disk_ops()
                .any(|o| o.kind == DiskOpKind::Read && matches!(o.cause, Cause::User | Cause::ReconstructRead));
            let writes = plan.disk_ops().any(|o| o.kind == DiskOpKind::Write);
            if reads_user && !writes {
                let (lost, spare) = lost_unit_reads(array, blocks.clone());
                self.rep.lost_reads.blocks += lost;
                self.rep.lost_reads.from_spare += spare;
                self.bin.lost += lost;
                self.bin.spare += spare;
            }
        }
        self.strategy.observe_user(array, blocks, plan, now);
    }

    /// A user request completed at `time` (issued at `start`).
    pub fn user_done(&mut self, time: Ns, start: Ns, unreadable: bool) {
        if unreadable {
            return;
        }
        let r = time - start;
        if self.running() {
            self.roll(time);
            self.bin.done += 1;
            self.bin.resp += r as u128;
        }
        let acc = if !self.started {
            &mut self.before
        } else if self.end.is_some() {
            &mut self.after
        } else {
            &mut self.during
        };
        acc.n += 1;
        acc.sum += r as u128;
        acc.max = acc.max.max(r);
    }

    /// React to a background wake-up or completion.
    pub fn on_wake(&mut self, token: u64, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        if token == START {
            array.set_rebuilt_unit(self.cfg.map_unit_rows);
            array.start_recovery(&self.rep.disks)?;
            self.strategy.start(array, ex.now());
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
        let (kib, own) = self.in_flight.remove(&tag).unwrap_or((0, None));
        self.in_flight_kib -= kib;
        let rows = self.strategy.complete(tag, array, ex.now());
        self.pacing.rebuilt(own.unwrap_or(rows * self.row_kib));
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
        self.roll(now);
        if self.cfg.interval > 0 && (self.bin.lost > 0 || self.bin.done > 0 || now > self.bin_end - self.cfg.interval) {
            self.flush_bin(now);
        }
        array.finish_recovery();
        self.end = Some(now);
    }

    /// Issue the strategy's steps while the window and the speed rule allow.
    fn pump(&mut self, array: &mut Array, ex: &mut TimedExecutor) -> Result<()> {
        if !self.running() {
            return Ok(());
        }
        while self.in_flight.len() < self.window && self.strategy.has_step() {
            let now = ex.now();
            match self.pacing.gate(&*ex, self.in_flight_kib) {
                Gate::Go => {}
                Gate::Until(until) => {
                    self.paused = true;
                    self.rep.pauses += 1;
                    ex.bg_wake_at(until.max(now + 1), RESUME);
                    return Ok(());
                }
                // Going on when the in-flight steps complete.
                Gate::Drain => return Ok(()),
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
            self.pacing.issued(step.kib.unwrap_or(step.rows * self.row_kib));
            let kib = step.kib.unwrap_or(step.rows.max(1) * self.row_kib);
            self.in_flight.insert(step.tag, (kib, step.kib));
            self.in_flight_kib += kib;
            if self.low {
                let id = ex.reserve_id();
                ex.submit_idle_as(step.plan, step.tag, id)?;
            } else {
                ex.submit_background(step.plan, step.tag)?;
            }
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
        r.order_stats = self.strategy.stats();
        r.drains = self.pacing.drains;
        let l = &mut r.lost_reads;
        l.share_from_spare = if l.blocks > 0 {
            l.from_spare as f64 / l.blocks as f64
        } else {
            0.0
        };
        r
    }
}

/// Of the blocks `blocks` a read asks for, those whose data lives on a
/// recovering disk (a *lost unit*; mirrors: every copy of the block is on a
/// recovering disk or lost), and of those the ones the spare serves (their
/// row is rebuilt there).
pub fn lost_unit_reads(array: &Array, blocks: Range<u64>) -> (u64, u64) {
    let recovering = array.recovering();
    if recovering.is_empty() {
        return (0, 0);
    }
    let cb = array.chunk_blocks();
    let mirrored = matches!(array.level(), Level::Raid1 | Level::Raid10);
    let (mut lost, mut spare) = (0, 0);
    let mut b = blocks.start;
    while b < blocks.end {
        let piece_end = ((b / cb + 1) * cb).min(blocks.end);
        let n = piece_end - b;
        let p = array.map(b);
        let on_spare = |d: u32| recovering.contains(&d);
        let copies = p.disks.iter().zip(&p.disk_blocks);
        let is_lost = if mirrored {
            // Lost when no copy outside the recovering disks survives.
            copies.clone().all(|(&d, _)| on_spare(d) || array.is_failed(d))
        } else {
            on_spare(p.disks[0])
        };
        if is_lost {
            lost += n;
            if p.disks
                .iter()
                .zip(&p.disk_blocks)
                .any(|(&d, &at)| on_spare(d) && !array.is_failed_at(d, at / cb))
            {
                spare += n;
            }
        }
        b = piece_end;
    }
    (lost, spare)
}

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod orders_tests;

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
            Some(RebuildStep::row(self.left, array.plan_rebuild_row(self.left)))
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

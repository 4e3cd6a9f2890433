//! Rebuild of spares with real bytes: any rebuild order of the timed
//! executor (`crate::rebuild`: `md`, `pro`, `dor`, `pro-dor`) on the array's
//! map of rebuilt units, several steps in flight, paced by MD's speed rule
//! (`crate::rebuild::pacing`, the timed executor's own code) on the wall
//! clock, resumable after a crash from the map recorded in the state file.
//!
//! One coordinating thread owns the strategy and the pacing; a pool of
//! workers runs the steps' plans on the member files. The coordinator
//! issues steps while fewer than `window` are in flight (DOR bounds its own)
//! and the speed rule lets it, and publishes completions to the array (the
//! strategy's `complete`: the recovery offset, the map of rebuilt units)
//! under the state lock held exclusively, so a request sees a row rebuilt
//! only once its spares hold it. In between, a user write planned before a
//! step wrote a spare would leave that spare out: the step lists its rows
//! as pending before it unlocks them, and such a write plans again once
//! they are published (`Pending` in `mod.rs`).
//!
//! Steps: one with writes (MD's and PRO's rows, DOR's spare writes) locks
//! its rows, reads what its rows' rebuild plans read — or takes the bytes
//! an earlier read-only step of the same rows read (DOR's streams), as long
//! as no write locked those rows since (the row locks' epochs) — computes
//! and writes the spares. One that only reads (DOR's stream reads) keeps
//! its bytes for the row's write. A row that cannot be produced (a survivor
//! is bad and no redundancy is left) is written as zeroes and put on the
//! bad-block list, so it reads as an error, never as data. Steps of rows
//! rebuilt already (a resumed recovery) have empty plans and complete at
//! once.
//!
//! The users: every request is shown to the strategy (`observe_user`:
//! PRO's access monitor) and to the speed rule (per-member sectors for the
//! `md2611` and `md6` idle tests); the `simple` rule's idle test sees the
//! requests in flight and the time of the last one. An order that prefers
//! low priority (DOR) issues its steps only while no user request is in
//! flight (the nearest a file can come to the idle class of a device
//! queue), or when it has waited 100 ms (so that a steady load does not
//! starve it).
//!
//! Resuming: about once a second (`checkpoint`) the spares are synced and
//! the map (the offset and the runs of rows rebuilt beyond it) written to
//! the state file; at the end the spares become members. A crash loses at
//! most the rows since the last checkpoint, which the next `rebuild` redoes:
//! a new strategy hands out every row again and the rows recorded as
//! rebuilt are no work. A change of the failed or recovering members
//! during the rebuild starts the order over the same way.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::admin::rebuilt_count;
use super::runner::{op_rows, plan_rows, read_ops, write_buffers, Fault, Filler, Reads, UserData};
use super::state::BadRange;
use super::{io_err, Live, RealArray, ReqError};
use crate::array::{DiskOp, DiskOpKind, IoPlan, Level};
use crate::error::{Error, Result};
use crate::rebuild::pacing::{Gate, IdleRule, MdPacing, PaceClock};
use crate::rebuild::{OrderParams, ProParams, RebuildStep, Strategy};
use crate::timed::engine::Ns;
use crate::timed::rebuild::{DEFAULT_WINDOW, MD_SPEED_MAX, MD_SPEED_MIN};

/// Rebuild settings (`real rebuild` flags; sent as JSON to a server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RebuildOptions {
    /// The order: `md`, `pro`, `dor`, `pro-dor`.
    pub order: String,
    /// Steps in flight at most (MD's window of sync requests), unless the
    /// order bounds its own (DOR).
    pub window: usize,
    /// MD's sync_speed_min (KiB/s).
    pub min_kbps: u64,
    /// MD's sync_speed_max (KiB/s).
    pub max_kbps: u64,
    /// MD's idle test and speed rule: `simple`, `md2611`, `md6`.
    pub idle: String,
    /// Whether the speed rule paces the rebuild (None: the order's
    /// preference: yes for `md` and `pro`, no for the DOR orders).
    pub throttle: Option<bool>,
    /// Whether steps wait until no user request is in flight (None: the
    /// order's preference: DOR's).
    pub low_priority: Option<bool>,
    /// PRO: hot-zone length in member bytes, and time slice (ms).
    pub pro_zone_bytes: u64,
    pub pro_slice_ms: f64,
    /// How often the map of rebuilt rows is recorded (ms).
    pub checkpoint_ms: u64,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        let pro = ProParams::default();
        RebuildOptions {
            order: "md".into(),
            window: DEFAULT_WINDOW,
            min_kbps: MD_SPEED_MIN,
            max_kbps: MD_SPEED_MAX,
            idle: IdleRule::Simple.name().into(),
            throttle: None,
            low_priority: None,
            pro_zone_bytes: pro.zone_bytes,
            pro_slice_ms: pro.slice_ns as f64 / 1e6,
            checkpoint_ms: 1000,
        }
    }
}

impl RebuildOptions {
    /// As fast as the files go: no speed rule (the integrity suite, tests).
    pub fn unthrottled() -> Self {
        RebuildOptions {
            throttle: Some(false),
            ..Default::default()
        }
    }

    fn order_params(&self) -> Result<OrderParams> {
        if !(self.pro_slice_ms.is_finite() && self.pro_slice_ms > 0.0) {
            return Err(Error::config("the PRO time slice must be a positive number of ms"));
        }
        let mut p = OrderParams::default();
        p.pro.zone_bytes = self.pro_zone_bytes;
        p.pro.slice_ns = (self.pro_slice_ms * 1e6).round() as u64;
        Ok(p)
    }
}

/// The wall clock, in seconds since the Unix epoch.
pub(super) fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What a rebuild run did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RebuildReport {
    pub order: String,
    pub disks: Vec<u32>,
    pub rows_total: u64,
    /// Rows rebuilt already when this run started (> 0: resumed).
    pub resumed_from: u64,
    /// Rows this run rebuilt.
    pub rows_done: u64,
    pub finished: bool,
    pub seconds: f64,
    /// KiB of each spare rebuilt per second in this run.
    pub avg_kbps: f64,
    pub row_kib: u64,
    pub min_kbps: u64,
    pub max_kbps: u64,
    /// How the speed rule ran: the idle test, whether it paced the rebuild,
    /// the priority of the steps (`same` / `low`).
    pub idle: String,
    pub throttled: bool,
    pub priority: String,
    pub window: usize,
    /// Times the speed rule made the rebuild wait, and `md6`'s waits for the
    /// steps in flight to drain.
    pub pauses: u64,
    pub drains: u64,
    /// Steps run (plans with member I/O), and the most in flight at once.
    pub steps: u64,
    pub max_in_flight: u64,
    /// User requests shown to the order's access monitor.
    pub user_requests_seen: u64,
    /// The member sectors those requests' plans touched (what the speed
    /// rule's idle test counts as the users' I/O), summed over the members.
    #[serde(default)]
    pub user_member_sectors: u64,
    /// Times the order started over because the members changed.
    pub restarts: u64,
    /// Checkpoints of the map, and the runs of rows beyond the offset the
    /// last one recorded.
    pub checkpoints: u64,
    pub recorded_runs: u64,
    /// The order's own figures (PRO's zones and slices, DOR's streams).
    pub order_stats: BTreeMap<String, u64>,
    /// Blocks that could not be produced (now on the bad-block list).
    pub unrecoverable_blocks: u64,
    /// When the run started and ended, in seconds since the Unix epoch (the
    /// server's clock when served), so that a caller can cut a replay's
    /// per-request log (`real replay --log`) at the rebuild's own ends.
    #[serde(default)]
    pub started_unix_s: f64,
    #[serde(default)]
    pub finished_unix_s: f64,
}

/// The wall clock since the array was opened, and its user requests.
impl PaceClock for RealArray {
    fn now(&self) -> Ns {
        self.now_ns()
    }
    fn users_in_flight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst) as usize
    }
    fn last_user_issue(&self) -> Option<Ns> {
        let t = self.last_user_ns.load(Ordering::SeqCst);
        (t != 0).then_some(t)
    }
}

/// Longest a low-priority order's steps wait behind user requests since
/// the last step was issued: a file has no idle class whose queue would
/// serve them when the users pause, so under a steady load they would
/// never run (a guard against starvation).
const LOW_WAIT_MAX_NS: Ns = 100_000_000;

/// A step handed to a worker.
struct Job {
    tag: u64,
    plan: IoPlan,
    membership: u64,
}

/// What a worker did with a step.
enum Outcome {
    /// The spares of `rows` are written (and pending); `lost` blocks could
    /// not be produced.
    Wrote { rows: Vec<u64>, lost: u64 },
    /// A read-only step: its bytes are kept.
    Read,
    /// The members changed before the step ran: nothing done.
    Stale,
}

/// (row, epoch) pairs a stream read was made under, and its bytes.
type KeptRead = (Vec<(u64, u64)>, Reads);

/// Bytes read by read-only steps, by (disk, block) of the read, with the
/// epochs of the rows they were read under.
#[derive(Default)]
struct Kept {
    reads: HashMap<(u32, u64), KeptRead>,
}

/// Rows touched by the writes of `plan`, ascending, once each.
fn written_rows(plan: &IoPlan, cb: u64) -> Vec<u64> {
    let mut rows: Vec<u64> = plan
        .disk_ops()
        .filter(|o| o.kind == DiskOpKind::Write)
        .flat_map(|o| op_rows(o, cb))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

fn reads_of(plan: &IoPlan) -> Vec<DiskOp> {
    plan.disk_ops()
        .filter(|o| o.kind == DiskOpKind::Read)
        .copied()
        .collect()
}

impl RealArray {
    /// Rebuild the spares being recovered with `opts`, until done or `stop`.
    pub fn rebuild(&self, opts: &RebuildOptions, stop: &AtomicBool) -> Result<RebuildReport> {
        let shown = self.dir.display().to_string();
        if opts.max_kbps == 0 {
            return Err(Error::config("the maximum rebuild speed must be at least 1 KiB/s"));
        }
        if opts.window == 0 {
            return Err(Error::config("the rebuild window must be at least 1 step"));
        }
        let idle = IdleRule::parse(&opts.idle)?;
        if opts.order.eq_ignore_ascii_case("live") {
            // D-GRAID's live-block recovery copies what a file system says is
            // live; an array of member files has no file system to ask, and
            // a spare left with stale dead blocks would fail every check.
            return Err(Error::config(
                "rebuild order `live` needs a file system's live map: arrays on files rebuild with md, pro, dor or pro-dor",
            ));
        }
        let params = opts.order_params()?;
        let (disks, probe, resumed_from) = {
            let live = self.live.read().unwrap();
            let a = &live.array;
            (
                a.recovering(),
                crate::rebuild::build_with(&opts.order, a, &params)?,
                rebuilt_count(a, self.member_rows),
            )
        };
        if disks.is_empty() {
            return Err(Error::config(
                "nothing to rebuild: no spare is being recovered (put one in with `blocklab real replace`)",
            ));
        }
        let throttled = opts.throttle.unwrap_or(probe.prefers_speed_rule());
        let low = opts.low_priority.unwrap_or(probe.prefers_low_priority());
        let self_limited = probe.self_limited();
        drop(probe);
        let row_kib = (self.cfg.chunk_bytes / 1024).max(1);
        let mut report = RebuildReport {
            order: opts.order.to_ascii_lowercase(),
            disks,
            rows_total: self.member_rows,
            resumed_from,
            row_kib,
            min_kbps: opts.min_kbps,
            max_kbps: opts.max_kbps,
            idle: idle.name().into(),
            throttled,
            priority: if low { "low" } else { "same" }.into(),
            window: opts.window,
            ..Default::default()
        };
        let t0 = Instant::now();
        report.started_unix_s = unix_now_s();
        let workers = if self_limited {
            self.cfg.disks as usize + 2
        } else {
            opts.window
        }
        .clamp(1, 64);
        let run = Run {
            a: self,
            opts,
            params,
            idle,
            throttled,
            low,
            self_limited,
            row_kib,
            stop,
        };
        let kept = Mutex::new(Kept::default());
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Mutex::new(job_rx);
        let (done_tx, done_rx) = mpsc::channel::<(u64, u64, std::result::Result<Outcome, ReqError>)>();
        let result = std::thread::scope(|s| {
            for _ in 0..workers {
                let (job_rx, done_tx, kept) = (&job_rx, done_tx.clone(), &kept);
                s.spawn(move || loop {
                    let job = job_rx.lock().unwrap().recv();
                    let Ok(job) = job else { break };
                    let out = self.run_step(&job, kept);
                    if done_tx.send((job.tag, job.membership, out)).is_err() {
                        break;
                    }
                });
            }
            drop(done_tx);
            let r = run.coordinate(&job_tx, &done_rx, &kept, &mut report);
            drop(job_tx);
            r
        });
        self.pending.clear();
        let finished = result.map_err(|e| match e {
            RunError::Req(e) => Error::io(&shown, e),
            RunError::Other(e) => e,
        })?;
        report.finished = finished;
        let end = if finished {
            self.member_rows
        } else {
            let live = self.live.read().unwrap();
            rebuilt_count(&live.array, self.member_rows)
        };
        report.rows_done = end.saturating_sub(resumed_from);
        report.seconds = t0.elapsed().as_secs_f64();
        report.finished_unix_s = unix_now_s();
        report.avg_kbps = if report.seconds > 0.0 {
            (report.rows_done * row_kib) as f64 / report.seconds
        } else {
            0.0
        };
        Ok(report)
    }

    /// Record the map of rebuilt rows once the spares hold it durably.
    /// Returns the runs beyond the offset it recorded.
    fn checkpoint_rebuild(&self) -> std::result::Result<u64, ReqError> {
        let live = self.live.read().unwrap();
        // Rows in the map were written before they were published: syncing
        // after the snapshot makes at least those durable.
        let map = live.array.rebuilt_map().clone();
        self.sync_members(&live)?;
        let runs = map.runs().len() as u64;
        *self.durable.lock().unwrap() = map;
        let bm = self.bitmap.lock().unwrap();
        self.persist(&live, &bm)?;
        Ok(runs)
    }

    /// Every row rebuilt: the spares become members (`live` held exclusively).
    fn finish_rebuild(&self, live: &mut Live) -> std::result::Result<(), ReqError> {
        self.sync_members(live)?;
        self.checkpoint_journal(live)?;
        live.array.finish_recovery();
        self.array_changed();
        self.durable.lock().unwrap().clear();
        live.recovering.iter_mut().for_each(|r| *r = false);
        self.membership.fetch_add(1, Ordering::SeqCst);
        self.monitor.on.store(false, Ordering::SeqCst);
        self.monitor.events.lock().unwrap().clear();
        let bm = self.bitmap.lock().unwrap();
        self.persist(live, &bm)
    }

    /// Run one step on the member files (a worker).
    fn run_step(&self, job: &Job, kept: &Mutex<Kept>) -> std::result::Result<Outcome, ReqError> {
        let live = self.live.read().unwrap();
        if self.membership.load(Ordering::SeqCst) != job.membership {
            return Ok(Outcome::Stale);
        }
        let cb = live.array.chunk_blocks();
        if !job.plan.disk_ops().any(|o| o.kind == DiskOpKind::Write) {
            // A stream read: keep the bytes, with the epochs of their rows.
            let rows = plan_rows(&job.plan, cb);
            let _g = self.rows.lock(&rows, false);
            let epochs: Vec<(u64, u64)> = rows.iter().map(|&r| (r, self.rows.epoch(r))).collect();
            let bad = self.bad.lock().unwrap().clone();
            let env = self.env(&live, &bad);
            let got: Vec<(DiskOp, Reads)> = reads_of(&job.plan)
                .into_iter()
                .map(|op| (op, read_ops(&env, &[&op])))
                .collect();
            let mut kept = kept.lock().unwrap();
            for (op, reads) in got {
                kept.reads.insert((op.disk, op.block), (epochs.clone(), reads));
            }
            return Ok(Outcome::Read);
        }
        self.write_step(&live, &job.plan, kept)
    }

    /// A step that writes spares: its own reads, or those its rows'
    /// rebuild plans need, kept from stream reads when still current.
    fn write_step(&self, live: &Live, plan: &IoPlan, kept: &Mutex<Kept>) -> std::result::Result<Outcome, ReqError> {
        let cb = live.array.chunk_blocks();
        let wrote = written_rows(plan, cb);
        let own = reads_of(plan);
        // The reads the row plans make, when the step itself makes none.
        let needed: Vec<DiskOp> = if own.is_empty() {
            wrote
                .iter()
                .flat_map(|&r| reads_of(&live.array.plan_rebuild_row(r)))
                .collect()
        } else {
            own.clone()
        };
        let mut rows = plan_rows(plan, cb);
        for op in &needed {
            rows.extend(op_rows(op, cb));
        }
        rows.sort_unstable();
        rows.dedup();
        let mut guards = self.rows.lock(&rows, true);
        let mut healed = false;
        loop {
            let bad = self.bad.lock().unwrap().clone();
            let env = self.env(live, &bad);
            let mut reads = Reads::default();
            let mut fresh: Vec<&DiskOp> = Vec::new();
            {
                let mut kept = kept.lock().unwrap();
                for op in &needed {
                    match kept.reads.remove(&(op.disk, op.block)) {
                        Some((epochs, r)) if !healed && epochs.iter().all(|&(row, e)| self.rows.epoch(row) == e) => {
                            reads.append(r)
                        }
                        _ => fresh.push(op),
                    }
                }
            }
            reads.append(read_ops(&env, &fresh));
            let user = UserData::none(self.bs);
            match write_buffers(&env, plan, &reads, &user) {
                Ok(bufs) => {
                    for w in &bufs {
                        let m = live.members[w.op.disk as usize].as_ref().expect("spares are open");
                        m.write_blocks(w.op.block, &w.contiguous(), self.bs, &self.faults)
                            .map_err(io_err)?;
                    }
                    self.pending.add(&wrote);
                    drop(guards);
                    return Ok(Outcome::Wrote { rows: wrote, lost: 0 });
                }
                Err(Fault::Heal(heal)) if !healed => {
                    healed = true;
                    drop(guards);
                    let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(live, &heal)).collect();
                    guards = self.rows.lock(&all, true);
                    self.heal(live, &heal)?;
                }
                Err(Fault::Io(m)) => return Err(ReqError::Io(m)),
                Err(_) => {
                    // Past the redundancy: write what can be produced, list the rest.
                    let mut f = Filler::new(&env, &reads, &user);
                    let mut lost = Vec::new();
                    for op in plan.disk_ops().filter(|o| o.kind == DiskOpKind::Write) {
                        let m = live.members[op.disk as usize].as_ref().expect("spares are open");
                        let mut buf = super::members::AlignedBuf::zeroed(self.bs);
                        for i in 0..op.nblocks as u64 {
                            let b = op.block + i;
                            if f.fill(op.disk, b, &mut buf).is_err() {
                                buf.fill(0);
                                lost.push(BadRange {
                                    disk: op.disk,
                                    block: b,
                                    blocks: 1,
                                });
                            }
                            m.write_blocks(b, &buf, self.bs, &self.faults).map_err(io_err)?;
                        }
                    }
                    let n = lost.len() as u64;
                    if n > 0 {
                        let mut bad = self.bad.lock().unwrap();
                        bad.extend(lost);
                        merge_ranges(&mut bad);
                        drop(bad);
                        let bm = self.bitmap.lock().unwrap();
                        self.persist(live, &bm)?;
                    }
                    self.pending.add(&wrote);
                    drop(guards);
                    return Ok(Outcome::Wrote { rows: wrote, lost: n });
                }
            }
        }
    }
}

/// Why the coordinator stopped with an error.
enum RunError {
    Req(ReqError),
    Other(Error),
}

impl From<ReqError> for RunError {
    fn from(e: ReqError) -> Self {
        RunError::Req(e)
    }
}

/// One rebuild run: settings and what it works on.
struct Run<'a> {
    a: &'a RealArray,
    opts: &'a RebuildOptions,
    params: OrderParams,
    idle: IdleRule,
    throttled: bool,
    low: bool,
    self_limited: bool,
    row_kib: u64,
    stop: &'a AtomicBool,
}

/// The order and its pacing, for one membership of the array.
struct Session {
    strategy: Box<dyn Strategy>,
    pacing: MdPacing,
    membership: u64,
}

type Done = (u64, u64, std::result::Result<Outcome, ReqError>);

impl Run<'_> {
    /// A fresh order over the array as it is; the rows rebuilt already are
    /// handed out too and complete at once. Rows at the head of the order
    /// are passed here, under the same exclusive hold, so that MD's offset
    /// never shows less than the state recorded.
    fn session(
        &self,
        live: &mut Live,
        report: &mut RebuildReport,
    ) -> std::result::Result<(Session, Option<RebuildStep>), RunError> {
        let a = self.a;
        let membership = a.membership.load(Ordering::SeqCst);
        let strategy =
            crate::rebuild::build_with(&self.opts.order, &live.array, &self.params).map_err(RunError::Other)?;
        let parity = matches!(live.array.level(), Level::Raid4 | Level::Raid5 | Level::Raid6);
        let mut pacing = MdPacing::with_rule(
            self.idle,
            self.throttled,
            self.opts.min_kbps,
            self.opts.max_kbps,
            a.cfg.disks as usize,
            parity,
        );
        pacing.start(a.now_ns());
        let mut s = Session {
            strategy,
            pacing,
            membership,
        };
        // What users did since the spares went in ranks the first steps.
        self.show_users(&mut s, live, report);
        let strategy = &mut s.strategy;
        let mut first = None;
        while strategy.has_step() {
            let Some(step) = strategy.next_step(&live.array, a.now_ns()) else {
                break;
            };
            if step.plan.nodes.is_empty() {
                strategy.complete(step.tag, &mut live.array, a.now_ns());
                a.array_changed();
            } else {
                first = Some(step);
                break;
            }
        }
        Ok((s, first))
    }

    /// Show the users' requests seen since the last look to the order's
    /// access monitor and to the speed rule's idle test.
    fn show_users(&self, s: &mut Session, live: &Live, report: &mut RebuildReport) {
        let a = self.a;
        let events = std::mem::take(&mut *a.monitor.events.lock().unwrap());
        let spb = (a.cfg.block_size / 512).max(1);
        for ev in &events {
            for op in ev.plan.disk_ops() {
                s.pacing.user_io(op.disk as usize, op.nblocks as u64 * spb);
                report.user_member_sectors += op.nblocks as u64 * spb;
            }
            s.strategy
                .observe_user(&live.array, ev.blocks.clone(), &ev.plan, ev.at_ns);
        }
        report.user_requests_seen += events.len() as u64;
    }

    /// Issue, publish and pace until the order is finished (true), stopped
    /// (false), or an error.
    fn coordinate(
        &self,
        jobs: &mpsc::Sender<Job>,
        done: &mpsc::Receiver<Done>,
        kept: &Mutex<Kept>,
        report: &mut RebuildReport,
    ) -> std::result::Result<bool, RunError> {
        let a = self.a;
        let checkpoint_every = Duration::from_millis(self.opts.checkpoint_ms);
        let mut last_ckpt = Instant::now();
        // Steps in flight: tag → KiB of member they rebuild.
        let mut in_flight: BTreeMap<u64, u64> = BTreeMap::new();
        let mut in_flight_kib = 0u64;
        let mut arrived: Vec<Done> = Vec::new();
        let mut session: Option<Session> = None;
        let mut held: Option<RebuildStep> = None;
        let mut paused_until: Option<Ns> = None;
        let mut failure: Option<RunError> = None;
        let mut finished = false;
        let mut last_issue_ns = a.now_ns();
        loop {
            let stopping = failure.is_some() || self.stop.load(Ordering::SeqCst);
            {
                let mut live = a.live.write().unwrap();
                let changed = session
                    .as_ref()
                    .is_some_and(|s| s.membership != a.membership.load(Ordering::SeqCst));
                // Publish what completed.
                if !arrived.is_empty() {
                    a.array_changed();
                }
                for (tag, membership, out) in arrived.drain(..) {
                    let kib = in_flight.remove(&tag).unwrap_or(0);
                    in_flight_kib -= kib;
                    let current = session.as_mut().filter(|s| s.membership == membership && !changed);
                    match (out, current) {
                        (Err(e), _) => {
                            failure.get_or_insert(RunError::Req(e));
                        }
                        (Ok(Outcome::Wrote { rows, lost }), Some(s)) => {
                            let n = s.strategy.complete(tag, &mut live.array, a.now_ns());
                            s.pacing.rebuilt(n * self.row_kib);
                            report.unrecoverable_blocks += lost;
                            a.pending.remove(&rows);
                        }
                        (Ok(Outcome::Read), Some(s)) => {
                            s.strategy.complete(tag, &mut live.array, a.now_ns());
                        }
                        // Planned for other members: redone by the next order.
                        (Ok(Outcome::Wrote { rows, .. }), None) => a.pending.remove(&rows),
                        (Ok(_), _) => {}
                    }
                }
                if changed && in_flight.is_empty() {
                    session = None;
                    held = None;
                    kept.lock().unwrap().reads.clear();
                    report.restarts += 1;
                }
                if session.is_none() && !stopping && in_flight.is_empty() {
                    if live.array.recovering().is_empty() {
                        // Every spare failed: nothing left to rebuild.
                        return Err(RunError::Other(Error::config(
                            "the rebuild stopped: no spare is being recovered any more",
                        )));
                    }
                    let (s, first) = self.session(&mut live, report)?;
                    session = Some(s);
                    held = first;
                }
                let Some(s) = session.as_mut() else {
                    if stopping && in_flight.is_empty() {
                        break;
                    }
                    drop(live);
                    self.wait(done, &mut arrived, None);
                    continue;
                };
                self.show_users(s, &live, report);
                if s.strategy.is_finished() && in_flight.is_empty() {
                    a.finish_rebuild(&mut live)?;
                    report.order_stats = s.strategy.stats();
                    report.drains = s.pacing.drains;
                    finished = true;
                    break;
                }
                if paused_until.is_some_and(|t| a.now_ns() >= t) {
                    paused_until = None;
                }
                // Issue while the window, the priority and the speed rule allow.
                while !stopping && !changed && paused_until.is_none() {
                    if !self.self_limited && in_flight.len() >= self.opts.window {
                        break;
                    }
                    if held.is_none() && !s.strategy.has_step() {
                        break;
                    }
                    if self.low && a.users_in_flight() > 0 && a.now_ns() < last_issue_ns + LOW_WAIT_MAX_NS {
                        paused_until = Some(a.now_ns() + 1_000_000);
                        break;
                    }
                    match s.pacing.gate(a, in_flight_kib) {
                        Gate::Go => {}
                        Gate::Until(t) => {
                            report.pauses += 1;
                            paused_until = Some(t);
                            break;
                        }
                        Gate::Drain => break,
                    }
                    let step = match held.take() {
                        Some(step) => step,
                        None => match s.strategy.next_step(&live.array, a.now_ns()) {
                            Some(step) => step,
                            None => break,
                        },
                    };
                    if step.plan.nodes.is_empty() {
                        // A row rebuilt already, or one without data.
                        s.strategy.complete(step.tag, &mut live.array, a.now_ns());
                        a.array_changed();
                        continue;
                    }
                    s.pacing.issued(step.rows * self.row_kib);
                    let kib = step.rows.max(1) * self.row_kib;
                    in_flight.insert(step.tag, kib);
                    in_flight_kib += kib;
                    report.steps += 1;
                    last_issue_ns = a.now_ns();
                    report.max_in_flight = report.max_in_flight.max(in_flight.len() as u64);
                    let job = Job {
                        tag: step.tag,
                        plan: step.plan,
                        membership: s.membership,
                    };
                    if jobs.send(job).is_err() {
                        return Err(RunError::Other(Error::config("the rebuild workers stopped")));
                    }
                }
                report.order_stats = s.strategy.stats();
                report.drains = s.pacing.drains;
                if stopping && in_flight.is_empty() {
                    break;
                }
                if s.strategy.is_finished() && in_flight.is_empty() {
                    // Finished by steps that were no work: finish on the next turn.
                    continue;
                }
                if in_flight.is_empty() && held.is_none() && !s.strategy.has_step() && paused_until.is_none() {
                    return Err(RunError::Other(Error::config(format!(
                        "rebuild order `{}` stopped before every row was rebuilt",
                        s.strategy.name()
                    ))));
                }
            }
            if last_ckpt.elapsed() >= checkpoint_every && failure.is_none() {
                report.recorded_runs = a.checkpoint_rebuild()?;
                report.checkpoints += 1;
                last_ckpt = Instant::now();
            }
            self.wait(done, &mut arrived, paused_until);
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if !finished {
            report.recorded_runs = a.checkpoint_rebuild()?;
            report.checkpoints += 1;
        }
        Ok(finished)
    }

    /// Wait for a completion (then take every one that has arrived), the
    /// end of a pause, or 50 ms (a stop request, users' requests to show).
    fn wait(&self, done: &mpsc::Receiver<Done>, arrived: &mut Vec<Done>, until: Option<Ns>) {
        let mut timeout = Duration::from_millis(50);
        if let Some(t) = until {
            let now = self.a.now_ns();
            timeout = timeout.min(Duration::from_nanos(t.saturating_sub(now).max(1)));
        }
        match done.recv_timeout(timeout) {
            Ok(d) => arrived.push(d),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(d) = done.try_recv() {
            arrived.push(d);
        }
    }
}

/// Sort and join adjacent bad ranges of the same disk.
pub fn merge_ranges(v: &mut Vec<BadRange>) {
    v.sort();
    let mut out: Vec<BadRange> = Vec::with_capacity(v.len());
    for r in v.drain(..) {
        if let Some(last) = out.last_mut() {
            if last.disk == r.disk && r.block <= last.block + last.blocks {
                let end = (last.block + last.blocks).max(r.block + r.blocks);
                last.blocks = end - last.block;
                continue;
            }
        }
        out.push(r);
    }
    *v = out;
}

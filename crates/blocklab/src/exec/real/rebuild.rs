//! Rebuild of spares with real bytes: the array's rebuild plans
//! (`Array::plan_rebuild_row`) run row by row, paced by MD's speed limits on
//! the wall clock, resumable after a crash.
//!
//! Order: a [`RebuildOrder`] says which member row comes next. Today the
//! only one is [`MdOrder`] (MD's `md_do_sync`: from the recovery offset up);
//! the timed executor's rebuild strategies will plug in here. The array keeps
//! a single recovery offset (rows below it are in sync on the spare), so an
//! order must hand out the row at the offset; an out-of-order strategy needs
//! per-row recovery state in `Array` first, and is refused until then.
//!
//! Pacing (MD's rule, as the timed executor applies it in simulated time,
//! see `timed/rebuild.rs`): before each row the speed since the oldest mark
//! (a mark every 3 s, the last 10 kept) is compared with `sync_speed_min` and
//! `sync_speed_max` (KiB/s); above min, the rebuild waits while it is above
//! max or users are active (a request in flight or started in the last
//! 500 ms): until the speed falls to max, or (busy) to min but at most 500 ms
//! before checking again.
//!
//! Resuming: the recovery offset is written to the state file about once a
//! second, after syncing the spares, and at the end; a crash loses at most
//! the rows since the last checkpoint, which the next `rebuild` redoes. A
//! row that cannot be produced (a survivor is bad and the level has no
//! redundancy left) is written as zeroes and put on the bad-block list, so
//! it reads as an error, never as data.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::runner::{do_reads, plan_rows, write_buffers, Fault, Filler, UserData};
use super::state::BadRange;
use super::{io_err, RealArray, ReqError};
use crate::array::DiskOpKind;
use crate::error::{Error, Result};
use crate::timed::rebuild::{MD_SPEED_MAX, MD_SPEED_MIN};

/// Which member row to rebuild next.
pub trait RebuildOrder: Send {
    fn name(&self) -> &'static str;
    /// The next row given the recovery offset (rows below it are done) and
    /// the member's rows; None when finished.
    fn next_row(&mut self, offset: u64, rows: u64) -> Option<u64>;
}

/// MD's order: sequentially from the recovery offset.
#[derive(Debug, Default, Clone, Copy)]
pub struct MdOrder;

impl RebuildOrder for MdOrder {
    fn name(&self) -> &'static str {
        "md"
    }
    fn next_row(&mut self, offset: u64, rows: u64) -> Option<u64> {
        (offset < rows).then_some(offset)
    }
}

/// Rebuild settings (CLI `--speed-min`, `--speed-max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RebuildOptions {
    /// MD's sync_speed_min (KiB/s).
    pub min_kbps: u64,
    /// MD's sync_speed_max (KiB/s).
    pub max_kbps: u64,
    /// How often the recovery offset is recorded.
    pub checkpoint: Duration,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            min_kbps: MD_SPEED_MIN,
            max_kbps: MD_SPEED_MAX,
            checkpoint: Duration::from_secs(1),
        }
    }
}

/// What a rebuild run did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct RebuildReport {
    pub order: String,
    pub disks: Vec<u32>,
    pub rows_total: u64,
    /// The recovery offset this run started from (> 0: resumed).
    pub resumed_from: u64,
    pub rows_done: u64,
    pub finished: bool,
    pub seconds: f64,
    /// KiB of each spare rebuilt per second in this run.
    pub avg_kbps: f64,
    pub row_kib: u64,
    pub min_kbps: u64,
    pub max_kbps: u64,
    /// Times the speed rule made the rebuild wait.
    pub pauses: u64,
    /// Blocks that could not be produced (now on the bad-block list).
    pub unrecoverable_blocks: u64,
}

const MARK_STEP: Duration = Duration::from_secs(3);
const MARKS: usize = 10;
const RECHECK: Duration = Duration::from_millis(500);

/// MD's speed rule on the wall clock.
struct Pacer {
    marks: VecDeque<(Instant, u64)>,
    done_kib: u64,
    min: f64,
    max: f64,
    pauses: u64,
}

impl Pacer {
    fn new(o: &RebuildOptions) -> Pacer {
        Pacer {
            marks: VecDeque::from([(Instant::now(), 0)]),
            done_kib: 0,
            min: o.min_kbps as f64,
            max: o.max_kbps as f64,
            pauses: 0,
        }
    }

    /// Wait as long as the rule says before the next row.
    fn pace(&mut self, idle: &dyn Fn() -> bool, stop: &AtomicBool) {
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let now = Instant::now();
            if let Some(&(t, _)) = self.marks.back() {
                if now >= t + MARK_STEP {
                    self.marks.push_back((now, self.done_kib));
                    if self.marks.len() > MARKS {
                        self.marks.pop_front();
                    }
                }
            }
            let (mt, mk) = *self.marks.front().expect("a mark is taken at the start");
            let kib = (self.done_kib - mk) as f64;
            let secs = now.duration_since(mt).as_secs_f64();
            let speed = if secs == 0.0 {
                if kib == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                kib / secs
            };
            if !(speed > self.min && (speed > self.max || !idle())) {
                return;
            }
            let at = |limit: f64| mt + Duration::from_secs_f64(kib / limit);
            let until = if speed > self.max {
                at(self.max)
            } else {
                at(self.min).min(now + RECHECK)
            };
            self.pauses += 1;
            // Sleep in short steps so that a stop request is seen quickly.
            let until = until.max(now + Duration::from_millis(1));
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
            }
        }
    }
}

impl RealArray {
    /// Rebuild the spares being recovered, in `order`, until done or `stop`.
    pub fn rebuild(
        &self,
        order: &mut dyn RebuildOrder,
        opts: RebuildOptions,
        stop: &AtomicBool,
    ) -> Result<RebuildReport> {
        let shown = self.dir.display().to_string();
        if opts.max_kbps == 0 {
            return Err(Error::config("the maximum rebuild speed must be at least 1 KiB/s"));
        }
        let (disks, start) = {
            let live = self.live.read().unwrap();
            (live.array.recovering(), live.array.recovered_rows())
        };
        if disks.is_empty() {
            return Err(Error::config(
                "nothing to rebuild: no spare is being recovered (put one in with `blocklab real replace`)",
            ));
        }
        let rows = self.member_rows;
        let row_kib = self.cfg.chunk_bytes / 1024;
        let t0 = Instant::now();
        let mut pacer = Pacer::new(&opts);
        let mut report = RebuildReport {
            order: order.name().into(),
            disks: disks.clone(),
            rows_total: rows,
            resumed_from: start,
            row_kib,
            min_kbps: opts.min_kbps,
            max_kbps: opts.max_kbps,
            ..Default::default()
        };
        let mut last_ckpt = Instant::now();
        let idle = || self.idle();
        loop {
            let offset = self.live.read().unwrap().array.recovered_rows();
            let Some(row) = order.next_row(offset, rows) else { break };
            if row != offset {
                return Err(Error::config(format!(
                    "rebuild order `{}` asked for row {row} at recovery offset {offset}: the array records one \
                     recovery offset, so rows must come in order",
                    order.name()
                )));
            }
            pacer.pace(&idle, stop);
            if stop.load(Ordering::SeqCst) {
                break;
            }
            report.unrecoverable_blocks += self.rebuild_row(row).map_err(|e| Error::io(&shown, e))?;
            self.live.write().unwrap().array.set_recovered_rows(row + 1);
            pacer.done_kib += row_kib;
            report.rows_done += 1;
            if last_ckpt.elapsed() >= opts.checkpoint {
                self.checkpoint_rebuild().map_err(|e| Error::io(&shown, e))?;
                last_ckpt = Instant::now();
            }
        }
        let done = self.live.read().unwrap().array.recovered_rows() >= rows;
        if done {
            self.finish_rebuild().map_err(|e| Error::io(&shown, e))?;
        } else {
            self.checkpoint_rebuild().map_err(|e| Error::io(&shown, e))?;
        }
        report.finished = done;
        report.seconds = t0.elapsed().as_secs_f64();
        report.avg_kbps = if report.seconds > 0.0 {
            (report.rows_done * row_kib) as f64 / report.seconds
        } else {
            0.0
        };
        report.pauses = pacer.pauses;
        Ok(report)
    }

    /// Record the recovery offset once the spares hold it durably.
    fn checkpoint_rebuild(&self) -> std::result::Result<(), ReqError> {
        let mut live = self.live.write().unwrap();
        self.sync_members(&live)?;
        live.durable_rows = live.array.recovered_rows();
        let bm = self.bitmap.lock().unwrap();
        self.persist(&live, &bm)
    }

    /// Every row rebuilt: the spares become members.
    fn finish_rebuild(&self) -> std::result::Result<(), ReqError> {
        let mut live = self.live.write().unwrap();
        self.sync_members(&live)?;
        self.checkpoint_journal(&live)?;
        live.array.finish_recovery();
        live.durable_rows = 0;
        live.recovering.iter_mut().for_each(|r| *r = false);
        let bm = self.bitmap.lock().unwrap();
        self.persist(&live, &bm)
    }

    /// Rebuild one member row; returns the blocks that could not be produced.
    fn rebuild_row(&self, row: u64) -> std::result::Result<u64, ReqError> {
        let live = self.live.read().unwrap();
        let plan = live.array.plan_rebuild_row(row);
        if plan.nodes.is_empty() {
            return Ok(0);
        }
        let cb = live.array.chunk_blocks();
        let rows = plan_rows(&plan, cb);
        let mut guards = self.rows.lock(&rows, true);
        let mut healed = false;
        loop {
            let bad = self.bad.lock().unwrap().clone();
            let env = self.env(&live, &bad);
            let reads = do_reads(&env, &plan);
            let user = UserData::none(self.bs);
            match write_buffers(&env, &plan, &reads, &user) {
                Ok(bufs) => {
                    for (op, buf) in &bufs {
                        let m = live.members[op.disk as usize].as_ref().expect("spares are open");
                        m.write_blocks(op.block, buf, self.bs, self.zero_crc, &self.faults)
                            .map_err(io_err)?;
                    }
                    return Ok(0);
                }
                Err(Fault::Heal(heal)) if !healed => {
                    healed = true;
                    drop(guards);
                    let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(&live, &heal)).collect();
                    guards = self.rows.lock(&all, true);
                    self.heal(&live, &heal)?;
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
                            m.write_blocks(b, &buf, self.bs, self.zero_crc, &self.faults)
                                .map_err(io_err)?;
                        }
                    }
                    let n = lost.len() as u64;
                    if n > 0 {
                        let mut bad = self.bad.lock().unwrap();
                        bad.extend(lost);
                        merge_ranges(&mut bad);
                        drop(bad);
                        let bm = self.bitmap.lock().unwrap();
                        self.persist(&live, &bm)?;
                    }
                    drop(guards);
                    return Ok(n);
                }
            }
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

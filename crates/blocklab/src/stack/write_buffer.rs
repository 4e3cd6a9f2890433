//! A write buffer (Hsu & Smith §4 "Write buffering"): writes complete once
//! their data is in the buffer (non-volatile, as the paper assumes) and are
//! written below later by a background destage process.
//!
//! * The process starts when the dirty share of the buffer exceeds
//!   `high_mark` and stops once it drops below `low_mark`.
//! * Victims are chosen least-recently-written (LRW); each destage carries
//!   the contiguous dirty blocks around its victim (one operation).
//! * Blocks dirty for longer than `max_age` (since they became dirty, as
//!   Linux's `dirty_expire`) are destaged whatever the marks, woken by a
//!   timer of the layer's own.
//! * At most `max_outstanding` destages are in flight ("as many outstanding
//!   destage requests as the maximum queue depth seen by the host").
//! * Destages are of the devices' idle class (served when no demand request
//!   waits) unless the buffer is full; then they are normal requests and a
//!   write that finds no room waits for destages to free it.
//! * A block being destaged keeps its frame until the destage completes
//!   (reads of it are served here: the device may not have it yet); a
//!   rewrite makes it dirty again in a new frame, and it is not destaged
//!   again before the first destage has completed (two writes of one block
//!   in flight could reach the device in either order).
//! * At the end of the run every dirty block is written below, in address
//!   order, contiguous blocks as one operation.
//!
//! Without time (the counted executor) a destage completes when issued, and
//! the age limit is checked when requests arrive (by their trace time).

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::layer::{Below, Class, Cx, Exec, Io, Layer};
use super::result::StackResult;
use crate::array::plan::{Action, Cause, IoPlan};
use crate::error::Result;
use crate::timed::engine::Ns;
use crate::timed::executor::PlanId;
use crate::trace::Op;

/// The payload of the layer's age timer (destages count from 1).
const AGE_WAKE: u64 = 0;
/// At most this many blocks in one destage operation.
const MAX_RUN: u64 = 1 << 16;

/// What a write buffer is made of.
#[derive(Debug, Clone)]
pub struct WriteBufferConfig {
    /// The cache layer it belongs to (for reports).
    pub name: String,
    pub blocks: u64,
    pub high_mark: f64,
    pub low_mark: f64,
    /// 0: no age limit.
    pub max_age_ns: Ns,
    pub hit_ns: Ns,
    pub max_outstanding: usize,
    /// `runtime::layer_tag(index, 0)`.
    pub tag: u64,
}

/// A write buffer's figures (`write_buffers[]` of the result).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WriteBufferReport {
    /// The cache layer it belongs to.
    pub name: String,
    pub buffer_blocks: u64,
    pub high_mark: f64,
    pub low_mark: f64,
    pub max_age_s: f64,
    pub max_outstanding: u64,
    /// User write requests and their blocks.
    pub write_requests: u64,
    pub write_blocks: u64,
    /// Written blocks already dirty here (absorbed: one physical write fewer).
    pub rewrites: u64,
    /// Read blocks served from the buffer, and read requests served entirely by it.
    pub read_hits: u64,
    pub read_requests_served: u64,
    /// Destage operations and their blocks (the final flush included);
    /// those issued because of the age limit; blocks written at the end.
    pub destages: u64,
    pub destaged_blocks: u64,
    pub age_destages: u64,
    pub flushed_blocks: u64,
    /// Write requests that found the buffer full and waited for room.
    pub full_waits: u64,
    /// destages / write_requests: the buffer's write miss ratio (physical
    /// writes per write request).
    pub write_miss_ratio: f64,
}

pub struct WriteBuffer {
    cfg: WriteBufferConfig,
    /// Dirty blocks not yet being destaged: block -> (write stamp, dirty since).
    dirty: FxHashMap<u64, (u64, Ns)>,
    /// Least recently written first: stamp -> block.
    lrw: BTreeMap<u64, u64>,
    /// Oldest first: (dirty since, block).
    ages: BTreeSet<(Ns, u64)>,
    stamp: u64,
    /// Blocks held by destages in flight (frames until they complete).
    destaging: FxHashMap<u64, u32>,
    destaging_frames: u64,
    /// Destages in flight: payload -> (plan, first block, blocks).
    in_flight: BTreeMap<u64, (PlanId, u64, u64)>,
    next_payload: u64,
    /// The destage process runs (between the high and the low mark).
    active: bool,
    /// The age timer is set for this time.
    wake: Option<Ns>,
    stats: WriteBufferReport,
}

impl WriteBuffer {
    pub fn new(cfg: WriteBufferConfig) -> Self {
        let stats = WriteBufferReport {
            name: cfg.name.clone(),
            buffer_blocks: cfg.blocks,
            high_mark: cfg.high_mark,
            low_mark: cfg.low_mark,
            max_age_s: cfg.max_age_ns as f64 / 1e9,
            max_outstanding: cfg.max_outstanding as u64,
            ..Default::default()
        };
        WriteBuffer {
            cfg,
            dirty: FxHashMap::default(),
            lrw: BTreeMap::new(),
            ages: BTreeSet::new(),
            stamp: 0,
            destaging: FxHashMap::default(),
            destaging_frames: 0,
            in_flight: BTreeMap::new(),
            next_payload: AGE_WAKE + 1,
            active: false,
            wake: None,
            stats,
        }
    }

    /// Dirty blocks not yet being destaged (tests).
    pub fn dirty_blocks(&self) -> usize {
        self.dirty.len()
    }

    fn frames(&self) -> u64 {
        self.dirty.len() as u64 + self.destaging_frames
    }

    fn full(&self) -> bool {
        self.frames() >= self.cfg.blocks
    }

    fn dirty_share(&self) -> f64 {
        self.dirty.len() as f64 / self.cfg.blocks as f64
    }

    fn held(&self, b: u64) -> bool {
        self.dirty.contains_key(&b) || self.destaging.contains_key(&b)
    }

    fn take_dirty(&mut self, b: u64) {
        if let Some((stamp, since)) = self.dirty.remove(&b) {
            self.lrw.remove(&stamp);
            self.ages.remove(&(since, b));
        }
    }

    /// A dirty block that can be destaged now (no destage of it in flight).
    fn ready(&self, b: u64) -> bool {
        self.dirty.contains_key(&b) && !self.destaging.contains_key(&b)
    }

    /// Destage `victim` with the contiguous ready blocks around it; returns
    /// the plan id (None: counted, done at once).
    fn destage(&mut self, victim: u64, class: Class, cx: &mut Cx, below: &mut Below) -> Result<Option<PlanId>> {
        let mut lo = victim;
        while lo > 0 && victim - lo + 1 < MAX_RUN && self.ready(lo - 1) {
            lo -= 1;
        }
        let mut hi = victim + 1;
        while hi - lo < MAX_RUN && self.ready(hi) {
            hi += 1;
        }
        self.write_below(lo, hi - lo, class, cx, below)
    }

    /// Write dirty blocks `[first, first + n)` below as one background
    /// operation (after the destages of them still in flight: the final flush).
    fn write_below(
        &mut self,
        first: u64,
        n: u64,
        class: Class,
        cx: &mut Cx,
        below: &mut Below,
    ) -> Result<Option<PlanId>> {
        let earlier: Vec<PlanId> = self
            .in_flight
            .values()
            .filter(|&&(_, f, m)| f < first + n && first < f + m)
            .map(|&(id, _, _)| id)
            .collect();
        for b in first..first + n {
            self.take_dirty(b);
        }
        self.stats.destages += 1;
        self.stats.destaged_blocks += n;
        let payload = self.next_payload;
        self.next_payload += 1;
        let at = cx.deferred.len();
        below.background(
            &[Io::blocks(Op::Write, first, n, Cause::Destage)],
            cx,
            self.cfg.tag | payload,
            class,
        )?;
        if !cx.timed {
            return Ok(None);
        }
        if !earlier.is_empty() {
            let d = &mut cx.deferred[at];
            let mut p = IoPlan::default();
            for &id in &earlier {
                p.push(Action::Await { plan: id }, &[]);
            }
            let deps: Vec<u16> = (0..earlier.len() as u16).collect();
            let base = p.nodes.len();
            p.append(std::mem::take(&mut d.plan));
            for node in &mut p.nodes[base..] {
                if node.deps.is_empty() {
                    node.deps = deps.clone();
                }
            }
            d.plan = p;
        }
        let id = cx.deferred[at].id;
        for b in first..first + n {
            *self.destaging.entry(b).or_insert(0) += 1;
        }
        self.destaging_frames += n;
        self.in_flight.insert(payload, (id, first, n));
        Ok(Some(id))
    }

    /// The oldest ready block whose age limit has passed at `now`.
    fn aged(&self, now: Ns) -> Option<u64> {
        if self.cfg.max_age_ns == 0 {
            return None;
        }
        self.ages
            .iter()
            .take_while(|&&(since, _)| since.saturating_add(self.cfg.max_age_ns) <= now)
            .map(|&(_, b)| b)
            .find(|&b| !self.destaging.contains_key(&b))
    }

    /// The least recently written ready block.
    fn lrw_victim(&self) -> Option<u64> {
        self.lrw.values().copied().find(|&b| !self.destaging.contains_key(&b))
    }

    /// Run the destage process as far as it goes now: aged blocks first,
    /// then least-recently-written ones while above the low mark.
    fn pump(&mut self, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let now = cx.exec.now();
        if self.dirty_share() > self.cfg.high_mark {
            self.active = true;
        }
        while self.in_flight.len() < self.cfg.max_outstanding && !self.dirty.is_empty() {
            let class = if self.full() { Class::Normal } else { Class::Idle };
            let victim = if let Some(b) = self.aged(now) {
                self.stats.age_destages += 1;
                b
            } else if let (true, Some(b)) = (self.active, self.lrw_victim()) {
                b
            } else {
                break;
            };
            self.destage(victim, class, cx, below)?;
            if self.dirty_share() < self.cfg.low_mark || self.dirty.is_empty() {
                self.active = false;
            }
        }
        if self.dirty.is_empty() {
            self.active = false;
        }
        self.arm_timer(cx);
        Ok(())
    }

    /// Set the age timer for the oldest dirty block (timed runs).
    fn arm_timer(&mut self, cx: &mut Cx) {
        if self.cfg.max_age_ns == 0 || !cx.timed {
            return;
        }
        let Some(&(since, _)) = self.ages.iter().find(|&&(_, b)| !self.destaging.contains_key(&b)) else {
            return;
        };
        let due = since.saturating_add(self.cfg.max_age_ns);
        if due > cx.exec.now() && self.wake.is_none_or(|w| w > due) {
            cx.exec.bg_wake_at(due, self.cfg.tag | AGE_WAKE);
            self.wake = Some(due);
        }
    }

    /// The buffer holds more than it can: destage (as normal requests)
    /// until the excess is on its way, and make the request wait for the
    /// destages that free its room (timed); counted, they free it at once.
    fn make_room(&mut self, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let excess = self.frames().saturating_sub(self.cfg.blocks);
        if excess == 0 {
            return Ok(());
        }
        self.stats.full_waits += 1;
        let (now, timed) = (cx.exec.now(), cx.timed);
        while !self.dirty.is_empty() {
            let excess = self.frames().saturating_sub(self.cfg.blocks);
            // In time, frames being destaged are freed when their destage ends.
            let coming = if timed { self.destaging_frames } else { 0 };
            if coming >= excess || (timed && self.in_flight.len() >= self.cfg.max_outstanding) {
                break;
            }
            let Some(victim) = self.aged(now).or_else(|| self.lrw_victim()) else {
                break;
            };
            self.destage(victim, Class::Normal, cx, below)?;
        }
        // Wait for the oldest destages until they free the excess.
        let mut freed = 0;
        let mut waits = Vec::new();
        for &(id, _, n) in self.in_flight.values() {
            if freed >= excess {
                break;
            }
            waits.push(id);
            freed += n;
        }
        for id in waits {
            cx.await_plan(id);
        }
        Ok(())
    }
}

impl Layer for WriteBuffer {
    fn handle(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()> {
        let timed = cx.timed;
        if !timed && self.aged(cx.exec.now()).is_some() {
            // No timer without time: the age limit is checked as requests come.
            self.pump(cx, below)?;
        }
        let (first, n) = (io.first, io.nblocks);
        if io.op == Op::Read {
            let held = (first..first + n).filter(|&b| self.held(b)).count() as u64;
            if held == 0 {
                return below.handle(io, cx);
            }
            self.stats.read_hits += held;
            cx.delay(self.cfg.hit_ns);
            if held == n {
                self.stats.read_requests_served += 1;
                return Ok(());
            }
            let missing: Vec<u64> = (first..first + n).filter(|&b| !self.held(b)).collect();
            let mut i = 0;
            while i < missing.len() {
                let mut j = i + 1;
                while j < missing.len() && missing[j] == missing[j - 1] + 1 {
                    j += 1;
                }
                below.handle(&Io::blocks(Op::Read, missing[i], (j - i) as u64, io.cause), cx)?;
                i = j;
            }
            return Ok(());
        }
        // A write: into the buffer.
        self.stats.write_requests += 1;
        self.stats.write_blocks += n;
        let now = cx.exec.now();
        for b in first..first + n {
            self.stamp += 1;
            match self.dirty.get_mut(&b) {
                Some((stamp, _)) => {
                    self.lrw.remove(stamp);
                    *stamp = self.stamp;
                    self.stats.rewrites += 1;
                }
                None => {
                    self.dirty.insert(b, (self.stamp, now));
                    self.ages.insert((now, b));
                }
            }
            self.lrw.insert(self.stamp, b);
        }
        cx.delay(self.cfg.hit_ns);
        self.make_room(cx, below)?;
        self.pump(cx, below)
    }

    fn background_step(&mut self, payload: u64, wake: bool, cx: &mut Cx, below: &mut Below) -> Result<()> {
        if wake {
            self.wake = None;
        } else if let Some((_, first, n)) = self.in_flight.remove(&payload) {
            for b in first..first + n {
                if let Some(c) = self.destaging.get_mut(&b) {
                    *c -= 1;
                    if *c == 0 {
                        self.destaging.remove(&b);
                    }
                }
            }
            self.destaging_frames -= n;
        }
        self.pump(cx, below)
    }

    fn flush(&mut self, exec: &mut dyn Exec, below: &mut Below) -> Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        let mut d: Vec<u64> = self.dirty.keys().copied().collect();
        d.sort_unstable();
        self.stats.flushed_blocks += d.len() as u64;
        let mut cx = Cx::new(exec);
        let mut i = 0;
        while i < d.len() {
            let mut j = i + 1;
            while j < d.len() && d[j] == d[j - 1] + 1 && (j - i) < MAX_RUN as usize {
                j += 1;
            }
            self.write_below(d[i], (j - i) as u64, Class::Normal, &mut cx, below)?;
            i = j;
        }
        self.active = false;
        cx.finish_background()
    }

    fn reset_stats(&mut self) {
        self.stats = WriteBufferReport {
            name: std::mem::take(&mut self.stats.name),
            buffer_blocks: self.stats.buffer_blocks,
            high_mark: self.stats.high_mark,
            low_mark: self.stats.low_mark,
            max_age_s: self.stats.max_age_s,
            max_outstanding: self.stats.max_outstanding,
            ..Default::default()
        };
    }

    fn report(&self, out: &mut StackResult) {
        let mut s = self.stats.clone();
        s.write_miss_ratio = if s.write_requests > 0 {
            s.destages as f64 / s.write_requests as f64
        } else {
            0.0
        };
        out.write_buffers.push(s);
    }
}

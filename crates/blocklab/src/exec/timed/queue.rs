//! The per-device queue: requests waiting for one device, a depth limit, the
//! scheduler, and the device's busy-time and queue-length accounting.
//!
//! The depth limit models command queueing: at most `depth` requests are
//! handed to the device (the one in service included); the scheduler chooses
//! only among those. Requests beyond the limit wait in arrival order in the
//! host's queue. Depth 1 therefore means FCFS whatever the scheduler.
//!
//! Background work may come in the *idle* class (a cache's prefetch or
//! write-back, a low-priority rebuild): such requests wait in a queue of
//! their own and reach the device only when no normal request is waiting,
//! so they delay a demand request by at most the one in service.
//!
//! The queue also keeps the sectors a device reads opportunistically (see
//! `device::Opportunism`) until the host takes them: those read while a
//! write of them waited at the device, or arrived meanwhile, are dropped
//! (the host must not keep data older than a write it issued).
//!
//! Every operation costs O(log n) or less in the number of waiting requests
//! (the schedulers keep their queues ordered; waiting writes are indexed by
//! sector), so a queue that grows without bound under overload does not make
//! each request dearer.

use std::collections::{BTreeMap, VecDeque};

use super::engine::{ms_to_ns, ns_to_ms, Ns};
use super::sched::{SchedCtx, Scheduler};
use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel, Dispatch, FreeRun};

/// A request waiting at a device. `tag` identifies it to the executor.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub tag: u64,
    pub req: DevRequest,
    pub arrival: Ns,
    /// Arrival order at this device (tie-breaker of every scheduler).
    pub seq: u64,
    /// A user request's own operation (not background work: a destage, a prefetch).
    pub demand: bool,
}

/// Busy time and queue statistics of one device.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DeviceStats {
    pub ops: u64,
    pub busy_ns: u64,
    /// Integral over time of the number of waiting requests (not in service).
    pub queue_area: u128,
    pub max_queue: u64,
    /// Busy time split as the model tells it (`DeviceModel::last_split`):
    /// seek, rotation, transfer, and the rest (overhead); they sum to `busy_ns`.
    pub seek_ns: u64,
    pub rotation_ns: u64,
    pub transfer_ns: u64,
    pub overhead_ns: u64,
    /// Busy time of read operations (demand and prefetch).
    pub read_busy_ns: u64,
    /// Operations completed, and the sum of their times from arrival here
    /// to completion (DiskSim's per-device IOdriver response time).
    pub completed: u64,
    pub response_ns: u128,
}

pub struct DevQueue {
    pub model: Box<dyn DeviceModel>,
    sched: Box<dyn Scheduler>,
    depth: usize,
    /// Handed to the device: the requests `sched` holds.
    /// Beyond the depth limit, in arrival order.
    host_q: VecDeque<Pending>,
    /// Idle-class requests, served (by a scheduler of the same rule) only
    /// when no normal request waits.
    idle_sched: Box<dyn Scheduler>,
    /// Writes waiting in any of the three queues, by sector; kept from the
    /// first time the model reads sectors for free (only opportunistic
    /// models do: an index nobody asks would cost every write a lookup).
    writes: Option<WaitingWrites>,
    in_service: Option<Pending>,
    head_cyl: u64,
    seq: u64,
    last_change: Ns,
    pub stats: DeviceStats,
    /// Sectors read opportunistically, not yet taken by the host.
    free: Vec<FreeRun>,
}

impl DevQueue {
    /// `sched` orders the normal requests handed to the device, `idle_sched`
    /// (a second instance of the same rule) the idle class.
    pub fn new(
        model: Box<dyn DeviceModel>,
        sched: Box<dyn Scheduler>,
        idle_sched: Box<dyn Scheduler>,
        depth: usize,
    ) -> Self {
        DevQueue {
            model,
            sched,
            depth: depth.max(1),
            host_q: VecDeque::new(),
            idle_sched,
            writes: None,
            in_service: None,
            head_cyl: 0,
            seq: 0,
            last_change: 0,
            stats: DeviceStats::default(),
            free: Vec::new(),
        }
    }

    /// Start the statistics afresh from `now` (the end of a warm-up).
    pub fn reset_stats(&mut self, now: Ns) {
        self.stats = DeviceStats::default();
        self.last_change = now;
    }

    /// Requests waiting (not in service).
    pub fn waiting(&self) -> usize {
        self.sched.len() + self.host_q.len() + self.idle_sched.len()
    }

    pub fn busy(&self) -> bool {
        self.in_service.is_some()
    }

    fn account(&mut self, now: Ns) {
        let w = self.waiting() as u128;
        self.stats.queue_area += w * now.saturating_sub(self.last_change) as u128;
        self.last_change = now;
    }

    fn note_max(&mut self) {
        self.stats.max_queue = self.stats.max_queue.max(self.waiting() as u64);
    }

    /// Close the queue-length integral at the end of the run.
    pub fn finish(&mut self, now: Ns) {
        self.account(now);
    }

    /// A request arrives. Returns `Some((tag, service_ns))` if it starts
    /// service at once (the device was idle).
    pub fn arrive(&mut self, now: Ns, tag: u64, req: DevRequest) -> Option<(u64, Ns)> {
        self.arrive_as(now, tag, req, false)
    }

    /// As [`arrive`](Self::arrive); `idle`: the request is of the idle class.
    pub fn arrive_as(&mut self, now: Ns, tag: u64, req: DevRequest, idle: bool) -> Option<(u64, Ns)> {
        self.arrive_with(now, tag, req, idle, !idle)
    }

    /// As [`arrive_as`](Self::arrive_as); `demand`: a user request's own
    /// operation (the device is told, `Dispatch::demand`), whatever its class.
    pub fn arrive_with(&mut self, now: Ns, tag: u64, req: DevRequest, idle: bool, demand: bool) -> Option<(u64, Ns)> {
        self.account(now);
        let p = Pending {
            tag,
            req,
            arrival: now,
            seq: self.seq,
            demand,
        };
        self.seq += 1;
        if req.kind == DiskOpKind::Write {
            // Sectors read after the write arrived would be older than it.
            let t = ns_to_ms(now);
            trim(&mut self.free, req.lbn, req.sectors.max(1) as u64, |r| r.at_ms > t);
            if let Some(w) = &mut self.writes {
                w.insert(&p);
            }
        }
        let held = self.sched.len() + self.in_service.is_some() as usize;
        if idle {
            self.idle_sched.push(p, self.model.as_ref());
        } else if held < self.depth {
            self.sched.push(p, self.model.as_ref());
        } else {
            self.host_q.push_back(p);
        }
        let started = if self.in_service.is_none() {
            self.start_next(now)
        } else {
            None
        };
        self.note_max();
        started
    }

    /// The request in service completes. Returns its tag, and the next one
    /// started, if any.
    pub fn complete(&mut self, now: Ns) -> (u64, Option<(u64, Ns)>) {
        let tag = self.finish_op(now);
        (tag, self.start_next(now))
    }

    /// The request in service completes and the device stays idle until
    /// [`kick`](Self::kick) or an arrival: its tag.
    pub fn finish_op(&mut self, now: Ns) -> u64 {
        self.account(now);
        let done = self.in_service.take().expect("completion of an idle device");
        self.stats.completed += 1;
        self.stats.response_ns += now.saturating_sub(done.arrival) as u128;
        done.tag
    }

    /// Start the next request if the device is idle.
    pub fn kick(&mut self, now: Ns) -> Option<(u64, Ns)> {
        if self.in_service.is_some() {
            return None;
        }
        self.account(now);
        let started = self.start_next(now);
        self.note_max();
        started
    }

    fn start_next(&mut self, now: Ns) -> Option<(u64, Ns)> {
        // Refill the device's queue from the host's, in arrival order.
        while self.sched.len() < self.depth {
            match self.host_q.pop_front() {
                Some(p) => self.sched.push(p, self.model.as_ref()),
                None => break,
            }
        }
        let now_ms = ns_to_ms(now);
        let ctx = SchedCtx {
            now_ms,
            head_cyl: self.head_cyl,
            dev: self.model.as_ref(),
        };
        let sched = if self.sched.is_empty() {
            &mut self.idle_sched
        } else {
            &mut self.sched
        };
        let p = sched.pop(&ctx)?;
        if let (DiskOpKind::Write, Some(w)) = (p.req.kind, &mut self.writes) {
            w.remove(&p);
        }
        let d = Dispatch {
            demand: p.demand,
            arrived_ms: ns_to_ms(p.arrival),
        };
        let ms = self.model.serve(now_ms, &p.req, &d);
        let dur = ms_to_ns(ms);
        let last = p.req.lbn + (p.req.sectors.max(1) as u64) - 1;
        self.head_cyl = self.model.cylinder(last);
        self.stats.ops += 1;
        self.stats.busy_ns += dur;
        if p.req.kind == DiskOpKind::Read {
            self.stats.read_busy_ns += dur;
        }
        self.split(dur);
        self.in_service = Some(p);
        self.collect_free();
        Some((p.tag, dur))
    }

    /// Add the last service's split to the statistics (clamped so that the
    /// parts never exceed the service time; the rest is overhead).
    fn split(&mut self, dur: Ns) {
        let Some(s) = self.model.last_split() else {
            self.stats.overhead_ns += dur;
            return;
        };
        let mut left = dur;
        let mut part = |ms: f64| {
            let ns = ms_to_ns(ms.max(0.0)).min(left);
            left -= ns;
            ns
        };
        let (seek, rot, xfer) = (part(s.seek_ms), part(s.rotation_ms), part(s.transfer_ms));
        self.stats.seek_ns += seek;
        self.stats.rotation_ns += rot;
        self.stats.transfer_ns += xfer;
        self.stats.overhead_ns += left;
    }

    /// Take what the model read opportunistically, less the sectors of
    /// writes waiting here (the device read their old data).
    fn collect_free(&mut self) {
        let start = self.free.len();
        self.model.take_free(&mut self.free);
        if self.free.len() == start {
            return;
        }
        let mut fresh = self.free.split_off(start);
        let writes = self.writes.get_or_insert_with(|| {
            let mut w = WaitingWrites::default();
            let mut add = |p: &Pending| {
                if p.req.kind == DiskOpKind::Write {
                    w.insert(p)
                }
            };
            self.sched.for_each(&mut add);
            self.idle_sched.for_each(&mut add);
            self.host_q.iter().for_each(add);
            w
        });
        // What is left of a run does not depend on the order the writes are
        // cut out in, so only the writes that overlap a run need be looked at.
        let mut overlapping = Vec::new();
        for r in &fresh {
            writes.overlapping(r.lbn, r.sectors, &mut overlapping);
        }
        for (lbn, n) in overlapping {
            trim(&mut fresh, lbn, n, |_| true);
        }
        self.free.append(&mut fresh);
    }

    /// The sectors read opportunistically by `now` (the device idles until
    /// then unless it is busy); later ones stay until they are read.
    pub fn take_free(&mut self, now: Ns, out: &mut Vec<FreeRun>) {
        if self.in_service.is_none() {
            self.model.advance_idle(ns_to_ms(now));
            self.collect_free();
        }
        let t = ns_to_ms(now);
        // In place, in order: no allocation per call, and `free` keeps its capacity.
        self.free.retain(|r| {
            let read = r.at_ms <= t;
            if read {
                out.push(*r);
            }
            !read
        });
    }
}

/// The writes waiting at a device, by first sector, so that the ones
/// overlapping a range are found without a scan of the queue.
#[derive(Default)]
struct WaitingWrites {
    /// (first sector, arrival) -> sectors.
    by_lbn: BTreeMap<(u64, u64), u64>,
    /// The longest write seen: one overlapping `lbn` starts at most this
    /// many sectors before it.
    longest: u64,
}

impl WaitingWrites {
    fn insert(&mut self, p: &Pending) {
        let n = p.req.sectors.max(1) as u64;
        self.longest = self.longest.max(n);
        self.by_lbn.insert((p.req.lbn, p.seq), n);
    }

    fn remove(&mut self, p: &Pending) {
        self.by_lbn.remove(&(p.req.lbn, p.seq));
    }

    /// Append the (first sector, sectors) of every write overlapping `lbn..lbn+n`.
    fn overlapping(&self, lbn: u64, n: u64, out: &mut Vec<(u64, u64)>) {
        let from = (lbn + 1).saturating_sub(self.longest);
        let end = lbn + n;
        for (&(w, _), &len) in self.by_lbn.range((from, 0)..(end, 0)) {
            if w + len > lbn {
                out.push((w, len));
            }
        }
    }
}

/// Remove sectors `lbn..lbn+n` from the runs that `which` selects (a run
/// overlapping them keeps its parts before and after).
fn trim(runs: &mut Vec<FreeRun>, lbn: u64, n: u64, which: impl Fn(&FreeRun) -> bool) {
    let end = lbn + n;
    let mut out = Vec::with_capacity(runs.len());
    for r in runs.drain(..) {
        let r_end = r.lbn + r.sectors;
        if !which(&r) || r_end <= lbn || end <= r.lbn {
            out.push(r);
            continue;
        }
        if r.lbn < lbn {
            out.push(FreeRun {
                sectors: lbn - r.lbn,
                ..r
            });
        }
        if end < r_end {
            out.push(FreeRun {
                lbn: end,
                sectors: r_end - end,
                ..r
            });
        }
    }
    *runs = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timed::sched;

    /// A 1 ms device that "reads" sectors 0..100 for free on every read, all
    /// of them by 0.5 ms into the service.
    struct Free {
        runs: Vec<FreeRun>,
    }
    impl DeviceModel for Free {
        fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
            if req.kind == DiskOpKind::Read {
                self.runs.push(FreeRun {
                    lbn: 0,
                    sectors: 100,
                    at_ms: now_ms + 0.5,
                });
            }
            1.0
        }
        fn positioning_estimate(&self, _: f64, _: &DevRequest) -> f64 {
            0.0
        }
        fn cylinder(&self, _: u64) -> u64 {
            0
        }
        fn capacity_sectors(&self) -> u64 {
            1000
        }
        fn take_free(&mut self, out: &mut Vec<FreeRun>) {
            out.append(&mut self.runs);
        }
    }

    fn rq(kind: DiskOpKind, lbn: u64, sectors: u32) -> DevRequest {
        DevRequest { kind, lbn, sectors }
    }

    #[test]
    fn free_reads_never_hand_over_data_older_than_a_write() {
        const MS: Ns = 1_000_000;
        let fcfs = || sched::build("fcfs").unwrap();
        let mut q = DevQueue::new(Box::new(Free { runs: vec![] }), fcfs(), fcfs(), 4);
        // A read at 0 ms: its free sectors are all read by 0.5 ms. A write of
        // sectors 10..20 arrives at 0.2 ms (before they were read) and one
        // of 50..60 at 0.7 ms (after).
        q.arrive(0, 1, rq(DiskOpKind::Read, 500, 8));
        q.arrive(MS / 5, 2, rq(DiskOpKind::Write, 10, 10));
        q.arrive(7 * MS / 10, 3, rq(DiskOpKind::Write, 50, 10));
        let mut out = Vec::new();
        q.take_free(MS / 4, &mut out);
        assert!(out.is_empty(), "not read yet at 0.25 ms");
        q.take_free(MS, &mut out);
        let got: Vec<(u64, u64)> = out.iter().map(|r| (r.lbn, r.sectors)).collect();
        assert_eq!(got, vec![(0, 10), (20, 80)]);
        // The writes are served next (1..2, 2..3 ms); a read arriving at 1.5
        // ms is served at 3 ms while a write of 30..40 waits behind it: its
        // sectors are left out.
        let (_, next) = q.complete(MS);
        assert!(next.is_some());
        q.arrive(MS + MS / 2, 4, rq(DiskOpKind::Read, 600, 8));
        q.arrive(MS + MS / 2, 5, rq(DiskOpKind::Write, 30, 10));
        q.complete(2 * MS);
        assert_eq!(q.complete(3 * MS).1.map(|(tag, _)| tag), Some(4));
        out.clear();
        q.take_free(5 * MS, &mut out);
        let got: Vec<(u64, u64)> = out.iter().map(|r| (r.lbn, r.sectors)).collect();
        assert_eq!(got, vec![(0, 30), (40, 60)]);
    }

    #[test]
    fn writes_waiting_before_the_first_free_read_are_left_out() {
        const MS: Ns = 1_000_000;
        let fcfs = || sched::build("fcfs").unwrap();
        let mut q = DevQueue::new(Box::new(Free { runs: vec![] }), fcfs(), fcfs(), 4);
        // A write in service, then a read and a write of 10..20 waiting: the
        // read (served at 1 ms) is the device's first free read, and the
        // write still waits behind it.
        q.arrive(0, 1, rq(DiskOpKind::Write, 50, 10));
        q.arrive(MS / 10, 2, rq(DiskOpKind::Read, 500, 8));
        q.arrive(MS / 5, 3, rq(DiskOpKind::Write, 10, 10));
        assert_eq!(q.complete(MS).1.map(|(tag, _)| tag), Some(2));
        let mut out = Vec::new();
        q.take_free(2 * MS, &mut out);
        let got: Vec<(u64, u64)> = out.iter().map(|r| (r.lbn, r.sectors)).collect();
        assert_eq!(got, vec![(0, 10), (20, 80)]);
    }

    #[test]
    fn trim_keeps_what_lies_outside() {
        let run = |lbn, sectors, at_ms| FreeRun { lbn, sectors, at_ms };
        let mut v = vec![run(0, 10, 1.0), run(20, 5, 3.0), run(40, 4, 1.0)];
        trim(&mut v, 5, 18, |r| r.at_ms > 0.5);
        assert_eq!(v, vec![run(0, 5, 1.0), run(23, 2, 3.0), run(40, 4, 1.0)]);
        // Only runs read after the write count.
        let mut v = vec![run(0, 10, 1.0), run(0, 10, 3.0)];
        trim(&mut v, 2, 2, |r| r.at_ms > 2.0);
        assert_eq!(v, vec![run(0, 10, 1.0), run(0, 2, 3.0), run(4, 6, 3.0)]);
    }
}

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

use std::collections::VecDeque;

use super::engine::{ms_to_ns, ns_to_ms, Ns};
use super::sched::{SchedCtx, Scheduler};
use crate::device::{DevRequest, DeviceModel};

/// A request waiting at a device. `tag` identifies it to the executor.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub tag: u64,
    pub req: DevRequest,
    pub arrival: Ns,
    /// Arrival order at this device (tie-breaker of every scheduler).
    pub seq: u64,
}

/// Busy time and queue statistics of one device.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DeviceStats {
    pub ops: u64,
    pub busy_ns: u64,
    /// Integral over time of the number of waiting requests (not in service).
    pub queue_area: u128,
    pub max_queue: u64,
}

pub struct DevQueue {
    pub model: Box<dyn DeviceModel>,
    sched: Box<dyn Scheduler>,
    depth: usize,
    /// Handed to the device, visible to the scheduler.
    device_q: Vec<Pending>,
    /// Beyond the depth limit, in arrival order.
    host_q: VecDeque<Pending>,
    /// Idle-class requests, served (by the scheduler) only when no normal
    /// request waits.
    idle_q: Vec<Pending>,
    in_service: Option<Pending>,
    head_cyl: u64,
    seq: u64,
    last_change: Ns,
    pub stats: DeviceStats,
}

impl DevQueue {
    pub fn new(model: Box<dyn DeviceModel>, sched: Box<dyn Scheduler>, depth: usize) -> Self {
        DevQueue {
            model,
            sched,
            depth: depth.max(1),
            device_q: Vec::new(),
            host_q: VecDeque::new(),
            idle_q: Vec::new(),
            in_service: None,
            head_cyl: 0,
            seq: 0,
            last_change: 0,
            stats: DeviceStats::default(),
        }
    }

    /// Requests waiting (not in service).
    pub fn waiting(&self) -> usize {
        self.device_q.len() + self.host_q.len() + self.idle_q.len()
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
        self.account(now);
        let p = Pending {
            tag,
            req,
            arrival: now,
            seq: self.seq,
        };
        self.seq += 1;
        let held = self.device_q.len() + self.in_service.is_some() as usize;
        if idle {
            self.idle_q.push(p);
        } else if held < self.depth {
            self.device_q.push(p);
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
        self.account(now);
        let done = self.in_service.take().expect("completion of an idle device");
        (done.tag, self.start_next(now))
    }

    fn start_next(&mut self, now: Ns) -> Option<(u64, Ns)> {
        // Refill the device's queue from the host's, in arrival order.
        while self.device_q.len() < self.depth {
            match self.host_q.pop_front() {
                Some(p) => self.device_q.push(p),
                None => break,
            }
        }
        let idle = self.device_q.is_empty();
        if idle && self.idle_q.is_empty() {
            return None;
        }
        let now_ms = ns_to_ms(now);
        let i = {
            let ctx = SchedCtx {
                now_ms,
                head_cyl: self.head_cyl,
                dev: self.model.as_ref(),
            };
            self.sched.pick(if idle { &self.idle_q } else { &self.device_q }, &ctx)
        };
        // `remove` keeps arrival order among the rest (FCFS picks index 0).
        let p = if idle {
            self.idle_q.remove(i)
        } else {
            self.device_q.remove(i)
        };
        let ms = self.model.service(now_ms, &p.req);
        let dur = ms_to_ns(ms);
        let last = p.req.lbn + (p.req.sectors.max(1) as u64) - 1;
        self.head_cyl = self.model.cylinder(last);
        self.stats.ops += 1;
        self.stats.busy_ns += dur;
        self.in_service = Some(p);
        Some((p.tag, dur))
    }
}

//! Disk schedulers: which queued request the device serves next.
//!
//! One scheduler per file would be overkill for four short rules; each is a
//! small struct behind [`Scheduler`]. Ties are always broken by arrival order
//! (the queue's sequence number), so the choice is deterministic.

use super::queue::Pending;
use crate::device::DeviceModel;
use crate::error::{Error, Result};

/// What a scheduler may look at besides the queue.
pub struct SchedCtx<'a> {
    pub now_ms: f64,
    /// Cylinder of the last sector the head served (0 at start).
    pub head_cyl: u64,
    pub dev: &'a dyn DeviceModel,
}

pub trait Scheduler: Send {
    /// Index in `queue` (never empty) of the request to serve next.
    fn pick(&mut self, queue: &[Pending], ctx: &SchedCtx) -> usize;
    fn name(&self) -> &'static str;
}

pub const SCHEDULERS: &[&str] = &["fcfs", "sstf", "clook", "satf"];

/// Build a scheduler by name (`sptf` is an alias of `satf`, `c-look` of `clook`).
pub fn build(name: &str) -> Result<Box<dyn Scheduler>> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "fcfs" | "fifo" => Box::new(Fcfs),
        "sstf" => Box::new(Sstf),
        "clook" | "c-look" => Box::new(CLook),
        "satf" | "sptf" => Box::new(Satf),
        _ => return Err(Error::unknown("scheduler", name, SCHEDULERS)),
    })
}

/// Index of the minimum of `key` over the queue; ties go to the earliest arrival.
fn argmin<K: PartialOrd>(queue: &[Pending], mut key: impl FnMut(&Pending) -> K) -> usize {
    let mut best = 0;
    let mut best_key = key(&queue[0]);
    for (i, p) in queue.iter().enumerate().skip(1) {
        let k = key(p);
        let better = match k.partial_cmp(&best_key) {
            Some(std::cmp::Ordering::Less) => true,
            Some(std::cmp::Ordering::Equal) => p.seq < queue[best].seq,
            _ => false,
        };
        if better {
            best = i;
            best_key = k;
        }
    }
    best
}

/// First come, first served.
pub struct Fcfs;
impl Scheduler for Fcfs {
    fn pick(&mut self, queue: &[Pending], _: &SchedCtx) -> usize {
        argmin(queue, |p| p.seq)
    }
    fn name(&self) -> &'static str {
        "fcfs"
    }
}

/// Shortest seek (cylinder distance) first.
pub struct Sstf;
impl Scheduler for Sstf {
    fn pick(&mut self, queue: &[Pending], ctx: &SchedCtx) -> usize {
        argmin(queue, |p| ctx.dev.cylinder(p.req.lbn).abs_diff(ctx.head_cyl))
    }
    fn name(&self) -> &'static str {
        "sstf"
    }
}

/// Circular LOOK: sweep towards higher cylinders serving the nearest request
/// at or beyond the head; when none is left, jump back to the lowest one.
pub struct CLook;
impl Scheduler for CLook {
    fn pick(&mut self, queue: &[Pending], ctx: &SchedCtx) -> usize {
        // Key (wrapped?, cylinder): requests ahead of the head sort first.
        argmin(queue, |p| {
            let c = ctx.dev.cylinder(p.req.lbn);
            (c < ctx.head_cyl, c)
        })
    }
    fn name(&self) -> &'static str {
        "clook"
    }
}

/// Shortest access (positioning) time first, by the device's own estimate
/// of seek + rotational latency.
pub struct Satf;
impl Scheduler for Satf {
    fn pick(&mut self, queue: &[Pending], ctx: &SchedCtx) -> usize {
        argmin(queue, |p| ctx.dev.positioning_estimate(ctx.now_ms, &p.req))
    }
    fn name(&self) -> &'static str {
        "satf"
    }
}

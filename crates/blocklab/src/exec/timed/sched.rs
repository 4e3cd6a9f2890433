//! Disk schedulers: which waiting request the device serves next.
//!
//! A scheduler holds the requests that wait for it and hands out the next
//! one, so that it can keep them in the order its rule needs: a queue deep
//! in overload holds tens of thousands of requests, and a scan of all of
//! them per dispatch made a run's cost quadratic in its length. FCFS keeps
//! them by arrival; SSTF, C-LOOK and SATF by (cylinder, arrival), so that
//! the request nearest the head is a lookup, not a scan. Every push and pop
//! costs O(log n) in the queue's length (SATF: plus its bounded window).
//!
//! Ties are always broken by arrival order (the queue's sequence number),
//! so the choice is deterministic.

use std::collections::BTreeMap;

use super::queue::Pending;
use crate::device::DeviceModel;
use crate::error::{Error, Result};

/// What a scheduler may look at besides its queue.
pub struct SchedCtx<'a> {
    pub now_ms: f64,
    /// Cylinder of the last sector the head served (0 at start).
    pub head_cyl: u64,
    pub dev: &'a dyn DeviceModel,
}

pub trait Scheduler: Send {
    /// A request joins the queue (`dev`: the device, for its cylinder map).
    fn push(&mut self, p: Pending, dev: &dyn DeviceModel);
    /// Remove and return the request to serve next (None: the queue is empty).
    fn pop(&mut self, ctx: &SchedCtx) -> Option<Pending>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Every waiting request, in no particular order.
    fn for_each(&self, f: &mut dyn FnMut(&Pending));
    fn name(&self) -> &'static str;
}

pub const SCHEDULERS: &[&str] = &["fcfs", "sstf", "clook", "satf"];

/// SATF's default scan window: the requests nearest the head (by cylinder)
/// whose access time it estimates. Every scheduler of a validated drive or
/// a recipe (DiskSim's drivers: FCFS, C-LOOK, SSTF; Hsu-Smith's SATF at
/// queue depth 8) sees fewer, so for them the window changes nothing.
pub const DEFAULT_SATF_WINDOW: usize = 128;

/// Build a scheduler by name (`sptf` is an alias of `satf`, `c-look` of
/// `clook`) with SATF's default window.
pub fn build(name: &str) -> Result<Box<dyn Scheduler>> {
    build_windowed(name, DEFAULT_SATF_WINDOW)
}

/// As [`build`]; `satf_window`: how many requests SATF estimates per choice
/// (the nearest by cylinder; at least 1). Other schedulers ignore it.
pub fn build_windowed(name: &str, satf_window: usize) -> Result<Box<dyn Scheduler>> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "fcfs" | "fifo" => Box::new(Fcfs::default()),
        "sstf" => Box::new(Sstf::default()),
        "clook" | "c-look" => Box::new(CLook::default()),
        "satf" | "sptf" => Box::new(Satf {
            q: ByCylinder::default(),
            window: satf_window.max(1),
        }),
        _ => return Err(Error::unknown("scheduler", name, SCHEDULERS)),
    })
}

/// First come, first served: by arrival order.
#[derive(Default)]
pub struct Fcfs {
    q: BTreeMap<u64, Pending>,
}
impl Scheduler for Fcfs {
    fn push(&mut self, p: Pending, _: &dyn DeviceModel) {
        self.q.insert(p.seq, p);
    }
    fn pop(&mut self, _: &SchedCtx) -> Option<Pending> {
        self.q.pop_first().map(|(_, p)| p)
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Pending)) {
        self.q.values().for_each(f)
    }
    fn name(&self) -> &'static str {
        "fcfs"
    }
}

/// Waiting requests ordered by (cylinder of their first sector, arrival).
#[derive(Default)]
struct ByCylinder {
    q: BTreeMap<(u64, u64), Pending>,
}

impl ByCylinder {
    fn push(&mut self, p: Pending, dev: &dyn DeviceModel) {
        self.q.insert((dev.cylinder(p.req.lbn), p.seq), p);
    }

    /// The earliest arrival on the lowest cylinder at or above `cyl`.
    fn first_from(&self, cyl: u64) -> Option<(u64, u64)> {
        self.q.range((cyl, 0)..).next().map(|(k, _)| *k)
    }

    /// The earliest arrival on the highest cylinder below `cyl`.
    fn first_below(&self, cyl: u64) -> Option<(u64, u64)> {
        let (&(c, _), _) = self.q.range(..(cyl, 0)).next_back()?;
        self.first_from(c)
    }

    fn take(&mut self, key: (u64, u64)) -> Option<Pending> {
        self.q.remove(&key)
    }
}

/// Shortest seek (cylinder distance) first.
#[derive(Default)]
pub struct Sstf {
    q: ByCylinder,
}
impl Scheduler for Sstf {
    fn push(&mut self, p: Pending, dev: &dyn DeviceModel) {
        self.q.push(p, dev)
    }
    fn pop(&mut self, ctx: &SchedCtx) -> Option<Pending> {
        let head = ctx.head_cyl;
        // The nearest cylinder on each side; equal distances go to the earlier arrival.
        let key = match (self.q.first_from(head), self.q.first_below(head)) {
            (Some(up), Some(down)) => {
                let (du, dd) = (up.0 - head, head - down.0);
                if du < dd || (du == dd && up.1 < down.1) {
                    up
                } else {
                    down
                }
            }
            (Some(k), None) | (None, Some(k)) => k,
            (None, None) => return None,
        };
        self.q.take(key)
    }
    fn len(&self) -> usize {
        self.q.q.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Pending)) {
        self.q.q.values().for_each(f)
    }
    fn name(&self) -> &'static str {
        "sstf"
    }
}

/// Circular LOOK: sweep towards higher cylinders serving the nearest request
/// at or beyond the head; when none is left, jump back to the lowest one.
#[derive(Default)]
pub struct CLook {
    q: ByCylinder,
}
impl Scheduler for CLook {
    fn push(&mut self, p: Pending, dev: &dyn DeviceModel) {
        self.q.push(p, dev)
    }
    fn pop(&mut self, ctx: &SchedCtx) -> Option<Pending> {
        let key = self.q.first_from(ctx.head_cyl).or_else(|| self.q.first_from(0))?;
        self.q.take(key)
    }
    fn len(&self) -> usize {
        self.q.q.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Pending)) {
        self.q.q.values().for_each(f)
    }
    fn name(&self) -> &'static str {
        "clook"
    }
}

/// Shortest access (positioning) time first, by the device's own estimate
/// of seek + rotational latency, among the `window` requests nearest the
/// head by cylinder distance (all of them when no more wait). An estimate
/// costs a layout lookup and the seek curve, so an unbounded scan would make
/// every dispatch linear in the queue; near the head is where short
/// positioning times are, though a far request that happens to sit just
/// ahead of the heads in rotation can be missed by a small window.
pub struct Satf {
    q: ByCylinder,
    window: usize,
}
impl Scheduler for Satf {
    fn push(&mut self, p: Pending, dev: &dyn DeviceModel) {
        self.q.push(p, dev)
    }
    fn pop(&mut self, ctx: &SchedCtx) -> Option<Pending> {
        let head = ctx.head_cyl;
        let estimate = |p: &Pending| ctx.dev.positioning_estimate(ctx.now_ms, &p.req);
        let mut best: Option<((u64, u64), f64)> = None;
        let mut consider = |key: (u64, u64), p: &Pending| {
            let e = estimate(p);
            // Ties (and incomparable estimates) go to the earlier arrival.
            let better = match &best {
                None => true,
                Some((bk, be)) => match e.partial_cmp(be) {
                    Some(std::cmp::Ordering::Less) => true,
                    Some(std::cmp::Ordering::Equal) => key.1 < bk.1,
                    _ => false,
                },
            };
            if better {
                best = Some((key, e));
            }
        };
        if self.q.q.len() <= self.window {
            for (&k, p) in &self.q.q {
                consider(k, p);
            }
        } else {
            // Walk outwards from the head, nearer cylinder first (below on a tie).
            let mut up = self.q.q.range((head, 0)..).peekable();
            let mut down = self.q.q.range(..(head, 0)).rev().peekable();
            for _ in 0..self.window {
                let take_up = match (up.peek(), down.peek()) {
                    (Some((u, _)), Some((d, _))) => u.0 - head < head - d.0,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                let (&k, p) = if take_up { up.next() } else { down.next() }.expect("peeked");
                consider(k, p);
            }
        }
        let (key, _) = best?;
        self.q.take(key)
    }
    fn len(&self) -> usize {
        self.q.q.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Pending)) {
        self.q.q.values().for_each(f)
    }
    fn name(&self) -> &'static str {
        "satf"
    }
}

#[cfg(test)]
mod tests {
    //! The schedulers against the linear scans they replaced, kept here as
    //! the reference: on random queues (repeated cylinders, heads on either
    //! side of every request, arrivals out of order) both must hand out the
    //! same requests in the same order.
    use super::*;
    use crate::array::plan::DiskOpKind;
    use crate::device::DevRequest;

    /// The former rule: index of the minimum of `key`; ties to the earliest arrival.
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

    /// The former linear schedulers.
    fn reference_pick(name: &str, queue: &[Pending], ctx: &SchedCtx) -> usize {
        let cyl = |p: &Pending| ctx.dev.cylinder(p.req.lbn);
        match name {
            "fcfs" => argmin(queue, |p| p.seq),
            "sstf" => argmin(queue, |p| cyl(p).abs_diff(ctx.head_cyl)),
            "clook" => argmin(queue, |p| {
                let c = cyl(p);
                (c < ctx.head_cyl, c)
            }),
            "satf" => argmin(queue, |p| ctx.dev.positioning_estimate(ctx.now_ms, &p.req)),
            _ => unreachable!(),
        }
    }

    /// SATF with a window, by brute force: sort the queue by distance from
    /// the head (at equal distance the side below first, walking away from
    /// the head: latest arrival first below, earliest above), keep `window`,
    /// take the reference's pick among them.
    fn reference_satf_window(queue: &[Pending], ctx: &SchedCtx, window: usize) -> usize {
        let head = ctx.head_cyl;
        let walk = |p: &Pending| {
            let c = ctx.dev.cylinder(p.req.lbn);
            let below = c < head;
            (c.abs_diff(head), !below, if below { u64::MAX - p.seq } else { p.seq })
        };
        let mut order: Vec<usize> = (0..queue.len()).collect();
        order.sort_by_key(|&i| walk(&queue[i]));
        order.truncate(window);
        let near: Vec<Pending> = order.iter().map(|&i| queue[i]).collect();
        order[reference_pick("satf", &near, ctx)]
    }

    /// Ten sectors per cylinder; the estimate is a seek term plus a
    /// "rotation" term that ties often and is not monotone in distance.
    struct Dev {
        head: u64,
    }
    impl DeviceModel for Dev {
        fn service(&mut self, _: f64, _: &DevRequest) -> f64 {
            1.0
        }
        fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
            let d = self.cylinder(req.lbn).abs_diff(self.head) as f64;
            d.sqrt().floor() + ((req.lbn + now_ms as u64) % 3) as f64
        }
        fn cylinder(&self, lbn: u64) -> u64 {
            lbn / 10
        }
        fn capacity_sectors(&self) -> u64 {
            u64::MAX
        }
    }

    /// xorshift64*: the test's own seeded stream.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
        }
    }

    fn pending(seq: u64, lbn: u64) -> Pending {
        Pending {
            tag: seq * 7,
            req: DevRequest {
                kind: DiskOpKind::Read,
                lbn,
                sectors: 8,
            },
            arrival: 0,
            seq,
            demand: true,
        }
    }

    /// Random pushes and pops on the scheduler and on a reference queue;
    /// each pop must take the request the reference picks. `window`: SATF's.
    fn agree(name: &str, window: usize, seed: u64) {
        let mut rng = Rng(seed | 1);
        let mut s = build_windowed(name, window).unwrap();
        let mut reference: Vec<Pending> = Vec::new();
        let mut seq = 0;
        // Few cylinders (many equal positions) or many, by seed.
        let span = if seed % 2 == 0 { 60 } else { 100_000 };
        for step in 0..3000 {
            if rng.below(5) < 3 || reference.is_empty() {
                // Arrivals mostly in order, sometimes out of it (the host
                // queue's refill hands requests over late).
                let seq_of = if rng.below(8) == 0 { 1_000_000 + step } else { seq };
                seq += 1;
                let p = pending(seq_of, rng.below(span));
                let dev = Dev { head: 0 };
                s.push(p, &dev);
                reference.push(p);
                assert_eq!(s.len(), reference.len());
                continue;
            }
            // The head anywhere: below, among and beyond the requests.
            let head = rng.below(span / 10 + 2);
            let dev = Dev { head };
            let ctx = SchedCtx {
                now_ms: step as f64,
                head_cyl: head,
                dev: &dev,
            };
            let i = if name == "satf" && reference.len() > window {
                reference_satf_window(&reference, &ctx, window)
            } else {
                reference_pick(name, &reference, &ctx)
            };
            let want = reference.remove(i);
            let got = s.pop(&ctx).expect("a request waits");
            assert_eq!(
                (got.seq, got.req.lbn, got.tag),
                (want.seq, want.req.lbn, want.tag),
                "{name} (window {window}, seed {seed}) at step {step}, head {head}"
            );
        }
        let mut left = 0;
        s.for_each(&mut |_| left += 1);
        assert_eq!(left, reference.len());
    }

    #[test]
    fn every_scheduler_picks_as_the_linear_scan_did() {
        for name in SCHEDULERS {
            for seed in 1..9 {
                // SATF's window covers every queue here, so it must be exact.
                agree(name, usize::MAX, seed);
            }
        }
    }

    #[test]
    fn windowed_satf_picks_from_the_nearest_requests() {
        for window in [1, 2, 5, 40] {
            for seed in 1..9 {
                agree("satf", window, seed);
            }
        }
    }

    #[test]
    fn satf_window_scans_only_the_nearest_requests() {
        // Head on cylinder 50. Sector 600 (cylinder 60) estimates
        // floor(sqrt(10)) + 600 % 3 = 3; sector 491 (cylinder 49)
        // floor(sqrt(1)) + 491 % 3 = 3 too. With both in view the tie goes to
        // the earlier arrival, 600; a window of one sees only the nearest
        // cylinder, 49.
        let dev = Dev { head: 50 };
        let ctx = SchedCtx {
            now_ms: 0.0,
            head_cyl: 50,
            dev: &dev,
        };
        for (window, want) in [(1, 491), (2, 600)] {
            let mut s = build_windowed("satf", window).unwrap();
            for (seq, lbn) in [(0, 600), (1, 491)] {
                s.push(pending(seq, lbn), &dev);
            }
            assert_eq!(s.pop(&ctx).unwrap().req.lbn, want, "window {window}");
        }
    }
}

//! MD's recovery speed rule (`md_do_sync`): whether the next rebuild step
//! may start now or the rebuild pauses, and until when. Exactly (see
//! `docs/timed.md`, "Rebuild"):
//!
//! * speed = KiB rebuilt since the oldest mark ÷ seconds since it (MD:
//!   `recovery_done = io_sectors − recovery_active`); a mark (time, KiB
//!   rebuilt) is taken at the start and then at the first check at least
//!   3 s after the previous mark, the last 10 kept (MD's SYNC_MARK_STEP =
//!   3 s, SYNC_MARKS = 10). With no time elapsed since the mark the speed
//!   is 0 if nothing completed, else infinite. The check runs before every
//!   step (MD checks once per `window` sectors).
//! * idle = no user request in flight and none issued in the last 500 ms.
//! * pause when speed > min and (speed > max or not idle): if speed > max,
//!   until the moment the speed would fall to max (mark time + KiB ÷ max);
//!   otherwise (busy array) until the earlier of that moment for min and
//!   now + 500 ms. MD sleeps a fixed 500 ms above max; when not idle older
//!   kernels also slept 500 ms and current ones wait until their in-flight
//!   recovery I/O has drained. MD's speed has `+1 s` in its denominator; we
//!   wait exactly as long as the rule needs, so a binding max gives a
//!   hand-computable rate.

use std::collections::VecDeque;

use super::super::engine::Ns;
use super::super::executor::TimedExecutor;

const MARK_STEP: Ns = 3_000_000_000;
const MARKS: usize = 10;
const IDLE_NS: Ns = 500_000_000;
const RECHECK_NS: Ns = 500_000_000;

/// The speed rule's state: limits, marks and the KiB rebuilt so far.
#[derive(Debug, Clone)]
pub struct MdPacing {
    min_kbps: u64,
    max_kbps: u64,
    done_kib: u64,
    marks: VecDeque<(Ns, u64)>,
}

impl MdPacing {
    pub fn new(min_kbps: u64, max_kbps: u64) -> MdPacing {
        MdPacing {
            min_kbps,
            max_kbps,
            done_kib: 0,
            marks: VecDeque::new(),
        }
    }

    /// The recovery starts at `now`: the first mark.
    pub fn start(&mut self, now: Ns) {
        self.marks.push_back((now, 0));
    }

    /// `kib` more of the member were rebuilt.
    pub fn rebuilt(&mut self, kib: u64) {
        self.done_kib += kib;
    }

    /// Before a step at `now`: None to go ahead, or the time (after `now`)
    /// until which the rebuild pauses before checking again.
    pub fn check(&mut self, now: Ns, ex: &TimedExecutor) -> Option<Ns> {
        let (speed, mt, kib) = self.speed(now);
        let idle = ex.in_flight() == 0 && ex.last_user_issue().is_none_or(|t| now >= t + IDLE_NS);
        let min = self.min_kbps as f64;
        let max = self.max_kbps as f64;
        if !(speed > min && (speed > max || !idle)) {
            return None;
        }
        // The moment the speed falls to `limit` with no new step.
        let at = |limit: f64| mt + (kib as f64 / limit * 1e9).ceil() as Ns;
        let until = if speed > max {
            at(max)
        } else {
            at(min).min(now + RECHECK_NS)
        };
        Some(until.max(now + 1))
    }

    /// (speed in KiB/s, oldest mark's time, KiB since it); takes a new mark
    /// when the last one is old enough.
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
}

//! MD's recovery speed rule (`md_do_sync`): whether the next rebuild step
//! may start now or the rebuild waits, and until when. Three rules
//! (`array.rebuild.idle`, `--rebuild-idle`; see `docs/timed.md`, "Rebuild"):
//!
//! * `simple` (the default; blocklab's rule since the first rebuild):
//!   checked before every step. Speed = KiB *completed* since the oldest
//!   mark ÷ seconds since it; marks (time, KiB) at the start and then at the
//!   first check at least 3 s after the previous one, the last 10 kept (MD's
//!   SYNC_MARK_STEP, SYNC_MARKS). Idle = no user request in flight and none
//!   issued in the last 500 ms. Pause when speed > min and (speed > max or
//!   not idle): above max until the moment the speed falls to max; busy,
//!   until the earlier of that moment for min and now + 500 ms. Exact waits,
//!   so a binding limit gives a hand-computable rate.
//! * `md2611`: Linux 2.6.11, the kernel of the PRO paper. Checked once per
//!   128 KiB (32 pages) of *issued* recovery I/O. Ten marks stepped every
//!   3 s, each recording the KiB completed; speed = (KiB issued − the oldest
//!   mark's KiB) ÷ (whole seconds since it + 1) + 1. Busy when some member
//!   saw more than 32 sectors of non-recovery I/O since the last time it was
//!   found busy (`is_mddev_idle`, per member, evaluated only when the speed
//!   is between min and max). When speed > min and (speed > max or busy):
//!   sleep 250 ms and check again (`msleep_interruptible(250); goto repeat`).
//! * `md6`: today's `md.c`. Checked once per 128 KiB of issued I/O; speed
//!   from KiB *completed* (`io_sectors − recovery_active`) with the same
//!   marks, `+ 1 s` and `+ 1 KB/s`. Above max: sleep 500 ms, check again.
//!   Between min and max, when the recovery I/O in flight exceeds
//!   `sync_io_depth` (32) × 8 sectors (RAID-4/5/6, 128 KiB of member) or ×
//!   128 sectors (other levels, 2 MiB) and the array is not idle (it saw
//!   user I/O since the last check, or has some in flight): wait until the
//!   recovery I/O in flight has drained, then go on.
//!
//! Sectors of user I/O are counted when the request is planned (the kernel
//! counts them at completion in its disk statistics).
//!
//! The rule is written once for every executor: it reads the time and the
//! users' activity through [`PaceClock`] — simulated ns from the timed
//! executor ([`crate::timed::rebuild::Rebuilder`]), the wall clock since the
//! array was opened from the real one (`exec/real/rebuild.rs`) — and says
//! [`Gate::Go`], [`Gate::Until`] a time on that clock, or [`Gate::Drain`];
//! the driver waits in its own way (a wake-up event, a sleep).

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::timed::engine::Ns;

/// The clock the rule runs on and what it sees of the users.
pub trait PaceClock {
    /// Now, in ns (simulated time, or the wall clock from some epoch).
    fn now(&self) -> Ns;
    /// User requests in flight (the rebuild's own I/O excluded).
    fn users_in_flight(&self) -> usize;
    /// When the last user request was issued, on the same clock (None: none yet).
    fn last_user_issue(&self) -> Option<Ns>;
}

const MARK_STEP: Ns = 3_000_000_000;
const MARKS: usize = 10;
const IDLE_NS: Ns = 500_000_000;
const RECHECK_NS: Ns = 500_000_000;
/// MD checks its speed once per this much issued recovery I/O (32 pages).
const MD_WINDOW_KIB: u64 = 128;
const SEC: Ns = 1_000_000_000;

/// Which of MD's idle tests (and the speed rule around it) paces the rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdleRule {
    #[default]
    Simple,
    Md2611,
    Md6,
}

/// Names of the rules.
pub const IDLE_RULES: &[&str] = &["simple", "md2611", "md6"];

impl IdleRule {
    pub fn parse(s: &str) -> Result<IdleRule> {
        match s.to_ascii_lowercase().as_str() {
            "simple" => Ok(IdleRule::Simple),
            "md2611" | "md-2.6.11" => Ok(IdleRule::Md2611),
            "md6" | "md" => Ok(IdleRule::Md6),
            other => Err(Error::unknown("rebuild idle rule", other, IDLE_RULES)),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            IdleRule::Simple => "simple",
            IdleRule::Md2611 => "md2611",
            IdleRule::Md6 => "md6",
        }
    }
}

/// What the rule says before a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Go,
    /// Pause until this time, then check again.
    Until(Ns),
    /// Issue nothing until the recovery I/O in flight has completed.
    Drain,
}

/// The speed rule's state.
#[derive(Debug, Clone)]
pub struct MdPacing {
    rule: IdleRule,
    /// False: the rule never holds the rebuild back.
    on: bool,
    min_kbps: u64,
    max_kbps: u64,
    done_kib: u64,
    issued_kib: u64,
    /// `simple`: (time, KiB completed), oldest first.
    marks: VecDeque<(Ns, u64)>,
    /// MD's ring of marks, the last stepped, and the mark the speed is
    /// measured from (`resync_mark`, `resync_mark_cnt`).
    ring: [(Ns, u64); MARKS],
    last_mark: usize,
    resync_mark: (Ns, u64),
    last_check_kib: u64,
    /// The last check paused: check again before issuing (`goto repeat`).
    recheck: bool,
    draining: bool,
    /// Non-recovery sectors per member so far, and at the last busy finding.
    member_sectors: Vec<u64>,
    last_events: Vec<u64>,
    array_sectors: u64,
    array_last: u64,
    /// In-flight recovery KiB that `md6` tolerates on a busy array.
    io_limit_kib: u64,
    pub drains: u64,
}

impl MdPacing {
    pub fn new(min_kbps: u64, max_kbps: u64) -> MdPacing {
        Self::with_rule(IdleRule::Simple, true, min_kbps, max_kbps, 0, false)
    }

    /// A rule for an array of `ndisks` members (`parity`: RAID-4/5/6, for
    /// `md6`'s in-flight limit); `on` false never pauses.
    pub fn with_rule(rule: IdleRule, on: bool, min_kbps: u64, max_kbps: u64, ndisks: usize, parity: bool) -> MdPacing {
        MdPacing {
            rule,
            on,
            min_kbps,
            max_kbps,
            done_kib: 0,
            issued_kib: 0,
            marks: VecDeque::new(),
            ring: [(0, 0); MARKS],
            last_mark: 0,
            resync_mark: (0, 0),
            last_check_kib: 0,
            recheck: false,
            draining: false,
            member_sectors: vec![0; ndisks],
            last_events: vec![0; ndisks],
            array_sectors: 0,
            array_last: 0,
            // sync_io_depth (32) × 8 or 128 sectors of 512 bytes.
            io_limit_kib: if parity { 32 * 8 / 2 } else { 32 * 128 / 2 },
            drains: 0,
        }
    }

    pub fn rule(&self) -> IdleRule {
        self.rule
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The recovery starts at `now`: the first marks.
    pub fn start(&mut self, now: Ns) {
        self.marks.push_back((now, 0));
        self.ring = [(now, 0); MARKS];
        self.last_mark = 0;
        self.resync_mark = (now, 0);
    }

    /// `kib` more of the member were rebuilt.
    pub fn rebuilt(&mut self, kib: u64) {
        self.done_kib += kib;
    }

    /// A step that will rebuild `kib` of the member was issued.
    pub fn issued(&mut self, kib: u64) {
        self.issued_kib += kib;
    }

    /// `sectors` of non-recovery I/O were asked of member `disk`.
    pub fn user_io(&mut self, disk: usize, sectors: u64) {
        if let Some(s) = self.member_sectors.get_mut(disk) {
            *s += sectors;
        }
        self.array_sectors += sectors;
    }

    /// Before a step, at `clock.now()` (`in_flight_kib`: recovery I/O in flight).
    pub fn gate(&mut self, clock: &impl PaceClock, in_flight_kib: u64) -> Gate {
        if !self.on {
            return Gate::Go;
        }
        let now = clock.now();
        match self.rule {
            IdleRule::Simple => self.check(now, clock).map_or(Gate::Go, Gate::Until),
            IdleRule::Md2611 => self.md2611(now),
            IdleRule::Md6 => self.md6(now, clock, in_flight_kib),
        }
    }

    /// `simple`: None to go ahead, or the time (after `now`) until which the
    /// rebuild pauses before checking again.
    pub fn check(&mut self, now: Ns, clock: &impl PaceClock) -> Option<Ns> {
        let (speed, mt, kib) = self.speed(now);
        let idle = clock.users_in_flight() == 0 && clock.last_user_issue().is_none_or(|t| now >= t + IDLE_NS);
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

    /// Whether this is one of MD's check points: once per 128 KiB issued,
    /// or again after a pause.
    fn due(&mut self) -> bool {
        if self.recheck || self.issued_kib >= self.last_check_kib + MD_WINDOW_KIB {
            self.last_check_kib = self.issued_kib;
            true
        } else {
            false
        }
    }

    /// MD's marks: step when the last is 3 s old; the speed is measured
    /// from the mark stepped over (the oldest of the ten).
    fn step_marks(&mut self, now: Ns) {
        if now >= self.ring[self.last_mark].0 + MARK_STEP {
            let next = (self.last_mark + 1) % MARKS;
            self.resync_mark = self.ring[next];
            self.ring[next] = (now, self.done_kib);
            self.last_mark = next;
        }
    }

    /// MD's `currspeed` from a count in KiB.
    fn md_speed(&self, now: Ns, kib: u64) -> u64 {
        let (t, k) = self.resync_mark;
        kib.saturating_sub(k) / ((now.saturating_sub(t)) / SEC + 1) + 1
    }

    fn md2611(&mut self, now: Ns) -> Gate {
        if !self.due() {
            return Gate::Go;
        }
        self.step_marks(now);
        let speed = self.md_speed(now, self.issued_kib);
        if speed > self.min_kbps && (speed > self.max_kbps || !self.members_idle()) {
            self.recheck = true;
            return Gate::Until(now + 250_000_000);
        }
        self.recheck = false;
        Gate::Go
    }

    /// 2.6.11's `is_mddev_idle`: busy when a member saw more than 32
    /// sectors since the last time it was found busy.
    fn members_idle(&mut self) -> bool {
        let mut idle = true;
        for (cur, last) in self.member_sectors.iter().zip(self.last_events.iter_mut()) {
            if cur - *last > 32 {
                *last = *cur;
                idle = false;
            }
        }
        idle
    }

    fn md6(&mut self, now: Ns, clock: &impl PaceClock, in_flight_kib: u64) -> Gate {
        if self.draining {
            if in_flight_kib > 0 {
                return Gate::Drain;
            }
            self.draining = false;
            return Gate::Go;
        }
        if !self.due() {
            return Gate::Go;
        }
        self.step_marks(now);
        let speed = self.md_speed(now, self.done_kib);
        self.recheck = false;
        if speed > self.min_kbps {
            if speed > self.max_kbps {
                self.recheck = true;
                return Gate::Until(now + 500_000_000);
            }
            if in_flight_kib >= self.io_limit_kib && !self.array_idle(clock) {
                self.draining = true;
                self.drains += 1;
                return Gate::Drain;
            }
        }
        Gate::Go
    }

    /// Today's `is_mddev_idle`: no user I/O since the last check, none in flight.
    fn array_idle(&mut self, clock: &impl PaceClock) -> bool {
        let quiet = self.array_sectors == self.array_last;
        self.array_last = self.array_sectors;
        quiet && clock.users_in_flight() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names() {
        for n in IDLE_RULES {
            assert_eq!(IdleRule::parse(n).unwrap().name(), *n);
        }
        assert!(IdleRule::parse("never").unwrap_err().to_string().contains("md2611"));
    }

    #[test]
    fn md_speed_has_mds_plus_one_second_and_plus_one() {
        let mut p = MdPacing::with_rule(IdleRule::Md2611, true, 10, 100, 2, true);
        p.start(0);
        // 1,000 KiB 2.5 s after the start: 1000 / (2 + 1) + 1 = 334.
        assert_eq!(p.md_speed(2_500_000_000, 1000), 334);
        // Marks step every 3 s: at 3 s the ring's next mark (start, 0) becomes
        // the reference and (3 s, done) is recorded.
        p.rebuilt(600);
        p.step_marks(3 * SEC);
        assert_eq!(p.resync_mark, (0, 0));
        assert_eq!(p.ring[1], (3 * SEC, 600));
    }

    #[test]
    fn md2611_checks_every_128_kib_and_finds_members_busy_above_32_sectors() {
        let mut p = MdPacing::with_rule(IdleRule::Md2611, true, 10, 1_000_000, 3, true);
        p.start(0);
        p.issued(64);
        assert_eq!(p.md2611(SEC / 10), Gate::Go, "not yet a window");
        p.issued(64);
        p.user_io(1, 32);
        // Speed (128 − 0)/(0 + 1) + 1 = 129 > 10; 32 sectors is not busy.
        assert_eq!(p.md2611(SEC / 10), Gate::Go);
        p.issued(128);
        p.user_io(1, 1);
        // 33 sectors since the last busy finding (none): busy, sleep 250 ms.
        assert_eq!(p.md2611(SEC / 5), Gate::Until(SEC / 5 + 250_000_000));
        // Checked again after the sleep: the member's count was reset.
        assert_eq!(p.md2611(SEC / 2), Gate::Go);
    }
}

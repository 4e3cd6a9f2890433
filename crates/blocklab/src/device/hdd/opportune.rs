//! Opportunistic reading (Hsu & Smith §4 "Opportunistic prefetch"), for a
//! host that asks for it (`DeviceModel::set_opportunism`); the drive's own
//! buffer and read-ahead (`cache`) are another matter and stay as they are.
//!
//! * Preemptible read-ahead: after a read the mechanism keeps reading the
//!   following sectors while no request arrives, until the limit (counted
//!   from the end of the last demand read, so a host read-ahead of that
//!   read counts towards it). A request stops it at its arrival; the sector
//!   in progress completes. Evaluated lazily, like the drive's own read-ahead.
//! * A read that continues the sector stream the mechanism is on (the next
//!   sector after the previous read or after the read-ahead so far), and
//!   that arrived while the mechanism was still on it, streams on without a
//!   lost revolution: a queued second command (the host's read-ahead I/O)
//!   or a request that preempts read-ahead exactly where it is.
//! * Read-any-free-blocks: the sectors of the target track that pass under
//!   the head while a read miss waits for its first sector are read too
//!   (before the request on the track, and those after it when the wait
//!   wraps round), all of them, contiguous with the request or not.
//! * Just-in-time seek: a read that preempts read-ahead lets the mechanism
//!   read on along the current track until `T1 − positioning`, where `T1`
//!   is when the read's transfer would start with an immediate departure;
//!   the transfer then starts at `T1` exactly. (Not with DiskSim's
//!   "trackSwitchPlusRotation" access model, whose extra switch would make
//!   the rule approximate.)
//!
//! Everything read so is handed over as `FreeRun`s, never served by the
//! drive itself: the host decides what to keep.

use super::{c_over, Hdd};
use crate::device::{DevRequest, Dispatch, FreeRun, Opportunism};

/// The host's opportunistic reading and where the mechanism's sector stream is.
#[derive(Debug, Clone, Default)]
pub(super) struct Opp {
    pub(super) cfg: Opportunism,
    /// One past the last sector of the demand read the read-ahead limit counts from.
    anchor_end: u64,
    /// After the last read: the next sector and when the mechanism reached
    /// it (`t`), and where preemptible read-ahead stops (`limit`).
    stream: Option<Stream>,
    free: Vec<FreeRun>,
}

#[derive(Debug, Clone, Copy)]
struct Stream {
    next: u64,
    t: f64,
    limit: u64,
}

impl Opp {
    pub(super) fn new(cfg: Opportunism) -> Self {
        Opp {
            cfg,
            ..Default::default()
        }
    }
}

impl Hdd {
    /// Preemptible read-ahead up to `until`. With `stop`, a request arrives
    /// then: the sector in progress completes and the read-ahead ends; else
    /// only whole sectors read by `until` count and it goes on. Returns
    /// whether read-ahead was still under way at `until`.
    fn read_ahead_until(&mut self, until: f64, stop: bool) -> bool {
        let Some(opp) = self.opp.as_ref() else { return false };
        let Some(mut s) = opp.stream else { return false };
        let cap = self.p.layout.capacity();
        let limit = s.limit.min(cap);
        let mut active = false;
        let mut runs = Vec::new();
        while s.next < limit {
            let saved = self.head;
            let (ph, run) = self.p.layout.run(s.next, limit - s.next);
            let (start, _) = self.access(s.t, &ph, false);
            let st = self.period / ph.spt as f64;
            let k = if start > until {
                0
            } else if stop {
                // Sectors started by `until` (the one in progress completes).
                run.min(((until - start) / st).floor() as u64 + 1)
            } else {
                run.min(((until - start) / st).floor() as u64)
            };
            if k == 0 {
                self.head = saved;
                active = true;
                break;
            }
            self.head_wrote = false;
            runs.push(FreeRun {
                lbn: s.next,
                sectors: k,
                at_ms: start + k as f64 * st,
            });
            s.next += k;
            s.t = start + k as f64 * st;
            if k < run {
                active = true;
                break;
            }
        }
        if stop && active {
            // The mechanism leaves now (or after the sector in progress).
            s.t = s.t.max(until);
            s.limit = s.next;
        }
        self.mech_free = self.mech_free.max(s.t);
        let opp = self.opp.as_mut().expect("checked above");
        opp.stream = Some(s);
        opp.free.extend(runs);
        active
    }

    /// Just-in-time seek: read on along the current track until the
    /// latest departure that still starts the transfer of a read of `lbn`,
    /// arriving `now`, when an immediate departure would.
    fn jit_hold(&mut self, now: f64, lbn: u64) {
        let Some(mut s) = self.opp.as_ref().and_then(|o| o.stream) else {
            return;
        };
        let oh = c_over(&self.p.overheads.read_miss, self.last_write as usize);
        let start = (now + oh).max(self.mech_free);
        let ph = self.p.layout.map(lbn);
        let pos = self.position(self.head, &ph, false);
        let t1 = start + pos;
        let depart = t1 + self.rotation_wait(t1, &ph) - pos;
        if depart <= self.mech_free {
            return;
        }
        // Further sectors of the track under the head (the positioning from
        // anywhere on it is the same).
        let limit = self
            .opp
            .as_ref()
            .map_or(s.next, |o| s.next.max(o.anchor_end + o.cfg.readahead_sectors))
            .min(self.p.layout.capacity());
        if s.next < limit {
            let (q, run) = self.p.layout.run(s.next, limit - s.next);
            if q.cyl == self.head.cyl && q.head == self.head.head {
                let st = self.period / q.spt as f64;
                let first = self.mech_free + self.rotation_wait(self.mech_free, &q);
                let k = run.min(((depart - first) / st).max(0.0).floor() as u64);
                if k > 0 {
                    let at = first + k as f64 * st;
                    s.next += k;
                    s.t = at;
                    let opp = self.opp.as_mut().expect("checked above");
                    opp.free.push(FreeRun {
                        lbn: s.next - k,
                        sectors: k,
                        at_ms: at,
                    });
                    opp.stream = Some(s);
                }
            }
        }
        self.mech_free = depart;
    }

    /// Read-any-free-blocks for a read miss of `lbn..lbn+n` whose media
    /// access starts at `start`: the whole sectors of the target track that
    /// pass under the head before the first requested one.
    pub(super) fn free_on_track(&mut self, start: f64, lbn: u64, n: u64) {
        if !self.opp.as_ref().is_some_and(|o| o.cfg.read_any_free) {
            return;
        }
        let ph = self.p.layout.map(lbn);
        let t1 = start + self.position(self.head, &ph, false);
        let wait = self.rotation_wait(t1, &ph);
        let st = self.period / ph.spt as f64;
        let (spt, s0) = (ph.spt as u64, ph.sector as u64);
        let k = ((wait / st).floor() as u64).min(spt - 1);
        let Some(first) = lbn.checked_sub(s0) else { return };
        // Only tracks numbered as one run of `spt` sectors (no slips, spares).
        let (q, run) = self.p.layout.run(first, spt);
        if q.cyl != ph.cyl || q.head != ph.head || q.sector != 0 || run != spt {
            return;
        }
        let at = t1 + wait;
        let mut runs = Vec::new();
        let before = k.min(s0);
        if before > 0 {
            runs.push((lbn - before, before));
        }
        if k > s0 {
            // Wrapped round: the end of the track, less the request's own sectors.
            let lo = (first + spt - (k - s0)).max(lbn + n);
            let hi = first + spt;
            if lo < hi {
                runs.push((lo, hi - lo));
            }
        }
        let opp = self.opp.as_mut().expect("checked above");
        for (l, c) in runs {
            opp.free.push(FreeRun {
                lbn: l,
                sectors: c,
                at_ms: at,
            });
        }
    }

    /// A read continuing the sector stream at `lbn`: no lost revolution.
    fn read_stream_on(&mut self, now: f64, t: f64, lbn: u64, n: u64) -> f64 {
        let oh = c_over(&self.p.overheads.read_hit, self.last_write as usize);
        let bus = self.p.bus_read_ms;
        let mut ready = Vec::with_capacity(n as usize);
        self.split_on = true;
        let end = self.media(t.max(self.mech_free), lbn, n, false, |_, r| ready.push(r));
        self.split_on = false;
        let mut bus_t = now + oh;
        for &r in &ready {
            bus_t = bus_t.max(r) + bus;
        }
        self.mech_free = end;
        self.head_wrote = false;
        self.last_hit = false;
        self.prev_read_end = Some(lbn + n);
        bus_t - now + self.p.overheads.read_complete
    }

    /// Serve `req` with opportunistic reading on (see the module comment).
    pub(super) fn serve_opportunistic(&mut self, now: f64, req: &DevRequest, d: &Dispatch) -> f64 {
        let read = req.kind == crate::array::plan::DiskOpKind::Read;
        let arrived = d.arrived_ms.min(now);
        let was_reading = self.read_ahead_until(arrived, true);
        let stream = self.opp.as_ref().and_then(|o| o.stream);
        let prev_end = self.prev_chain_end;
        let (lbn, n) = self.clamp(req);
        // Streaming on: the request arrived while the mechanism was still on
        // the stream (reading ahead, or before the previous media transfer ended).
        let continues = read && stream.is_some_and(|s| s.next == lbn && (was_reading || arrived <= s.t));
        let t = if continues {
            self.split = Default::default();
            let t = self.read_stream_on(now, stream.map_or(now, |s| s.t), lbn, n);
            self.last_write = false;
            self.last_end = lbn + n;
            t
        } else {
            let jit = self.opp.as_ref().is_some_and(|o| o.cfg.jit_seek);
            if was_reading && read && jit && !self.p.track_switch_per_access {
                self.jit_hold(now, lbn);
            }
            self.service_inner(now, req)
        };
        // Background reads that follow the previous read (the host's own
        // read-ahead) leave the limit where the demand read put it.
        let chained = !d.demand && prev_end == Some(lbn);
        let end = lbn + n;
        let mech = self.mech_free;
        let opp = self.opp.as_mut().expect("opportunistic serve");
        if read {
            if d.demand || !chained {
                opp.anchor_end = end;
            }
            opp.stream = Some(Stream {
                next: end,
                t: mech,
                limit: end.max(opp.anchor_end + opp.cfg.readahead_sectors),
            });
            self.prev_chain_end = Some(end);
        } else {
            opp.stream = None;
            self.prev_chain_end = None;
        }
        t
    }

    /// The device idles until `until`: read ahead meanwhile.
    pub(super) fn idle_until(&mut self, until: f64) {
        self.read_ahead_until(until, false);
    }

    pub(super) fn take_free_runs(&mut self, out: &mut Vec<FreeRun>) {
        if let Some(o) = self.opp.as_mut() {
            out.append(&mut o.free);
        }
    }
}

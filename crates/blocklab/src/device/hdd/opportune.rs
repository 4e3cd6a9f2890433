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

#[cfg(test)]
mod tests {
    use super::super::tests::simple_drive;
    use super::super::SeekCurve;
    use crate::array::plan::DiskOpKind;
    use crate::device::{DevRequest, DeviceModel, Dispatch, FreeRun, Opportunism};
    use proptest::prelude::*;

    // The simple drive: 1 surface, 100 cylinders of 100 sectors, 10 ms a
    // revolution (0.1 ms a sector), no skews, no overheads; here the
    // single-cylinder seek takes 1.03 ms.
    fn drive(o: Opportunism) -> super::Hdd {
        let mut d = simple_drive();
        d.p.read_seek = SeekCurve::Table(vec![(1.0, 1.03), (99.0, 5.9)]);
        assert!(d.set_opportunism(o));
        d
    }

    fn read(lbn: u64, sectors: u32) -> DevRequest {
        DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors,
        }
    }

    fn demand(at: f64) -> Dispatch {
        Dispatch {
            demand: true,
            arrived_ms: at,
        }
    }

    fn free(d: &mut super::Hdd) -> Vec<(u64, u64, f64)> {
        let mut v: Vec<FreeRun> = Vec::new();
        d.take_free(&mut v);
        v.iter()
            .map(|r| (r.lbn, r.sectors, (r.at_ms * 1e6).round() / 1e6))
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn read_any_free_blocks_keeps_what_passes_under_the_head() {
        let mut d = drive(Opportunism {
            read_any_free: true,
            ..Default::default()
        });
        // At 0.05 ms the platter is half a sector past sector 0: sector 50
        // comes round at 5.0 ms; sectors 1..49 pass whole meanwhile.
        assert!(close(d.serve(0.05, &read(50, 1), &demand(0.05)), 5.05));
        assert_eq!(free(&mut d), vec![(1, 49, 5.0)]);
        // At 25.05 ms (angle 50.5) sector 10 is 59.5 sectors away: 49 of the
        // track's end (51..99, after the request) and 0..9 before it pass.
        assert!(close(d.serve(25.05, &read(10, 1), &demand(25.05)), 6.05));
        assert_eq!(free(&mut d), vec![(0, 10, 31.0), (51, 49, 31.0)]);
    }

    #[test]
    fn preemptible_read_ahead_runs_while_idle_up_to_its_limit() {
        let mut d = drive(Opportunism {
            readahead_sectors: 20,
            ..Default::default()
        });
        assert!(close(d.serve(0.0, &read(0, 1), &demand(0.0)), 0.1));
        // Idle until 1.05 ms: sectors 1..9 are read (the tenth is in progress).
        d.advance_idle(1.05);
        assert_eq!(free(&mut d), vec![(1, 9, 1.0)]);
        // Then up to the limit, 20 sectors past the demand read: 10..20 by 2.1.
        d.advance_idle(5.0);
        assert_eq!(free(&mut d), vec![(10, 11, 2.1)]);
        // A read of sector 21 at 10.05 ms comes after the read-ahead has
        // stopped: an ordinary access (20.5 sectors of rotation, 2.15 ms).
        assert!(close(d.serve(10.05, &read(21, 1), &demand(10.05)), 2.15));
        assert!(free(&mut d).is_empty());
    }

    #[test]
    fn a_queued_read_after_the_last_one_streams_on() {
        // Misses cost 0.05 ms of overhead; the drive read sector 0 at 10.0
        // (10.1 ms). The host's read-ahead of sectors 1..8, queued at 0 ms,
        // continues the stream (0.8 ms); without opportunism it arrives 0.05
        // ms too late and waits a revolution.
        let mk = |opp: bool| {
            let mut d = simple_drive();
            d.p.overheads.read_miss = [0.05, 0.05];
            if opp {
                d.set_opportunism(Opportunism::default());
            }
            d
        };
        let queued = Dispatch {
            demand: false,
            arrived_ms: 0.0,
        };
        let mut d = mk(true);
        assert!(close(d.serve(0.0, &read(0, 1), &demand(0.0)), 10.1));
        assert!(close(d.serve(10.1, &read(1, 8), &queued), 0.8));
        let mut d = mk(false);
        assert!(close(d.serve(0.0, &read(0, 1), &demand(0.0)), 10.1));
        assert!(close(d.serve(10.1, &read(1, 8), &queued), 10.8));
    }

    #[test]
    fn just_in_time_seek_reads_on_and_still_starts_the_transfer_on_time() {
        // Read-ahead after sector 0 (read by 0.1 ms); a read of sector 50 of
        // cylinder 1 arrives at 1.05 ms. Without JIT: sectors 1..10 (the
        // tenth completes at 1.1), seek 1.03 to 2.13, sector 50 at 5.0, done
        // 5.1 (4.05 ms). With JIT the arm leaves at 5.0 − 1.03 = 3.97:
        // sectors 11..38 more, the same 4.05 ms.
        for (jit, runs) in [(false, vec![(1, 10, 1.1)]), (true, vec![(1, 10, 1.1), (11, 28, 3.9)])] {
            let mut d = drive(Opportunism {
                readahead_sectors: 1000,
                jit_seek: jit,
                ..Default::default()
            });
            assert!(close(d.serve(0.0, &read(0, 1), &demand(0.0)), 0.1));
            assert!(close(d.serve(1.05, &read(150, 1), &demand(1.05)), 4.05), "jit {jit}");
            assert_eq!(free(&mut d), runs, "jit {jit}");
        }
    }

    #[test]
    fn the_split_of_a_read_is_its_rotation_and_transfer() {
        let mut d = simple_drive();
        // At 2.0 ms the platter is at sector 20: 3.0 ms to sector 50, 0.1 to read it.
        assert!(close(d.service(2.0, &read(50, 1)), 3.1));
        let s = d.last_split().unwrap();
        assert!(close(s.seek_ms, 0.0) && close(s.rotation_ms, 3.0) && close(s.transfer_ms, 0.1));
        // Sector 40 of the next cylinder at 10.0: a 1.0 ms seek, then the
        // platter is at sector 10: 3.0 ms more.
        assert!(close(d.service(10.0, &read(140, 1)), 4.1));
        let s = d.last_split().unwrap();
        assert!(close(s.seek_ms, 1.0) && close(s.rotation_ms, 3.0) && close(s.transfer_ms, 0.1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// However a demand read arrives during read-ahead, JIT seek never
        /// changes when its transfer starts (hence its service time) and
        /// only adds sectors read.
        #[test]
        fn jit_seek_never_delays_the_read_and_only_adds_sectors(
            first in 0u64..5000,
            target in 0u64..9000,
            n in 1u32..16,
            gap in 0.01f64..6.0,
        ) {
            let go = |jit: bool| {
                let mut d = drive(Opportunism { readahead_sectors: 256, jit_seek: jit, ..Default::default() });
                let t0 = d.serve(0.0, &read(first, 4), &demand(0.0));
                let t = d.serve(t0 + gap, &read(target, n), &demand(t0 + gap));
                let sectors: u64 = free(&mut d).iter().map(|r| r.1).sum();
                (t, sectors)
            };
            let (t_no, s_no) = go(false);
            let (t_jit, s_jit) = go(true);
            prop_assert!((t_no - t_jit).abs() < 1e-6, "{} vs {}", t_no, t_jit);
            prop_assert!(s_jit >= s_no);
        }
    }
}

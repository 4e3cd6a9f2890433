//! The mechanism: the arm (seek, head switch, write settle) and the platter
//! (absolute rotational position), and the media transfer built from them.
//! Angles are absolute: the platter is at angle 0 at time 0.

use super::layout::Phys;
use super::remainder::rem_euclid;
use super::Hdd;

/// Where the heads are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    pub(super) cyl: u32,
    pub(super) head: u32,
}

const EPS: f64 = 1e-9;

impl Hdd {
    /// Positioning time from the current head to `to` (seek or head switch).
    pub(super) fn position(&self, from: Head, to: &Phys, write: bool) -> f64 {
        let d = (from.cyl as i64 - to.cyl as i64).unsigned_abs();
        let mut t = if d == 0 {
            if from.head != to.head {
                self.p.head_switch_ms
            } else {
                0.0
            }
        } else if write && self.p.write_seek.is_some() {
            return self.p.write_seek.as_ref().map(|c| c.time(d)).unwrap_or(0.0).max(0.0);
        } else if d == 1 && self.p.single_cyl_ms.is_some() {
            self.p.single_cyl_ms.unwrap_or(0.0)
        } else {
            self.p.read_seek.time(d)
        };
        if write && (d > 0 || from.head != to.head) {
            t += self.p.write_settle_ms;
        }
        t.max(0.0)
    }

    /// Time until the leading edge of `to` passes under the head at `t`.
    pub(super) fn rotation_wait(&self, t: f64, to: &Phys) -> f64 {
        let target = to.angle / to.spt as f64;
        let now = rem_euclid(t / self.period, 1.0);
        let mut f = rem_euclid(target - now, 1.0);
        if f > 1.0 - EPS {
            f = 0.0;
        }
        f * self.period
    }

    /// Access one sector: positioning from the current head, rotation,
    /// transfer. Returns (start of transfer, end of transfer).
    pub(super) fn access(&mut self, t: f64, ph: &Phys, write: bool) -> (f64, f64) {
        let pos = self.position(self.head, ph, write);
        let t1 = t + pos;
        let wait = self.rotation_wait(t1, ph);
        let start = t1 + wait;
        if self.split_on {
            self.split.seek_ms += pos;
            self.split.rotation_ms += wait;
        }
        self.head = Head {
            cyl: ph.cyl,
            head: ph.head,
        };
        (start, start + self.period / ph.spt as f64)
    }

    /// Read or write `n` consecutive LBNs on the media from time `t`;
    /// calls `each(i, end_time)` per sector, in LBN order; returns the end
    /// time (the last sector's, which with zero-latency reads need not be
    /// the last LBN's).
    pub(super) fn media(&mut self, t: f64, lbn: u64, n: u64, write: bool, mut each: impl FnMut(u64, f64)) -> f64 {
        let mut t = t;
        let mut i = 0;
        while i < n {
            // One access per run of consecutive sectors on a track.
            let (ph, run) = self.p.layout.run(lbn + i, n - i);
            let st = self.period / ph.spt as f64;
            let reading = !write && !self.writing;
            // When the head reaches the track: only the track buffer asks.
            let arrive = if reading && self.p.track_buffer_tracks > 0 {
                t + self.position(self.head, &ph, write)
            } else {
                t
            };
            let end = if reading && self.p.zero_latency {
                self.zero_latency_run(t, &ph, run, |k, at| each(i + k, at))
            } else if !reading && self.p.zero_latency_writes {
                self.write_on_arrival_run(t, &ph, run, write, i, |k, at| each(i + k, at))
            } else {
                let (start, _) = self.access(t, &ph, write);
                if self.split_on {
                    self.split.transfer_ms += run as f64 * st;
                }
                for k in 0..run {
                    each(i + k, start + (k + 1) as f64 * st);
                }
                start + run as f64 * st
            };
            if reading {
                self.track_seen(lbn + i, &ph, arrive, end);
            }
            t = end;
            i += run;
        }
        t
    }

    /// A zero-latency (read-on-arrival) read of the `run` sectors from `ph`
    /// on one track, from time `t`: once on the track the head reads the
    /// first whole sector of the run that comes round and goes on, wrapping
    /// to the run's start, so the run costs at most one revolution after
    /// the next sector boundary instead of the wait for its first sector
    /// plus its length. Calls `each(k, end_time)` for k = 0..run in order;
    /// returns when the last sector is in.
    fn zero_latency_run(&mut self, t: f64, ph: &Phys, run: u64, mut each: impl FnMut(u64, f64)) -> f64 {
        let pos = self.position(self.head, ph, false);
        let t1 = t + pos;
        let spt = ph.spt as f64;
        let st = self.period / spt;
        // Where the head is, in sectors past the run's first one.
        let x = rem_euclid((t1 / self.period) * spt - ph.angle, spt);
        // The first whole sector of the run under the head, and the wait
        // for its leading edge (sector boundaries within EPS count as on it).
        let j0 = if x < EPS || x > spt - EPS {
            0.0
        } else {
            (x - EPS).ceil()
        };
        let (first, wait) = if j0 == 0.0 || j0 >= run as f64 {
            // Outside the run (or at its start): an ordinary access.
            (0u64, self.rotation_wait(t1, ph))
        } else {
            (j0 as u64, (j0 - x).max(0.0) * st)
        };
        let start = t1 + wait;
        let mut end = start;
        for k in 0..run {
            // Sectors first..run come first, then 0..first after the gap.
            let order = if k >= first {
                k - first
            } else {
                k + ph.spt as u64 - first
            };
            let at = start + (order + 1) as f64 * st;
            end = end.max(at);
            each(k, at);
        }
        self.end_run(ph, pos, t1, run, st, end)
    }

    /// A zero-latency (write-on-arrival) write of the `run` sectors from
    /// `ph` on one track, from time `t`: each sector is written the first
    /// time its leading edge passes under the head once the head is on the
    /// track and the sector's data is in the buffer (`write_data`: sector
    /// `offset + k` of the request arrives over the bus by
    /// `t0 + (offset + k + 1)·bus`; none: all of it is there), whatever
    /// the LBN order. A full track then costs one revolution from any
    /// angle. Calls `each(k, end_time)` for k = 0..run in order; returns
    /// when the last sector is written.
    fn write_on_arrival_run(
        &mut self,
        t: f64,
        ph: &Phys,
        run: u64,
        write: bool,
        offset: u64,
        mut each: impl FnMut(u64, f64),
    ) -> f64 {
        let pos = self.position(self.head, ph, write);
        let t1 = t + pos;
        let st = self.period / ph.spt as f64;
        let mut end = t1;
        for k in 0..run {
            let from = match self.write_data {
                Some((t0, bus)) => t1.max(t0 + (offset + k + 1) as f64 * bus),
                None => t1,
            };
            let sector = Phys {
                angle: rem_euclid(ph.angle + k as f64, ph.spt as f64),
                ..*ph
            };
            let at = from + self.rotation_wait(from, &sector) + st;
            end = end.max(at);
            each(k, at);
        }
        self.end_run(ph, pos, t1, run, st, end)
    }

    /// A track run's end: the time split's shares (positioning, transfer,
    /// the rest rotation) and the head left on `ph`'s track; returns `end`.
    fn end_run(&mut self, ph: &Phys, pos: f64, t1: f64, run: u64, st: f64, end: f64) -> f64 {
        if self.split_on {
            self.split.seek_ms += pos;
            self.split.transfer_ms += run as f64 * st;
            self.split.rotation_ms += end - t1 - run as f64 * st;
        }
        self.head = Head {
            cyl: ph.cyl,
            head: ph.head,
        };
        end
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::simple_drive;
    use crate::array::plan::DiskOpKind;
    use crate::device::{DevRequest, DeviceModel};

    #[test]
    fn rotational_latency_follows_absolute_angle() {
        let mut d = simple_drive();
        let r = |lbn| DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors: 1,
        };
        // At t = 0 the head is over sector 0: reading sector 0 takes 0.1 ms.
        assert!((d.service(0.0, &r(0)) - 0.1).abs() < 1e-9);
        // At t = 2.0 the platter is at sector 20; sector 50 is 3 ms away.
        assert!((d.service(2.0, &r(50)) - 3.1).abs() < 1e-9);
        // Sector 10 at t = 7.0 (angle 70): 4 ms to come round, then 0.1.
        assert!((d.positioning_estimate(7.0, &r(10)) - 4.0).abs() < 1e-9);
        // Next cylinder (LBN 100+30): 1 ms seek to t = 11 (angle 10), wait 2 ms.
        assert!((d.service(10.0, &r(130)) - 3.1).abs() < 1e-9);
    }
}

#[cfg(test)]
mod zero_latency_tests {
    use super::super::tests::{read, simple_drive};
    use crate::device::DeviceModel;

    /// The simple drive (10 ms a revolution, 100 sectors a track, sector s
    /// of track 0 at angle s) with zero-latency reads on or off.
    fn drive(zero: bool) -> super::super::Hdd {
        let mut d = simple_drive();
        d.p.zero_latency = zero;
        d
    }

    #[test]
    fn a_full_track_read_takes_one_revolution_from_any_angle() {
        // Arriving on a sector boundary at any angle: exactly 10 ms.
        for t in [0.0, 2.0, 5.0, 9.9] {
            let s = drive(true).service(t, &read(0, 100));
            assert!((s - 10.0).abs() < 1e-9, "at {t}: {s}");
        }
        // Between boundaries (angle 73.5) the head waits for the next one,
        // half a sector: 10.05.
        assert!((drive(true).service(7.35, &read(0, 100)) - 10.05).abs() < 1e-9);
        // Without zero latency the read waits for sector 0: at angle 20,
        // 8 ms, then the 10 ms revolution.
        assert!((drive(false).service(2.0, &read(0, 100)) - 18.0).abs() < 1e-9);
    }

    #[test]
    fn a_partial_track_read_starts_with_the_sector_under_the_head() {
        // Sectors 10..30 at t = 2 (angle 20): 20..30 by 3.0, round to
        // sector 10 at 11.0, 10..20 by 12.0: 10 ms, not 9 + 2 = 11.
        let mut z = drive(true);
        assert!((z.service(2.0, &read(10, 20)) - 10.0).abs() < 1e-9);
        assert!((drive(false).service(2.0, &read(10, 20)) - 11.0).abs() < 1e-9);
        // The split: no seek, 2 ms transfer, the rest rotation.
        let sp = z.last_split().unwrap();
        assert!((sp.transfer_ms - 2.0).abs() < 1e-9 && (sp.rotation_ms - 8.0).abs() < 1e-9);
        // Arriving outside the run (angle 50) it is an ordinary read: wait
        // to sector 10 at 11.0 (6 ms), read to 13.0.
        assert!((drive(true).service(5.0, &read(10, 20)) - 8.0).abs() < 1e-9);
        // Writes are not affected.
        let w = crate::device::DevRequest {
            kind: crate::array::plan::DiskOpKind::Write,
            lbn: 10,
            sectors: 20,
        };
        let sw = drive(true).service(2.0, &w);
        assert!((sw - 11.0).abs() < 1e-9, "{sw}");
    }
}

#[cfg(test)]
mod write_on_arrival_tests {
    use super::super::tests::simple_drive;
    use crate::array::plan::DiskOpKind;
    use crate::device::{DevRequest, DeviceModel};

    /// The simple drive (10 ms a revolution, 100 sectors a track, sector s
    /// of track 0 at angle s, no overheads, write-through) with zero-latency
    /// writes on or off and `bus` ms per sector on the bus.
    fn drive(zero: bool, bus: f64) -> super::super::Hdd {
        let mut d = simple_drive();
        d.p.zero_latency_writes = zero;
        d.p.bus_write_ms = bus;
        d
    }

    fn write(lbn: u64, sectors: u32) -> DevRequest {
        DevRequest {
            kind: DiskOpKind::Write,
            lbn,
            sectors,
        }
    }

    #[test]
    fn a_full_track_write_on_arrival_takes_one_revolution() {
        // Data in at once: from any angle on a sector boundary, 10 ms.
        for t in [2.0, 5.0, 9.9] {
            let s = drive(true, 0.0).service(t, &write(0, 100));
            assert!((s - 10.0).abs() < 1e-9, "at {t}: {s}");
        }
        // In LBN order the write at angle 20 waits 8 ms for sector 0: 18 ms.
        assert!((drive(false, 0.0).service(2.0, &write(0, 100)) - 18.0).abs() < 1e-9);
        // Sectors 10..30 at angle 20: 20..30 by 3.0, then 10..20 by 12.0
        // (10 ms), against 9 ms to sector 10 plus 2 ms in order; the
        // split: 2 ms transfer, 8 ms rotation.
        let mut z = drive(true, 0.0);
        assert!((z.service(2.0, &write(10, 20)) - 10.0).abs() < 1e-9);
        let sp = z.last_split().unwrap();
        assert!((sp.transfer_ms - 2.0).abs() < 1e-9 && (sp.rotation_ms - 8.0).abs() < 1e-9);
        assert!((drive(false, 0.0).service(2.0, &write(10, 20)) - 11.0).abs() < 1e-9);
        // Reads are not affected.
        let r = DevRequest {
            kind: DiskOpKind::Read,
            ..write(10, 20)
        };
        assert!((drive(true, 0.0).service(2.0, &r) - 11.0).abs() < 1e-9);
    }

    #[test]
    fn a_sector_is_written_on_arrival_only_once_its_data_is_in() {
        // The bus as fast as the media (0.1 ms a sector): the stream can
        // start at 0.1 ms (angle 1), but sector k's data is in at
        // 0.1·(k+1), just after its leading edge passed (0.1·k): every
        // sector waits for its next pass, as sector 0 does in order. A full
        // track written from t = 0 ends at 20.0 either way.
        assert!((drive(true, 0.1).service(0.0, &write(0, 100)) - 20.0).abs() < 1e-9);
        assert!((drive(false, 0.1).service(0.0, &write(0, 100)) - 20.0).abs() < 1e-9);
        // A slower bus (0.2 ms a sector): in order the stream starts at
        // 20.0 − 9.9 = 10.1 (angle 1), sector 0 comes round at 20.0: 30.0.
        // On arrival sectors 1..98 go at 10.1..19.9 and sector 0 at 20.0,
        // but sector 99's data (in at 20.0) misses its pass at 19.9: 30.0.
        assert!((drive(true, 0.2).service(0.0, &write(0, 100)) - 30.0).abs() < 1e-9);
        assert!((drive(false, 0.2).service(0.0, &write(0, 100)) - 30.0).abs() < 1e-9);
        // Half a track from several angles with that bus: on arrival is
        // never later than in order.
        for lbn in [0, 30, 50, 70] {
            let on = drive(true, 0.2).service(5.0, &write(lbn, 50));
            let off = drive(false, 0.2).service(5.0, &write(lbn, 50));
            assert!(on <= off + 1e-9, "lbn {lbn}: {on} > {off}");
        }
    }
}

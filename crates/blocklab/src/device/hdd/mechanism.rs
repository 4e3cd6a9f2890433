//! The mechanism: the arm (seek, head switch, write settle) and the platter
//! (absolute rotational position), and the media transfer built from them.
//! Angles are absolute: the platter is at angle 0 at time 0.

use super::layout::Phys;
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
        let now = (t / self.period).rem_euclid(1.0);
        let mut f = (target - now).rem_euclid(1.0);
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
    /// calls `each(i, end_time)` per sector; returns the end time.
    pub(super) fn media(&mut self, t: f64, lbn: u64, n: u64, write: bool, mut each: impl FnMut(u64, f64)) -> f64 {
        let mut t = t;
        let mut i = 0;
        while i < n {
            // One access per run of consecutive sectors on a track.
            let (ph, run) = self.p.layout.run(lbn + i, n - i);
            let (start, _) = self.access(t, &ph, write);
            let st = self.period / ph.spt as f64;
            if self.split_on {
                self.split.transfer_ms += run as f64 * st;
            }
            for k in 0..run {
                t = start + (k + 1) as f64 * st;
                each(i + k, t);
            }
            i += run;
        }
        t
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

//! The drive's track buffer: the sectors of the last few tracks the head
//! has been on, kept as they passed under it — during the rotational wait
//! of a read, its transfer, and while the drive idles on the track after
//! it (`track_buffer_tracks` tracks, least recently used replaced). A read
//! whose sectors are all held costs the command overhead and the bus
//! transfer, no media access; a read whose leading sectors are held (the
//! head idled past them, also during the command overhead) reads only the
//! rest from the media. Writes drop the sectors they overwrite.
//!
//! Only tracks numbered as one run of sectors (no slips or spares inside)
//! are buffered, so a sector's LBN is the track's first LBN plus its index.

use super::remainder::rem_euclid;
use super::{c_over, layout::Phys, Hdd};

const EPS: f64 = 1e-9;

/// One buffered track.
#[derive(Debug, Clone)]
pub(super) struct Track {
    /// LBN of the track's sector 0.
    first: u64,
    cyl: u32,
    head: u32,
    /// Angle of sector 0, in sectors.
    angle0: f64,
    have: Vec<bool>,
    stamp: u64,
}

/// Where the idle head sits: the buffered track and since when.
#[derive(Debug, Clone, Copy)]
pub(super) struct Idle {
    first: u64,
    since: f64,
}

impl Hdd {
    /// The head was on the track of `ph` (which holds `lbn`) from `from`
    /// to `to` reading: keep every whole sector that passed under it.
    pub(super) fn track_seen(&mut self, lbn: u64, ph: &Phys, from: f64, to: f64) {
        if self.p.track_buffer_tracks == 0 {
            return;
        }
        let spt = ph.spt as u64;
        let Some(first) = lbn.checked_sub(ph.sector as u64) else {
            return;
        };
        let (q, run) = self.p.layout.run(first, spt);
        if q.cyl != ph.cyl || q.head != ph.head || q.sector != 0 || run != spt {
            return;
        }
        self.clock += 1;
        let stamp = self.clock;
        let i = match self.tracks.iter().position(|t| t.first == first) {
            Some(i) => i,
            None => {
                let t = Track {
                    first,
                    cyl: ph.cyl,
                    head: ph.head,
                    angle0: rem_euclid(ph.angle - ph.sector as f64, spt as f64),
                    have: vec![false; spt as usize],
                    stamp,
                };
                if self.tracks.len() < self.p.track_buffer_tracks as usize {
                    self.tracks.push(t);
                    self.tracks.len() - 1
                } else {
                    let lru = (0..self.tracks.len())
                        .min_by_key(|&k| self.tracks[k].stamp)
                        .unwrap_or(0);
                    self.tracks[lru] = t;
                    lru
                }
            }
        };
        self.tracks[i].stamp = stamp;
        self.pass_under_head(i, from, to);
        self.idle_on_track = Some(Idle { first, since: to });
    }

    /// Mark the sectors of buffered track `i` that pass whole under the
    /// head between `from` and `to`.
    fn pass_under_head(&mut self, i: usize, from: f64, to: f64) {
        let period = self.period;
        let t = &mut self.tracks[i];
        let spt = t.have.len() as f64;
        let (a, b) = (from / period * spt, to / period * spt);
        if b - a >= spt + 1.0 {
            t.have.iter_mut().for_each(|h| *h = true);
            return;
        }
        for (s, h) in t.have.iter_mut().enumerate() {
            let angle = rem_euclid(t.angle0 + s as f64, spt);
            // The first time the sector's leading edge reaches the head from `from` on.
            let lead = angle + ((a - EPS - angle) / spt).ceil() * spt;
            if lead + 1.0 <= b + EPS {
                *h = true;
            }
        }
    }

    /// A request arrives at `now`: an idle head still on its last read's
    /// track has kept reading it (not after background work moved it).
    pub(super) fn track_idle(&mut self, now: f64) {
        let Some(idle) = self.idle_on_track else { return };
        let Some(i) = self.tracks.iter().position(|t| t.first == idle.first) else {
            self.idle_on_track = None;
            return;
        };
        let on = self.tracks[i].cyl == self.head.cyl && self.tracks[i].head == self.head.head;
        if !on || self.mech_free > idle.since + EPS {
            self.idle_on_track = None;
            return;
        }
        if now > idle.since {
            self.pass_under_head(i, idle.since, now);
            self.idle_on_track = Some(Idle { since: now, ..idle });
        }
    }

    /// Whether every sector of `lbn..lbn+n` is in the track buffer.
    pub(super) fn track_buffer_holds(&self, lbn: u64, n: u64) -> bool {
        !self.tracks.is_empty()
            && (lbn..lbn + n).all(|l| {
                self.tracks
                    .iter()
                    .any(|t| l >= t.first && l < t.first + t.have.len() as u64 && t.have[(l - t.first) as usize])
            })
    }

    /// How many leading sectors of `lbn..lbn+n` the track buffer holds.
    pub(super) fn track_buffer_prefix(&self, lbn: u64, n: u64) -> u64 {
        (lbn..lbn + n).take_while(|&l| self.track_buffer_holds(l, 1)).count() as u64
    }

    /// Serve a read from the track buffer: overhead and bus only.
    pub(super) fn track_buffer_read(&mut self, lbn: u64, n: u64) -> f64 {
        self.last_hit = true;
        self.prev_read_end = Some(lbn + n);
        let oh = c_over(&self.p.overheads.read_hit, self.last_write as usize);
        oh + n as f64 * self.p.bus_read_ms + self.p.overheads.read_complete
    }

    /// A write of `lbn..lbn+n`: its sectors leave the buffer, and the head
    /// leaves the track it idled on.
    pub(super) fn track_buffer_forget(&mut self, lbn: u64, n: u64) {
        for t in &mut self.tracks {
            let end = t.first + t.have.len() as u64;
            for l in lbn.max(t.first)..(lbn + n).min(end) {
                t.have[(l - t.first) as usize] = false;
            }
        }
        self.idle_on_track = None;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{read, simple_drive};
    use crate::array::plan::DiskOpKind;
    use crate::device::{DevRequest, DeviceModel};

    /// The simple drive (10 ms a revolution, 0.1 ms a sector, sector s of
    /// track 0 at angle s, no overheads, instant bus) with a one-track buffer.
    fn drive() -> super::super::Hdd {
        let mut d = simple_drive();
        d.p.track_buffer_tracks = 1;
        d
    }

    #[test]
    fn sectors_that_passed_under_the_head_are_read_without_a_media_access() {
        let mut d = drive();
        // LBN 50 at t = 0: wait 5 ms, read by 5.1; sectors 0..=50 passed.
        assert!((d.service(0.0, &read(50, 1)) - 5.1).abs() < 1e-9);
        // LBN 20 passed during that wait: served from the buffer at once,
        // with no seek, rotation or transfer.
        assert_eq!(d.service(5.1, &read(20, 1)), 0.0);
        assert!(d.last_hit());
        let sp = d.last_split().unwrap();
        assert_eq!(sp.seek_ms + sp.rotation_ms + sp.transfer_ms, 0.0);
        // LBN 70 has not come round yet: a media read (to 7.0, by 7.1).
        assert!((d.service(5.1, &read(70, 1)) - 2.0).abs() < 1e-9);
        assert!(!d.last_hit());
        // 55..60 passed while waiting for 70.
        assert_eq!(d.service(7.1, &read(55, 5)), 0.0);
        // Sectors 80..90 are not buffered yet (the idle head is at 71)…
        assert!(!d.track_buffer_holds(80, 10));
        // …but after idling a revolution on the track all of it is.
        assert_eq!(d.service(30.0, &read(80, 20)), 0.0);
    }

    #[test]
    fn a_read_continuing_the_last_one_reads_only_what_has_not_passed() {
        let mut d = drive();
        d.p.overheads.read_miss = [0.25, 0.25];
        // LBN 3..10 at t = 0: overhead to 0.25 (the head mid-sector 2),
        // sector 3 from 0.3, read by 1.0.
        assert!((d.service(0.0, &read(3, 7)) - 1.0).abs() < 1e-9);
        // LBN 10..20 issued at 1.0: the idle head reads on through the
        // overhead (to 1.25, mid-sector 12, which is in by 1.3); 13..20
        // follow at once, by 2.0. Without the buffer sector 10 has gone
        // by: a revolution lost, 10.0 + 1.0.
        assert!((d.service(1.0, &read(10, 10)) - 1.0).abs() < 1e-9);
        let mut e = simple_drive();
        e.p.overheads.read_miss = [0.25, 0.25];
        e.service(0.0, &read(3, 7));
        assert!((e.service(1.0, &read(10, 10)) - 11.0).abs() < 1e-9);
    }

    #[test]
    fn a_hit_pays_the_overhead_and_the_bus_and_writes_drop_sectors() {
        let mut d = drive();
        d.p.overheads.read_hit = [0.2, 0.3];
        d.p.bus_read_ms = 0.01;
        d.service(0.0, &read(50, 1));
        // 4 sectors: 0.2 + 4 × 0.01.
        assert!((d.service(20.0, &read(10, 4)) - 0.24).abs() < 1e-9);
        // A write of LBN 11 drops it (and leaves the head off the idle
        // track): the next read of it goes to the media.
        let w = DevRequest {
            kind: DiskOpKind::Write,
            lbn: 11,
            sectors: 1,
        };
        d.service(30.0, &w);
        assert!(!d.track_buffer_holds(10, 4));
        assert!(d.track_buffer_holds(12, 2));
        // Another track replaces the only buffered one.
        d.service(40.0, &read(150, 1));
        assert!(!d.track_buffer_holds(12, 2));
        assert!(d.track_buffer_holds(140, 10));
    }
}

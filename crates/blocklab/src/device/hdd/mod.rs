//! A mechanical disk drive: zoned layout with skews, spares and slipped
//! defects; a seek curve; absolute rotational position; per-command
//! controller overheads; bus transfer; and an on-disk segmented cache with
//! read-ahead and (optionally) immediate-report write-back.
//!
//! Modelled from what the parameters mean (DiskSim's documentation and
//! Ruemmler & Wilkes), not from DiskSim's code. Time is in milliseconds and
//! absolute: the platter is at angle 0 at time 0, so the same request
//! sequence always gives the same answers.
//!
//! Background work (destaging written data, read-ahead) is evaluated lazily:
//! the state remembers where the mechanism is and what it is doing, and the
//! next request first advances it to its own arrival time.
//!
//! The parts, one file each: `seek` (seek curves), `layout` (LBN to
//! cylinder, surface, sector and angle), `mechanism` (positioning, rotation,
//! media transfer, zero-latency reads and writes), `cache` (buffer segments,
//! read-ahead, write-back) and `trackbuf` (the track buffer).
//! This module holds the drive's parameters and state and serves requests
//! with those parts.

mod cache;
mod layout;
mod mechanism;
mod opportune;
mod remainder;
mod seek;
mod trackbuf;

pub use cache::CacheParams;
pub use layout::{Layout, Phys, SpareUnit, ZoneSpec};
pub use seek::{parse_seek_file, parse_seek_table, SeekCurve};

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel, Dispatch, FreeRun, Opportunism, TimeSplit};
use crate::error::{Error, Result};
use cache::{Prefetch, Seg};
use mechanism::Head;

/// Command overheads (ms), indexed `[after a read, after a write]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overheads {
    pub read_hit: [f64; 2],
    pub read_miss: [f64; 2],
    pub write_hit: [f64; 2],
    pub write_miss: [f64; 2],
    pub read_complete: f64,
    pub write_complete: f64,
}

/// Everything the mechanical model needs.
#[derive(Debug, Clone)]
pub struct HddParams {
    pub name: String,
    pub layout: Layout,
    pub rpm: f64,
    pub read_seek: SeekCurve,
    /// Separate write seek curve (Hsu–Smith); else read curve + settle.
    pub write_seek: Option<SeekCurve>,
    pub single_cyl_ms: Option<f64>,
    pub head_switch_ms: f64,
    pub write_settle_ms: f64,
    /// DiskSim's access time type "trackSwitchPlusRotation": every access
    /// costs a track switch plus rotation, even on the track under the head.
    /// A read miss there waits the head switch; a write-through write pays
    /// it after its data can stream; a read on the cylinder just written
    /// re-seeks (at least the single-cylinder seek).
    pub track_switch_per_access: bool,
    pub overheads: Overheads,
    /// Bus time per sector (ms).
    pub bus_read_ms: f64,
    pub bus_write_ms: f64,
    pub cache: CacheParams,
    /// Zero-latency (read-on-arrival) reads: a read of a track's sectors
    /// starts with whichever of them first comes under the head (DiskSim's
    /// "Immediate buffer read").
    pub zero_latency: bool,
    /// Zero-latency (write-on-arrival) writes: a write's sectors on a track
    /// are written in the order they come under the head, each once its
    /// data is in the buffer (DiskSim's "Immediate buffer write").
    pub zero_latency_writes: bool,
    /// Tracks held by the track buffer (`trackbuf`); 0: none.
    pub track_buffer_tracks: u32,
}

/// The drive.
pub struct Hdd {
    p: HddParams,
    period: f64,
    segs: Vec<Seg>,
    clock: u64,
    head: Head,
    /// When the mechanism finishes its current background job.
    mech_free: f64,
    prefetch: Option<Prefetch>,
    last_write: bool,
    last_hit: bool,
    prev_read_end: Option<u64>,
    /// End LBN of the previous request (appending-write detection).
    last_end: u64,
    /// The mechanism's last media access was a write: the heads are still
    /// positioned for writing.
    head_wrote: bool,
    /// The host's opportunistic reading (`opportune`), when asked for.
    opp: Option<opportune::Opp>,
    /// End of the previous read (a read chained to it keeps the read-ahead limit).
    prev_chain_end: Option<u64>,
    /// Where the time of the current service goes (`split_on`: the media
    /// accesses being made count).
    split: TimeSplit,
    split_on: bool,
    /// The track buffer's tracks and the track the idle head sits on.
    tracks: Vec<trackbuf::Track>,
    idle_on_track: Option<trackbuf::Idle>,
    /// Serving a write: media accesses write, whatever their positioning
    /// (a write-through write positions for writing first, then `media`).
    writing: bool,
    /// A read miss's scratch list of when each sector is buffered, kept
    /// between requests so that a read allocates nothing.
    ready: Vec<f64>,
    /// A write-through write's data phase while its media write runs: the
    /// first sector's data starts crossing the bus at `.0`, each takes `.1`
    /// ms (when writing on arrival may write each sector).
    write_data: Option<(f64, f64)>,
}

impl Hdd {
    pub fn new(p: HddParams) -> Result<Hdd> {
        if !(p.rpm > 0.0) {
            return Err(Error::config(format!("{}: rotation speed must be positive", p.name)));
        }
        let n = if p.cache.enabled {
            p.cache.segments.max(1) as usize
        } else {
            0
        };
        Ok(Hdd {
            period: 60_000.0 / p.rpm,
            segs: vec![Seg::EMPTY; n],
            clock: 0,
            head: Head { cyl: 0, head: 0 },
            mech_free: 0.0,
            prefetch: None,
            last_write: false,
            last_hit: false,
            prev_read_end: None,
            last_end: u64::MAX,
            head_wrote: false,
            opp: None,
            prev_chain_end: None,
            split: TimeSplit::default(),
            split_on: false,
            tracks: Vec::new(),
            idle_on_track: None,
            writing: false,
            ready: Vec::new(),
            write_data: None,
            p,
        })
    }

    pub fn params(&self) -> &HddParams {
        &self.p
    }

    /// Bring read-ahead up to date, then serve the read from the buffer
    /// (a full hit, or data being read ahead) or from the media.
    fn read(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        self.advance_prefetch(now);
        self.track_idle(now);
        if let Some(i) = self.find(lbn, n) {
            return self.read_hit(now, i, lbn, n);
        }
        if self.track_buffer_holds(lbn, n) {
            return self.track_buffer_read(lbn, n);
        }
        if let Some(pf) = self.read_ahead_stream(lbn, n) {
            return self.read_from_stream(now, pf, lbn, n);
        }
        self.read_miss(now, lbn, n)
    }

    fn read_miss(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_read_ms;
        // Miss: stop read-ahead, position, read, then read ahead again.
        self.last_hit = false;
        let oh = c_over(&self.p.overheads.read_miss, ow);
        self.stop_prefetch(now);
        let mut start = (now + oh).max(self.mech_free);
        // "trackSwitchPlusRotation": a read miss on the track already under
        // the head re-settles for the head-switch time before reading.
        // Without it same-track misses on the Atlas III and 18ES traces are
        // ≈0.6–1.2 ms too fast on average.
        let target = self.p.layout.map(lbn);
        if self.p.track_switch_per_access && self.head.cyl == target.cyl {
            if self.head.head == target.head {
                start += self.p.head_switch_ms;
            }
            // After a media write the heads sit where the write put them
            // (writes settle separately: "Add. write settling delay"), so a
            // read on the same cylinder, this track or another surface, is
            // a repositioning of its own: it costs at least the drive's
            // shortest seek, the single-cylinder one, instead of the head
            // switch. Without it such reads on the 18ES, Barracuda and
            // Cheetah 9LP traces are 0.3–1.1 ms too fast.
            if self.head_wrote {
                let single = self.p.single_cyl_ms.unwrap_or_else(|| self.p.read_seek.time(1));
                start += (single - self.p.head_switch_ms).max(0.0);
            }
        }
        self.head_wrote = false;
        // Read-any-free-blocks: sectors of the target track that pass under
        // the head while it waits for the first requested sector are cached
        // too (those before the request, and the rest of the track when
        // the whole tail after the request went by).
        let (mut before, mut after) = (0u64, 0u64);
        if c.read_any_free {
            let ph = self.p.layout.map(lbn);
            let t1 = start + self.position(self.head, &ph, false);
            let k = (self.rotation_wait(t1, &ph) / (self.period / ph.spt as f64)).floor() as u64;
            let s0 = ph.sector as u64;
            before = k.min(s0).min(lbn);
            let wrapped = k.saturating_sub(s0);
            let tail = (ph.spt as u64).saturating_sub(s0 + n);
            if tail > 0 && wrapped >= tail {
                after = tail;
            }
        }
        // The track buffer: the head idled on its track through the command
        // overhead too; a leading part of the request already buffered is
        // not read again (a read continuing the last one then goes on
        // without losing a revolution).
        // The sector under the head at `start` is being read already: it is
        // in by the end of the next sector time.
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        let held = if self.p.track_buffer_tracks > 0 {
            let sector_ms = self.period / self.p.layout.map(lbn).spt as f64;
            self.track_idle(start + sector_ms);
            let held = self.track_buffer_prefix(lbn, n);
            ready.resize(held as usize, start + sector_ms);
            held
        } else {
            0
        };
        self.free_on_track(start, lbn + held, n - held);
        self.split_on = true;
        let end = if held < n {
            self.media(start, lbn + held, n - held, false, |_, t| ready.push(t))
        } else {
            start
        };
        self.split_on = false;
        // The bus transfer starts once the high-water mark is buffered.
        let k = ((c.read_water * n as f64).ceil() as usize).clamp(1, n as usize);
        let mut bus_t = (now + oh).max(ready[k - 1] + self.p.cache.reselect_ms);
        for &t in &ready {
            bus_t = bus_t.max(t) + bus;
        }
        self.ready = ready;
        self.mech_free = end;
        self.cache_read(lbn, n, before, after, end);
        self.prev_read_end = Some(lbn + n);
        bus_t - now + self.p.overheads.read_complete
    }

    /// Writes stop read-ahead; the buffer takes them (write-back) or they
    /// go through to the media.
    fn write(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        self.stop_prefetch(now);
        self.last_hit = false;
        self.track_buffer_forget(lbn, n);
        if self.p.cache.enabled && self.p.cache.write_back && !self.segs.is_empty() {
            return self.write_back(now, lbn, n);
        }
        self.write_through(now, lbn, n)
    }

    fn write_through(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_write_ms;
        // Write-through: transfer into the buffer while positioning; the
        // media write starts once the data can reach the head in time.
        let oh = c_over(&self.p.overheads.write_miss, ow);
        // The data phase follows the command overhead and the data
        // preparation overhead.
        let data_t0 = now + oh + c.write_data_prep_ms;
        let data_in = data_t0 + n as f64 * bus;
        let start = (now + oh).max(self.mech_free);
        // Position first (the seek overlaps the transfer), then wait for data.
        let ph = self.p.layout.map(lbn);
        let pos = self.position(self.head, &ph, true);
        // The media write may start before the last sector has crossed the
        // bus, as long as each sector is buffered before the head reaches it
        // (just in time). The low-water mark is not a gate here: it is the
        // reconnection point once a full segment drains (DiskSim's manual),
        // which these request sizes never reach.
        let sector_ms = self.period / ph.spt as f64;
        let just_in_time = if bus > sector_ms {
            data_in - (n - 1) as f64 * sector_ms
        } else {
            data_t0 + bus
        };
        // "trackSwitchPlusRotation": an access costs a head switch, then the
        // rotation. A write-through drive begins that access once its data
        // can stream, so the switch is charged from then (even on the track
        // under the head); the seek itself overlaps the transfer.
        let access = if self.p.track_switch_per_access {
            self.p.head_switch_ms
        } else {
            0.0
        };
        // A drive that holds the bus for the whole transfer writes only
        // once all the data is in.
        let all_in = if c.hold_bus_write { data_in } else { 0.0 };
        let ready = (start + pos).max(just_in_time + access).max(all_in);
        self.head = Head {
            cyl: ph.cyl,
            head: ph.head,
        };
        self.split.seek_ms += pos;
        self.split_on = true;
        self.write_data = Some((data_t0, bus));
        let end = self.media(ready, lbn, n, false, |_, _| {});
        self.write_data = None;
        self.split_on = false;
        self.mech_free = end;
        self.head_wrote = true;
        if c.enabled && !self.segs.is_empty() {
            self.cache_written(lbn, n);
        }
        end - now + self.p.overheads.write_complete
    }
}

fn c_over(o: &[f64; 2], after_write: usize) -> f64 {
    o[after_write]
}

impl Hdd {
    /// The request's first sector and length, within the disk.
    fn clamp(&self, req: &DevRequest) -> (u64, u64) {
        let n = (req.sectors.max(1) as u64).min(self.p.layout.capacity().saturating_sub(req.lbn).max(1));
        let lbn = req.lbn.min(self.p.layout.capacity().saturating_sub(1));
        (lbn, n)
    }

    fn service_inner(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        self.split = TimeSplit::default();
        let (lbn, n) = self.clamp(req);
        self.writing = req.kind == DiskOpKind::Write;
        let t = match req.kind {
            DiskOpKind::Read => self.read(now_ms, lbn, n),
            DiskOpKind::Write => self.write(now_ms, lbn, n),
        };
        self.last_write = req.kind == DiskOpKind::Write;
        self.last_end = lbn + n;
        self.writing = false;
        t
    }
}

impl DeviceModel for Hdd {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        self.service_inner(now_ms, req)
    }

    fn serve(&mut self, now_ms: f64, req: &DevRequest, d: &Dispatch) -> f64 {
        if self.opp.is_some() {
            self.serve_opportunistic(now_ms, req, d)
        } else {
            self.service_inner(now_ms, req)
        }
    }

    fn last_split(&self) -> Option<TimeSplit> {
        Some(self.split)
    }

    fn set_opportunism(&mut self, o: Opportunism) -> bool {
        self.opp = Some(opportune::Opp::new(o));
        true
    }

    fn advance_idle(&mut self, until_ms: f64) {
        self.idle_until(until_ms);
    }

    fn take_free(&mut self, out: &mut Vec<FreeRun>) {
        self.take_free_runs(out);
    }

    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
        let ph = self.p.layout.map(req.lbn);
        let write = req.kind == DiskOpKind::Write;
        let t0 = now_ms.max(self.mech_free);
        let pos = self.position(self.head, &ph, write);
        t0 - now_ms + pos + self.rotation_wait(t0 + pos, &ph)
    }

    fn cylinder(&self, lbn: u64) -> u64 {
        self.p.layout.map(lbn).cyl as u64
    }

    fn capacity_sectors(&self) -> u64 {
        self.p.layout.capacity()
    }

    fn last_hit(&self) -> bool {
        self.last_hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::layout::tests::zone;

    pub(super) fn simple_drive() -> Hdd {
        let layout = Layout::new(1, 100, 10_000, vec![zone(0, 99, 100)], SpareUnit::None, false, 0).unwrap();
        Hdd::new(HddParams {
            name: "t".into(),
            layout,
            rpm: 6000.0, // 10 ms per revolution, 0.1 ms per sector
            read_seek: SeekCurve::Table(vec![(1.0, 1.0), (99.0, 5.9)]),
            write_seek: None,
            single_cyl_ms: None,
            head_switch_ms: 0.5,
            write_settle_ms: 0.0,
            track_switch_per_access: false,
            overheads: Overheads::default(),
            bus_read_ms: 0.0,
            bus_write_ms: 0.0,
            cache: CacheParams {
                prefetch_mode: 0,
                ..CacheParams::off()
            },
            zero_latency: false,
            zero_latency_writes: false,
            track_buffer_tracks: 0,
        })
        .unwrap()
    }

    /// `d` rebuilt with an on-disk cache (its segments sized from `cache`).
    pub(super) fn with_cache(d: Hdd, cache: CacheParams) -> Hdd {
        Hdd::new(HddParams { cache, ..d.p }).unwrap()
    }

    pub(super) fn read(lbn: u64, sectors: u32) -> DevRequest {
        DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors,
        }
    }

    #[test]
    fn same_track_read_miss_pays_a_track_switch() {
        // Hand-worked on the simple drive (10 ms per revolution, 0.1 ms per
        // sector, 0.5 ms head switch, no cache).
        let r = |lbn| DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors: 1,
        };
        let mut d = simple_drive();
        d.p.track_switch_per_access = true;
        // At t = 0 the head is over sector 0 of its own track: the read
        // waits the 0.5 ms switch (platter at sector 5), then a full
        // revolution less 0.5 ms for sector 0 to come round: 10.0 + 0.1.
        assert!((d.service(0.0, &r(0)) - 10.1).abs() < 1e-9);
        // Sector 50 at t = 20 (angle 0): switch to 20.5, wait to 25.0, read.
        assert!((d.service(20.0, &r(50)) - 5.1).abs() < 1e-9);
        // Another cylinder is a seek, not a switch: 1 ms seek from t = 30
        // to 31 (angle 10) and sector 30 of cylinder 1 is 2 ms away.
        assert!((d.service(30.0, &r(130)) - 3.1).abs() < 1e-9);
        // Without the flag the same-track read at t = 20 is 5.0 + 0.1.
        let mut d = simple_drive();
        d.service(0.0, &r(0));
        assert!((d.service(20.0, &r(50)) - 5.1).abs() < 1e-9);
        assert!((d.service(40.0, &r(50)) - 5.1).abs() < 1e-9);
        let mut e = simple_drive();
        e.p.track_switch_per_access = true;
        e.service(0.0, &r(0));
        // At t = 40 (angle 0) with the switch: 40.5 → sector 50 at 45.0.
        assert!((e.service(40.0, &r(50)) - 5.1).abs() < 1e-9);
        // Sector 3 at t = 60 (angle 0): without the switch 0.3 + 0.1, with
        // it the platter has passed sector 3 by 60.5 → wait to 70.3.
        assert!((d.service(60.0, &r(3)) - 0.4).abs() < 1e-9);
        assert!((e.service(60.0, &r(3)) - 10.4).abs() < 1e-9);
    }

    #[test]
    fn write_through_access_starts_a_head_switch_after_the_data_can_stream() {
        // Simple drive: 10 ms per revolution, 0.1 ms per sector, 0.5 ms head
        // switch, no cache (write-through). The bus takes 0.2 ms a sector,
        // slower than the media, and the write overhead is 0.5 ms.
        let w = |lbn| DevRequest {
            kind: DiskOpKind::Write,
            lbn,
            sectors: 4,
        };
        let drive = |switch: bool, prep: f64| {
            let mut d = simple_drive();
            d.p.track_switch_per_access = switch;
            d.p.bus_write_ms = 0.2;
            d.p.overheads.write_miss = [0.5, 0.5];
            d.p.cache.write_data_prep_ms = prep;
            d
        };
        // Data cross the bus from 0.5 to 1.3 ms; with the last sector due
        // 0.3 ms after the first, the media write can stream from 1.0 ms
        // (just in time). Sector 12 passes at 1.2: written by 1.6 (waiting
        // for all the data, as the old low-water-mark gate did, would miss it).
        assert!((drive(false, 0.0).service(0.0, &w(12)) - 1.6).abs() < 1e-9);
        // With "trackSwitchPlusRotation" the access (a 0.5 ms switch) starts
        // at 1.0, so sector 12 is missed at 1.2 and written at 11.2..11.6.
        assert!((drive(true, 0.0).service(0.0, &w(12)) - 11.6).abs() < 1e-9);
        // 0.15 ms of data preparation moves the stream point to 1.15 ms:
        // sector 11 (at 1.1) is missed, written at 11.1..11.5 instead of
        // 1.1..1.5.
        assert!((drive(false, 0.0).service(0.0, &w(11)) - 1.5).abs() < 1e-9);
        assert!((drive(false, 0.15).service(0.0, &w(11)) - 11.5).abs() < 1e-9);
        // A drive holding the bus for the whole transfer waits for all the
        // data (1.3 ms): sector 12 is missed too.
        let mut d = drive(false, 0.0);
        d.p.cache.hold_bus_write = true;
        assert!((d.service(0.0, &w(12)) - 11.6).abs() < 1e-9);
    }

    #[test]
    fn same_cylinder_read_after_a_write_pays_a_single_cylinder_seek() {
        // Simple drive: 10 ms per revolution, 0.1 ms per sector, 0.5 ms head
        // switch, 1.0 ms single-cylinder seek (the seek table at d = 1), no
        // cache (writes go through), no overheads.
        let req = |kind, lbn| DevRequest { kind, lbn, sectors: 1 };
        let mut d = simple_drive();
        d.p.track_switch_per_access = true;
        // Write sector 10 at t = 0: no move, 1.0 ms to come round, written
        // by 1.1.
        assert!((d.service(0.0, &req(DiskOpKind::Write, 10)) - 1.1).abs() < 1e-9);
        // Read sector 8 of the same track at t = 20 (angle 0): after the
        // write the heads re-settle for the 1.0 ms single-cylinder seek, not
        // the 0.5 ms switch; at 21.0 sector 8 has gone by → 30.8, read 30.9.
        assert!((d.service(20.0, &req(DiskOpKind::Read, 8)) - 10.9).abs() < 1e-9);
        // The next same-track read follows a read: the 0.5 ms switch again.
        // At t = 40: 40.5 (sector 5), sector 8 at 40.8, read by 40.9.
        assert!((d.service(40.0, &req(DiskOpKind::Read, 8)) - 0.9).abs() < 1e-9);
        // Without the write the first read pays only the switch too.
        let mut e = simple_drive();
        e.p.track_switch_per_access = true;
        assert!((e.service(20.0, &req(DiskOpKind::Read, 8)) - 0.9).abs() < 1e-9);

        // Two surfaces: LBN 100.. is surface 1 of cylinder 0 (no skews).
        let mut f = simple_drive();
        f.p.layout = Layout::new(2, 100, 20_000, vec![zone(0, 99, 100)], SpareUnit::None, false, 0).unwrap();
        f.p.track_switch_per_access = true;
        assert!((f.service(0.0, &req(DiskOpKind::Write, 10)) - 1.1).abs() < 1e-9);
        // Sector 8 of surface 1 at t = 20: the switch after the write costs
        // the 1.0 ms seek → 21.0, sector 8 comes round at 30.8 → 30.9.
        assert!((f.service(20.0, &req(DiskOpKind::Read, 108)) - 10.9).abs() < 1e-9);
        // Back to surface 0 after a read: the 0.5 ms switch → 40.9.
        assert!((f.service(40.0, &req(DiskOpKind::Read, 8)) - 0.9).abs() < 1e-9);
    }
}

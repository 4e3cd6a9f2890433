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

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel};
use crate::error::{Error, Result};

// ------------------------------------------------------------------ seek

/// Seek time (ms) as a function of cylinder distance.
#[derive(Debug, Clone, PartialEq)]
pub enum SeekCurve {
    /// Measured distance→time points, linearly interpolated (and
    /// extrapolated from the last two points beyond the table).
    Table(Vec<(f64, f64)>),
    /// Ruemmler & Wilkes (HP) form: `a + b·√d` below `x0` cylinders,
    /// `c + e·d` from there on; `first` overrides distances 1..=first.len().
    Hpl {
        x0: f64,
        a: f64,
        b: f64,
        c: f64,
        e: f64,
        first: Vec<f64>,
    },
    /// Three-point fit through (1, single), (⅓·max, average), (max, full):
    /// `t = single + p·√(d−1) + q·(d−1)`.
    ThreePoint { single: f64, p: f64, q: f64 },
    /// Hsu–Smith form: power law `a + b·d^c` below `boundary`, `e + f·d`
    /// from there on.
    PowerLinear {
        a: f64,
        b: f64,
        c: f64,
        boundary: f64,
        e: f64,
        f: f64,
    },
}

impl SeekCurve {
    /// Fit the three-point form: average seek taken at one third of the
    /// full stroke (the mean distance of uniformly random seeks).
    pub fn three_point(single: f64, average: f64, full: f64, cylinders: u64) -> SeekCurve {
        let dmax = (cylinders.max(3) - 1) as f64;
        let x1 = dmax / 3.0 - 1.0;
        let x2 = dmax - 1.0;
        // Solve  p·√x1 + q·x1 = avg − single ;  p·√x2 + q·x2 = full − single.
        let (r1, r2) = (average - single, full - single);
        let det = x1.sqrt() * x2 - x2.sqrt() * x1;
        let (p, q) = if det.abs() < 1e-12 {
            (0.0, r2 / x2.max(1.0))
        } else {
            ((r1 * x2 - r2 * x1) / det, (x1.sqrt() * r2 - x2.sqrt() * r1) / det)
        };
        SeekCurve::ThreePoint { single, p, q }
    }

    pub fn time(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let x = d as f64;
        match self {
            SeekCurve::Table(pts) => interpolate(pts, x),
            SeekCurve::Hpl { x0, a, b, c, e, first } => {
                if (d as usize) <= first.len() {
                    first[d as usize - 1]
                } else if x < *x0 {
                    a + b * x.sqrt()
                } else {
                    c + e * x
                }
            }
            SeekCurve::ThreePoint { single, p, q } => single + p * (x - 1.0).sqrt() + q * (x - 1.0),
            SeekCurve::PowerLinear {
                a,
                b,
                c,
                boundary,
                e,
                f,
            } => {
                if x < *boundary {
                    a + b * x.powf(*c)
                } else {
                    e + f * x
                }
            }
        }
    }
}

fn interpolate(pts: &[(f64, f64)], x: f64) -> f64 {
    match pts.len() {
        0 => 0.0,
        1 => pts[0].1,
        n => {
            // First segment whose right end is >= x (extrapolate at the ends).
            let i = pts.partition_point(|p| p.0 < x).clamp(1, n - 1);
            let (x0, y0) = pts[i - 1];
            let (x1, y1) = pts[i];
            if x1 == x0 {
                y1
            } else {
                y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            }
        }
    }
}

/// Read a DiskSim `.seek` file: `Seek distances measured: N` then `d, ms`.
pub fn parse_seek_file(path: &std::path::Path) -> Result<Vec<(f64, f64)>> {
    let shown = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, e))?;
    parse_seek_table(&src, &shown)
}

pub fn parse_seek_table(src: &str, file: &str) -> Result<Vec<(f64, f64)>> {
    use crate::error::Location;
    let mut pts = Vec::new();
    let mut declared = None;
    for (i, line) in src.lines().enumerate() {
        let ln = Location::Line(i as u64 + 1);
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("Seek distances measured:") {
            declared = Some(
                rest.trim()
                    .parse::<usize>()
                    .map_err(|_| Error::parse(file, ln, "Seek distances measured", "expected a count"))?,
            );
            continue;
        }
        let mut it = t
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty());
        let d = it.next().and_then(|s| s.parse::<f64>().ok());
        let ms = it.next().and_then(|s| s.parse::<f64>().ok());
        match (d, ms) {
            (Some(d), Some(ms)) if d >= 0.0 && ms >= 0.0 && d.is_finite() && ms.is_finite() => {
                if pts.last().is_some_and(|&(pd, _)| pd >= d) {
                    return Err(Error::parse(file, ln, "distance", "distances must increase"));
                }
                pts.push((d, ms));
            }
            (None, _) => {
                return Err(Error::parse(
                    file,
                    ln,
                    "distance",
                    format!("expected `distance, ms`, got `{t}`"),
                ))
            }
            _ => {
                return Err(Error::parse(
                    file,
                    ln,
                    "time",
                    format!("expected `distance, ms`, got `{t}`"),
                ))
            }
        }
    }
    if let Some(n) = declared {
        if n != pts.len() {
            return Err(Error::parse(
                file,
                crate::error::Location::Whole,
                "Seek distances measured",
                format!("declares {n} points, file has {}", pts.len()),
            ));
        }
    }
    if pts.is_empty() {
        return Err(Error::parse(
            file,
            crate::error::Location::Whole,
            "distance",
            "no seek points",
        ));
    }
    Ok(pts)
}

// ---------------------------------------------------------------- layout

/// What a spare-sector budget is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpareUnit {
    None,
    /// `spares` whole tracks at the end of each zone (slips are tracks).
    TracksPerZone,
    /// `spares` sectors at the end (or front) of every cylinder.
    SectorsPerCylinder,
    /// `spares` sectors at the end of every track.
    SectorsPerTrack,
    /// `spares` sectors at the end of every range of `range` cylinders.
    SectorsPerRange(u32),
    /// `spares` sectors at the end of each zone.
    SectorsPerZone,
}

/// One recording zone (cylinders `first..=last`).
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneSpec {
    pub first_cyl: u32,
    pub last_cyl: u32,
    pub sectors_per_track: u32,
    /// Angular skews in sectors (of this zone's tracks).
    pub track_skew: f64,
    pub cyl_skew: f64,
    /// Angle of the zone's first sector, in sectors.
    pub first_offset: f64,
    /// Data positions left unused at the zone front (sectors).
    pub front_space: u64,
    pub spares: u64,
    /// Slipped defects: zone-relative physical slot numbers (sectors, or
    /// tracks under track sparing), skipped by the numbering.
    pub slips: Vec<u64>,
}

#[derive(Debug, Clone)]
struct Zone {
    spec: ZoneSpec,
    first_lbn: u64,
    lbns: u64,
    /// Slot = the unit spares and slips are counted in (1 sector or 1 track).
    slot: u64,
    unit_slots: u64,
    data_per_unit: u64,
    total_slots: u64,
    spares_at_front: bool,
}

/// Where a sector lives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phys {
    pub cyl: u32,
    pub head: u32,
    pub sector: u32,
    pub spt: u32,
    /// Angle of this sector's leading edge, in sectors (0..spt).
    pub angle: f64,
}

/// LBN ↔ physical mapping.
#[derive(Debug, Clone)]
pub struct Layout {
    surfaces: u32,
    cylinders: u32,
    zones: Vec<Zone>,
    capacity: u64,
    /// 0 normal; 1 odd cylinders of a zone run the surfaces backwards;
    /// 2 odd absolute cylinders run backwards.
    serpentine: u8,
}

impl Layout {
    pub fn new(
        surfaces: u32,
        cylinders: u32,
        block_count: u64,
        zones: Vec<ZoneSpec>,
        unit: SpareUnit,
        spares_at_front: bool,
        serpentine: u8,
    ) -> Result<Layout> {
        if surfaces == 0 || zones.is_empty() {
            return Err(Error::config("disk layout needs at least one surface and one zone"));
        }
        let mut out = Vec::new();
        let mut next = 0u64;
        for z in zones {
            if z.last_cyl < z.first_cyl || z.sectors_per_track == 0 {
                return Err(Error::config(format!(
                    "bad zone: cylinders {}..={}, {} sectors per track",
                    z.first_cyl, z.last_cyl, z.sectors_per_track
                )));
            }
            let spt = z.sectors_per_track as u64;
            let ncyl = (z.last_cyl - z.first_cyl + 1) as u64;
            let s = surfaces as u64;
            let zone_sectors = ncyl * s * spt;
            let (slot, unit_slots) = match unit {
                SpareUnit::None => (1, zone_sectors),
                SpareUnit::TracksPerZone => (spt, ncyl * s),
                SpareUnit::SectorsPerCylinder => (1, s * spt),
                SpareUnit::SectorsPerTrack => (1, spt),
                SpareUnit::SectorsPerRange(r) => (1, r.max(1) as u64 * s * spt),
                SpareUnit::SectorsPerZone => (1, zone_sectors),
            };
            let spares = if unit == SpareUnit::None { 0 } else { z.spares };
            if spares >= unit_slots {
                return Err(Error::config(format!(
                    "zone at cylinder {}: {spares} spares leave no data",
                    z.first_cyl
                )));
            }
            let total_slots = zone_sectors / slot;
            let units = total_slots.div_ceil(unit_slots);
            let last = total_slots - (units - 1) * unit_slots;
            let data_slots = (units - 1) * (unit_slots - spares) + last.saturating_sub(spares);
            let data = data_slots * slot;
            let lbns = data.saturating_sub(z.front_space).min(block_count.saturating_sub(next));
            let mut spec = z;
            spec.slips.sort_unstable();
            out.push(Zone {
                spec,
                first_lbn: next,
                lbns,
                slot,
                unit_slots,
                data_per_unit: unit_slots - spares,
                total_slots,
                spares_at_front,
            });
            next += lbns;
        }
        // Some extracted models number one cylinder past the declared count.
        let cylinders = out
            .iter()
            .map(|z| z.spec.last_cyl + 1)
            .max()
            .unwrap_or(0)
            .max(cylinders);
        Ok(Layout {
            surfaces,
            cylinders,
            zones: out,
            capacity: next,
            serpentine,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    fn zone_of(&self, lbn: u64) -> &Zone {
        let i = self.zones.partition_point(|z| z.first_lbn + z.lbns <= lbn);
        &self.zones[i.min(self.zones.len() - 1)]
    }

    /// Where `lbn` lives and how many LBNs from it (at most `max`, at
    /// least 1) follow on consecutive sectors of the same track. The
    /// mapping is monotone, so the run ends where the offset stops matching
    /// (binary search; a handful of `map` calls per track).
    pub fn run(&self, lbn: u64, max: u64) -> (Phys, u64) {
        let ph = self.map(lbn);
        let fits = |r: u64| {
            if r <= 1 {
                return true;
            }
            let q = self.map(lbn + r - 1);
            lbn + r - 1 < self.capacity
                && q.cyl == ph.cyl
                && q.head == ph.head
                && q.sector as u64 == ph.sector as u64 + r - 1
        };
        let cap = max.max(1).min(ph.spt as u64 - ph.sector as u64);
        if fits(cap) {
            return (ph, cap);
        }
        let (mut lo, mut hi) = (1u64, cap); // fits(lo), !fits(hi)
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (ph, lo)
    }

    /// Physical location of `lbn` (clamped to the last sector).
    pub fn map(&self, lbn: u64) -> Phys {
        let lbn = lbn.min(self.capacity.saturating_sub(1));
        let z = self.zone_of(lbn);
        let spt = z.spec.sectors_per_track as u64;
        let d = lbn - z.first_lbn + z.spec.front_space;
        let (slot_d, rem) = (d / z.slot, d % z.slot);
        let (u, k) = (slot_d / z.data_per_unit, slot_d % z.data_per_unit);
        let unit_start = u * z.unit_slots;
        let mut p = unit_start
            + k
            + if z.spares_at_front {
                z.unit_slots - z.data_per_unit
            } else {
                0
            };
        // Slipped slots push the numbering along: the slot is the base
        // position plus the number of slips at or before it (a fixed point,
        // reached in a few binary searches).
        let slips = &z.spec.slips;
        let from = slips.partition_point(|&s| s < unit_start);
        let base = p;
        loop {
            let upto = slips.partition_point(|&s| s <= p);
            let next = base + (upto.max(from) - from) as u64;
            if next == p {
                break;
            }
            p = next;
        }
        let p = (p.min(z.total_slots - 1)) * z.slot + rem;
        let s = self.surfaces as u64;
        let track = p / spt; // zone-relative track in numbering order
        let sector = (p % spt) as u32;
        let cz = track / s;
        let order = (track % s) as u32;
        let cyl = z.spec.first_cyl + cz as u32;
        let reversed = match self.serpentine {
            1 => cz % 2 == 1,
            2 => cyl % 2 == 1,
            _ => false,
        };
        let head = if reversed { self.surfaces - 1 - order } else { order };
        // Each track switch shifts the first sector by the track skew, each
        // cylinder switch by the cylinder skew (in numbering order).
        let switches_t = (cz * (s - 1) + order as u64) as f64;
        let base = z.spec.first_offset + z.spec.track_skew * switches_t + z.spec.cyl_skew * cz as f64;
        let angle = (base + sector as f64).rem_euclid(spt as f64);
        Phys {
            cyl,
            head,
            sector,
            spt: spt as u32,
            angle,
        }
    }
}

// ------------------------------------------------------------- controller

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

#[derive(Debug, Clone, PartialEq)]
pub struct CacheParams {
    pub enabled: bool,
    pub segments: u32,
    pub segment_sectors: u64,
    pub max_readahead: u64,
    /// Read-ahead counts beyond the request (else: fill the segment).
    pub readahead_over_requested: bool,
    /// Report writes once the data is in the buffer; destage later.
    pub write_back: bool,
    pub read_hits_on_write_data: bool,
    pub separate_write_segment: bool,
    /// Read sectors passing under the head during rotational latency.
    pub read_any_free: bool,
    /// Read hits free the buffer space of the data they return.
    pub consume_on_hit: bool,
    /// DiskSim "Buffer continuous read": 0 none, 1 to the end of the track,
    /// 2 to the end of the cylinder, 3 until the segment is full, 4 to the
    /// end of the following track when a sequential stream is detected
    /// (else to the end of the current track).
    pub prefetch_mode: u8,
    /// Fraction of a read request that must be in the buffer before the
    /// bus transfer starts (the "high water mark", by request size).
    pub read_water: f64,
    /// Reconnection overhead before a read's data transfer after a miss.
    pub reselect_ms: f64,
    /// A read whose first block is being read ahead counts as a hit.
    pub almost_read_hits: bool,
    /// Start read-ahead again after a full hit on an idle drive.
    pub readahead_on_idle_hit: bool,
    /// "Fast write level" 1: only appending writes are write hits.
    pub write_back_sequential_only: bool,
    /// The drive holds the bus for a whole write transfer.
    pub hold_bus_write: bool,
    /// "Data preparation overhead" before a write-through write's data phase.
    pub write_data_prep_ms: f64,
}

impl CacheParams {
    /// No buffer cache: every request goes to the media. The other switches
    /// hold the defaults of a simple spec-file drive (read-ahead until the
    /// segment is full, almost-read hits), so a cache that differs is written
    /// `CacheParams { enabled: true, .., ..CacheParams::off() }`.
    pub fn off() -> Self {
        CacheParams {
            enabled: false,
            segments: 0,
            segment_sectors: 0,
            max_readahead: 0,
            readahead_over_requested: true,
            write_back: false,
            read_hits_on_write_data: false,
            separate_write_segment: false,
            read_any_free: false,
            consume_on_hit: false,
            prefetch_mode: 3,
            read_water: 0.0,
            reselect_ms: 0.0,
            write_back_sequential_only: false,
            almost_read_hits: true,
            readahead_on_idle_hit: false,
            hold_bus_write: false,
            write_data_prep_ms: 0.0,
        }
    }
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
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u64,
    end: u64,
    stamp: u64,
    valid: bool,
}

#[derive(Debug, Clone, Copy)]
struct Head {
    cyl: u32,
    head: u32,
}

/// Read-ahead in progress: the mechanism keeps reading `next..limit` into
/// segment `seg`; `t` is when it finished the previous sector.
#[derive(Debug, Clone, Copy)]
struct Prefetch {
    seg: usize,
    next: u64,
    limit: u64,
    t: f64,
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
}

const EPS: f64 = 1e-9;

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
            segs: vec![
                Seg {
                    start: 0,
                    end: 0,
                    stamp: 0,
                    valid: false
                };
                n
            ],
            clock: 0,
            head: Head { cyl: 0, head: 0 },
            mech_free: 0.0,
            prefetch: None,
            last_write: false,
            last_hit: false,
            prev_read_end: None,
            last_end: u64::MAX,
            head_wrote: false,
            p,
        })
    }

    pub fn params(&self) -> &HddParams {
        &self.p
    }

    /// Positioning time from the current head to `to` (seek or head switch).
    fn position(&self, from: Head, to: &Phys, write: bool) -> f64 {
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
    fn rotation_wait(&self, t: f64, to: &Phys) -> f64 {
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
    fn access(&mut self, t: f64, ph: &Phys, write: bool) -> (f64, f64) {
        let pos = self.position(self.head, ph, write);
        let t1 = t + pos;
        let start = t1 + self.rotation_wait(t1, ph);
        self.head = Head {
            cyl: ph.cyl,
            head: ph.head,
        };
        (start, start + self.period / ph.spt as f64)
    }

    /// Read or write `n` consecutive LBNs on the media from time `t`;
    /// calls `each(i, end_time)` per sector; returns the end time.
    fn media(&mut self, t: f64, lbn: u64, n: u64, write: bool, mut each: impl FnMut(u64, f64)) -> f64 {
        let mut t = t;
        let mut i = 0;
        while i < n {
            // One access per run of consecutive sectors on a track.
            let (ph, run) = self.p.layout.run(lbn + i, n - i);
            let (start, _) = self.access(t, &ph, write);
            let st = self.period / ph.spt as f64;
            for k in 0..run {
                t = start + (k + 1) as f64 * st;
                each(i + k, t);
            }
            i += run;
        }
        t
    }

    /// Advance read-ahead up to time `until`; returns the time at which the
    /// mechanism can leave (end of the sector in progress at `until`).
    fn advance_prefetch(&mut self, until: f64) -> f64 {
        let Some(mut pf) = self.prefetch else {
            return self.mech_free;
        };
        let mut leave = pf.t;
        let cap = self.p.layout.capacity();
        // Track by track: a run of consecutive sectors costs one access.
        while pf.next < pf.limit && pf.next < cap {
            let saved = self.head;
            let (ph, run) = self.p.layout.run(pf.next, pf.limit.min(cap) - pf.next);
            let (start, _) = self.access(pf.t, &ph, false);
            if start > until {
                self.head = saved;
                leave = until.max(pf.t);
                break;
            }
            let st = self.period / ph.spt as f64;
            // Sectors started by `until` are read (a sector in progress
            // completes).
            let started = (((until - start) / st).floor() as u64).saturating_add(1);
            let k = run.min(started);
            self.head_wrote = false;
            let end = start + k as f64 * st;
            pf.t = end;
            pf.next += k;
            leave = end;
            let seg = &mut self.segs[pf.seg];
            seg.end = pf.next;
            if seg.end - seg.start > self.p.cache.segment_sectors {
                seg.start = seg.end - self.p.cache.segment_sectors;
            }
            if k < run || end > until {
                break;
            }
        }
        if pf.next >= pf.limit || pf.next >= cap {
            leave = pf.t;
        }
        self.mech_free = self.mech_free.max(pf.t);
        self.prefetch = Some(pf);
        leave
    }

    fn stop_prefetch(&mut self, at: f64) {
        if self.prefetch.is_some() {
            let leave = self.advance_prefetch(at);
            self.mech_free = self.mech_free.max(leave);
            self.prefetch = None;
        }
    }

    fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segs[i].stamp = self.clock;
    }

    /// Least recently used read segment (segment 0 is reserved for writes
    /// when the drive has a separate write segment).
    fn victim(&self, for_write: bool) -> usize {
        let reserve = self.p.cache.separate_write_segment && self.segs.len() > 1;
        if reserve && for_write {
            return 0;
        }
        let lo = if reserve { 1 } else { 0 };
        (lo..self.segs.len())
            .min_by_key(|&i| (self.segs[i].valid, self.segs[i].stamp))
            .unwrap_or(0)
    }

    /// Data handed to the host on a hit frees its buffer space: the
    /// segment then starts after it (the drives re-read such data from the
    /// media, as the validation traces show).
    fn consume(&mut self, i: usize, upto: u64) {
        if self.p.cache.consume_on_hit {
            let s = &mut self.segs[i];
            s.start = s.start.max(upto).min(s.end);
        }
    }

    fn find(&self, lbn: u64, n: u64) -> Option<usize> {
        self.segs
            .iter()
            .position(|s| s.valid && s.start <= lbn && lbn + n <= s.end)
    }

    fn invalidate_overlap(&mut self, lbn: u64, n: u64, keep: Option<usize>) {
        for (i, s) in self.segs.iter_mut().enumerate() {
            if Some(i) != keep && s.valid && s.start < lbn + n && lbn < s.end {
                s.valid = false;
            }
        }
    }

    fn read(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_read_ms;
        // Bring read-ahead up to date, then classify.
        self.advance_prefetch(now);
        let stream = self.prefetch.filter(|pf| {
            let s = &self.segs[pf.seg];
            // Without "almost read hits", a request whose first block is
            // still being read ahead is not a hit.
            let almost = lbn == pf.next && pf.next < pf.limit;
            s.valid
                && s.start <= lbn
                && lbn <= pf.next
                && lbn + n <= pf.next.max(pf.limit) + c.max_readahead
                && (c.almost_read_hits || !almost)
        });
        if let Some(i) = self.find(lbn, n) {
            // Full hit: transfer from the buffer.
            self.touch(i);
            self.last_hit = true;
            self.consume(i, lbn + n);
            let oh = c_over(&self.p.overheads.read_hit, ow);
            // "Read-ahead on idle hit": an idle drive reads ahead again
            // after a full hit.
            let idle = self.prefetch.is_none_or(|pf| pf.next >= pf.limit);
            if c.readahead_on_idle_hit && idle {
                let seg = self.segs[i];
                let limit = self.prefetch_limit(lbn, n, seg.start.max(lbn));
                if limit > seg.end && seg.end >= lbn + n {
                    let t = (now + oh).max(self.mech_free);
                    self.prefetch = Some(Prefetch {
                        seg: i,
                        next: seg.end,
                        limit,
                        t,
                    });
                }
            }
            self.prev_read_end = Some(lbn + n);
            return oh + n as f64 * bus + self.p.overheads.read_complete;
        }
        if let Some(mut pf) = stream {
            // The data is cached or being read ahead: wait for it and keep
            // reading. If read-ahead had already stopped short of the
            // request, the rest is a partial hit: a miss overhead, and the
            // mechanism restarts from now.
            let stopped = pf.next >= pf.limit && lbn + n > pf.next;
            self.last_hit = !stopped;
            let oh = if stopped {
                c_over(&self.p.overheads.read_miss, ow)
            } else {
                c_over(&self.p.overheads.read_hit, ow)
            };
            if stopped {
                pf.t = pf.t.max(now + oh).max(self.mech_free);
            }
            // Read-ahead may push out data before this request (kept when
            // hits do not consume), never the request's own.
            let seg_start = self.segs[pf.seg].start.max(lbn);
            pf.limit = pf.limit.max(self.prefetch_limit(lbn, n, seg_start));
            self.prefetch = Some(pf);
            self.touch(pf.seg);
            // Advance until the request's last sector is in.
            let mut bus_t = now + oh;
            let mut i = lbn;
            while i < lbn + n {
                let pf = self.prefetch.expect("stream");
                if i < pf.next {
                    bus_t += bus;
                    i += 1;
                    continue;
                }
                let ph = self.p.layout.map(pf.next);
                let (_, end) = self.access(pf.t, &ph, false);
                self.head_wrote = false;
                let mut pf = pf;
                pf.t = end;
                pf.next += 1;
                let seg = &mut self.segs[pf.seg];
                seg.end = pf.next;
                if seg.end - seg.start > c.segment_sectors {
                    seg.start = seg.end - c.segment_sectors;
                }
                self.prefetch = Some(pf);
                bus_t = bus_t.max(end) + bus;
                i += 1;
            }
            self.mech_free = self.mech_free.max(self.prefetch.map(|p| p.t).unwrap_or(0.0));
            let seg = self.prefetch.expect("stream").seg;
            self.consume(seg, lbn + n);
            self.prev_read_end = Some(lbn + n);
            return bus_t - now + self.p.overheads.read_complete;
        }
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
        let mut ready = Vec::with_capacity(n as usize);
        let end = self.media(start, lbn, n, false, |_, t| ready.push(t));
        // The bus transfer starts once the high-water mark is buffered.
        let k = ((c.read_water * n as f64).ceil() as usize).clamp(1, n as usize);
        let mut bus_t = (now + oh).max(ready[k - 1] + self.p.cache.reselect_ms);
        for &t in &ready {
            bus_t = bus_t.max(t) + bus;
        }
        self.mech_free = end;
        if !self.segs.is_empty() {
            let v = self.victim(false);
            self.invalidate_overlap(lbn, n, None);
            let seg_end = (lbn + n + after).min(self.p.layout.capacity());
            let start_lbn = seg_end.saturating_sub(c.segment_sectors).max(lbn - before);
            self.segs[v] = Seg {
                start: start_lbn,
                end: seg_end,
                stamp: 0,
                valid: true,
            };
            self.touch(v);
            let limit = self.prefetch_limit(lbn, n, start_lbn);
            if limit > seg_end {
                self.prefetch = Some(Prefetch {
                    seg: v,
                    next: seg_end,
                    limit,
                    t: end,
                });
            }
        }
        self.prev_read_end = Some(lbn + n);
        bus_t - now + self.p.overheads.read_complete
    }

    /// Where read-ahead after a read of `lbn..lbn+n` stops.
    fn prefetch_limit(&self, lbn: u64, n: u64, seg_start: u64) -> u64 {
        let c = &self.p.cache;
        let end = lbn + n;
        let cap_ra = end + c.max_readahead;
        // Without "read-ahead over requested", prefetch must not push the
        // request's own data out of the segment.
        let cap_seg = if c.readahead_over_requested {
            u64::MAX
        } else {
            seg_start + c.segment_sectors
        };
        // First LBN after the track holding `from`.
        let track_end = |from: u64| -> u64 {
            let (ph, run) = self.p.layout.run(from, u64::MAX);
            let mut l = from + run;
            // Slipped sectors can interrupt a track: keep going while the
            // numbering stays on it.
            while l < self.p.layout.capacity() {
                let (q, r) = self.p.layout.run(l, u64::MAX);
                if q.cyl != ph.cyl || q.head != ph.head {
                    break;
                }
                l += r;
            }
            l
        };
        let want = match c.prefetch_mode {
            0 => end,
            1 => track_end(end - 1),
            2 => {
                let cyl = self.p.layout.map(end - 1).cyl;
                let mut l = end;
                while l < cap_ra && l < self.p.layout.capacity() && self.p.layout.map(l).cyl == cyl {
                    l += 1;
                }
                l
            }
            4 => {
                let t = track_end(end - 1);
                let spt = self.p.layout.map(lbn).spt as u64;
                let stream = self.prev_read_end.is_some_and(|e| e <= lbn && e + 2 * spt >= lbn);
                if stream {
                    track_end(t)
                } else if c.readahead_over_requested || c.read_any_free {
                    t
                } else {
                    // Empirical (Atlas III trace): a drive that keeps the
                    // request's data and cannot read on arrival starts
                    // read-ahead only once a sequential stream is seen.
                    end
                }
            }
            _ => u64::MAX,
        };
        want.min(cap_ra).min(cap_seg).max(end)
    }

    fn write(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_write_ms;
        self.stop_prefetch(now);
        self.last_hit = false;
        if c.enabled && c.write_back && !self.segs.is_empty() {
            // Immediate report: data into the buffer, destage afterwards.
            // Level 1 fast writes only cover writes appending to the
            // previous write's data; others count as misses.
            let appending = self.last_write && self.last_end == lbn;
            let busy = self.mech_free > now || (c.write_back_sequential_only && !appending);
            let oh = if busy {
                c_over(&self.p.overheads.write_miss, ow)
            } else {
                c_over(&self.p.overheads.write_hit, ow)
            };
            self.last_hit = !busy;
            let done = now + oh + n as f64 * bus;
            self.cache_written(lbn, n);
            let start = done.max(self.mech_free);
            self.mech_free = self.media(start, lbn, n, true, |_, _| {});
            self.head_wrote = true;
            return done - now + self.p.overheads.write_complete;
        }
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
        let end = self.media(ready, lbn, n, false, |_, _| {});
        self.mech_free = end;
        self.head_wrote = true;
        if c.enabled && !self.segs.is_empty() {
            self.cache_written(lbn, n);
        }
        end - now + self.p.overheads.write_complete
    }

    fn cache_written(&mut self, lbn: u64, n: u64) {
        if self.segs.is_empty() {
            return;
        }
        if self.p.cache.read_hits_on_write_data {
            // Extend a segment that ends where this write starts, else take one.
            let i = self
                .segs
                .iter()
                .position(|s| s.valid && s.end == lbn && s.end - s.start + n <= self.p.cache.segment_sectors)
                .unwrap_or_else(|| self.victim(true));
            self.invalidate_overlap(lbn, n, Some(i));
            let s = &mut self.segs[i];
            if !(s.valid && s.end == lbn) {
                s.start = lbn;
            }
            s.end = lbn + n;
            s.valid = true;
            if s.end - s.start > self.p.cache.segment_sectors {
                s.start = s.end - self.p.cache.segment_sectors;
            }
            self.touch(i);
        } else {
            self.invalidate_overlap(lbn, n, None);
        }
    }
}

fn c_over(o: &[f64; 2], after_write: usize) -> f64 {
    o[after_write]
}

impl DeviceModel for Hdd {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        let n = (req.sectors.max(1) as u64).min(self.p.layout.capacity().saturating_sub(req.lbn).max(1));
        let lbn = req.lbn.min(self.p.layout.capacity().saturating_sub(1));
        let t = match req.kind {
            DiskOpKind::Read => self.read(now_ms, lbn, n),
            DiskOpKind::Write => self.write(now_ms, lbn, n),
        };
        self.last_write = req.kind == DiskOpKind::Write;
        self.last_end = lbn + n;
        t
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

    fn zone(first: u32, last: u32, spt: u32) -> ZoneSpec {
        ZoneSpec {
            first_cyl: first,
            last_cyl: last,
            sectors_per_track: spt,
            track_skew: 0.0,
            cyl_skew: 0.0,
            first_offset: 0.0,
            front_space: 0,
            spares: 0,
            slips: vec![],
        }
    }

    #[test]
    fn seek_table_interpolates_between_points() {
        let c = SeekCurve::Table(vec![(1.0, 1.0), (10.0, 2.8), (100.0, 5.0)]);
        assert_eq!(c.time(0), 0.0);
        assert!((c.time(1) - 1.0).abs() < 1e-12);
        // 5.5 is halfway between 1 and 10: 1.0 + 0.2·4.5 = 1.9.
        assert!((c.time(5) - (1.0 + 0.2 * 4.0)).abs() < 1e-12);
        assert!((c.time(55) - (2.8 + 2.2 * 45.0 / 90.0)).abs() < 1e-12);
        // Beyond the table: the last segment extended.
        assert!((c.time(190) - (5.0 + 2.2 * 90.0 / 90.0)).abs() < 1e-12);
    }

    #[test]
    fn hpl_equation_at_hand_computed_points() {
        // HP C2247A: x0 = 300, a = 3.81, b = 0.33, c = 7.75, e = 0.0059.
        let c = SeekCurve::Hpl {
            x0: 300.0,
            a: 3.81,
            b: 0.33,
            c: 7.75,
            e: 0.0059,
            first: vec![2.89, 3.68],
        };
        assert_eq!(c.time(1), 2.89);
        assert_eq!(c.time(2), 3.68);
        assert!((c.time(100) - (3.81 + 0.33 * 10.0)).abs() < 1e-12); // 7.11
        assert!((c.time(1000) - (7.75 + 5.9)).abs() < 1e-12); // 13.65
    }

    #[test]
    fn three_point_passes_through_its_points() {
        let c = SeekCurve::three_point(0.8, 4.9, 10.5, 3001);
        assert!((c.time(1) - 0.8).abs() < 1e-9);
        assert!((c.time(1000) - 4.9).abs() < 1e-9);
        assert!((c.time(3000) - 10.5).abs() < 1e-9);
    }

    #[test]
    fn power_linear_form() {
        let c = SeekCurve::PowerLinear {
            a: 0.5,
            b: 0.1,
            c: 0.5,
            boundary: 5000.0,
            e: 5.0,
            f: 0.001,
        };
        assert!((c.time(400) - (0.5 + 0.1 * 20.0)).abs() < 1e-12);
        assert!((c.time(6000) - 11.0).abs() < 1e-12);
    }

    #[test]
    fn seek_file_errors_name_the_line() {
        match parse_seek_table("Seek distances measured: 2\n1, 0.8\n2 x\n", "a.seek") {
            Err(Error::Parse { location, field, .. }) => {
                assert_eq!(location, crate::error::Location::Line(3));
                assert_eq!(field, "time");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse_seek_table("Seek distances measured: 3\n1, 0.8\n2, 1\n", "a.seek").is_err());
        assert_eq!(
            parse_seek_table("Seek distances measured: 2\n1,\t0.8\n2,\t1\n", "a").unwrap(),
            vec![(1.0, 0.8), (2.0, 1.0)]
        );
    }

    #[test]
    fn zone_boundaries_map_to_hand_computed_locations() {
        // 2 surfaces; zone A cylinders 0..=1 with 10 sectors, zone B 2..=3 with 8.
        let l = Layout::new(
            2,
            4,
            1_000,
            vec![zone(0, 1, 10), zone(2, 3, 8)],
            SpareUnit::None,
            false,
            0,
        )
        .unwrap();
        assert_eq!(l.capacity(), 40 + 32);
        let p = l.map(0);
        assert_eq!((p.cyl, p.head, p.sector), (0, 0, 0));
        let p = l.map(10);
        assert_eq!((p.cyl, p.head, p.sector), (0, 1, 0));
        let p = l.map(39);
        assert_eq!((p.cyl, p.head, p.sector), (1, 1, 9));
        let p = l.map(40); // first LBN of zone B
        assert_eq!((p.cyl, p.head, p.sector, p.spt), (2, 0, 0, 8));
        let p = l.map(71);
        assert_eq!((p.cyl, p.head, p.sector), (3, 1, 7));
    }

    #[test]
    fn skews_shift_the_first_sector_of_each_track() {
        let mut z = zone(0, 1, 10);
        z.track_skew = 3.0;
        z.cyl_skew = 4.0;
        let l = Layout::new(2, 2, 1_000, vec![z], SpareUnit::None, false, 0).unwrap();
        assert_eq!(l.map(0).angle, 0.0);
        assert_eq!(l.map(10).angle, 3.0); // one track switch
        assert_eq!(l.map(20).angle, 7.0); // + one cylinder switch (3 + 4)
        assert_eq!(l.map(30).angle, 0.0); // 3 + 4 + 3 = 10 ≡ 0
        assert_eq!(l.map(35).angle, 5.0);
    }

    #[test]
    fn spares_and_slips_shift_the_numbering() {
        // Per-track sparing: 1 spare per 10-sector track leaves 9 data sectors.
        let mut z = zone(0, 1, 10);
        z.spares = 1;
        let l = Layout::new(1, 2, 1_000, vec![z.clone()], SpareUnit::SectorsPerTrack, false, 0).unwrap();
        assert_eq!(l.capacity(), 18);
        let p = l.map(9);
        assert_eq!((p.cyl, p.sector), (1, 0));
        // Per-zone sparing with slipped slot 3: LBN 3 lands on sector 4, the
        // last data LBN on the sector before the spare.
        z.slips = vec![3];
        let l = Layout::new(1, 2, 1_000, vec![z.clone()], SpareUnit::SectorsPerZone, false, 0).unwrap();
        assert_eq!(l.capacity(), 19);
        assert_eq!(l.map(2).sector, 2);
        assert_eq!(l.map(3).sector, 4);
        let p = l.map(18);
        assert_eq!((p.cyl, p.sector), (1, 9));
        // Track sparing: 1 spare track at the zone end, track 0 slipped.
        z.slips = vec![0];
        let l = Layout::new(2, 2, 1_000, vec![z.clone()], SpareUnit::TracksPerZone, false, 0).unwrap();
        assert_eq!(l.capacity(), 30);
        let p = l.map(0);
        assert_eq!((p.cyl, p.head, p.sector), (0, 1, 0));
        // Front space: the first 5 data positions are unused.
        let mut z2 = zone(0, 1, 10);
        z2.front_space = 5;
        let l = Layout::new(1, 2, 1_000, vec![z2], SpareUnit::None, false, 0).unwrap();
        assert_eq!(l.capacity(), 15);
        assert_eq!(l.map(0).sector, 5);
    }

    #[test]
    fn runs_stop_at_slips_and_track_ends() {
        let mut z = zone(0, 1, 10);
        z.spares = 1;
        z.slips = vec![3];
        let l = Layout::new(1, 2, 1_000, vec![z], SpareUnit::SectorsPerZone, false, 0).unwrap();
        let (p, r) = l.run(0, 100);
        assert_eq!((p.sector, r), (0, 3)); // LBNs 0..=2 on sectors 0..=2
        let (p, r) = l.run(3, 100);
        assert_eq!((p.sector, r), (4, 6)); // LBN 3 on sector 4, to the track end
        assert_eq!(l.run(3, 2).1, 2);
        let (p, r) = l.run(9, 100);
        assert_eq!((p.cyl, p.sector, r), (1, 0, 10));
    }

    #[test]
    fn serpentine_reverses_odd_cylinders() {
        let l = Layout::new(3, 2, 1_000, vec![zone(0, 1, 4)], SpareUnit::None, false, 1).unwrap();
        assert_eq!(l.map(12).head, 2); // cylinder 1 starts on the last surface
        assert_eq!(l.map(20).head, 0);
    }

    fn simple_drive() -> Hdd {
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
        })
        .unwrap()
    }

    /// `d` rebuilt with an on-disk cache (its segments sized from `cache`).
    fn with_cache(d: Hdd, cache: CacheParams) -> Hdd {
        Hdd::new(HddParams { cache, ..d.p }).unwrap()
    }

    fn read(lbn: u64, sectors: u32) -> DevRequest {
        DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors,
        }
    }

    #[test]
    fn read_ahead_hits_and_consumed_data_misses() {
        let mut d = simple_drive();
        d.p.bus_read_ms = 0.01;
        d.p.overheads.read_hit = [0.1, 0.1];
        d.p.overheads.read_miss = [0.5, 0.5];
        let mut d = with_cache(
            d,
            CacheParams {
                enabled: true,
                segments: 2,
                segment_sectors: 100,
                max_readahead: 50,
                consume_on_hit: true,
                ..CacheParams::off()
            },
        );
        let r = read;
        // Miss at t = 0: 0.5 ms overhead puts the platter at sector 5, so
        // sector 0 comes round at 10.0; read until 10.1, bus 0.01 → 10.11.
        assert!((d.service(0.0, &r(0, 1)) - 10.11).abs() < 1e-9);
        assert!(!d.last_hit());
        // Read-ahead of sectors 1..=50 ran from 10.1 to 15.1: a full hit.
        assert!((d.service(30.0, &r(1, 4)) - (0.1 + 4.0 * 0.01)).abs() < 1e-9);
        assert!(d.last_hit());
        // The hit freed sectors 1..=4: re-reading sector 1 misses. At 40.5
        // the platter is at sector 5; sector 1 is 9.6 ms away → 50.1..50.2.
        assert!((d.service(40.0, &r(1, 1)) - 10.21).abs() < 1e-9);
        assert!(!d.last_hit());
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

    #[test]
    fn read_ahead_protects_only_the_current_request_when_hits_keep_data() {
        // "Read-ahead over requested" = 0 and hits that do not consume: the
        // segment keeps the data already returned, and read-ahead may push
        // out older data but not the current request's.
        let mut d = simple_drive();
        d.p.bus_read_ms = 0.01;
        d.p.overheads.read_hit = [0.1, 0.1];
        d.p.overheads.read_miss = [0.5, 0.5];
        let mut d = with_cache(
            d,
            CacheParams {
                enabled: true,
                segments: 1,
                segment_sectors: 10,
                max_readahead: 50,
                readahead_over_requested: false,
                consume_on_hit: false,
                prefetch_mode: 3,
                ..CacheParams::off()
            },
        );
        let r = read;
        // Miss on sector 0 at t = 0: 0.5 ms overhead (platter at sector 5),
        // sector 0 at 10.0..10.1, bus 0.01 → 10.11. Read-ahead fills the
        // 10-sector segment: sectors 1..=9, 10.1..11.0.
        assert!((d.service(0.0, &r(0, 1)) - 10.11).abs() < 1e-9);
        // Sectors 8..=11 at t = 30: 8 and 9 are buffered, read-ahead has
        // stopped: miss overhead, bus 30.52; the mechanism restarts at 30.5
        // (sector 5), reads 10 at 31.0..31.1 and 11 by 31.2 → 31.21.
        assert!((d.service(30.0, &r(8, 4)) - 1.21).abs() < 1e-9);
        assert!(!d.last_hit());
        // Read-ahead now protects sectors 8..=11 only and runs to 18 (12..=17
        // by 31.8): sectors 14..=15 at t = 50 are a full hit, 0.1 + 2 × 0.01.
        // Protecting the segment's oldest data would have stopped it at 12
        // (a miss: 1.61 ms).
        assert!((d.service(50.0, &r(14, 2)) - 0.12).abs() < 1e-9);
        assert!(d.last_hit());
        // The data returned stay: re-reading sector 14 hits, 0.1 + 0.01.
        assert!((d.service(60.0, &r(14, 1)) - 0.11).abs() < 1e-9);
        assert!(d.last_hit());
    }

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

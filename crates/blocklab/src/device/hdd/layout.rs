//! The zoned layout: which cylinder, surface and sector hold an LBN, and at
//! what angle. Zones set the sectors per track; spare sectors or tracks and
//! slipped defects are skipped by the numbering; track and cylinder skews
//! rotate each track's first sector so that a sequential transfer does not
//! lose a revolution at every head or cylinder switch.

use super::remainder::rem_euclid;
use crate::error::{Error, Result};

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
    /// The slips are strictly increasing (no slot slipped twice) ...
    slips_increasing: bool,
    /// ... and then `slips[i] - i`, a non-decreasing key for `locate`.
    slip_keys: Vec<u64>,
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
            let slips_increasing = spec.slips.windows(2).all(|w| w[0] < w[1]);
            let slip_keys = if slips_increasing {
                spec.slips.iter().enumerate().map(|(i, &s)| s - i as u64).collect()
            } else {
                Vec::new()
            };
            out.push(Zone {
                spec,
                first_lbn: next,
                lbns,
                slot,
                unit_slots,
                data_per_unit: unit_slots - spares,
                total_slots,
                spares_at_front,
                slips_increasing,
                slip_keys,
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
    /// least 1) follow on consecutive sectors of the same track. Usually
    /// one `locate`: when nothing can interrupt the run before the track
    /// ends or `max` is reached (see `Located::unbroken`), the whole of it
    /// is the answer; otherwise `run_by_search` finds where it stops.
    pub fn run(&self, lbn: u64, max: u64) -> (Phys, u64) {
        let at = self.locate(lbn);
        let mut ph = at.ph;
        ph.angle = rem_euclid(at.base + ph.sector as f64, ph.spt as f64);
        let cap = max.max(1).min(ph.spt as u64 - ph.sector as u64);
        if at.unbroken >= cap {
            return (ph, cap);
        }
        self.run_by_search(lbn, max)
    }

    /// `run` by probing: the mapping is monotone, so the run ends where
    /// the offset stops matching (binary search; a handful of `map` calls
    /// per track). The path for runs cut short by a slip, a unit's spares
    /// or a zone's end, and the reference `run`'s shortcut is tested
    /// against.
    fn run_by_search(&self, lbn: u64, max: u64) -> (Phys, u64) {
        let ph = self.map(lbn);
        let fits = |r: u64| {
            if r <= 1 {
                return true;
            }
            // Where, not at what angle: the probes need no remainder.
            let q = self.locate(lbn + r - 1).ph;
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
    #[inline]
    pub fn map(&self, lbn: u64) -> Phys {
        let at = self.locate(lbn);
        let mut ph = at.ph;
        ph.angle = rem_euclid(at.base + ph.sector as f64, ph.spt as f64);
        ph
    }

    /// `map` without the angle (left 0), the angle of the track's first
    /// sector before reduction modulo the track, and how far the numbering
    /// surely runs on unbroken from `lbn`.
    #[inline]
    fn locate(&self, lbn: u64) -> Located {
        let lbn = lbn.min(self.capacity.saturating_sub(1));
        let z = self.zone_of(lbn);
        let spt = z.spec.sectors_per_track as u64;
        let d = lbn - z.first_lbn + z.spec.front_space;
        // Sector slots and one unit per zone are the common cases: skip
        // their divisions (a disk run maps several LBNs per request).
        let (slot_d, rem) = if z.slot == 1 { (d, 0) } else { (d / z.slot, d % z.slot) };
        let (u, k) = if slot_d < z.data_per_unit {
            (0, slot_d)
        } else {
            (slot_d / z.data_per_unit, slot_d % z.data_per_unit)
        };
        let unit_start = u * z.unit_slots;
        let p = unit_start
            + k
            + if z.spares_at_front {
                z.unit_slots - z.data_per_unit
            } else {
                0
            };
        let (p, slips_upto) = slipped(z, unit_start, p);
        // LBNs from `lbn` on that surely take the slots (or, a slot being a
        // whole track, the sectors) right after this one: up to the zone's
        // end (the disk's, for the last), and with sector slots, up to the unit's spares,
        // the next slip and the zone's last slot. p + i is then the fixed
        // point `slipped` finds for base + i, so `locate(lbn + i)` is this
        // track, sector + i, whenever sector + i is still on the track.
        // (An LBN past the end is clamped to the last one: 1, the run `run`
        // finds for it too, whatever `max`.)
        let in_zone = (z.first_lbn + z.lbns).saturating_sub(lbn);
        let unbroken = if z.slot != 1 {
            in_zone.min(z.slot - rem)
        } else if z.slips_increasing && p < z.total_slots {
            let next_slip = z.spec.slips.get(slips_upto);
            in_zone
                .min(z.data_per_unit - k)
                .min(next_slip.map_or(u64::MAX, |&s| s - p))
                .min(z.total_slots - p)
        } else {
            0
        };
        let p = (p.min(z.total_slots - 1)) * z.slot + rem;
        let s = self.surfaces as u64;
        // Zone-relative track in numbering order, and the sector on it; in
        // 32 bits when they fit (64-bit divisions are several times slower).
        let (track, sector) = if p <= u32::MAX as u64 {
            let (p, spt) = (p as u32, spt as u32);
            ((p / spt) as u64, p % spt)
        } else {
            (p / spt, (p % spt) as u32)
        };
        let (cz, order) = if track <= u32::MAX as u64 {
            let (t, s) = (track as u32, s as u32);
            ((t / s) as u64, t % s)
        } else {
            (track / s, (track % s) as u32)
        };
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
        let ph = Phys {
            cyl,
            head,
            sector,
            spt: spt as u32,
            angle: 0.0,
        };
        Located { ph, base, unbroken }
    }
}

/// What `locate` finds.
struct Located {
    ph: Phys,
    base: f64,
    /// LBNs from this one (itself included) that certainly follow on
    /// consecutive slots with nothing skipped; 0 when not known.
    unbroken: u64,
}

/// Slipped slots push the numbering along: the slot of data position
/// `base` (in the unit starting at slot `unit_start`) is `base` plus the
/// number of the unit's slips at or before it, the least fixed point of
/// p = base + #{slips >= unit_start, <= p}. Also how many of the zone's
/// slips lie at or before that slot (the index of the next one).
#[inline]
fn slipped(z: &Zone, unit_start: u64, base: u64) -> (u64, usize) {
    let slips = &z.spec.slips;
    let from = if unit_start == 0 {
        0
    } else {
        slips.partition_point(|&s| s < unit_start)
    };
    if z.slips_increasing {
        // With slips s_i strictly increasing, slip i >= from is passed iff
        // s_i - (i - from) <= base; s_i - i never decreases, and every slip
        // before `from` meets it too: one binary search finds them all, and
        // the slips passed are those at or before the fixed point.
        let limit = base - from as u64;
        let upto = z.slip_keys.partition_point(|&k| k <= limit);
        return (base + (upto - from) as u64, upto);
    }
    let p = slipped_by_iteration(slips, from, base);
    (p, slips.partition_point(|&s| s <= p))
}

/// The same fixed point found by iterating from `base` (slips in any order,
/// `from` of them before the unit): the path for unsorted slip lists, and
/// the reference the single search is tested against.
fn slipped_by_iteration(slips: &[u64], from: usize, base: u64) -> u64 {
    let mut p = base;
    loop {
        let upto = slips.partition_point(|&s| s <= p);
        let next = base + (upto.max(from) - from) as u64;
        if next == p {
            return p;
        }
        p = next;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A zone without skews, spares or slips (the drive tests use it too).
    pub(in crate::device::hdd) fn zone(first: u32, last: u32, spt: u32) -> ZoneSpec {
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
    fn one_search_finds_the_fixed_point_of_the_slips() {
        // The fixed-point iteration `slipped` replaced, against its single
        // binary search: seeded random slip lists, units anywhere.
        let by_iteration = |slips: &[u64], unit_start: u64, base: u64| {
            slipped_by_iteration(slips, slips.partition_point(|&s| s < unit_start), base)
        };
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..300 {
            let mut z = zone(0, 9, 10);
            let n = (next() % 40) as usize;
            let span = 20 + next() % 400;
            z.slips = (0..n).map(|_| next() % span).collect();
            if round % 2 == 0 {
                z.slips.sort_unstable();
                z.slips.dedup(); // strictly increasing: the one-search path
            }
            let l = Layout::new(1, 10, 1_000, vec![z], SpareUnit::SectorsPerZone, false, 0).unwrap();
            let zz = &l.zones[0];
            assert_eq!(zz.slips_increasing, zz.spec.slips.windows(2).all(|w| w[0] < w[1]));
            for _ in 0..50 {
                let unit_start = next() % span;
                let base = unit_start + next() % span;
                let (p, upto) = slipped(zz, unit_start, base);
                assert_eq!(upto, zz.spec.slips.partition_point(|&s| s <= p));
                assert_eq!(
                    p,
                    by_iteration(&zz.spec.slips, unit_start, base),
                    "slips {:?}, unit at {unit_start}, base {base}",
                    zz.spec.slips
                );
            }
        }
    }

    #[test]
    fn runs_found_in_one_step_match_the_search() {
        // `run`'s shortcut against the probing search, on seeded random
        // layouts: every sparing unit, spares in front or behind, slips
        // sorted or repeated, front space, a block count cutting the last
        // zone short, serpentine numbering; LBNs anywhere, past the end too.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..400 {
            let surfaces = 1 + (next() % 4) as u32;
            let (mut zones, mut cyl) = (Vec::new(), 0u32);
            for _ in 0..1 + next() % 3 {
                let ncyl = 1 + (next() % 4) as u32;
                let mut z = zone(cyl, cyl + ncyl - 1, 3 + (next() % 30) as u32);
                z.spares = next() % 4;
                z.front_space = if next() % 4 == 0 { next() % 7 } else { 0 };
                let span = (ncyl * surfaces * z.sectors_per_track) as u64;
                z.slips = (0..next() % 6).map(|_| next() % span).collect();
                if round % 3 == 0 {
                    z.slips.extend(z.slips.clone().first()); // a repeat: not strictly increasing
                }
                cyl += ncyl;
                zones.push(z);
            }
            let unit = match next() % 7 {
                0 => SpareUnit::None,
                1 => SpareUnit::TracksPerZone,
                2 => SpareUnit::SectorsPerCylinder,
                3 => SpareUnit::SectorsPerTrack,
                4 => SpareUnit::SectorsPerRange(1 + (next() % 3) as u32),
                _ => SpareUnit::SectorsPerZone,
            };
            let block_count = if next() % 3 == 0 { next() % 2_000 } else { u64::MAX };
            let Ok(l) = Layout::new(
                surfaces,
                cyl,
                block_count,
                zones,
                unit,
                next() % 2 == 0,
                (next() % 3) as u8,
            ) else {
                continue; // spares leaving no data
            };
            for _ in 0..200 {
                let lbn = next() % (l.capacity() + 3);
                let max = [1, 2, 8, next() % 40, u64::MAX][(next() % 5) as usize];
                assert_eq!(
                    l.run(lbn, max),
                    l.run_by_search(lbn, max),
                    "round {round}, lbn {lbn}, max {max}"
                );
            }
        }
    }

    #[test]
    fn serpentine_reverses_odd_cylinders() {
        let l = Layout::new(3, 2, 1_000, vec![zone(0, 1, 4)], SpareUnit::None, false, 1).unwrap();
        assert_eq!(l.map(12).head, 2); // cylinder 1 starts on the last surface
        assert_eq!(l.map(20).head, 0);
    }
}

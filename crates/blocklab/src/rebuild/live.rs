//! `live`: D-GRAID's live-block recovery (Sivathanu et al., FAST'04): the
//! spare gets only the blocks the file system uses, copied from a mirror,
//! so the rebuild takes time in proportion to the live share.
//!
//! Mirrored levels only (RAID-1, RAID-10: every live block has a copy to
//! read). Each recovering member has a set of live member blocks
//! ([`LiveSet`]: a share of the member laid out `compact` or `spread`, or
//! a live map of a model run, `dgraid live --json`). They are copied in
//! extents: ascending runs of live blocks cut at `max_io` blocks and where
//! the source stops being contiguous (RAID-10 chunks whose copies sit on
//! different disks); one step reads an extent from the first surviving
//! copy and writes it to every recovering member with that same extent
//! (as MD's row step does). Recovering members are walked together in
//! ascending member order. A full share with `max_io` one chunk issues
//! exactly `md`'s row plans.
//!
//! The map of rebuilt units: a unit of the map (one or more chunk rows)
//! holding no live block of any recovering member is marked rebuilt when
//! the recovery starts (nothing to copy: user writes there go to the spare
//! from then on); a unit with live blocks is marked when its last extent
//! has been copied. Until then a user write to it is planned degraded (the
//! spare is not written), so the order watches user writes
//! ([`Strategy::observe_user`]): a written block of a recovering member in
//! a unit not yet marked is copied again after it (a block that was dead
//! becomes live, as D-GRAID's conservative map has it; a live block
//! already copied is copied anew), unless its extent is still to come.
//!
//! Dead blocks are not copied and never read. Once the rebuild finishes the
//! spare is a member: a block that was dead stays whatever the spare held
//! until the file system writes it (a file system reads no block it has not
//! allocated and written).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::strategy::{RebuildStep, Strategy};
use crate::array::{Action, Array, Cause, DiskOp, DiskOpKind, IoPlan, Level};
use crate::dgraid::{LiveLayout, LiveSet};
use crate::error::{Error, Location, Result};

/// Where the live blocks of the recovering members come from.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveSource {
    /// This share of every recovering member, compact or spread in runs
    /// of `unit` blocks ([`LiveSet::synthetic_in_units`]).
    Share { frac: f64, layout: LiveLayout, unit: u64 },
    /// Live member blocks per disk (a model run's live map).
    Map(Arc<LiveMap>),
}

/// Live member blocks of some members, by disk.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveMap {
    pub members: BTreeMap<u32, LiveSet>,
}

/// One member as `dgraid live --json` prints it (other fields ignored).
#[derive(Deserialize)]
struct MemberJson {
    disk: u32,
    live: SetJson,
}

#[derive(Deserialize)]
struct SetJson {
    member_blocks: u64,
    runs: Vec<(u64, u64)>,
}

impl LiveMap {
    /// Read the JSON of `blocklab dgraid live --json` (a list of members,
    /// each with `disk` and `live: {member_blocks, runs}`; blocks of the
    /// array's block size).
    pub fn read(path: &Path) -> Result<LiveMap> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&file, e))?;
        Self::from_json(&text, &file)
    }

    /// Parse that JSON; `file` names it in errors.
    pub fn from_json(text: &str, file: &str) -> Result<LiveMap> {
        let rows: Vec<MemberJson> = serde_json::from_str(text)
            .map_err(|e| Error::parse(file, Location::Line(e.line() as u64), "live map", e.to_string()))?;
        let mut members = BTreeMap::new();
        for m in rows {
            let set = LiveSet::from_runs(m.live.member_blocks, &m.live.runs)
                .map_err(|e| Error::parse(file, Location::Whole, "runs", format!("disk {}: {e}", m.disk)))?;
            if members.insert(m.disk, set).is_some() {
                return Err(Error::parse(
                    file,
                    Location::Whole,
                    "disk",
                    format!("disk {} is listed twice", m.disk),
                ));
            }
        }
        Ok(LiveMap { members })
    }
}

/// The live order's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveParams {
    pub source: LiveSource,
    /// Largest extent copied at once, in blocks (0: one chunk).
    pub max_io: u64,
}

impl Default for LiveParams {
    /// Everything live (the bytes of a full rebuild), one-chunk extents.
    fn default() -> Self {
        LiveParams {
            source: LiveSource::Share {
                frac: 1.0,
                layout: LiveLayout::Compact,
                unit: 1,
            },
            max_io: 0,
        }
    }
}

/// One extent: `n` blocks from `first` on each of `targets`, read from
/// `src` at `src_first`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Extent {
    targets: Vec<u32>,
    first: u64,
    n: u64,
    src: u32,
    src_first: u64,
}

/// The next extents of one recovering member, ascending.
#[derive(Debug, Clone)]
struct Cursor {
    disk: u32,
    set: LiveSet,
    run: usize,
    off: u64,
    peek: Option<Extent>,
}

/// Where member block `b` of recovering `disk` is read from: (disk, block)
/// of its first copy on a disk that has not failed; None when the place
/// holds no data (RAID-10 past the far regions) or no copy survives.
fn source(array: &Array, disk: u32, b: u64) -> Option<(u32, u64)> {
    match array.level() {
        Level::Raid1 => (0..array.ndisks()).find(|&d| !array.is_failed(d)).map(|d| (d, b)),
        Level::Raid10 => {
            let (block, _) = array.raid10_block_at(disk, b)?;
            array.raid10_copies(block).find(|&(d, _)| !array.is_failed(d))
        }
        _ => None,
    }
}

impl Cursor {
    /// Compute the next extent (cut at `max_io`, at a break in the source,
    /// at the end of a run), skipping places that hold no data.
    fn advance(&mut self, array: &Array, cb: u64, max_io: u64) {
        self.peek = None;
        while let Some(&(s, n)) = self.set.runs.get(self.run) {
            if self.off >= n {
                self.run += 1;
                self.off = 0;
                continue;
            }
            let b = s + self.off;
            let end = s + n;
            let chunk_end = |x: u64| ((x / cb + 1) * cb).min(end);
            let Some((src, src_first)) = source(array, self.disk, b) else {
                self.off = chunk_end(b) - s;
                continue;
            };
            let mut len = (chunk_end(b) - b).min(max_io);
            while len < max_io && b + len < end {
                let nb = b + len;
                match source(array, self.disk, nb) {
                    Some((d, at)) if d == src && at == src_first + len => {
                        len = (chunk_end(nb) - b).min(max_io);
                    }
                    _ => break,
                }
            }
            self.off += len;
            self.peek = Some(Extent {
                targets: vec![self.disk],
                first: b,
                n: len,
                src,
                src_first,
            });
            return;
        }
    }

    /// Whether live block `b` is still to be issued by this cursor.
    fn ahead(&self, b: u64) -> bool {
        self.peek.as_ref().is_some_and(|p| b >= p.first) && self.set.contains(b)
    }
}

/// The live-block rebuild of a mirrored array's recovering members.
#[derive(Debug, Clone)]
pub struct Live {
    cb: u64,
    max_io: u64,
    rows: u64,
    unit_rows: u64,
    cursors: Vec<Cursor>,
    /// Blocks written by users that must be copied (again): (disk, block).
    late: BTreeSet<(u32, u64)>,
    /// Live blocks not yet copied, per unit of the map (all recovering members).
    left: Vec<u64>,
    in_flight: BTreeMap<u64, Extent>,
    next_tag: u64,
    started: bool,
    rebuilt_rows: u64,
    // Figures for the report.
    member_blocks: u64,
    live_blocks: u64,
    extents: u64,
    copied_blocks: u64,
    late_blocks: u64,
    dead_units: u64,
}

impl Live {
    /// The order for `array`'s failed disks (RAID-1 or RAID-10 with a known
    /// member size), live blocks from `p.source`.
    pub fn new(array: &Array, rows: u64, p: &LiveParams) -> Result<Live> {
        if !matches!(array.level(), Level::Raid1 | Level::Raid10) {
            return Err(Error::config(format!(
                "the live order copies live blocks from a mirror: raid1 or raid10, not {}",
                array.level().name()
            )));
        }
        let cb = array.chunk_blocks();
        let member_blocks = rows * cb;
        let mut cursors = Vec::new();
        for &disk in array.failed() {
            let set = match &p.source {
                LiveSource::Share { frac, layout, unit } => {
                    LiveSet::synthetic_in_units(member_blocks, *frac, *layout, *unit)?
                }
                LiveSource::Map(m) => {
                    let set = m.members.get(&disk).ok_or_else(|| {
                        Error::config(format!("the live map has no member {disk} (a disk to rebuild)"))
                    })?;
                    if let Some(&(s, n)) = set.runs.last() {
                        if s + n > member_blocks {
                            return Err(Error::config(format!(
                                "the live map's member {disk} has live block {} beyond the array's member \
                                 ({member_blocks} blocks)",
                                s + n - 1
                            )));
                        }
                    }
                    LiveSet {
                        member_blocks,
                        runs: set.runs.clone(),
                    }
                }
            };
            cursors.push(Cursor {
                disk,
                set,
                run: 0,
                off: 0,
                peek: None,
            });
        }
        let live_blocks = cursors.iter().map(|c| c.set.count()).sum();
        Ok(Live {
            cb,
            max_io: if p.max_io == 0 { cb } else { p.max_io },
            rows,
            unit_rows: 1,
            cursors,
            late: BTreeSet::new(),
            left: Vec::new(),
            in_flight: BTreeMap::new(),
            next_tag: 0,
            started: false,
            rebuilt_rows: 0,
            member_blocks,
            live_blocks,
            extents: 0,
            copied_blocks: 0,
            late_blocks: 0,
            dead_units: 0,
        })
    }

    fn unit_of(&self, b: u64) -> usize {
        (b / self.cb / self.unit_rows) as usize
    }

    /// Count (`+`) or discount (`-`) the blocks `first..first+n` in their units.
    fn tally(&mut self, first: u64, n: u64, add: bool) -> Vec<usize> {
        let mut emptied = Vec::new();
        let per = self.unit_rows * self.cb;
        let mut b = first;
        while b < first + n {
            let u = self.unit_of(b);
            let k = ((u as u64 + 1) * per).min(first + n) - b;
            if add {
                self.left[u] += k;
            } else {
                self.left[u] -= k;
                if self.left[u] == 0 {
                    emptied.push(u);
                }
            }
            b += k;
        }
        emptied
    }

    fn mark_unit(&mut self, u: usize, array: &mut Array) {
        let first = u as u64 * self.unit_rows;
        let end = (first + self.unit_rows).min(self.rows);
        for row in first..end {
            array.mark_rebuilt(row);
        }
        self.rebuilt_rows += end - first;
    }

    fn plan(e: &Extent) -> IoPlan {
        let op = |disk, kind, block, n: u64| {
            Action::Disk(DiskOp {
                disk,
                kind,
                block,
                nblocks: n as u32,
                cause: Cause::Rebuild,
            })
        };
        let mut plan = IoPlan::default();
        let r = plan.push(op(e.src, DiskOpKind::Read, e.src_first, e.n), &[]);
        for &t in &e.targets {
            plan.push(op(t, DiskOpKind::Write, e.first, e.n), &[r]);
        }
        plan
    }

    /// The next late extent: a run of written blocks of one disk, within a
    /// chunk and contiguous at the source too.
    fn late_extent(&mut self, array: &Array) -> Option<Extent> {
        while let Some(&(disk, b)) = self.late.iter().next() {
            self.late.remove(&(disk, b));
            // `observe_user` admits only blocks with a copy to read.
            let Some((src, src_first)) = source(array, disk, b) else {
                continue;
            };
            let mut n = 1;
            while n < self.max_io && (b + n) % self.cb != 0 && self.late.remove(&(disk, b + n)) {
                n += 1;
            }
            return Some(Extent {
                targets: vec![disk],
                first: b,
                n,
                src,
                src_first,
            });
        }
        None
    }

    /// The next extent of the recovering members walked together: the
    /// lowest; members with the very same extent share its read.
    fn main_extent(&mut self, array: &Array) -> Option<Extent> {
        let i = (0..self.cursors.len())
            .filter(|&i| self.cursors[i].peek.is_some())
            .min_by_key(|&i| (self.cursors[i].peek.as_ref().map(|p| p.first), self.cursors[i].disk))?;
        let mut e = self.cursors[i].peek.clone().expect("peeked");
        let (cb, max_io) = (self.cb, self.max_io);
        self.cursors[i].advance(array, cb, max_io);
        for j in 0..self.cursors.len() {
            if j == i {
                continue;
            }
            let same = self.cursors[j]
                .peek
                .as_ref()
                .is_some_and(|p| (p.first, p.n, p.src, p.src_first) == (e.first, e.n, e.src, e.src_first));
            if same {
                e.targets.push(self.cursors[j].disk);
                self.cursors[j].advance(array, cb, max_io);
            }
        }
        e.targets.sort_unstable();
        Some(e)
    }
}

impl Strategy for Live {
    fn name(&self) -> &'static str {
        "live"
    }

    fn start(&mut self, array: &mut Array, _now: u64) {
        self.unit_rows = array.rebuilt_map().unit_rows();
        let units = self.rows.div_ceil(self.unit_rows) as usize;
        self.left = vec![0; units];
        // Count the live blocks of every unit by walking the extents once.
        let (cb, max_io) = (self.cb, self.max_io);
        let mut probe = self.cursors.clone();
        for c in &mut probe {
            c.advance(array, cb, max_io);
            while let Some(p) = c.peek.take() {
                self.tally(p.first, p.n, true);
                c.advance(array, cb, max_io);
            }
        }
        for &(_, b) in &self.late.clone() {
            self.tally(b, 1, true);
        }
        for c in &mut self.cursors {
            c.advance(array, cb, max_io);
        }
        for u in 0..units {
            if self.left[u] == 0 {
                self.dead_units += 1;
                self.mark_unit(u, array);
            }
        }
        self.started = true;
    }

    fn has_step(&self) -> bool {
        self.started && (!self.late.is_empty() || self.cursors.iter().any(|c| c.peek.is_some()))
    }

    fn next_step(&mut self, array: &Array, _now: u64) -> Option<RebuildStep> {
        if !self.started {
            return None;
        }
        let e = match self.late_extent(array) {
            Some(e) => e,
            None => self.main_extent(array)?,
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        let blocks = e.n * e.targets.len() as u64;
        self.extents += 1;
        self.copied_blocks += blocks;
        let kib = (blocks * array.config().block_size).div_ceil(1024);
        let plan = Self::plan(&e);
        self.in_flight.insert(tag, e);
        Some(RebuildStep {
            tag,
            plan,
            rows: 0,
            kib: Some(kib),
        })
    }

    fn complete(&mut self, tag: u64, array: &mut Array, _now: u64) -> u64 {
        let Some(e) = self.in_flight.remove(&tag) else { return 0 };
        let before = self.rebuilt_rows;
        for _ in &e.targets {
            for u in self.tally(e.first, e.n, false) {
                self.mark_unit(u, array);
            }
        }
        self.rebuilt_rows - before
    }

    fn is_finished(&self) -> bool {
        self.started && self.in_flight.is_empty() && !self.has_step()
    }

    fn rebuilt_rows(&self) -> u64 {
        self.rebuilt_rows
    }

    fn observe_user(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, _now: u64) {
        if !plan.disk_ops().any(|o| o.kind == DiskOpKind::Write) {
            return;
        }
        let cap = array.capacity_blocks().unwrap_or(u64::MAX).max(1);
        for b in blocks {
            let p = array.map(b % cap);
            for (&d, &at) in p.disks.iter().zip(&p.disk_blocks) {
                let Some(i) = self.cursors.iter().position(|c| c.disk == d) else {
                    continue;
                };
                if at >= self.member_blocks || (self.started && array.is_rebuilt(at / self.cb)) {
                    continue;
                }
                if source(array, d, at).is_none() {
                    continue;
                }
                let c = &self.cursors[i];
                // Still to be copied by its own extent (before the start, every live block is).
                let pending = if self.started { c.ahead(at) } else { c.set.contains(at) };
                if pending || !self.late.insert((d, at)) {
                    continue;
                }
                self.late_blocks += 1;
                if self.started {
                    self.tally(at, 1, true);
                }
            }
        }
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("member_blocks".to_string(), self.member_blocks),
            ("live_blocks".to_string(), self.live_blocks),
            ("extents".to_string(), self.extents),
            ("copied_blocks".to_string(), self.copied_blocks),
            ("late_blocks".to_string(), self.late_blocks),
            ("dead_units".to_string(), self.dead_units),
            ("max_io_blocks".to_string(), self.max_io),
        ])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::{any, prop_oneof, proptest, Just, ProptestConfig};

    use super::*;
    use crate::array::{ArrayConfig, Raid10Layout};

    fn array(level: Level, layout: Option<&str>, n: u32, rows: u64, chunk_blocks: u64, lost: &[u32]) -> Array {
        let mut cfg = ArrayConfig::new(level, n);
        cfg.chunk_bytes = chunk_blocks * cfg.block_size;
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        if let Some(l) = layout {
            cfg.raid10 = Some(Raid10Layout::parse(l).unwrap());
        }
        let mut a = Array::new(cfg).unwrap();
        for &d in lost {
            a.fail(d).unwrap();
        }
        a
    }

    fn share(frac: f64, layout: LiveLayout, max_io: u64) -> LiveParams {
        LiveParams {
            source: LiveSource::Share { frac, layout, unit: 1 },
            max_io,
        }
    }

    /// Plans of a whole rebuild without time.
    fn plans(mut a: Array, order: &str, p: &LiveParams) -> (Vec<IoPlan>, BTreeMap<String, u64>) {
        let params = super::super::OrderParams {
            live: p.clone(),
            ..Default::default()
        };
        let mut s = super::super::build_with(order, &a, &params).unwrap();
        let mut out = Vec::new();
        super::super::rebuild_all(&mut a, s.as_mut(), |p| out.push(p.clone())).unwrap();
        assert!(a.failed().is_empty(), "the spares are members");
        (out, s.stats())
    }

    #[test]
    fn a_full_share_in_chunk_extents_is_mds_rebuild() {
        let cases: [(Level, Option<&str>, u32, &[u32]); 6] = [
            (Level::Raid1, None, 2, &[0]),
            (Level::Raid1, None, 3, &[0, 2]),
            (Level::Raid10, None, 4, &[2]),
            (Level::Raid10, None, 3, &[1]),
            (Level::Raid10, Some("f2"), 4, &[1]),
            (Level::Raid10, Some("o2"), 4, &[3]),
        ];
        for (level, layout, n, lost) in cases {
            let a = array(level, layout, n, 8, 4, lost);
            let (md, _) = plans(a.clone(), "md", &LiveParams::default());
            let md: Vec<IoPlan> = md.into_iter().filter(|p| p.disk_ops().next().is_some()).collect();
            let (live, st) = plans(a, "live", &LiveParams::default());
            assert_eq!(live, md, "{level:?} {layout:?} of {n}, lost {lost:?}");
            assert_eq!(st["dead_units"], 0);
        }
    }

    #[test]
    fn a_share_copies_its_extents_and_nothing_else() {
        // RAID-1 of 2, 8 rows of 4 blocks (32 blocks), disk 0 lost.
        let a = array(Level::Raid1, None, 2, 8, 4, &[0]);
        // Compact quarter: blocks 0..8, one chunk per extent; rows 2..8 dead.
        let (p, st) = plans(a.clone(), "live", &share(0.25, LiveLayout::Compact, 0));
        let ops: Vec<(u32, DiskOpKind, u64, u32)> = p
            .iter()
            .flat_map(|p| p.disk_ops().map(|o| (o.disk, o.kind, o.block, o.nblocks)))
            .collect();
        use DiskOpKind::{Read, Write};
        assert_eq!(
            ops,
            [(1, Read, 0, 4), (0, Write, 0, 4), (1, Read, 4, 4), (0, Write, 4, 4)]
        );
        assert_eq!(
            (st["live_blocks"], st["extents"], st["copied_blocks"], st["dead_units"]),
            (8, 2, 8, 6)
        );
        // Spread quarter: blocks 3, 7, 11, ...: eight one-block extents.
        let (p, st) = plans(a.clone(), "live", &share(0.25, LiveLayout::Spread, 16));
        let firsts: Vec<u64> = p.iter().map(|p| p.disk_ops().next().unwrap().block).collect();
        assert_eq!(firsts, [3, 7, 11, 15, 19, 23, 27, 31]);
        assert_eq!((st["extents"], st["dead_units"]), (8, 0));
        // Larger extents cross chunks on a mirror (one source), cut at max_io.
        let (p, _) = plans(a.clone(), "live", &share(0.75, LiveLayout::Compact, 10));
        let sizes: Vec<u32> = p.iter().map(|p| p.disk_ops().next().unwrap().nblocks).collect();
        assert_eq!(sizes, [10, 10, 4]);
        // Nothing live: nothing read, every row rebuilt at once.
        let (p, st) = plans(a, "live", &share(0.0, LiveLayout::Spread, 0));
        assert!(p.is_empty());
        assert_eq!(st["dead_units"], 8);
    }

    #[test]
    fn parity_levels_and_maps_without_the_member_are_errors() {
        let a = array(Level::Raid5, None, 4, 8, 4, &[1]);
        let e = Live::new(&a, 8, &LiveParams::default()).unwrap_err().to_string();
        assert!(e.contains("raid1 or raid10") && e.contains("raid5"), "{e}");
        let m = LiveMap::from_json(
            r#"[{"disk": 1, "live": {"member_blocks": 32, "runs": [[0, 3]]}}]"#,
            "m.json",
        )
        .unwrap();
        let a = array(Level::Raid1, None, 2, 8, 4, &[0]);
        let p = LiveParams {
            source: LiveSource::Map(Arc::new(m.clone())),
            max_io: 0,
        };
        assert!(Live::new(&a, 8, &p).unwrap_err().to_string().contains("no member 0"));
        // The map's blocks must fit the array's member.
        let a = array(Level::Raid1, None, 2, 8, 4, &[1]);
        assert!(Live::new(&a, 8, &p).is_ok());
        let big = LiveMap::from_json(
            r#"[{"disk": 1, "live": {"member_blocks": 99, "runs": [[40, 3]]}}]"#,
            "m.json",
        )
        .unwrap();
        let p = LiveParams {
            source: LiveSource::Map(Arc::new(big)),
            max_io: 0,
        };
        assert!(Live::new(&a, 8, &p)
            .unwrap_err()
            .to_string()
            .contains("beyond the array's member"));
        for (text, field) in [
            ("[{\"disk\": 1}]", "live map"),
            ("[{\"disk\": 1, \"live\": {\"member_blocks\": 9, \"runs\": [[4, 2], [5, 1]]}}]", "runs"),
            (
                "[{\"disk\": 1, \"live\": {\"member_blocks\": 9, \"runs\": []}}, {\"disk\": 1, \"live\": {\"member_blocks\": 9, \"runs\": []}}]",
                "disk",
            ),
        ] {
            match LiveMap::from_json(text, "m.json").unwrap_err() {
                Error::Parse { field: f, file, .. } => assert_eq!((f.as_str(), file.as_str()), (field, "m.json"), "{text}"),
                e => panic!("{e}"),
            }
        }
    }

    /// The logical block stored at member block `m` of `disk`.
    fn logical_at(a: &Array, disk: u32, m: u64) -> Option<u64> {
        match a.level() {
            Level::Raid1 => Some(m),
            _ => a.raid10_block_at(disk, m).map(|x| x.0),
        }
    }

    fn next(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// A live-block rebuild on real contents: every place holds a value,
    /// the lost disks garbage; live member blocks drawn at random; steps
    /// complete in any order, users write (any block) and read (blocks the
    /// file system uses) before and during the rebuild. Checks: the rebuild
    /// reads only survivors and only for live (or since written) blocks,
    /// writes only the spares; every user read sees the latest value; at
    /// the end the spares hold every live or written block, byte for byte.
    fn live_rebuild_on_bytes(
        cfg: (Level, Option<&'static str>, u32),
        lost: &[u32],
        unit: u64,
        max_io: u64,
        seed0: u64,
    ) {
        let (level, layout, n) = cfg;
        let (rows, cb) = (10u64, 2u64);
        let mut a = array(level, layout, n, rows, cb, &[]);
        let member = rows * cb;
        let cap = a.capacity_blocks().unwrap();
        let mut seed = seed0;
        // Contents: disk[d][m]; truth[b]: the latest value of logical block b.
        let mut truth: Vec<u64> = (0..cap).map(|b| b * 1000).collect();
        let mut disk = vec![vec![u64::MAX; member as usize]; n as usize];
        for b in 0..cap {
            let p = a.map(b);
            for (d, at) in p.disks.iter().zip(&p.disk_blocks) {
                disk[*d as usize][*at as usize] = truth[b as usize];
            }
        }
        // Live member blocks of each lost disk (a map, as a model run gives).
        let mut live: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        let mut map = LiveMap::default();
        for &d in lost {
            let blocks: Vec<u64> = (0..member).filter(|_| next(&mut seed) % 3 == 0).collect();
            map.members.insert(d, LiveSet::from_blocks(member, &blocks).unwrap());
            live.insert(d, blocks.into_iter().collect());
            disk[d as usize].fill(u64::MAX - 1);
            a.fail(d).unwrap();
        }
        // A logical block is in use when none of its lost copies is dead.
        let in_use = |live: &BTreeMap<u32, BTreeSet<u64>>, a: &Array, b: u64| {
            let p = a.map(b);
            p.disks
                .iter()
                .zip(&p.disk_blocks)
                .all(|(d, at)| live.get(d).is_none_or(|s| s.contains(at)))
        };
        let p = LiveParams {
            source: LiveSource::Map(Arc::new(map)),
            max_io,
        };
        let mut s = Live::new(&a, rows, &p).unwrap();
        let write = |a: &Array,
                     s: &mut Live,
                     live: &mut BTreeMap<u32, BTreeSet<u64>>,
                     disk: &mut Vec<Vec<u64>>,
                     truth: &mut Vec<u64>,
                     seed: &mut u64| {
            let b = next(seed) % cap;
            truth[b as usize] = next(seed);
            let plan = a.plan_write(b, 1);
            for o in plan.disk_ops().filter(|o| o.kind == DiskOpKind::Write) {
                disk[o.disk as usize][o.block as usize] = truth[b as usize];
            }
            s.observe_user(a, b..b + 1, &plan, 0);
            // The block is in use from now on (the file system allocated it).
            let pl = a.map(b);
            for (d, at) in pl.disks.iter().zip(&pl.disk_blocks) {
                if let Some(set) = live.get_mut(d) {
                    set.insert(*at);
                }
            }
        };
        for _ in 0..next(&mut seed) % 4 {
            write(&a, &mut s, &mut live, &mut disk, &mut truth, &mut seed);
        }
        a.set_rebuilt_unit(unit);
        a.start_recovery(lost).unwrap();
        s.start(&mut a, 0);
        let mut pending: Vec<(u64, IoPlan)> = Vec::new();
        let mut guard = 0;
        while !s.is_finished() {
            guard += 1;
            assert!(guard < 100_000, "the rebuild does not end");
            let roll = next(&mut seed) % 8;
            if roll < 3 && s.has_step() {
                let st = s.next_step(&a, 0).unwrap();
                for o in st.plan.disk_ops() {
                    assert_eq!(o.cause, Cause::Rebuild);
                    match o.kind {
                        DiskOpKind::Read => assert!(!a.is_failed(o.disk), "a rebuild read of a lost disk"),
                        DiskOpKind::Write => {
                            assert!(lost.contains(&o.disk), "a rebuild write to a survivor");
                            for m in o.block..o.block + o.nblocks as u64 {
                                assert!(live[&o.disk].contains(&m), "dead block {m} of disk {} copied", o.disk);
                            }
                        }
                    }
                }
                pending.push((st.tag, st.plan));
            } else if roll == 3 {
                write(&a, &mut s, &mut live, &mut disk, &mut truth, &mut seed);
            } else if roll == 4 {
                let b = next(&mut seed) % cap;
                if in_use(&live, &a, b) {
                    let plan = a.plan_read(b, 1);
                    let o = plan.disk_ops().next().expect("a mirror always has a copy");
                    assert_eq!(
                        disk[o.disk as usize][o.block as usize], truth[b as usize],
                        "read of {b} from disk {}",
                        o.disk
                    );
                }
            } else if !pending.is_empty() {
                let (tag, plan) = pending.remove((next(&mut seed) % pending.len() as u64) as usize);
                // The step's read and writes, at its completion.
                let ops: Vec<DiskOp> = plan.disk_ops().copied().collect();
                let r = ops[0];
                let buf = disk[r.disk as usize][r.block as usize..(r.block + r.nblocks as u64) as usize].to_vec();
                for w in &ops[1..] {
                    disk[w.disk as usize][w.block as usize..(w.block + w.nblocks as u64) as usize]
                        .copy_from_slice(&buf);
                }
                s.complete(tag, &mut a, 0);
            }
        }
        a.finish_recovery();
        for &d in lost {
            for &m in &live[&d] {
                let b = logical_at(&a, d, m).expect("a live place holds data");
                assert_eq!(disk[d as usize][m as usize], truth[b as usize], "disk {d} block {m}");
            }
        }
        let st = s.stats();
        assert!(st["copied_blocks"] >= st["live_blocks"], "{st:?}");
    }

    fn configs() -> impl proptest::strategy::Strategy<Value = ((Level, Option<&'static str>, u32), Vec<u32>)> {
        prop_oneof![
            Just(((Level::Raid1, None, 2), vec![0])),
            Just(((Level::Raid1, None, 3), vec![1])),
            Just(((Level::Raid1, None, 3), vec![0, 2])),
            Just(((Level::Raid10, None, 4), vec![1])),
            Just(((Level::Raid10, None, 3), vec![2])),
            Just(((Level::Raid10, Some("f2"), 4), vec![0])),
            Just(((Level::Raid10, Some("o2"), 4), vec![3])),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(120))]

        #[test]
        fn a_live_rebuild_restores_every_live_block((cfg, lost) in configs(), unit in 1u64..4, max_io in 1u64..7, seed in any::<u64>()) {
            live_rebuild_on_bytes(cfg, &lost, unit, max_io, seed);
        }
    }
}

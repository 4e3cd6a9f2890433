//! `pro`: popularity-based reconstruction (Tian et al., FAST'07; in Linux
//! MD: "Implementation and Evaluation of a Popularity-Based Reconstruction
//! Optimization Algorithm in Availability-Oriented Disk Arrays").
//!
//! The member is cut into contiguous, non-overlapping *hot zones* of
//! `zone_rows` chunk rows. An access monitor counts user requests per zone
//! (the hook sits in the array's request path); a zone that is accessed and
//! still has rows to rebuild gets a reconstruction *thread* while fewer than
//! `threads` are busy (threads are created lazily from the request path, as
//! the paper's `pro_find_available_thread` / `pro_init_thread` are). The
//! scheduler gives the thread of the most popular zone a *time slice* and
//! rebuilds that zone's remaining rows in ascending order until the slice
//! is used up or the zone is done, then ranks again (non-preemptive: a zone
//! that becomes hotter meanwhile waits for the slice to end). Rows of zones
//! nobody touched are rebuilt last by a cold sweep (ascending), which also
//! runs in slices. Completed rows are marked in the array's map of rebuilt
//! units, so reads of them go to the spare at once.
//!
//! What the papers leave open (the FAST'07 text with the details is not
//! available) is a parameter here, with a default: zone length (16 MiB of
//! member), threads (8), slice (1,000 ms of simulated time), popularity
//! aging (a half-life; default none), and what counts (every request whose
//! rows meet the zone, or only those touching a lost unit). Ties between
//! zones go to the lower zone. PRO stays inside MD's recovery loop, so MD's
//! speed rule still paces it.

use std::collections::BTreeMap;
use std::ops::Range;

use super::rows::{rows_of_plan, touches_lost, RowSource};
use super::strategy::{RebuildStep, Strategy};
use crate::array::{Array, IoPlan};
use crate::error::{Error, Result};

/// What the access monitor counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProCount {
    /// Every user request whose rows meet the zone (reads and writes).
    #[default]
    All,
    /// Only requests touching a unit that is lost (not yet rebuilt).
    Lost,
}

impl ProCount {
    pub fn parse(s: &str) -> Result<ProCount> {
        match s {
            "all" => Ok(ProCount::All),
            "lost" => Ok(ProCount::Lost),
            other => Err(Error::unknown("popularity count", other, &["all", "lost"])),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            ProCount::All => "all",
            ProCount::Lost => "lost",
        }
    }
}

/// PRO's own parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProParams {
    /// Hot-zone length in member bytes (rounded to whole chunk rows, at least one).
    pub zone_bytes: u64,
    /// Reconstruction threads (zones ranked at once); 0: unlimited.
    pub threads: usize,
    /// Time slice of a thread (ns of simulated time).
    pub slice_ns: u64,
    /// Popularity half-life (ns); 0: popularity never decays.
    pub half_life_ns: u64,
    pub count: ProCount,
}

/// Default hot-zone length: 16 MiB of member.
pub const DEFAULT_ZONE_BYTES: u64 = 16 << 20;
pub const DEFAULT_THREADS: usize = 8;
pub const DEFAULT_SLICE_NS: u64 = 1_000_000_000;

impl Default for ProParams {
    fn default() -> Self {
        ProParams {
            zone_bytes: DEFAULT_ZONE_BYTES,
            threads: DEFAULT_THREADS,
            slice_ns: DEFAULT_SLICE_NS,
            half_life_ns: 0,
            count: ProCount::All,
        }
    }
}

/// PRO's access monitor and reconstruction scheduler: hands out rows, the
/// most popular zone's first.
#[derive(Debug, Clone)]
pub struct ProOrder {
    p: ProParams,
    rows: u64,
    zone_rows: u64,
    chunk_blocks: u64,
    /// Per row: handed out already (one bit each).
    taken: Vec<u64>,
    taken_rows: u64,
    /// Per zone: rows not yet handed out, the next candidate row, the
    /// popularity (as of `pop_t`), whether a thread holds it.
    left: Vec<u64>,
    cursor: Vec<u64>,
    pop: Vec<f64>,
    pop_t: Vec<u64>,
    threaded: Vec<bool>,
    /// Zones with a thread, in the order they got one.
    hot: Vec<u64>,
    /// The zone being served (None: the cold sweep), and until when.
    cur: Option<u64>,
    slice_end: Option<u64>,
    cold: u64,
    slices: u64,
    hot_max: u64,
    hot_rows: u64,
}

impl ProOrder {
    /// The order over `rows` member chunk rows of `chunk_blocks` blocks of
    /// `block_size` bytes.
    pub fn new(rows: u64, chunk_blocks: u64, block_size: u64, p: ProParams) -> Self {
        let row_bytes = (chunk_blocks * block_size).max(1);
        let zone_rows = (p.zone_bytes / row_bytes).max(1);
        let zones = rows.div_ceil(zone_rows) as usize;
        let left = (0..zones as u64).map(|z| zone_rows.min(rows - z * zone_rows)).collect();
        ProOrder {
            p,
            rows,
            zone_rows,
            chunk_blocks,
            taken: vec![0; rows.div_ceil(64) as usize],
            taken_rows: 0,
            left,
            cursor: (0..zones as u64).map(|z| z * zone_rows).collect(),
            pop: vec![0.0; zones],
            pop_t: vec![0; zones],
            threaded: vec![false; zones],
            hot: Vec::new(),
            cur: None,
            slice_end: None,
            cold: 0,
            slices: 0,
            hot_max: 0,
            hot_rows: 0,
        }
    }

    /// Rows per hot zone.
    pub fn zone_rows(&self) -> u64 {
        self.zone_rows
    }

    fn is_taken(&self, row: u64) -> bool {
        self.taken[(row / 64) as usize] >> (row % 64) & 1 == 1
    }

    fn take(&mut self, row: u64) {
        self.taken[(row / 64) as usize] |= 1 << (row % 64);
        self.taken_rows += 1;
        self.left[(row / self.zone_rows) as usize] -= 1;
    }

    /// Zone `z`'s popularity at `now` (aged by the half-life).
    fn popularity(&self, z: usize, now: u64) -> f64 {
        let v = self.pop[z];
        if self.p.half_life_ns == 0 || v == 0.0 {
            return v;
        }
        let dt = now.saturating_sub(self.pop_t[z]) as f64;
        v * (-dt / self.p.half_life_ns as f64 * std::f64::consts::LN_2).exp()
    }

    /// The access monitor: one user request touching `rows` at `now`.
    fn access(&mut self, rows: &[u64], now: u64) {
        let mut last = u64::MAX;
        for &row in rows {
            let z = row / self.zone_rows;
            if z == last || row >= self.rows {
                continue;
            }
            last = z;
            let zi = z as usize;
            if self.left[zi] == 0 {
                continue;
            }
            self.pop[zi] = self.popularity(zi, now) + 1.0;
            self.pop_t[zi] = now;
            if !self.threaded[zi] && (self.p.threads == 0 || self.hot.len() < self.p.threads) {
                self.threaded[zi] = true;
                self.hot.push(z);
                self.hot_max = self.hot_max.max(self.hot.len() as u64);
            }
        }
    }

    /// The scheduler: free the threads of finished zones, then pick the
    /// most popular zone with rows left (None: the cold sweep).
    fn reschedule(&mut self, now: u64) {
        let left = &self.left;
        let threaded = &mut self.threaded;
        self.hot.retain(|&z| {
            let keep = left[z as usize] > 0;
            if !keep {
                threaded[z as usize] = false;
            }
            keep
        });
        let mut best: Option<(f64, u64)> = None;
        for &z in &self.hot {
            let v = self.popularity(z as usize, now);
            let better = match best {
                None => true,
                Some((bv, bz)) => v > bv || (v == bv && z < bz),
            };
            if better {
                best = Some((v, z));
            }
        }
        self.cur = best.map(|(_, z)| z);
        self.slice_end = Some(now.saturating_add(self.p.slice_ns));
        self.slices += 1;
    }

    /// The next row not yet handed out from `start` below `end`.
    fn scan(&self, start: u64, end: u64) -> Option<u64> {
        (start..end).find(|&r| !self.is_taken(r))
    }
}

impl RowSource for ProOrder {
    fn has_row(&self) -> bool {
        self.taken_rows < self.rows
    }

    fn next_row(&mut self, now: u64) -> Option<u64> {
        if !self.has_row() {
            return None;
        }
        let slice_over = self.slice_end.is_none_or(|e| now >= e);
        let zone_done = self.cur.is_some_and(|z| self.left[z as usize] == 0);
        // The cold sweep is no thread of its own: it yields to any zone
        // with a thread and rows left.
        let cold_yields = self.cur.is_none() && self.hot.iter().any(|&z| self.left[z as usize] > 0);
        if slice_over || zone_done || cold_yields {
            self.reschedule(now);
        }
        let row = match self.cur {
            Some(z) => {
                let zi = z as usize;
                let end = ((z + 1) * self.zone_rows).min(self.rows);
                let r = self.scan(self.cursor[zi], end).expect("a zone with rows left has one");
                self.cursor[zi] = r + 1;
                self.hot_rows += 1;
                r
            }
            None => {
                let r = self.scan(self.cold, self.rows).expect("rows left");
                self.cold = r + 1;
                r
            }
        };
        self.take(row);
        Some(row)
    }

    fn observe(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, now: u64) {
        if self.p.count == ProCount::Lost && !touches_lost(array, blocks) {
            return;
        }
        let rows = rows_of_plan(plan, self.chunk_blocks);
        self.access(&rows, now);
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("zone_rows".to_string(), self.zone_rows),
            ("zones".to_string(), self.left.len() as u64),
            ("threads".to_string(), self.p.threads as u64),
            ("zones_hot_max".to_string(), self.hot_max),
            ("slices".to_string(), self.slices),
            ("rows_from_hot_zones".to_string(), self.hot_rows),
        ])
    }
}

/// PRO on MD's recovery: whole-row steps (MD's `sync_request` per stripe)
/// in PRO's order.
#[derive(Debug, Clone)]
pub struct Pro {
    order: ProOrder,
    rows: u64,
    done: u64,
}

impl Pro {
    pub fn new(array: &Array, rows: u64, p: ProParams) -> Self {
        Pro {
            order: ProOrder::new(rows, array.chunk_blocks(), array.config().block_size, p),
            rows,
            done: 0,
        }
    }
}

impl Strategy for Pro {
    fn name(&self) -> &'static str {
        "pro"
    }

    fn has_step(&self) -> bool {
        self.order.has_row()
    }

    fn next_step(&mut self, array: &Array, now: u64) -> Option<RebuildStep> {
        let row = self.order.next_row(now)?;
        Some(RebuildStep::row(row, array.plan_rebuild_row(row)))
    }

    fn complete(&mut self, row: u64, array: &mut Array, _now: u64) -> u64 {
        array.mark_rebuilt(row);
        self.done += 1;
        1
    }

    fn is_finished(&self) -> bool {
        self.done == self.rows
    }

    fn rebuilt_rows(&self) -> u64 {
        self.done
    }

    fn observe_user(&mut self, array: &Array, blocks: Range<u64>, plan: &IoPlan, now: u64) {
        self.order.observe(array, blocks, plan, now);
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        self.order.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArrayConfig, Level};

    const ROW: u64 = 64 * 1024;

    /// An order over `rows` rows of 64 KiB with `zone` rows per zone.
    fn order(rows: u64, zone: u64, threads: usize, slice_ns: u64) -> ProOrder {
        ProOrder::new(
            rows,
            16,
            4096,
            ProParams {
                zone_bytes: zone * ROW,
                threads,
                slice_ns,
                ..Default::default()
            },
        )
    }

    fn drain(o: &mut ProOrder, now: u64) -> Vec<u64> {
        std::iter::from_fn(|| o.next_row(now)).collect()
    }

    #[test]
    fn without_accesses_it_is_mds_order() {
        let mut o = order(10, 4, 8, 1000);
        assert_eq!(drain(&mut o, 0), (0..10).collect::<Vec<_>>());
        assert_eq!(o.stats()["zones_hot_max"], 0);
    }

    #[test]
    fn the_hottest_zone_goes_first_then_the_next_then_the_cold_rows() {
        // 12 rows, zones of 4: zone 2 (rows 8..12) accessed twice, zone 1 once.
        let mut o = order(12, 4, 8, u64::MAX);
        o.access(&[9], 0);
        o.access(&[5], 0);
        o.access(&[10, 11], 0);
        assert_eq!(drain(&mut o, 0), vec![8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3]);
        let s = o.stats();
        assert_eq!((s["zones"], s["zones_hot_max"], s["rows_from_hot_zones"]), (3, 2, 8));
    }

    #[test]
    fn the_schedule_is_non_preemptive_within_a_slice() {
        // Zone 0 is hot first; zone 2 becomes hotter during zone 0's slice:
        // zone 0 keeps the disk until the slice ends (t = 100), then zone 2.
        let mut o = order(12, 4, 8, 100);
        o.access(&[1], 0);
        assert_eq!(o.next_row(0), Some(0));
        for _ in 0..5 {
            o.access(&[8], 10);
        }
        assert_eq!(o.next_row(50), Some(1), "still zone 0's slice");
        assert_eq!(o.next_row(100), Some(8), "slice over: the hotter zone");
        assert_eq!(o.next_row(101), Some(9));
        // Zone 2 done: the scheduler picks zone 0 again before the slice ends.
        assert_eq!(drain(&mut o, 150), vec![10, 11, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn the_thread_pool_bounds_the_zones_ranked() {
        // One thread: zone 2 is accessed while zone 1 holds it, so it waits
        // for the cold sweep (no second thread).
        let mut o = order(12, 4, 1, u64::MAX);
        o.access(&[4], 0);
        o.access(&[8], 0);
        o.access(&[8], 0);
        assert_eq!(drain(&mut o, 0), vec![4, 5, 6, 7, 0, 1, 2, 3, 8, 9, 10, 11]);
        // Unlimited threads: zone 2 wins.
        let mut o = order(12, 4, 0, u64::MAX);
        o.access(&[4], 0);
        o.access(&[8], 0);
        o.access(&[8], 0);
        assert_eq!(drain(&mut o, 0)[..4], [8, 9, 10, 11]);
    }

    #[test]
    fn popularity_ages_with_the_half_life() {
        let mut o = ProOrder::new(
            8,
            16,
            4096,
            ProParams {
                zone_bytes: 4 * ROW,
                half_life_ns: 10,
                slice_ns: u64::MAX,
                ..Default::default()
            },
        );
        // Zone 0: 3 accesses at t=0 (0.375 left at t=30); zone 1: 1 at t=30.
        for _ in 0..3 {
            o.access(&[0], 0);
        }
        o.access(&[4], 30);
        assert!((o.popularity(0, 30) - 0.375).abs() < 1e-9);
        assert_eq!(o.next_row(30), Some(4));
    }

    #[test]
    fn rows_already_handed_out_are_skipped_and_the_last_zone_may_be_short() {
        let mut o = order(10, 4, 8, u64::MAX);
        assert_eq!(o.next_row(0), Some(0)); // cold sweep takes row 0
        o.access(&[0], 0); // zone 0 (rows 0..4) now hot, row 0 taken
        o.access(&[9], 0); // zone 2 (rows 8..10, short)
        o.access(&[9], 0);
        assert_eq!(drain(&mut o, 0), vec![8, 9, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn counting_only_lost_units_ignores_reads_of_rebuilt_rows() {
        let mut cfg = ArrayConfig::new(Level::Raid5, 3);
        cfg.disk_bytes = 8 * ROW;
        let mut a = Array::new(cfg).unwrap();
        a.fail(0).unwrap();
        a.start_recovery(&[0]).unwrap();
        let p = ProParams {
            zone_bytes: 4 * ROW,
            count: ProCount::Lost,
            ..Default::default()
        };
        let mut pro = Pro::new(&a, 8, p);
        // A block of row 4 on the lost disk (row 5 holds its parity), one
        // of row 6 on a survivor.
        let lost = (4 * 32..5 * 32).find(|&b| a.disk_of(b) == 0).unwrap();
        let alive = (6 * 32..7 * 32).find(|&b| a.disk_of(b) != 0).unwrap();
        pro.observe_user(&a, alive..alive + 1, &a.plan_read(alive, 1), 0);
        assert_eq!(pro.stats()["zones_hot_max"], 0);
        pro.observe_user(&a, lost..lost + 1, &a.plan_read(lost, 1), 0);
        let order: Vec<u64> = std::iter::from_fn(|| pro.next_step(&a, 0).map(|s| s.tag)).collect();
        assert_eq!(order, vec![4, 5, 6, 7, 0, 1, 2, 3]);
    }
}

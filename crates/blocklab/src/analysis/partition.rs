//! Sharing a cache among tenants that want more than it holds: the
//! partitioning problem of ECI-Cache (Eq. 2) and Centaur, solved exactly on a
//! grid (dynamic programming) or greedily (UCP lookahead).
//!
//! **Problem.** Tenant i wants `want_i` blocks, must get at least `min_i`,
//! and gets value `v_i(c)` from `c` blocks, a non-decreasing step function
//! (hits, or hit ratio, against LRU size: see [`super::sizing`]). Given a
//! capacity C:
//!
//! ```text
//! maximise  Σ_i v_i(c_i)   subject to  Σ_i c_i <= C,  min_i <= c_i <= want_i,  c_i integer.
//! ```
//!
//! With `v_i = h_i` (hit ratio) this is the paper's Eq. 2: minimising
//! Σ_i [h_i·T_SSD + (1 − h_i)·T_HDD] = Σ_i T_HDD − (T_HDD − T_SSD)·Σ_i h_i is
//! maximising Σ_i h_i whatever the two latencies (T_SSD < T_HDD). The paper
//! calls the problem convex and hands it to a continuous solver; it is not
//! (`h_i` is a step function and miss-ratio curves are not convex), so both
//! solvers here are discrete.
//!
//! **Feasible** (Σ want_i <= C): every tenant gets `want_i`, the rest of the
//! cache stays free (ECI's saving). **Infeasible**: solve, then hand out what
//! is left (the paper's Algorithm 4 minimises the unused space too): first by
//! further lookahead steps that add value, then block by block to the tenants
//! still below their wish, by ascending tenant id. An infeasible solution
//! therefore uses all of C.
//!
//! **Solvers.**
//! - `exact`: dynamic programming over tenants and capacity units. The
//!   space above the minimums, C' = C − Σ min_i, is cut into at most
//!   `max_units` units of u = ⌈C'/max_units⌉ blocks; a tenant's step at s
//!   blocks costs ⌈(s − min_i)/u⌉ units. Optimal among allocations whose
//!   extra space is charged in whole units (u = 1, hence optimal, whenever
//!   C' <= max_units). O(N · units · P) time, O(N · units) memory, P = steps
//!   per tenant (at most one per unit). When u > 1 the greedy solution is
//!   computed too and the better of the two kept, so `exact` is never worse
//!   than `greedy`.
//! - `greedy`: UCP lookahead (Qureshi & Patt, MICRO'06): starting from the
//!   minimums, repeatedly give the tenant whose best next step (to any later
//!   step of its curve that fits in what is left) has the highest value per
//!   block. Optimal when every curve is concave; near-optimal otherwise. Runs
//!   along each curve's upper concave hull: about O(P log N) per step taken.
//!
//! Deterministic: ties go to the lower tenant id, then to the smaller step.

use crate::error::{Error, Result};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What one tenant asks of the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub tenant: u32,
    /// Blocks the tenant must get.
    pub min: u64,
    /// Blocks the tenant wants (it never gets more).
    pub want: u64,
    /// The value curve: `(size, value)` with sizes strictly ascending and
    /// values non-decreasing; the value of `c` blocks is that of the last
    /// step at or below `c` (0 below the first).
    pub steps: Vec<(u64, f64)>,
}

impl Demand {
    /// Value of `c` blocks.
    pub fn value(&self, c: u64) -> f64 {
        let i = self.steps.partition_point(|&(s, _)| s <= c);
        if i == 0 {
            0.0
        } else {
            self.steps[i - 1].1
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::config(format!("tenant {}: {m}", self.tenant)));
        if self.min > self.want {
            return bad(format!("minimum {} blocks exceeds the wish {}", self.min, self.want));
        }
        let mut prev: Option<(u64, f64)> = None;
        for &(s, v) in &self.steps {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("value {v} at {s} blocks is not a finite non-negative number"));
            }
            if let Some((ps, pv)) = prev {
                if s <= ps || v < pv {
                    return bad("curve steps must have ascending sizes and non-decreasing values".into());
                }
            }
            prev = Some((s, v));
        }
        Ok(())
    }
}

/// Which solver [`partition`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// Dynamic programming on a grid of at most `max_units` units.
    Exact { max_units: u64 },
    /// UCP lookahead.
    Greedy,
}

/// Default grid of the exact solver.
pub const DEFAULT_UNITS: u64 = 4096;

impl Default for Solver {
    fn default() -> Self {
        Solver::Exact {
            max_units: DEFAULT_UNITS,
        }
    }
}

impl Solver {
    pub const NAMES: &'static [&'static str] = &["exact", "greedy"];

    /// `exact` (with `max_units`, default [`DEFAULT_UNITS`]) or `greedy`.
    pub fn parse(name: &str, max_units: Option<u64>) -> Result<Solver> {
        match name {
            "exact" => {
                let max_units = max_units.unwrap_or(DEFAULT_UNITS);
                if max_units == 0 {
                    return Err(Error::config("--units must be at least 1"));
                }
                Ok(Solver::Exact { max_units })
            }
            "greedy" if max_units.is_some() => Err(Error::config("--units applies to the exact solver only")),
            "greedy" => Ok(Solver::Greedy),
            other => Err(Error::unknown("solver", other, Self::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Solver::Exact { .. } => "exact",
            Solver::Greedy => "greedy",
        }
    }
}

/// One tenant's share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Allocation {
    pub tenant: u32,
    pub want: u64,
    pub blocks: u64,
}

/// The result of [`partition`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    pub capacity: u64,
    pub solver: &'static str,
    /// Σ want_i <= capacity: every tenant got its wish.
    pub feasible: bool,
    pub wanted: u64,
    pub allocated: u64,
    /// Blocks per grid unit of the exact solver (1 for greedy or feasible).
    pub unit: u64,
    /// Σ_i v_i(c_i).
    pub value: f64,
    /// By ascending tenant.
    pub allocations: Vec<Allocation>,
}

/// Share `capacity` blocks among `demands` (see the module notes).
/// Errors: a tenant listed twice, an invalid curve, a minimum above the
/// wish, or minimums that together exceed the capacity.
pub fn partition(demands: &[Demand], capacity: u64, solver: Solver) -> Result<Partition> {
    let mut d: Vec<&Demand> = demands.iter().collect();
    d.sort_by_key(|x| x.tenant);
    for w in d.windows(2) {
        if w[0].tenant == w[1].tenant {
            return Err(Error::config(format!("tenant {} has two demands", w[0].tenant)));
        }
    }
    for x in &d {
        x.validate()?;
    }
    let sum = |f: fn(&Demand) -> u64| d.iter().try_fold(0u64, |a, x| a.checked_add(f(x)));
    let wanted = sum(|x| x.want).ok_or_else(|| Error::config("the wishes overflow a 64-bit block count"))?;
    let mins = sum(|x| x.min).unwrap_or(u64::MAX);
    if mins > capacity {
        return Err(Error::config(format!(
            "the minimum sizes ({mins} blocks) exceed the capacity ({capacity} blocks)"
        )));
    }
    let feasible = wanted <= capacity;
    let value = |a: &[u64]| -> f64 { d.iter().zip(a).map(|(x, &c)| x.value(c)).sum() };
    let mut unit = 1;
    let alloc: Vec<u64> = if feasible {
        d.iter().map(|x| x.want).collect()
    } else {
        let greedy = || complete(&d, d.iter().map(|x| x.min).collect(), capacity);
        match solver {
            Solver::Exact { max_units } => {
                let (a, u) = exact(&d, capacity - mins, max_units.max(1));
                unit = u;
                let a = complete(&d, a, capacity);
                // Off the unit grid the lookahead may do better: keep the better.
                if u > 1 {
                    let g = greedy();
                    if value(&g) > value(&a) {
                        g
                    } else {
                        a
                    }
                } else {
                    a
                }
            }
            Solver::Greedy => greedy(),
        }
    };
    let allocations: Vec<Allocation> = d
        .iter()
        .zip(&alloc)
        .map(|(x, &blocks)| Allocation {
            tenant: x.tenant,
            want: x.want,
            blocks,
        })
        .collect();
    Ok(Partition {
        capacity,
        solver: solver.name(),
        feasible,
        wanted,
        allocated: alloc.iter().sum(),
        unit,
        value: value(&alloc),
        allocations,
    })
}

/// Finish an allocation of an infeasible instance: value-adding lookahead
/// steps first (all of greedy's work; the exact solver's rounding
/// left-overs), then the rest block by block, by ascending tenant.
fn complete(d: &[&Demand], mut alloc: Vec<u64>, capacity: u64) -> Vec<u64> {
    let used: u64 = alloc.iter().sum();
    let mut left = lookahead(d, &mut alloc, capacity - used);
    for (a, x) in alloc.iter_mut().zip(d) {
        let more = (x.want - *a).min(left);
        *a += more;
        left -= more;
    }
    alloc
}

/// The points of a curve worth moving to from `from` blocks: `from` itself,
/// then every step up to the wish that raises the value.
fn points(x: &Demand, from: u64) -> Vec<(u64, f64)> {
    let mut p = vec![(from, x.value(from))];
    for &(s, v) in &x.steps {
        if s > from && s <= x.want && v > p.last().expect("non-empty").1 {
            p.push((s, v));
        }
    }
    p
}

/// Dynamic programming over tenants × units of the space above the
/// minimums. Returns the allocation (in blocks) and the unit.
fn exact(d: &[&Demand], spare: u64, max_units: u64) -> (Vec<u64>, u64) {
    let unit = spare.div_ceil(max_units).max(1);
    let k_max = (spare / unit) as usize;
    // Per tenant: options (cost in units, blocks, value), ascending cost,
    // one per cost (the largest step of that cost: the most value).
    let options: Vec<Vec<(usize, u64, f64)>> = d
        .iter()
        .map(|x| {
            let mut o: Vec<(usize, u64, f64)> = Vec::new();
            for (s, v) in points(x, x.min) {
                let cost = (s - x.min).div_ceil(unit);
                if cost > k_max as u64 {
                    break;
                }
                let cost = cost as usize;
                match o.last_mut() {
                    Some(last) if last.0 == cost => *last = (cost, s, v),
                    _ => o.push((cost, s, v)),
                }
            }
            o
        })
        .collect();
    // best[k]: the most value of the tenants so far within k units.
    let mut best = vec![0.0f64; k_max + 1];
    let mut choice: Vec<Vec<u32>> = Vec::with_capacity(d.len());
    for o in &options {
        let mut next = vec![f64::NEG_INFINITY; k_max + 1];
        let mut pick = vec![0u32; k_max + 1];
        for (j, &(cost, _, v)) in o.iter().enumerate() {
            for k in cost..=k_max {
                let cand = best[k - cost] + v;
                if cand > next[k] {
                    next[k] = cand;
                    pick[k] = j as u32;
                }
            }
        }
        best = next;
        choice.push(pick);
    }
    let mut alloc = vec![0u64; d.len()];
    let mut k = k_max;
    for i in (0..d.len()).rev() {
        let (cost, s, _) = options[i][choice[i][k] as usize];
        alloc[i] = s;
        k -= cost;
    }
    (alloc, unit)
}

/// A heap entry: a tenant's best next step and its value per block.
#[derive(Debug, PartialEq)]
struct Candidate {
    slope: f64,
    tenant: usize,
    /// Index into the tenant's points.
    to: usize,
    version: u64,
}

impl Eq for Candidate {}

impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> Ordering {
        // Steepest first; on ties the lower tenant (max-heap: reversed).
        self.slope.total_cmp(&o.slope).then_with(|| o.tenant.cmp(&self.tenant))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// One tenant's walk along its curve.
struct Walk {
    pts: Vec<(u64, f64)>,
    /// Current point.
    at: usize,
    /// Upper concave hull of pts[at..] (indexes into pts), starting at `at`.
    hull: Vec<usize>,
    /// Position of `at` in `hull`.
    pos: usize,
    version: u64,
}

impl Walk {
    fn new(pts: Vec<(u64, f64)>) -> Self {
        let mut w = Walk {
            pts,
            at: 0,
            hull: Vec::new(),
            pos: 0,
            version: 0,
        };
        w.rebuild();
        w
    }

    fn slope(&self, from: usize, to: usize) -> f64 {
        let (a, b) = (self.pts[from], self.pts[to]);
        (b.1 - a.1) / (b.0 - a.0) as f64
    }

    /// Upper hull of pts[at..], keeping collinear points so that the next
    /// vertex is the nearest steepest step.
    fn rebuild(&mut self) {
        let p = &self.pts;
        let mut h: Vec<usize> = Vec::new();
        for i in self.at..p.len() {
            while h.len() >= 2 {
                let (a, b) = (p[h[h.len() - 2]], p[h[h.len() - 1]]);
                let c = p[i];
                // b strictly below the segment a→c: not on the upper hull.
                let cross = (b.0 - a.0) as f64 * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0) as f64;
                if cross > 0.0 {
                    h.pop();
                } else {
                    break;
                }
            }
            h.push(i);
        }
        self.hull = h;
        self.pos = 0;
    }

    /// The steepest step from the current point within `left` blocks
    /// (nearest on ties): (slope, index).
    fn best(&self, left: u64) -> Option<(f64, usize)> {
        let here = self.pts[self.at].0;
        if let Some(&next) = self.hull.get(self.pos + 1) {
            if self.pts[next].0 - here <= left {
                return Some((self.slope(self.at, next), next));
            }
        }
        // The hull's next vertex does not fit: scan what does.
        let mut best: Option<(f64, usize)> = None;
        for j in self.at + 1..self.pts.len() {
            if self.pts[j].0 - here > left {
                break;
            }
            let s = self.slope(self.at, j);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, j));
            }
        }
        best
    }

    fn advance(&mut self, to: usize) {
        self.at = to;
        self.version += 1;
        match self.hull.get(self.pos + 1) {
            Some(&next) if next == to => self.pos += 1,
            _ => self.rebuild(),
        }
    }
}

/// UCP lookahead from the allocation `alloc` with `left` blocks to give;
/// returns what is left when no step that fits adds value.
fn lookahead(d: &[&Demand], alloc: &mut [u64], mut left: u64) -> u64 {
    let mut walks: Vec<Walk> = d
        .iter()
        .zip(alloc.iter())
        .map(|(x, &a)| Walk::new(points(x, a)))
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, w) in walks.iter().enumerate() {
        if let Some((slope, to)) = w.best(left) {
            heap.push(Candidate {
                slope,
                tenant: i,
                to,
                version: w.version,
            });
        }
    }
    while let Some(c) = heap.pop() {
        let w = &mut walks[c.tenant];
        if c.version != w.version {
            continue;
        }
        let here = w.pts[w.at].0;
        let need = w.pts[c.to].0 - here;
        if need > left {
            // Computed when more was left: recompute with what is left now.
            w.version += 1;
            if let Some((slope, to)) = w.best(left) {
                heap.push(Candidate {
                    slope,
                    tenant: c.tenant,
                    to,
                    version: w.version,
                });
            }
            continue;
        }
        left -= need;
        w.advance(c.to);
        alloc[c.tenant] = w.pts[w.at].0;
        if let Some((slope, to)) = w.best(left) {
            heap.push(Candidate {
                slope,
                tenant: c.tenant,
                to,
                version: w.version,
            });
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn demand(tenant: u32, min: u64, want: u64, steps: &[(u64, f64)]) -> Demand {
        Demand {
            tenant,
            min,
            want,
            steps: steps.to_vec(),
        }
    }

    fn blocks(p: &Partition) -> Vec<u64> {
        p.allocations.iter().map(|a| a.blocks).collect()
    }

    #[test]
    fn feasible_gives_every_wish() {
        let d = [demand(1, 0, 5, &[(5, 1.0)]), demand(0, 0, 3, &[(2, 1.0)])];
        let p = partition(&d, 10, Solver::default()).unwrap();
        assert!(p.feasible);
        assert_eq!(blocks(&p), vec![3, 5]);
        assert_eq!(p.allocations[0].tenant, 0);
        assert_eq!((p.wanted, p.allocated, p.value), (8, 8, 2.0));
    }

    #[test]
    fn hand_worked_infeasible() {
        // Capacity 10. Tenant 0: 4 blocks give 3 (hits), 10 give 4.
        // Tenant 1: 6 blocks give 5. Best: 4 + 6 = 10 blocks → 8.
        // Greedy: tenant 1's slope 5/6 = 0.83 against tenant 0's 3/4 = 0.75:
        // tenant 1 first (6), then tenant 0's 4 → the same here.
        let d = [demand(0, 0, 10, &[(4, 3.0), (10, 4.0)]), demand(1, 0, 6, &[(6, 5.0)])];
        for s in [Solver::default(), Solver::Greedy] {
            let p = partition(&d, 10, s).unwrap();
            assert!(!p.feasible);
            assert_eq!(blocks(&p), vec![4, 6], "{s:?}");
            assert_eq!(p.value, 8.0);
        }
        // Not concave: greedy takes the steep small step and misses the
        // big one. Tenant 0: 1 block → 1, Tenant 1: 10 blocks → 5 (0.5/block).
        // Capacity 10: exact gives tenant 1 everything (5); greedy gives
        // tenant 0 its block first (slope 1), then cannot fit tenant 1.
        let d = [demand(0, 0, 1, &[(1, 1.0)]), demand(1, 0, 10, &[(10, 5.0)])];
        let e = partition(&d, 10, Solver::default()).unwrap();
        let g = partition(&d, 10, Solver::Greedy).unwrap();
        assert_eq!((blocks(&e), e.value), (vec![0, 10], 5.0));
        assert_eq!((blocks(&g), g.value), (vec![1, 9], 1.0));
    }

    #[test]
    fn leftover_goes_to_tenants_below_their_wish() {
        // Nothing adds value beyond 2 blocks of tenant 0, yet the cache is
        // short of the wishes: the rest is handed out by tenant order.
        let d = [demand(0, 0, 8, &[(2, 1.0)]), demand(1, 0, 8, &[])];
        let p = partition(&d, 10, Solver::default()).unwrap();
        assert_eq!(blocks(&p), vec![8, 2]);
        assert_eq!(p.allocated, 10);
    }

    #[test]
    fn grid_units() {
        // 100 spare blocks on a grid of 10 units of 10 blocks: the step at 95
        // costs 10 units, the one at 3 costs 1, so the grid cannot hold both
        // (value 3); the leftover lookahead then reaches the step at 3 in the
        // 5 blocks the grid left: the optimum, 4.
        let d = [
            demand(0, 0, 100, &[(15, 2.0), (95, 3.0)]),
            demand(1, 0, 100, &[(3, 1.0)]),
        ];
        let p = partition(&d, 100, Solver::Exact { max_units: 10 }).unwrap();
        assert_eq!(p.unit, 10);
        assert_eq!(blocks(&p)[..], [97, 3]);
        assert_eq!(p.value, 4.0);
        assert_eq!(p.allocated, 100);
    }

    #[test]
    fn bad_demands() {
        let ok = demand(0, 0, 5, &[(1, 1.0)]);
        assert!(partition(&[ok.clone(), ok.clone()], 10, Solver::Greedy)
            .unwrap_err()
            .to_string()
            .contains("two demands"));
        let e = partition(&[demand(0, 6, 5, &[])], 10, Solver::Greedy).unwrap_err();
        assert!(e.to_string().contains("minimum 6"), "{e}");
        let e = partition(&[demand(0, 6, 8, &[]), demand(1, 6, 8, &[])], 10, Solver::Greedy).unwrap_err();
        assert!(e.to_string().contains("exceed the capacity"), "{e}");
        for steps in [vec![(2, 1.0), (2, 2.0)], vec![(1, 2.0), (2, 1.0)], vec![(1, f64::NAN)]] {
            assert!(partition(&[demand(0, 0, 5, &steps)], 1, Solver::Greedy).is_err());
        }
        assert!(Solver::parse("exact", Some(0)).is_err());
        assert!(Solver::parse("greedy", Some(5)).is_err());
        assert!(Solver::parse("fmincon", None)
            .unwrap_err()
            .to_string()
            .contains("exact, greedy"));
    }

    /// Random small instances: (min, want, step increments).
    fn instances() -> impl Strategy<Value = (Vec<Demand>, u64)> {
        let one = (0u64..3, 0u64..10, prop::collection::vec((1u64..4, 0u32..5), 0..5));
        (prop::collection::vec(one, 1..5), 0u64..40).prop_map(|(spec, cap)| {
            let demands = spec
                .into_iter()
                .enumerate()
                .map(|(i, (min, extra, inc))| {
                    let mut s = 0;
                    let mut v = 0.0;
                    let steps: Vec<(u64, f64)> = inc
                        .into_iter()
                        .map(|(ds, dv)| {
                            s += ds;
                            v += dv as f64;
                            (s, v)
                        })
                        .collect();
                    demand(i as u32 * 3, min, min + extra, &steps)
                })
                .collect();
            (demands, cap)
        })
    }

    /// The best value over every allocation, by exhaustive search.
    fn brute(d: &[Demand], cap: u64) -> f64 {
        fn go(d: &[Demand], left: u64) -> f64 {
            let Some((x, rest)) = d.split_first() else { return 0.0 };
            (x.min..=x.want.min(left))
                .map(|c| x.value(c) + go(rest, left - c))
                .fold(f64::NEG_INFINITY, f64::max)
        }
        go(d, cap)
    }

    /// Lookahead by definition: scan every tenant's every step each round.
    fn naive_lookahead(d: &[Demand], cap: u64) -> Vec<u64> {
        let mut d: Vec<&Demand> = d.iter().collect();
        d.sort_by_key(|x| x.tenant);
        let mut a: Vec<u64> = d.iter().map(|x| x.min).collect();
        let mut left = cap - a.iter().sum::<u64>();
        loop {
            let mut best: Option<(f64, usize, u64)> = None;
            for (i, x) in d.iter().enumerate() {
                for &(s, v) in &x.steps {
                    if s > a[i] && s <= x.want && s - a[i] <= left && v > x.value(a[i]) {
                        let slope = (v - x.value(a[i])) / (s - a[i]) as f64;
                        if best.is_none_or(|(b, _, _)| slope > b) {
                            best = Some((slope, i, s));
                        }
                    }
                }
            }
            let Some((_, i, s)) = best else { break };
            left -= s - a[i];
            a[i] = s;
        }
        for (ai, x) in a.iter_mut().zip(&d) {
            let more = (x.want - *ai).min(left);
            *ai += more;
            left -= more;
        }
        a
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn solvers_against_exhaustive_search((d, cap) in instances()) {
            let mins: u64 = d.iter().map(|x| x.min).sum();
            let wants: u64 = d.iter().map(|x| x.want).sum();
            if mins > cap {
                prop_assert!(partition(&d, cap, Solver::default()).is_err());
                return Ok(());
            }
            let best = brute(&d, cap);
            let e = partition(&d, cap, Solver::default()).unwrap();
            let g = partition(&d, cap, Solver::Greedy).unwrap();
            prop_assert!((e.value - best).abs() < 1e-9, "exact {} vs brute {}", e.value, best);
            prop_assert!(g.value <= best + 1e-9);
            prop_assert_eq!(blocks(&g), naive_lookahead(&d, cap));
            for p in [&e, &g] {
                prop_assert!(p.allocated <= cap);
                prop_assert_eq!(p.allocated, blocks(p).iter().sum::<u64>());
                prop_assert_eq!(p.feasible, wants <= cap);
                prop_assert_eq!(p.allocated, wants.min(cap));
                for (a, x) in p.allocations.iter().zip({ let mut s: Vec<&Demand> = d.iter().collect(); s.sort_by_key(|x| x.tenant); s }) {
                    prop_assert!(x.min <= a.blocks && a.blocks <= x.want);
                }
            }
            // Deterministic.
            prop_assert_eq!(partition(&d, cap, Solver::Greedy).unwrap(), g);
        }

        /// On a coarse grid the exact solver stays within the capacity and
        /// is never worse than greedy.
        #[test]
        fn coarse_grid_stays_within_capacity((d, cap) in instances(), units in 1u64..6) {
            let mins: u64 = d.iter().map(|x| x.min).sum();
            prop_assume!(mins <= cap);
            let p = partition(&d, cap, Solver::Exact { max_units: units }).unwrap();
            let g = partition(&d, cap, Solver::Greedy).unwrap();
            prop_assert!(p.allocated <= cap);
            prop_assert_eq!(p.allocated, d.iter().map(|x| x.want).sum::<u64>().min(cap));
            prop_assert!(p.value <= brute(&d, cap) + 1e-9);
            prop_assert!(p.value >= g.value);
        }

        /// With concave curves (a step at every block, shrinking gains)
        /// greedy is optimal.
        #[test]
        fn greedy_is_optimal_on_concave_curves(
            gains in prop::collection::vec(prop::collection::vec(0u32..20, 0..8), 1..5),
            cap in 0u64..30,
        ) {
            let d: Vec<Demand> = gains.iter().enumerate().map(|(i, g)| {
                let mut g = g.clone();
                g.sort_unstable_by(|a, b| b.cmp(a));
                let mut v = 0.0;
                let steps: Vec<(u64, f64)> = g.iter().enumerate().map(|(s, &x)| { v += x as f64; (s as u64 + 1, v) }).collect();
                demand(i as u32, 0, g.len() as u64, &steps)
            }).collect();
            let g = partition(&d, cap, Solver::Greedy).unwrap();
            prop_assert!((g.value - brute(&d, cap)).abs() < 1e-9);
        }
    }
}

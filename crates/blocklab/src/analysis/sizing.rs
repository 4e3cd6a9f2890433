//! The partition size each tenant wants for the next window, as Centaur
//! (traditional reuse distance) and ECI-Cache (useful reuse distance) size
//! it, and the value curve the partition solver weighs it with.
//!
//! From a tenant's [`ReuseProfile`] of the window just closed
//! (ECI-Cache §5.1, Algorithms 1, 2 and 4 as rebuilt in
//! `../shared/research/eci-ssd-tier.md`):
//! - **Centaur** wants the largest stack distance over all reuses (`trd_size`)
//!   and values `c` blocks by the reuses within `c` (a write re-access counts
//!   as a hit: its curve is the LRU miss-ratio curve).
//! - **ECI** wants the largest stack distance over read reuses (`urd_size`;
//!   0, no cache, when the window re-read nothing) and values `c` blocks by
//!   the read reuses within `c` (hits are defined for reads only).
//! - Estimator: the paper takes the maximum; `pNN` takes the NNth percentile
//!   instead (the maximum is outlier-driven).
//! - Value: `hit-ratio` (default) divides the hits by the tenant's accesses
//!   in the window: the objective Σ h_i of the paper's Eq. 2 (every VM
//!   weighs the same). `hits` keeps the count: the objective is then the
//!   mean latency over all accesses.
//! - `min_blocks` (the paper's per-VM minimum, default 0) is the least a
//!   tenant gets and wants.
//! - `initial_blocks` is what every tenant gets before its first window
//!   closes. Its value was lost from the paper's text; default 1,000.
//!
//! Tenants with no access in a window get no demand: the tier reclaims their
//! space (§6.3). Decisions made at the end of window k apply in window k+1.

use super::partition::Demand;
use super::reuse::{DistanceHistogram, ReuseProfile};
use crate::error::{Error, Result};

/// Whose sizing rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Traditional reuse distance: every reuse.
    Centaur,
    /// Useful reuse distance: read reuses only.
    Eci,
}

impl Scheme {
    pub const NAMES: &'static [&'static str] = &["centaur", "eci"];

    pub fn parse(s: &str) -> Result<Scheme> {
        match s {
            "centaur" => Ok(Scheme::Centaur),
            "eci" => Ok(Scheme::Eci),
            other => Err(Error::unknown("sizing scheme", other, Self::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Centaur => "centaur",
            Scheme::Eci => "eci",
        }
    }

    /// The distances this scheme sizes from.
    pub fn histogram(self, p: &ReuseProfile) -> &DistanceHistogram {
        match self {
            Scheme::Centaur => &p.trd,
            Scheme::Eci => &p.urd,
        }
    }
}

/// How a size is read off the distances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    /// The largest distance (the paper).
    Max,
    /// The smallest size within which this share of the reuses fall, in
    /// basis points (9,900 = 99th percentile).
    Percentile(u32),
}

impl Estimator {
    /// `max`, or `pNN` / `pNN.N...` with 0 < NN <= 100 (`p99`, `p99.9`).
    pub fn parse(s: &str) -> Result<Estimator> {
        if s == "max" {
            return Ok(Estimator::Max);
        }
        let bad = || {
            Error::config(format!(
                "unknown size estimator `{s}`; valid: max, pNN (e.g. p99, p99.9)"
            ))
        };
        let num = s.strip_prefix('p').ok_or_else(bad)?;
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() || frac.len() > 2 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let int: u32 = int.parse().map_err(|_| bad())?;
        let frac: u32 = format!("{frac:0<2}").parse().map_err(|_| bad())?;
        let bp = int.checked_mul(100).and_then(|x| x.checked_add(frac)).ok_or_else(bad)?;
        if bp == 0 || bp > 10_000 {
            return Err(bad());
        }
        Ok(Estimator::Percentile(bp))
    }

    pub fn name(self) -> String {
        match self {
            Estimator::Max => "max".into(),
            Estimator::Percentile(bp) if bp % 100 == 0 => format!("p{}", bp / 100),
            Estimator::Percentile(bp) => format!("p{}", bp as f64 / 100.0),
        }
    }

    pub fn size(self, h: &DistanceHistogram) -> u64 {
        match self {
            Estimator::Max => h.max(),
            Estimator::Percentile(bp) => h.percentile(bp),
        }
    }
}

/// What the solver maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Σ of per-tenant hit ratios (Eq. 2, equal weights).
    HitRatio,
    /// Σ of hits (mean latency over all accesses).
    Hits,
}

impl Value {
    pub const NAMES: &'static [&'static str] = &["hit-ratio", "hits"];

    pub fn parse(s: &str) -> Result<Value> {
        match s {
            "hit-ratio" => Ok(Value::HitRatio),
            "hits" => Ok(Value::Hits),
            other => Err(Error::unknown("objective", other, Self::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Value::HitRatio => "hit-ratio",
            Value::Hits => "hits",
        }
    }
}

/// Default [`Sizing::initial_blocks`] (the paper's value is lost).
pub const DEFAULT_INITIAL_BLOCKS: u64 = 1000;

/// One scheme's sizing rule with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub scheme: Scheme,
    pub estimator: Estimator,
    pub value: Value,
    /// Least a tenant wants and gets.
    pub min_blocks: u64,
    /// Every tenant's size before its first window closes.
    pub initial_blocks: u64,
    /// ECI §5's explicit classifier: a tenant whose window had at least
    /// this share of sequential requests (in basis points) wants only
    /// `min_blocks` ("cache space will be allocated to only VMs with random
    /// read or write access patterns"). None: off (the paper names the
    /// rule, not its threshold).
    pub sequential_bp: Option<u32>,
}

impl Sizing {
    /// The paper's rule for `scheme`: maximum, hit ratio, no minimum.
    pub fn new(scheme: Scheme) -> Sizing {
        Sizing {
            scheme,
            estimator: Estimator::Max,
            value: Value::HitRatio,
            min_blocks: 0,
            initial_blocks: DEFAULT_INITIAL_BLOCKS,
            sequential_bp: None,
        }
    }

    /// Whether the classifier calls the window's tenant sequential.
    pub fn sequential(&self, p: &ReuseProfile) -> bool {
        match self.sequential_bp {
            Some(bp) => p.requests > 0 && p.sequential_requests * 10_000 >= u64::from(bp) * p.requests,
            None => false,
        }
    }

    /// Blocks the tenant wants for the next window.
    pub fn wanted(&self, p: &ReuseProfile) -> u64 {
        if self.sequential(p) {
            return self.min_blocks;
        }
        self.estimator.size(self.scheme.histogram(p)).max(self.min_blocks)
    }

    /// The solver's input for one tenant: bounds and value curve (steps up
    /// to the wish).
    pub fn demand(&self, tenant: u32, p: &ReuseProfile) -> Demand {
        let want = self.wanted(p);
        let scale = match self.value {
            Value::HitRatio if p.accesses() > 0 => 1.0 / p.accesses() as f64,
            Value::HitRatio => 0.0,
            Value::Hits => 1.0,
        };
        let steps = self
            .scheme
            .histogram(p)
            .steps()
            .into_iter()
            .take_while(|&(d, _)| d <= want)
            .map(|(d, hits)| (d, hits as f64 * scale))
            .collect();
        Demand {
            tenant,
            min: self.min_blocks,
            want,
            steps,
        }
    }

    /// Demands of every tenant of a closed window ([`ReuseTracker::end_window`](super::reuse::ReuseTracker::end_window)).
    pub fn demands(&self, window: &[(u32, ReuseProfile)]) -> Vec<Demand> {
        window.iter().map(|(t, p)| self.demand(*t, p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::partition::{partition, Solver};
    use crate::analysis::reuse::{History, ReuseTracker};

    /// Fig. 5's sequence: R2 R3 R4 R5 W1 W2 R1.
    fn fig5() -> ReuseProfile {
        let mut t = ReuseTracker::new(true, History::All);
        for (w, b) in [
            (false, 2),
            (false, 3),
            (false, 4),
            (false, 5),
            (true, 1),
            (true, 2),
            (false, 1),
        ] {
            t.access(7, b, w).unwrap();
        }
        t.end_window().pop().unwrap().1
    }

    #[test]
    fn paper_example_sizes_and_curves() {
        let p = fig5();
        let c = Sizing::new(Scheme::Centaur);
        let e = Sizing::new(Scheme::Eci);
        assert_eq!((c.wanted(&p), e.wanted(&p)), (5, 2));
        // Centaur: reuses at distances 2 (R1) and 5 (W2), over 7 accesses.
        let dc = c.demand(7, &p);
        assert_eq!(dc.steps, vec![(2, 1.0 / 7.0), (5, 2.0 / 7.0)]);
        assert_eq!((dc.tenant, dc.min, dc.want), (7, 0, 5));
        // ECI: the read R1 at distance 2 only.
        let de = e.demand(7, &p);
        assert_eq!(de.steps, vec![(2, 1.0 / 7.0)]);
        let hits = Sizing {
            value: Value::Hits,
            ..e
        };
        assert_eq!(hits.demand(7, &p).steps, vec![(2, 1.0)]);
        // A percentile estimator cuts the wish and the curve.
        let p50 = Sizing {
            estimator: Estimator::Percentile(5000),
            ..c
        };
        assert_eq!(p50.wanted(&p), 2);
        assert_eq!(p50.demand(7, &p).steps, vec![(2, 1.0 / 7.0)]);
        // A minimum raises the wish.
        let m = Sizing { min_blocks: 3, ..e };
        assert_eq!((m.wanted(&p), m.demand(7, &p).min), (3, 3));
    }

    #[test]
    fn no_read_reuse_wants_nothing() {
        // Writes re-written: Centaur wants space, ECI none.
        let mut t = ReuseTracker::new(true, History::All);
        for b in [1, 2, 3, 1, 2, 3] {
            t.access(0, b, true).unwrap();
        }
        let w = t.end_window();
        assert_eq!(Sizing::new(Scheme::Centaur).wanted(&w[0].1), 3);
        assert_eq!(Sizing::new(Scheme::Eci).wanted(&w[0].1), 0);
        let d = Sizing::new(Scheme::Eci).demands(&w);
        let p = partition(&d, 10, Solver::default()).unwrap();
        assert_eq!((p.feasible, p.allocated), (true, 0));
    }

    #[test]
    fn estimator_names() {
        assert_eq!(Estimator::parse("max").unwrap(), Estimator::Max);
        assert_eq!(Estimator::parse("p99").unwrap(), Estimator::Percentile(9900));
        assert_eq!(Estimator::parse("p99.9").unwrap(), Estimator::Percentile(9990));
        assert_eq!(Estimator::parse("p100").unwrap(), Estimator::Percentile(10000));
        assert_eq!(Estimator::parse("p99.95").unwrap(), Estimator::Percentile(9995));
        for bad in ["p0", "p101", "p", "99", "p9x", "p99.999", "pmax", "p.5"] {
            assert!(Estimator::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Estimator::Percentile(9900).name(), "p99");
        assert_eq!(Estimator::Percentile(9990).name(), "p99.9");
        assert!(Scheme::parse("arc").unwrap_err().to_string().contains("centaur, eci"));
        assert!(Value::parse("x").is_err());
    }

    /// ECI §5's classifier by hand: requests of two blocks at 0, 2, 4, then 0
    /// again, all reads. Requests 2 and 3 start where the one before ended
    /// (2 of 4 sequential); the re-reads of blocks 0 and 1 each see 6
    /// distinct blocks, so URD wants 6.
    #[test]
    fn sequential_tenants_want_nothing() {
        let mut t = ReuseTracker::new(true, History::All);
        for first in [0, 2, 4, 0] {
            t.request(7, first, 2).unwrap();
            for b in first..first + 2 {
                t.access(7, b, false).unwrap();
            }
        }
        let p = t.end_window().pop().unwrap().1;
        assert_eq!((p.requests, p.sequential_requests), (4, 2));
        assert_eq!(p.sequential_share(), Some(0.5));
        let e = Sizing::new(Scheme::Eci);
        assert_eq!(e.wanted(&p), 6);
        let at = |bp| Sizing {
            sequential_bp: Some(bp),
            ..e
        };
        assert_eq!(at(5_000).wanted(&p), 0, "half sequential, threshold one half");
        assert_eq!(at(6_000).wanted(&p), 6, "below the threshold: random");
        assert_eq!(
            Sizing {
                min_blocks: 3,
                ..at(5_000)
            }
            .wanted(&p),
            3
        );
        assert!(at(5_000).demand(7, &p).steps.is_empty());
        // Across windows: the last request read 0 and 1, so one at 2 continues it.
        t.request(7, 2, 1).unwrap();
        t.access(7, 2, false).unwrap();
        assert_eq!(t.end_window().pop().unwrap().1.sequential_requests, 1);
    }
}

//! Live member blocks, as extents: what a live-block rebuild of a member
//! copies instead of the whole member. A timed rebuild walks
//! [`LiveSet::extents`] (runs of at most `max_io` blocks, ascending) where an
//! MD rebuild walks every chunk row.
//!
//! Sources: the live map of a model run ([`LiveSet::from_blocks`] over
//! [`crate::dgraid::Dgraid::live_member_blocks`]), or a synthetic share of
//! a member ([`LiveSet::synthetic`]): `compact` puts the live blocks at the
//! start of the member (the paper's best case), `spread` interleaves them
//! evenly over the whole member (its worst case).

use serde::Serialize;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LiveLayout {
    Compact,
    Spread,
}

impl LiveLayout {
    pub fn parse(s: &str) -> Result<LiveLayout> {
        match s.trim() {
            "compact" => Ok(LiveLayout::Compact),
            "spread" => Ok(LiveLayout::Spread),
            other => Err(Error::unknown("live layout", other, &["compact", "spread"])),
        }
    }
}

/// Live blocks of one member of `member_blocks` blocks, as sorted disjoint
/// runs `(first, count)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveSet {
    pub member_blocks: u64,
    pub runs: Vec<(u64, u64)>,
}

impl LiveSet {
    /// From any list of live member blocks (duplicates and order do not matter).
    pub fn from_blocks(member_blocks: u64, blocks: &[u64]) -> Result<LiveSet> {
        let mut v = blocks.to_vec();
        v.sort_unstable();
        v.dedup();
        if let Some(&last) = v.last() {
            if last >= member_blocks {
                return Err(Error::config(format!(
                    "live block {last} is beyond the member ({member_blocks} blocks)"
                )));
            }
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for b in v {
            match runs.last_mut() {
                Some((s, n)) if *s + *n == b => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        Ok(LiveSet { member_blocks, runs })
    }

    /// From runs `(first, count)` as [`LiveSet::runs`] holds them (read back
    /// from `dgraid live --json`): ascending, disjoint, non-empty, within
    /// the member; touching runs are joined.
    pub fn from_runs(member_blocks: u64, runs: &[(u64, u64)]) -> Result<LiveSet> {
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for &(s, n) in runs {
            let end = s
                .checked_add(n)
                .filter(|&e| n > 0 && e <= member_blocks)
                .ok_or_else(|| {
                    Error::config(format!(
                        "live run ({s}, {n}) is empty or beyond the member ({member_blocks} blocks)"
                    ))
                })?;
            match out.last_mut() {
                Some((ps, pn)) if *ps + *pn > s => {
                    return Err(Error::config(format!(
                        "live runs are not ascending and disjoint: ({ps}, {pn}) then ({s}, {n})"
                    )))
                }
                Some((ps, pn)) if *ps + *pn == s => *pn = end - *ps,
                _ => out.push((s, n)),
            }
        }
        Ok(LiveSet {
            member_blocks,
            runs: out,
        })
    }

    /// `frac` of the member live in runs of `unit` blocks (a file's worth):
    /// `compact` as [`synthetic`](Self::synthetic); `spread` interleaves
    /// round(frac × U) of the member's U units evenly by the same rule (the
    /// last unit may be short). `unit` 1 is [`synthetic`](Self::synthetic).
    pub fn synthetic_in_units(member_blocks: u64, frac: f64, layout: LiveLayout, unit: u64) -> Result<LiveSet> {
        if unit <= 1 || layout == LiveLayout::Compact {
            return Self::synthetic(member_blocks, frac, layout);
        }
        let units = Self::synthetic(member_blocks.div_ceil(unit), frac, layout)?;
        let mut runs: Vec<(u64, u64)> = Vec::with_capacity(units.runs.len());
        for (s, n) in units.runs {
            let first = s * unit;
            runs.push((first, ((s + n) * unit).min(member_blocks) - first));
        }
        Ok(LiveSet { member_blocks, runs })
    }

    /// `frac` of the member live, laid out compact or spread. The count is
    /// round(frac × member); spread makes block i live exactly when
    /// ⌊(i+1)·frac⌋ > ⌊i·frac⌋ (evenly interleaved, deterministic).
    pub fn synthetic(member_blocks: u64, frac: f64, layout: LiveLayout) -> Result<LiveSet> {
        if !(0.0..=1.0).contains(&frac) {
            return Err(Error::config(format!("--live-frac must be in [0, 1], got {frac}")));
        }
        let live = (frac * member_blocks as f64).round() as u64;
        let runs = match layout {
            LiveLayout::Compact => {
                if live == 0 {
                    vec![]
                } else {
                    vec![(0, live)]
                }
            }
            LiveLayout::Spread => {
                // Integer form of the rule: block i is live when
                // ⌊(i+1)·live/M⌋ > ⌊i·live/M⌋.
                let m = member_blocks as u128;
                let l = live as u128;
                let mut runs: Vec<(u64, u64)> = Vec::new();
                for i in 0..member_blocks {
                    let i2 = i as u128;
                    if (i2 + 1) * l / m > i2 * l / m {
                        match runs.last_mut() {
                            Some((s, n)) if *s + *n == i => *n += 1,
                            _ => runs.push((i, 1)),
                        }
                    }
                }
                runs
            }
        };
        Ok(LiveSet { member_blocks, runs })
    }

    /// Live blocks.
    pub fn count(&self) -> u64 {
        self.runs.iter().map(|r| r.1).sum()
    }

    pub fn fraction(&self) -> f64 {
        if self.member_blocks == 0 {
            0.0
        } else {
            self.count() as f64 / self.member_blocks as f64
        }
    }

    pub fn contains(&self, b: u64) -> bool {
        let i = self.runs.partition_point(|r| r.0 + r.1 <= b);
        self.runs.get(i).is_some_and(|r| r.0 <= b)
    }

    /// The runs cut into extents of at most `max_io` blocks, ascending: the
    /// rebuild's I/O list.
    pub fn extents(&self, max_io: u64) -> Vec<(u64, u64)> {
        let max_io = max_io.max(1);
        let mut out = Vec::new();
        for &(s, n) in &self.runs {
            let mut off = 0;
            while off < n {
                let k = (n - off).min(max_io);
                out.push((s + off, k));
                off += k;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn compact_and_spread_hold_the_share() {
        let c = LiveSet::synthetic(1000, 0.25, LiveLayout::Compact).unwrap();
        assert_eq!(c.runs, vec![(0, 250)]);
        let s = LiveSet::synthetic(1000, 0.25, LiveLayout::Spread).unwrap();
        assert_eq!(s.count(), 250);
        assert_eq!(s.runs.len(), 250);
        assert_eq!(s.runs[0], (3, 1));
        assert_eq!(s.runs[1], (7, 1));
        assert!(LiveSet::synthetic(10, 1.5, LiveLayout::Spread).is_err());
        assert_eq!(
            LiveSet::synthetic(10, 1.0, LiveLayout::Spread).unwrap().runs,
            vec![(0, 10)]
        );
    }

    #[test]
    fn spread_in_units_interleaves_whole_runs() {
        // 100 blocks in units of 8 (13 units, the last of 4 blocks), a
        // quarter live: round(3.25) = 3 units, unit i when
        // ⌊3(i+1)/13⌋ > ⌊3i/13⌋: units 4, 8 and 12 (the short one).
        let s = LiveSet::synthetic_in_units(100, 0.25, LiveLayout::Spread, 8).unwrap();
        assert_eq!(s.runs, vec![(32, 8), (64, 8), (96, 4)]);
        let last = LiveSet::synthetic_in_units(100, 1.0, LiveLayout::Spread, 8).unwrap();
        assert_eq!(last.runs, vec![(0, 100)]);
        assert_eq!(
            LiveSet::synthetic_in_units(100, 0.25, LiveLayout::Compact, 8).unwrap(),
            LiveSet::synthetic(100, 0.25, LiveLayout::Compact).unwrap()
        );
    }

    #[test]
    fn runs_read_back_are_checked() {
        assert_eq!(
            LiveSet::from_runs(10, &[(0, 2), (2, 3), (7, 1)]).unwrap().runs,
            vec![(0, 5), (7, 1)]
        );
        for bad in [&[(0u64, 0u64)][..], &[(8, 3)], &[(4, 2), (5, 1)], &[(4, 1), (2, 1)]] {
            assert!(LiveSet::from_runs(10, bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn extents_cover_exactly_the_live_blocks(blocks in proptest::collection::vec(0u64..500, 0..200), max_io in 1u64..40) {
            let s = LiveSet::from_blocks(500, &blocks).unwrap();
            let mut covered = Vec::new();
            for (a, n) in s.extents(max_io) {
                prop_assert!(n <= max_io && n > 0);
                covered.extend(a..a + n);
            }
            let mut want = blocks.clone();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(&covered, &want);
            prop_assert_eq!(&LiveSet::from_runs(500, &s.runs).unwrap(), &s);
            for b in 0..500 {
                prop_assert_eq!(s.contains(b), want.binary_search(&b).is_ok());
            }
        }

        #[test]
        fn spread_count_is_the_rounded_share(m in 1u64..3000, f in 0.0f64..=1.0) {
            let s = LiveSet::synthetic(m, f, LiveLayout::Spread).unwrap();
            prop_assert_eq!(s.count(), (f * m as f64).round() as u64);
            let c = LiveSet::synthetic(m, f, LiveLayout::Compact).unwrap();
            prop_assert_eq!(c.count(), s.count());
        }
    }
}

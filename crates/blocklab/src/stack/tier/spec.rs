//! `[tier]`: the SSD cache tier of a stack file (see docs/stack.md and
//! docs/eci.md). Parsed strictly like the rest of the file; the checks that
//! need no trace are in [`TierSpec::check`].

use std::collections::BTreeMap;

use serde::Deserialize;

use super::mode::ModeRule;
use super::partitioner::PartitionerKind;
use crate::analysis::partition::Solver;
use crate::analysis::reuse::History;
use crate::analysis::sizing::{Estimator, Value};
use crate::error::Result;
use crate::stack::spec::{NumOrStr, Origin, StackSpec, TenantMap};

/// `[tier]`: an SSD shared by the trace's tenants, between the host cache
/// layers and the array.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// Blocks (`3000000`), bytes (`"24GiB"`), a share of the trace's
    /// footprint (`"10%"`), or `"unlimited"`.
    pub size: NumOrStr,
    /// `global`, `static`, `centaur` or `eci`.
    #[serde(default = "default_partitioner")]
    pub partitioner: String,
    /// Seconds of the trace's clock between two re-sizings (and write-policy choices).
    #[serde(default = "default_window")]
    pub window_s: f64,
    /// `exact` or `greedy` (when the wishes do not fit).
    #[serde(default = "default_solver")]
    pub solver: String,
    /// Grid of the exact solver (default 4,096 units).
    #[serde(default)]
    pub units: Option<u64>,
    /// `max` (the paper) or `pNN`.
    #[serde(default = "default_estimator")]
    pub estimator: String,
    /// `hit-ratio` (Eq. 2, every tenant weighs the same) or `hits`.
    #[serde(default = "default_objective")]
    pub objective: String,
    /// `all` (distances reach into earlier windows) or `window`.
    #[serde(default = "default_history")]
    pub history: String,
    /// Least blocks a `centaur` / `eci` tenant wants and gets.
    #[serde(default)]
    pub min_blocks: u64,
    /// Blocks of a `centaur` / `eci` tenant before its first window closes
    /// (the paper's c_min, whose value was lost).
    #[serde(default = "default_initial")]
    pub initial_blocks: u64,
    /// ECI §5's sequential VMs: a `centaur` / `eci` tenant whose requests in a
    /// window were at least this share sequential (each starting where its
    /// previous one ended) gets `min_blocks` in the next. Absent: off.
    #[serde(default)]
    pub sequential_share: Option<f64>,
    /// Every tenant's write policy: `wb`, `wt`, `ro`, `wa`, `wo`, `pt`, `adaptive`.
    #[serde(default = "default_write_policy")]
    pub write_policy: String,
    /// Per-tenant overrides of `write_policy`, keyed by tenant id: `{ "256" = "ro" }`.
    #[serde(default)]
    pub tenant_write_policy: BTreeMap<String, String>,
    /// `adaptive`: read-only when (WAR + WAW) / accesses of the window >= theta.
    #[serde(default = "default_theta")]
    pub theta: f64,
    /// Insert a missed block only at its N-th access (Open CAS NHIT; 1: always).
    #[serde(default = "one")]
    pub promote_after: u32,
    /// Occupancy of the partition below which every miss is inserted (Open CAS: 0.8).
    #[serde(default = "default_trigger")]
    pub promote_trigger: f64,
    /// Requests continuing a sequential stream bypass the SSD once the stream
    /// has moved more than this many bytes (bcache 4 MiB, Open CAS 1 MiB; 0: never).
    #[serde(default = "zero_size")]
    pub sequential_cutoff: NumOrStr,
    /// Write dirty blocks back once more than this share of a partition is dirty ...
    #[serde(default)]
    pub clean_high: Option<f64>,
    /// ... until at most this share is (dm-writecache: 0.5 / 0.45).
    #[serde(default)]
    pub clean_low: Option<f64>,
    /// At the end of the run write every dirty block back to the array
    /// (default false: the SSD keeps them; `dirty_blocks` reports them).
    #[serde(default)]
    pub flush: bool,
    /// The SSD's device model (timed executor): a `.toml` spec, `const:MS`, ...
    #[serde(default)]
    pub model: Option<String>,
    /// The counted latency model (the paper's Eq. 2): a request served by the
    /// SSD alone takes `ssd_ms`, one that reaches the array `hdd_ms`.
    #[serde(default = "default_ssd_ms")]
    pub ssd_ms: f64,
    #[serde(default = "default_hdd_ms")]
    pub hdd_ms: f64,
    /// Cost of a GB (10^9 bytes) of allocated SSD, and of the rest of the
    /// system: performance-per-cost = (1 / mean latency) / (ssd_cost_per_gb
    /// x allocated GB + base_cost). The paper's is performance per allocated
    /// cache space (base_cost 0).
    #[serde(default = "default_ssd_cost")]
    pub ssd_cost_per_gb: f64,
    #[serde(default)]
    pub base_cost: f64,
}

fn default_partitioner() -> String {
    "global".into()
}
fn default_window() -> f64 {
    600.0
}
fn default_solver() -> String {
    "exact".into()
}
fn default_estimator() -> String {
    "max".into()
}
fn default_objective() -> String {
    "hit-ratio".into()
}
fn default_history() -> String {
    "all".into()
}
fn default_initial() -> u64 {
    crate::analysis::sizing::DEFAULT_INITIAL_BLOCKS
}
fn default_write_policy() -> String {
    "wb".into()
}
fn default_theta() -> f64 {
    crate::analysis::write_policy::DEFAULT_THETA
}
fn one() -> u32 {
    1
}
fn default_trigger() -> f64 {
    0.8
}
fn zero_size() -> NumOrStr {
    NumOrStr::Int(0)
}
fn default_ssd_ms() -> f64 {
    0.1
}
fn default_hdd_ms() -> f64 {
    7.0
}
fn default_ssd_cost() -> f64 {
    1.0
}

/// Frames are numbered in 32 bits: `unlimited` is the largest SSD.
pub const UNLIMITED_BLOCKS: u64 = u32::MAX as u64 - 1;

impl TierSpec {
    pub fn partitioner_kind(&self) -> Result<PartitionerKind> {
        PartitionerKind::parse(&self.partitioner.to_ascii_lowercase())
    }

    pub fn solver(&self) -> Result<Solver> {
        Solver::parse(&self.solver.to_ascii_lowercase(), self.units)
    }

    pub fn estimator(&self) -> Result<Estimator> {
        Estimator::parse(&self.estimator.to_ascii_lowercase())
    }

    pub fn value(&self) -> Result<Value> {
        Value::parse(&self.objective.to_ascii_lowercase())
    }

    pub fn history(&self) -> Result<History> {
        History::parse(&self.history.to_ascii_lowercase())
    }

    pub fn default_rule(&self) -> Result<ModeRule> {
        ModeRule::parse(&self.write_policy.to_ascii_lowercase())
    }

    /// The per-tenant overrides, by tenant id.
    pub fn tenant_rules(&self) -> Result<BTreeMap<u32, ModeRule>> {
        self.tenant_write_policy
            .iter()
            .map(|(k, v)| {
                let t: u32 = k
                    .trim()
                    .parse()
                    .map_err(|_| crate::error::Error::config(format!("`{k}` is not a tenant id (a whole number)")))?;
                Ok((t, ModeRule::parse(&v.to_ascii_lowercase())?))
            })
            .collect()
    }

    /// Whether any tenant's policy is `adaptive`.
    pub fn adaptive(&self) -> bool {
        self.write_policy.eq_ignore_ascii_case("adaptive")
            || self
                .tenant_write_policy
                .values()
                .any(|v| v.eq_ignore_ascii_case("adaptive"))
    }

    /// The sequential cutoff in bytes (0: none).
    pub fn cutoff_bytes(&self) -> Result<u64> {
        match &self.sequential_cutoff {
            NumOrStr::Int(n) => Ok(*n),
            other => crate::array::parse_bytes(&other.text()),
        }
    }

    /// Whether `size` is a share of the footprint (the trace needs a pass).
    pub fn size_is_share(&self) -> bool {
        self.size.text().trim().ends_with('%')
    }

    /// The size in blocks (`unique`: the footprint in stack blocks, for `%`).
    pub fn blocks(&self, block_size: u64, unique: Option<u64>) -> Result<u64> {
        let text = self.size.text();
        if text.trim().eq_ignore_ascii_case("unlimited") {
            return Ok(UNLIMITED_BLOCKS);
        }
        let s = crate::cache::sizes::parse_size(&text)?;
        let n = crate::cache::sizes::resolve(&s, &text, block_size, unique)?;
        if n > UNLIMITED_BLOCKS {
            return Err(crate::error::Error::config(format!(
                "{n} blocks is more than the tier can number ({UNLIMITED_BLOCKS}; `unlimited` is that)"
            )));
        }
        Ok(n)
    }

    /// Checks that need no trace. `o` names the file.
    pub fn check(&self, o: &Origin, stack: &StackSpec) -> Result<()> {
        let text = self.size.text();
        if !text.trim().eq_ignore_ascii_case("unlimited") {
            crate::cache::sizes::parse_size(&text).map_err(|e| o.err("tier.size", e))?;
            if !self.size_is_share() {
                self.blocks(stack.block_size(), None)
                    .map_err(|e| o.err("tier.size", e))?;
            }
        }
        let kind = self.partitioner_kind().map_err(|e| o.err("tier.partitioner", e))?;
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            return Err(o.err("tier.window_s", "must be a positive number of seconds"));
        }
        self.solver().map_err(|e| o.err("tier.solver", e))?;
        if self.units == Some(0) {
            return Err(o.err("tier.units", "must be at least 1"));
        }
        self.estimator().map_err(|e| o.err("tier.estimator", e))?;
        self.value().map_err(|e| o.err("tier.objective", e))?;
        self.history().map_err(|e| o.err("tier.history", e))?;
        self.default_rule().map_err(|e| o.err("tier.write_policy", e))?;
        for (k, v) in &self.tenant_write_policy {
            let key = format!("tier.tenant_write_policy.{k}");
            k.trim()
                .parse::<u32>()
                .map_err(|_| o.err(&key, format!("`{k}` is not a tenant id (a whole number)")))?;
            ModeRule::parse(&v.to_ascii_lowercase()).map_err(|e| o.err(&key, e))?;
        }
        crate::analysis::write_policy::validate_theta(self.theta).map_err(|e| o.err("tier.theta", e))?;
        if let Some(x) = self.sequential_share {
            if !(x > 0.0 && x <= 1.0) {
                return Err(o.err("tier.sequential_share", "must be a share in (0, 1]"));
            }
        }
        if self.promote_after == 0 {
            return Err(o.err("tier.promote_after", "must be at least 1 (1: every miss is inserted)"));
        }
        if !(0.0..=1.0).contains(&self.promote_trigger) {
            return Err(o.err("tier.promote_trigger", "must be a share in [0, 1]"));
        }
        self.cutoff_bytes().map_err(|e| o.err("tier.sequential_cutoff", e))?;
        match (self.clean_high, self.clean_low) {
            (None, None) => {}
            (Some(h), Some(l)) => {
                if !((0.0..=1.0).contains(&h) && (0.0..=1.0).contains(&l)) {
                    return Err(o.err("tier.clean_high", "watermarks are shares in [0, 1]"));
                }
                if l > h {
                    return Err(o.err("tier.clean_low", format!("{l} is above clean_high {h}")));
                }
            }
            (Some(_), None) => return Err(o.err("tier.clean_low", "cleaning needs both watermarks")),
            (None, Some(_)) => return Err(o.err("tier.clean_high", "cleaning needs both watermarks")),
        }
        for (key, v) in [("tier.ssd_ms", self.ssd_ms), ("tier.hdd_ms", self.hdd_ms)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(o.err(key, "must be a non-negative number of ms"));
            }
        }
        for (key, v) in [
            ("tier.ssd_cost_per_gb", self.ssd_cost_per_gb),
            ("tier.base_cost", self.base_cost),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(o.err(key, "must be a non-negative number"));
            }
        }
        let per_tenant = kind != PartitionerKind::Global || !self.tenant_write_policy.is_empty();
        if per_tenant && stack.tenant_map == TenantMap::Ignore {
            let key = if kind != PartitionerKind::Global {
                "tier.partitioner"
            } else {
                "tier.tenant_write_policy"
            };
            return Err(o.err(
                key,
                "tenants need their own volumes: with tenant_map `ignore` every tenant addresses one volume \
                 (use `concat` or `key`)",
            ));
        }
        Ok(())
    }
}

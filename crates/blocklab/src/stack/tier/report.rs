//! The `tier` object of a stack's result (see docs/stack.md): totals, one
//! entry per tenant, and the decisions window by window.

use serde::Serialize;

/// Counters of the tier, per tenant and in total (blocks unless said).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct TierCounts {
    /// Block accesses that reached the tier (user requests and the destages
    /// of the cache layers above).
    pub accesses: u64,
    pub reads: u64,
    /// Accesses served by the SSD (a write counts when it updates or
    /// allocates an SSD copy).
    pub hits: u64,
    pub read_hits: u64,
    /// Blocks read from the SSD: read hits and destages.
    pub ssd_reads: u64,
    /// Blocks written to the SSD: fills of read misses, writes allocated or
    /// updated in it (the endurance figure).
    pub ssd_writes: u64,
    /// Blocks read from the array: read misses.
    pub array_reads: u64,
    /// Blocks written to the array: writes not kept in the SSD (through,
    /// around, read-only, pass-through, bypassed) and destages.
    pub array_writes: u64,
    /// Dirty blocks written back: evictions, partitions shrinking, cleaning,
    /// the final flush.
    pub destaged: u64,
    /// Accesses the mode would have cached but the tier kept out: no space
    /// for the tenant, the sequential cutoff, promotion not yet earned.
    pub bypassed: u64,
}

impl TierCounts {
    pub fn add(&mut self, o: &TierCounts) {
        self.accesses += o.accesses;
        self.reads += o.reads;
        self.hits += o.hits;
        self.read_hits += o.read_hits;
        self.ssd_reads += o.ssd_reads;
        self.ssd_writes += o.ssd_writes;
        self.array_reads += o.array_reads;
        self.array_writes += o.array_writes;
        self.destaged += o.destaged;
        self.bypassed += o.bypassed;
    }
}

/// Mean latency of the counted model, per request: a request served by the
/// SSD alone takes `ssd_ms`, one that reaches the array `hdd_ms` (so a write
/// a read-only tenant sends to the array costs `hdd_ms`, one written back
/// `ssd_ms`). Ours: the paper's Eq. 2 is [`eq2_latency_ms`].
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ModelLatency {
    /// Requests (pieces of user requests that reached the tier).
    pub requests: u64,
    pub latency_ms: f64,
    pub read_requests: u64,
    pub read_latency_ms: f64,
    pub write_requests: u64,
    pub write_latency_ms: f64,
}

/// One tenant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TierTenant {
    pub tenant: u32,
    /// Its partition at the end (a `global` tier: the blocks it holds).
    pub allocated_blocks: u64,
    /// Over the run's trace time.
    pub mean_allocated_blocks: f64,
    /// Blocks it holds at the end, and how many of them are dirty.
    pub held_blocks: u64,
    pub dirty_blocks: u64,
    #[serde(flatten)]
    pub counts: TierCounts,
    /// The policy at the end (`adaptive`: the last one chosen).
    pub write_policy: String,
    /// Windows in which `adaptive` chose read-only.
    pub read_only_windows: u64,
    #[serde(flatten)]
    pub latency: ModelLatency,
    /// (1 / latency_ms) / (ssd_cost_per_gb x mean allocated GB + base_cost / tenants).
    pub performance_per_cost: Option<f64>,
    /// The paper's Eq. 2 over its block accesses ([`eq2_latency_ms`]).
    pub eq2_latency_ms: f64,
    /// (1 / eq2_latency_ms) / the same cost.
    pub eq2_performance_per_cost: Option<f64>,
}

/// One tenant at the end of a window.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WindowTenant {
    pub tenant: u32,
    /// Its partition for the next window (a `global` tier: what it holds).
    pub allocated_blocks: u64,
    pub held_blocks: u64,
    /// Its wish (reuse-sized schemes, tenants active in the window).
    pub want: Option<u64>,
    /// Its policy for the next window.
    pub write_policy: String,
    /// In the window: accesses, read accesses, read hits, SSD writes.
    pub accesses: u64,
    pub reads: u64,
    pub read_hits: u64,
    pub ssd_writes: u64,
    /// In the window: requests and their mean latency (the counted model).
    pub requests: u64,
    pub latency_ms: f64,
    /// In the window: the paper's Eq. 2 over its accesses ([`eq2_latency_ms`]).
    pub eq2_latency_ms: f64,
}

/// The decisions at the end of one window.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TierWindow {
    /// Index k: the window covers [k, k + 1) x window_s of the trace's clock.
    pub window: u64,
    /// Seconds since the first request at which it ended.
    pub end_s: f64,
    /// Whether every wish fit.
    pub feasible: bool,
    /// Σ of the partitions for the next window.
    pub allocated_blocks: u64,
    pub tenants: Vec<WindowTenant>,
}

/// The tier.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TierReport {
    /// SSD blocks.
    pub size: u64,
    pub partitioner: String,
    pub block_size: u64,
    pub window_s: f64,
    pub solver: String,
    pub theta: f64,
    #[serde(flatten)]
    pub counts: TierCounts,
    /// Σ of the partitions at the end (`global`: the blocks held).
    pub allocated_blocks: u64,
    pub mean_allocated_blocks: f64,
    pub dirty_blocks: u64,
    /// Windows closed, and those in which the wishes did not fit the SSD.
    pub windows: u64,
    pub infeasible_windows: u64,
    #[serde(flatten)]
    pub latency: ModelLatency,
    /// 1 / latency_ms of the counted model.
    pub performance: Option<f64>,
    /// ssd_cost_per_gb x mean allocated GB + base_cost.
    pub cost: f64,
    /// performance / cost (the paper's performance per allocated cache space).
    pub performance_per_cost: Option<f64>,
    /// The paper's Eq. 2 over all block accesses ([`eq2_latency_ms`]).
    pub eq2_latency_ms: f64,
    /// (1 / eq2_latency_ms) / cost.
    pub eq2_performance_per_cost: Option<f64>,
    /// Timed runs: (1 / response.avg_ms) / cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_performance_per_cost: Option<f64>,
    /// The SSD's operations (in `devices[]` too, as disk `ssd_disk`).
    pub ssd_disk: u32,
    pub ssd_read_ops: u64,
    pub ssd_write_ops: u64,
    pub tenants: Vec<TierTenant>,
    pub timeline: Vec<TierWindow>,
}

/// The paper's latency model (ECI-Cache Eq. 2), `h·ssd_ms + (1 − h)·hdd_ms`,
/// with `h` the hit ratio over block accesses where only a read can hit
/// (§4: "We define cache hit only for read requests"; the hit-ratio
/// objective of `analysis::sizing` reads `h` the same way). The write policy
/// does not enter: every write costs `hdd_ms`, written back or sent to the
/// array, so read-only is not charged more than write-back. 0 without accesses.
pub fn eq2_latency_ms(c: &TierCounts, ssd_ms: f64, hdd_ms: f64) -> f64 {
    if c.accesses == 0 {
        return 0.0;
    }
    let h = c.read_hits as f64 / c.accesses as f64;
    h * ssd_ms + (1.0 - h) * hdd_ms
}

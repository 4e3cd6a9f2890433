//! The result of a stack run: one schema for both executors (see
//! docs/stack.md). Figures that only exist in time (`response`, busy time)
//! are absent from counted results.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::exec::count::CountExecutor;
use crate::timed::metrics::{Point, Report, ResponseSummary};
use crate::timed::rebuild::RebuildReport;

/// One host cache layer.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LayerReport {
    pub name: String,
    pub policy: String,
    pub write: String,
    pub cache_blocks: u64,
    /// Block accesses presented to the layer.
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// misses / accesses (0 for no access).
    pub miss_ratio: f64,
    pub read_accesses: u64,
    pub read_hits: u64,
    /// Dirty blocks written below when evicted.
    pub dirty_evictions: u64,
    /// Dirty blocks written below at the end of the run.
    pub flushed_blocks: u64,
    /// Blocks this layer asked of the layers below: read misses (fetches)
    /// and writes passed on (write-through, write-around, bypass).
    pub fetched_blocks: u64,
    pub written_below_blocks: u64,
    /// Read requests that reached the layer, and those of them that
    /// missed (needed a read below; a request split by a layer above counts once).
    pub read_requests: u64,
    pub read_request_misses: u64,
    /// Prefetch: blocks kept from non-opportunistic prefetch (the rest of a
    /// fetch unit, read-ahead, CSP), prefetch operations issued (read-ahead
    /// and CSP), blocks kept from what the device read opportunistically.
    pub prefetched_blocks: u64,
    pub prefetch_ops: u64,
    pub opportunistic_blocks: u64,
    /// The prefetch buffer: its size, and reads of blocks found there.
    pub prefetch_buffer_blocks: u64,
    pub prefetch_buffer_hits: u64,
}

/// Disk operations of one cause.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct CauseTally {
    pub reads: u64,
    pub writes: u64,
    pub read_blocks: u64,
    pub write_blocks: u64,
    pub blocks: u64,
}

impl CauseTally {
    pub fn new(reads: u64, writes: u64, read_blocks: u64, write_blocks: u64) -> CauseTally {
        CauseTally {
            reads,
            writes,
            read_blocks,
            write_blocks,
            blocks: read_blocks + write_blocks,
        }
    }
}

/// The array.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ArrayReport {
    pub level: String,
    pub disks: u32,
    pub layout: String,
    pub chunk_bytes: u64,
    pub block_size: u64,
    /// Logical blocks (None: unbounded, a counted run without a member size).
    pub capacity_blocks: Option<u64>,
    /// Failed disks at the end of the run (a finished rebuild clears them).
    pub failed: Vec<u32>,
    /// Disks that failed and were rebuilt onto spares by the end of the run
    /// (when and how: `rebuild`), so that a summary need not say "failed
    /// none" of an array that lost a disk.
    pub rebuilt: Vec<u32>,
    /// Every disk operation by cause: `user`, `reconstruct-read`,
    /// `parity-update`, `destage`, `rebuild`.
    pub ops_by_cause: BTreeMap<String, CauseTally>,
    /// Blocks read / written on surviving disks by the stack's requests and
    /// destages (the rebuild's own I/O excluded). Plans never touch a
    /// failed disk, so these are all the blocks of those operations.
    pub surviving_reads: u64,
    pub surviving_writes: u64,
    /// (surviving_reads + surviving_writes) / block accesses presented to
    /// the stack (the VDF paper's RGR).
    pub rgr: f64,
    /// Logical blocks that could not be read or stored.
    pub unreadable_blocks: u64,
}

/// One device.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceFigures {
    pub disk: u32,
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    /// In blocks of the stack (a single device: 512-byte sectors).
    pub read_blocks: u64,
    pub write_blocks: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_service_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_queue: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queue: Option<u64>,
    /// Timed: busy time split into seek, rotation, media transfer and the
    /// rest (command overhead, bus, waits for the mechanism); they sum to
    /// `busy_ms`. A model that does not split its time reports overhead only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seek_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotation_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_ms: Option<f64>,
    /// Timed: busy time of read operations (demand and prefetch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_busy_ms: Option<f64>,
}

impl DeviceFigures {
    /// Operations per disk from a ledger (`unit`: sectors per counted unit,
    /// 1 to report the ledger's own units).
    pub fn from_ledger(ledger: &CountExecutor, ndisks: u32) -> Vec<DeviceFigures> {
        let s = ledger.summary();
        (0..ndisks)
            .map(|d| {
                let c = s.disks.get(d as usize);
                let (r, w) = c.map_or((Default::default(), Default::default()), |c| (c.read, c.write));
                DeviceFigures {
                    disk: d,
                    ops: r.ops + w.ops,
                    reads: r.ops,
                    writes: w.ops,
                    read_blocks: r.blocks,
                    write_blocks: w.blocks,
                    ..Default::default()
                }
            })
            .collect()
    }
}

/// Response times (timed executor).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Response {
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub reads: ResponseSummary,
    pub writes: ResponseSummary,
    /// The response time at each percentile 1, 2, ..., 100 of all requests
    /// (the 100th is `max_ms`): the CDF a sweep report plots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cdf_ms: Vec<f64>,
    /// `all`: every measured request; `served`: requests whose data could
    /// not be produced (`timing.unreadable`) are left out of these figures.
    pub covers: String,
}

/// What response figures cover, given the requests left out as unreadable.
pub fn response_covers(unreadable: u64) -> &'static str {
    if unreadable == 0 {
        "all"
    } else {
        "served"
    }
}

/// Everything a stack run reports.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StackResult {
    /// `count` or `timed`.
    pub executor: String,
    pub seed: u64,
    /// User requests (after `replay.reads_only`).
    pub requests: u64,
    /// Block accesses of the requests (what the top of the stack saw).
    pub block_accesses: u64,
    /// Malformed trace records skipped (`--skip-bad`).
    pub skipped: u64,
    /// How the trace's tenants shared the address space (`concat`, `key`,
    /// `ignore`) and how addresses were fitted onto the array or device
    /// (`none`, `wrap`, `scale`): layout choices that move the results.
    pub tenant_map: String,
    pub fit: String,
    /// `replay.sort`: the requests the reorder moved (summed over the traces).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<crate::trace::order::Reordered>,
    /// Distinct stack blocks of the trace, when a pass counted them (`%` sizes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_blocks: Option<u64>,
    pub layers: Vec<LayerReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayReport>,
    pub devices: Vec<DeviceFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<RebuildReport>,
    /// The SSD tier (`[tier]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<super::tier::report::TierReport>,
    /// Write buffers of the cache layers that have one (`cache.N.write_buffer`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_buffers: Vec<super::write_buffer::WriteBufferReport>,
    /// A D-GRAID array (`raid = "dgraid0" | "dgraid1"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dgraid: Option<super::dgraid_target::DgraidReport>,
    /// What only the real executor does beside the stack's decisions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real: Option<RealFigures>,
}

/// The real executor's own figures (executor `real`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RealFigures {
    /// Blocks read to complete writes of part of a block (outside the
    /// layers' policies: no layer counts them).
    pub partial_block_reads: u64,
    /// FLUSH requests served (each destages every dirty block).
    pub flushes: u64,
    /// `real replay`: its discipline, the requests the stack refused (not
    /// in the response times), and the wall time.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub replay: String,
    pub errors: u64,
    pub wall_s: f64,
    /// A stack with tenants: each tenant's export (name, place, size).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<RealExport>,
    /// `real replay` of a stack with tenants: each tenant's response times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<RealTenant>,
}

/// One tenant's export: its name, where its volume starts in the stack's
/// address space, and its size.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RealExport {
    pub tenant: u32,
    pub name: String,
    pub offset_bytes: u64,
    pub size_bytes: u64,
}

/// One tenant's response times in a `real replay` (its export's name).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RealTenant {
    pub tenant: u32,
    pub name: String,
    pub response: ResponseSummary,
    pub reads: ResponseSummary,
    pub writes: ResponseSummary,
}

/// Figures of a timed run beside the response times.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Timing {
    pub replay: String,
    pub scheduler: String,
    pub streams: usize,
    /// Requests whose data could not be produced (not in the response times).
    pub unreadable: u64,
    pub sim_time_ms: f64,
    /// From the end of the warm-up (`replay.warmup`; 0 without one) to the
    /// last completion.
    pub measured_ms: f64,
    /// Device busy time per request, summed over devices.
    pub avg_service_ms: f64,
    /// Mean device utilization.
    pub utilization: f64,
    pub mean_outstanding: f64,
    pub max_outstanding: u64,
    pub out_of_order: u64,
    pub events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<Vec<Point>>,
}

impl StackResult {
    /// Add what a timed run measured.
    pub fn add_timed(&mut self, r: &Report) {
        self.response = Some(Response {
            avg_ms: r.avg_response_ms,
            p50_ms: r.p50_ms,
            p95_ms: r.p95_ms,
            p99_ms: r.p99_ms,
            max_ms: r.max_response_ms,
            reads: r.reads.clone(),
            writes: r.writes.clone(),
            cdf_ms: r.cdf_ms.clone(),
            covers: response_covers(r.unreadable).to_string(),
        });
        self.timing = Some(Timing {
            replay: r.replay.clone(),
            scheduler: r.scheduler.clone(),
            streams: r.streams,
            unreadable: r.unreadable,
            sim_time_ms: r.sim_time_ms,
            measured_ms: r.measured_ms,
            avg_service_ms: r.avg_service_ms,
            utilization: r.utilization,
            mean_outstanding: r.mean_outstanding,
            max_outstanding: r.max_outstanding,
            out_of_order: r.out_of_order,
            events: r.events,
            timeseries: r.timeseries.clone(),
        });
        for (d, t) in self.devices.iter_mut().zip(&r.devices) {
            d.busy_ms = Some(t.busy_ms);
            d.utilization = Some(t.utilization);
            d.avg_service_ms = Some(t.avg_service_ms);
            d.mean_queue = Some(t.mean_queue);
            d.max_queue = Some(t.max_queue);
            d.seek_ms = Some(t.seek_ms);
            d.rotation_ms = Some(t.rotation_ms);
            d.transfer_ms = Some(t.transfer_ms);
            d.overhead_ms = Some(t.overhead_ms);
            d.read_busy_ms = Some(t.read_busy_ms);
        }
        self.rebuild = r.rebuild.clone();
    }

    /// Fill the figures derived from others (RGR, the tier's timed performance-per-cost).
    pub fn finish(&mut self) {
        if let (Some(t), Some(r)) = (&mut self.tier, &self.response) {
            t.timed_performance_per_cost = (r.avg_ms > 0.0 && t.cost > 0.0).then(|| 1.0 / r.avg_ms / t.cost);
        }
        let accesses = self.layers.first().map_or(self.block_accesses, |l| l.accesses);
        if let Some(a) = &mut self.array {
            a.rgr = if accesses > 0 {
                (a.surviving_reads + a.surviving_writes) as f64 / accesses as f64
            } else {
                0.0
            };
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a stack result always serializes")
    }
}

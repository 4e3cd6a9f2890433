//! `blocklab rgr`: RGR (Requests Generation Ratio, VDF paper §3.1) of cache
//! policies over a RAID array with failed disks — a front end of the stack.
//!
//! "This is the ratio of the number of requested blocks to the surviving disks
//! and the number of the requested blocks to buffer cache ... If a block is
//! serviced by the cache, the corresponding miss penalty MP_i = 0."
//!
//! Every (policy, size) cell is a stack of one write-back cache layer over the
//! array, run by the counted executor; all cells eat one pass over the trace.
//! As the cache simulators of the paper, the layer goes to the array block by
//! block (`merge_misses = false`): each read miss runs the array's plan of a
//! one-block read, each destaged dirty block (at eviction and at the end) a
//! one-block write (read-modify-write or reconstruct-write as MD chooses);
//! the blocks those plans touch on surviving disks are the cost. Hits cost
//! nothing. Without failures and with reads only, every miss costs exactly one
//! read, so RGR equals the miss ratio.
//!
//! Array blocks of a multi-tenant trace follow `--tenant-map`: `key`
//! (default: tenant << 40 | block, each tenant its own volume) or `ignore`
//! (every tenant addresses the same volume). Failed disks fail at the start
//! or at `--fail-at` (seconds of the trace's clock, or a request index after
//! the reads-only filter); fault-aware policies see the switch at their next
//! eviction.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::array::ArrayConfig;
use crate::cache::fault::all_policies;
use crate::cache::sim::{open_blocks, parse_policy_list};
use crate::cache::sizes;
use crate::error::{Error, Result};
use crate::stack::address::AddressMap;
use crate::stack::spec::{
    ArraySpec, CacheSpec, DeviceSpec, NumOrStr, Origin, ReplaySpec, StackSpec, TenantMap, WritePolicy,
};
use crate::stack::{run::run_count, TraceInput};
use crate::trace::blocks::BlockOptions;
use crate::trace::TraceOptions;

/// Everything `blocklab rgr` takes.
#[derive(Debug, Clone)]
pub struct RgrTraceConfig {
    pub trace: TraceOptions,
    pub block_size: u64,
    pub reads_only: bool,
    pub raid: String,
    pub disks: u32,
    pub chunk: String,
    pub layout: Option<String>,
    /// Each member's size (`4GiB`, ...); RAID-10 far layouts need it.
    pub disk_size: Option<String>,
    pub failed: Vec<u32>,
    pub fail_at: Option<String>,
    pub policies: String,
    pub sizes: String,
    pub tenant_map: String,
    pub miss_trace: Option<PathBuf>,
}

/// Result of one (policy, size) cell.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RgrCell {
    pub policy: String,
    pub cache_blocks: u64,
    pub accesses: u64,
    pub misses: u64,
    pub surviving_reads: u64,
    pub surviving_writes: u64,
    pub rgr: f64,
    pub miss_ratio: f64,
}

#[derive(Debug, Serialize)]
pub struct RgrReport {
    pub cells: Vec<RgrCell>,
    pub unique_blocks: Option<u64>,
    pub skipped: u64,
}

/// The miss-trace file of a cell: `OUT` itself for a single cell, otherwise
/// `stem.policy.size.ext` next to it.
pub fn miss_trace_path(out: &Path, policy: &str, size: u64, single: bool) -> PathBuf {
    if single {
        return out.to_path_buf();
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "misses".into());
    let ext = out
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.{policy}.{size}{ext}"))
}

/// The stack of one cell.
fn cell_spec(cfg: &RgrTraceConfig, map: TenantMap, policy: &str, blocks: u64, miss_trace: Option<String>) -> StackSpec {
    StackSpec {
        seed: 0,
        block_size: None,
        tenant_map: map,
        replay: ReplaySpec {
            reads_only: cfg.reads_only,
            ..Default::default()
        },
        cache: vec![CacheSpec {
            name: None,
            policy: policy.to_string(),
            size: NumOrStr::Int(blocks),
            write: WritePolicy::Back,
            reads_only: false,
            hit_ms: 0.0,
            merge_misses: false,
            miss_trace,
            ..CacheSpec::new(policy, NumOrStr::Int(blocks))
        }],
        array: Some(ArraySpec {
            raid: NumOrStr::Str(cfg.raid.clone()),
            disks: cfg.disks,
            chunk: NumOrStr::Str(cfg.chunk.clone()),
            layout: cfg.layout.clone(),
            failed: cfg.failed.clone(),
            fail_at: cfg.fail_at.clone().map(NumOrStr::Str),
            // More failures than the level tolerates: lost blocks cost nothing to read.
            allow_loss: true,
            disk_size: cfg.disk_size.clone().map(NumOrStr::Str),
            block_size: Some(cfg.block_size),
            wrap: false,
            fit: None,
            xor_ms: 0.0,
            rebuild: None,
            dgraid: None,
        }),
        tier: None,
        device: DeviceSpec {
            // No time is simulated: the device only has to exist.
            model: "const:0".into(),
            scheduler: "fcfs".into(),
            queue_depth: 0,
            wrap: false,
            ..DeviceSpec::new("const:0")
        },
        origin: Origin {
            file: "rgr".into(),
            dir: PathBuf::new(),
        },
    }
}

/// Run every (policy, size) cell over a trace file.
pub fn rgr_trace(path: &Path, cfg: &RgrTraceConfig) -> Result<RgrReport> {
    let map = match cfg.tenant_map.as_str() {
        "key" | "offset" => TenantMap::Key,
        "ignore" => TenantMap::Ignore,
        other => return Err(Error::unknown("tenant mapping", other, &["key", "ignore"])),
    };
    // Names and sizes are checked before any pass over the trace.
    let policies = parse_policy_list(&cfg.policies, &all_policies())?;
    sizes::parse_specs(&cfg.sizes)?;
    for &d in &cfg.failed {
        if d >= cfg.disks {
            return Err(Error::config(format!(
                "failed disk {d} does not exist: the array has disks 0..{}",
                cfg.disks.saturating_sub(1)
            )));
        }
    }
    if let Some(f) = &cfg.fail_at {
        crate::stack::failure::FailAt::parse(f)?;
    }
    // The array as the user wrote it (a far RAID-10 needs the member size).
    let disk_bytes = match &cfg.disk_size {
        Some(s) => crate::array::parse_bytes(s)?,
        None => 0,
    };
    ArrayConfig::from_names_sized(
        &cfg.raid,
        cfg.disks,
        crate::array::parse_bytes(&cfg.chunk)?,
        cfg.layout.as_deref(),
        cfg.block_size,
        disk_bytes,
    )?;
    // Sizes: blocks, bytes, or a share of the unique blocks (one extra pass).
    let unique = if sizes::needs_unique(&cfg.sizes) {
        let blocks = BlockOptions {
            block_size: cfg.block_size,
            reads_only: cfg.reads_only,
        };
        let mut seen = FxHashSet::default();
        for a in open_blocks(path, &cfg.trace, blocks)? {
            let a = a?;
            seen.insert(AddressMap::identity(map, a.tenant, a.block)?);
        }
        Some(seen.len() as u64)
    } else {
        None
    };
    let size_blocks = sizes::parse_sizes(&cfg.sizes, cfg.block_size, unique)?;
    let single = policies.len() * size_blocks.len() == 1;
    let mut specs = Vec::new();
    for p in &policies {
        for &s in &size_blocks {
            let miss = cfg
                .miss_trace
                .as_ref()
                .map(|out| miss_trace_path(out, p, s, single).to_string_lossy().into_owned());
            specs.push(cell_spec(cfg, map, p, s, miss).validated().map_err(strip_key)?);
        }
    }
    let trace = TraceInput {
        path: path.to_string_lossy().into_owned(),
        format: cfg.trace.format.clone(),
        skip_bad: cfg.trace.skip_bad,
    };
    let results = run_count(&specs, &[trace]).map_err(strip_key)?;
    let skipped = results.first().map_or(0, |r| r.skipped);
    let cells = results
        .into_iter()
        .map(|r| {
            let l = &r.layers[0];
            let a = r.array.as_ref().expect("an rgr stack has an array");
            RgrCell {
                policy: l.policy.clone(),
                cache_blocks: l.cache_blocks,
                accesses: l.accesses,
                misses: l.misses,
                surviving_reads: a.surviving_reads,
                surviving_writes: a.surviving_writes,
                rgr: a.rgr,
                miss_ratio: l.miss_ratio,
            }
        })
        .collect();
    Ok(RgrReport {
        cells,
        unique_blocks: unique,
        skipped,
    })
}

/// `rgr` has no stack file: report the message of a key error alone.
fn strip_key(e: Error) -> Error {
    match e {
        Error::Key { message, .. } => Error::config(message),
        other => other,
    }
}

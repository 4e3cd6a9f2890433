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
    /// More failed disks than the level tolerates (`--allow-loss`): lost
    /// blocks cost nothing and are counted in `unreadable_blocks`. Without
    /// it such an array is refused, as `run` refuses it.
    pub allow_loss: bool,
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
    /// Blocks the array could not read or store (past redundancy, with
    /// `allow_loss`): they cost nothing in `rgr`.
    pub unreadable_blocks: u64,
}

#[derive(Debug, Serialize)]
pub struct RgrReport {
    pub cells: Vec<RgrCell>,
    /// The footprint a `%` size was taken of: distinct array blocks of the
    /// access stream (after `reads_only`, under `tenant_map`).
    pub unique_blocks: Option<u64>,
    /// `reads only` or `reads and writes`: which accesses that footprint counts.
    pub footprint_of: String,
    pub skipped: u64,
    /// The layout the cells ran with: the tenant map (`key` or `ignore`)
    /// and the address fit (always `none`: a counted array places any block).
    pub tenant_map: String,
    pub fit: String,
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
            allow_loss: cfg.allow_loss,
            disk_size: cfg.disk_size.clone().map(NumOrStr::Str),
            block_size: Some(cfg.block_size),
            wrap: false,
            fit: None,
            xor_ms: 0.0,
            stripe_cache: 0,
            rebuild: None,
            dgraid: None,
        }),
        tier: None,
        tenant: Vec::new(),
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
    // The array itself (failures past redundancy, ...), before any pass.
    cell_spec(cfg, map, &policies[0], 1, None)
        .validated()
        .map_err(strip_key)?;
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
                unreadable_blocks: a.unreadable_blocks,
            }
        })
        .collect();
    Ok(RgrReport {
        cells,
        unique_blocks: unique,
        footprint_of: sizes::footprint_of(cfg.reads_only).to_string(),
        skipped,
        tenant_map: map.name().to_string(),
        fit: crate::stack::spec::Fit::None.name().to_string(),
    })
}

/// `rgr` has no stack file: report a key error by the flag it mirrors
/// (`array.failed` is `--failed`, whose refusal `--allow-loss` lifts).
fn strip_key(e: Error) -> Error {
    match e {
        Error::Key { key, message, .. } if key == "array.failed" => Error::config(format!(
            "--failed: {}",
            message.replace("set array.allow_loss = true", "give --allow-loss")
        )),
        Error::Key { message, .. } => Error::config(message),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(raid: &str, failed: &[u32], allow_loss: bool, sizes: &str, reads_only: bool) -> RgrTraceConfig {
        RgrTraceConfig {
            trace: TraceOptions {
                format: "csv".into(),
                ..Default::default()
            },
            block_size: 4096,
            reads_only,
            raid: raid.into(),
            disks: 6,
            chunk: "64KiB".into(),
            layout: None,
            disk_size: None,
            failed: failed.to_vec(),
            fail_at: None,
            allow_loss,
            policies: "lru".into(),
            sizes: sizes.into(),
            tenant_map: "key".into(),
            miss_trace: None,
        }
    }

    /// Reads of blocks 0 (disk 0) and 16 (disk 1), a write of block 32 (disk 2).
    fn trace(dir: &Path) -> PathBuf {
        let t = dir.join("t.csv");
        std::fs::write(
            &t,
            "timestamp,op,offset,size\n0.0,R,0,4096\n0.1,R,65536,4096\n0.2,W,131072,4096\n",
        )
        .unwrap();
        t
    }

    #[test]
    fn past_redundancy_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let t = trace(dir.path());
        let e = rgr_trace(&t, &cfg("6", &[0, 1, 2], false, "1%", false))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--failed") && e.contains("survives 2") && e.contains("--allow-loss"),
            "{e}"
        );
        let r = rgr_trace(&t, &cfg("6", &[0, 1, 2], true, "1", false)).unwrap();
        // Blocks 0 and 16 sit on failed disks 0 and 1, and a third failure
        // leaves RAID-6 nothing to rebuild them from.
        assert!(r.cells[0].unreadable_blocks >= 2, "{:?}", r.cells[0]);
        let r = rgr_trace(&t, &cfg("6", &[0, 1], false, "1", false)).unwrap();
        assert_eq!(r.cells[0].unreadable_blocks, 0);
    }

    #[test]
    fn report_states_footprint_and_layout() {
        let dir = tempfile::tempdir().unwrap();
        let t = trace(dir.path());
        let r = rgr_trace(&t, &cfg("5", &[0], false, "50%", false)).unwrap();
        assert_eq!(
            (r.unique_blocks, r.footprint_of.as_str()),
            (Some(3), "reads and writes")
        );
        assert_eq!((r.tenant_map.as_str(), r.fit.as_str()), ("key", "none"));
        let r = rgr_trace(&t, &cfg("5", &[0], false, "50%", true)).unwrap();
        assert_eq!((r.unique_blocks, r.footprint_of.as_str()), (Some(2), "reads only"));
        assert_eq!(r.cells[0].cache_blocks, 1);
    }
}

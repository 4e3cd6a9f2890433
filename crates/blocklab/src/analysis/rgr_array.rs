//! RGR over the real array: the [`Array`] as a [`FaultMap`] / [`RgrArray`],
//! and the whole `blocklab rgr` run from a trace file.

use super::rgr::{run, FailAt, MissOps, RgrArray, RgrCell, RgrRun, TenantMap};
use crate::array::{parse_bytes, Array, ArrayConfig, DiskOpKind, Layout};
use crate::cache::fault::FaultMap;
use crate::cache::sizes;
use crate::error::{Error, Result};
use crate::trace::blocks::{BlockOptions, BlockStream};
use crate::trace::{self, TraceOptions};
use rustc_hash::FxHashSet;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// An array shared by the RGR driver (which fails disks) and the policies
/// (which read placement and penalties).
pub struct SharedArray {
    inner: RwLock<Array>,
}

impl SharedArray {
    pub fn new(array: Array) -> Self {
        SharedArray { inner: RwLock::new(array) }
    }

    fn get(&self) -> std::sync::RwLockReadGuard<'_, Array> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl FaultMap for SharedArray {
    fn ndisks(&self) -> u32 {
        self.get().ndisks()
    }
    fn disk_of(&self, block: u64) -> u32 {
        self.get().disk_of(block)
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.get().is_failed(disk)
    }
    fn any_failed(&self) -> bool {
        !self.get().failed().is_empty()
    }
    fn penalty(&self, block: u64) -> u32 {
        self.get().read_penalty(block).unwrap_or(0)
    }
}

impl RgrArray for SharedArray {
    fn fail(&self, disk: u32) -> Result<()> {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).fail(disk)
    }

    /// Runs the array's plan for a one-block read (or write) and counts the
    /// blocks its disk operations touch on disks that are alive now.
    fn miss_ops(&self, block: u64, write: bool) -> MissOps {
        let a = self.get();
        let plan = if write { a.plan_write(block, 1) } else { a.plan_read(block, 1) };
        let mut ops = MissOps::default();
        for op in plan.disk_ops() {
            if a.is_failed(op.disk) {
                continue;
            }
            match op.kind {
                DiskOpKind::Read => ops.reads += op.nblocks as u64,
                DiskOpKind::Write => ops.writes += op.nblocks as u64,
            }
        }
        ops
    }
}

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
    pub failed: Vec<u32>,
    pub fail_at: Option<String>,
    pub policies: String,
    pub sizes: String,
    pub tenant_map: String,
    pub miss_trace: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct RgrReport {
    pub cells: Vec<RgrCell>,
    pub unique_blocks: Option<u64>,
    pub skipped: u64,
}

/// Build the array of a config (failures are applied by the run).
pub fn build_array(cfg: &RgrTraceConfig) -> Result<Array> {
    let mut ac = ArrayConfig::new(ArrayConfig::parse_level(&cfg.raid)?, cfg.disks);
    ac.chunk_bytes = parse_bytes(&cfg.chunk)?;
    ac.block_size = cfg.block_size;
    if let Some(l) = &cfg.layout {
        ac.layout = Layout::parse(l)?;
    }
    let array = Array::new(ac)?;
    for &d in &cfg.failed {
        if d >= cfg.disks {
            return Err(Error::config(format!(
                "failed disk {d} does not exist: the array has disks 0..{}",
                cfg.disks - 1
            )));
        }
    }
    Ok(array)
}

fn stream(path: &Path, cfg: &RgrTraceConfig) -> Result<BlockStream> {
    let reader = trace::open(path, &cfg.trace)?;
    BlockStream::new(reader, BlockOptions { block_size: cfg.block_size, reads_only: cfg.reads_only })
}

/// Run every (policy, size) cell over a trace file.
pub fn rgr_trace(path: &Path, cfg: &RgrTraceConfig) -> Result<RgrReport> {
    let array = build_array(cfg)?;
    let tenant_map = TenantMap::parse(&cfg.tenant_map)?;
    let fail_at = match &cfg.fail_at {
        None => FailAt::Start,
        Some(s) => FailAt::parse(s)?,
    };
    let policies: Vec<String> =
        cfg.policies.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    // Sizes: blocks, bytes, or a share of the unique blocks (one extra pass).
    let specs = sizes::parse_specs(&cfg.sizes)?;
    let unique = if sizes::needs_unique(&cfg.sizes) {
        let mut seen = FxHashSet::default();
        for a in stream(path, cfg)? {
            seen.insert(tenant_map.block(&a?));
        }
        Some(seen.len() as u64)
    } else {
        None
    };
    let texts: Vec<&str> = cfg.sizes.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let mut size_blocks = Vec::new();
    for (spec, text) in specs.iter().zip(texts.iter()) {
        size_blocks.push(sizes::resolve(spec, text, cfg.block_size, unique)?);
    }
    let s = stream(path, cfg)?;
    let run_cfg = RgrRun {
        failed: cfg.failed.clone(),
        fail_at,
        policies,
        sizes: size_blocks,
        tenant_map,
        block_size: cfg.block_size,
        miss_trace: cfg.miss_trace.clone(),
    };
    let shared: Arc<dyn RgrArray> = Arc::new(SharedArray::new(array));
    // The reader's skipped count is read through a second handle after the run.
    let mut skipped_probe = SkipCounter { stream: s, skipped: 0 };
    let cells = run(with_request_index_probe(&mut skipped_probe), shared, &run_cfg)?;
    Ok(RgrReport { cells, unique_blocks: unique, skipped: skipped_probe.skipped })
}

struct SkipCounter {
    stream: BlockStream,
    skipped: u64,
}

fn with_request_index_probe(
    c: &mut SkipCounter,
) -> impl Iterator<Item = Result<(crate::trace::blocks::BlockAccess, u64)>> + '_ {
    std::iter::from_fn(move || {
        let a = c.stream.next();
        c.skipped = c.stream.skipped();
        let a = a?;
        let idx = c.stream.requests().saturating_sub(1);
        Some(a.map(|a| (a, idx)))
    })
}

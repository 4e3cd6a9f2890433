//! RGR over the real array: the [`Array`] as a [`FaultMap`] / [`RgrArray`],
//! and the whole `blocklab rgr` run from a trace file.

use super::rgr::{run, FailAt, MissOps, RgrArray, RgrCell, RgrRun, TenantMap};
use crate::array::{parse_bytes, Array, ArrayConfig, DiskOpKind};
use crate::cache::fault::{all_policies, FaultMap};
use crate::cache::sim::{open_blocks, parse_policy_list};
use crate::cache::sizes;
use crate::error::{Error, Result};
use crate::trace::blocks::{BlockOptions, BlockStream};
use crate::trace::TraceOptions;
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
        SharedArray {
            inner: RwLock::new(array),
        }
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
        let plan = if write {
            a.plan_write(block, 1)
        } else {
            a.plan_read(block, 1)
        };
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
    /// Each member's size (`4GiB`, ...); RAID-10 far layouts need it.
    pub disk_size: Option<String>,
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
        ac.set_layout(l)?;
    }
    if let Some(sz) = &cfg.disk_size {
        ac.disk_bytes = parse_bytes(sz)?;
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
    open_blocks(
        path,
        &cfg.trace,
        BlockOptions {
            block_size: cfg.block_size,
            reads_only: cfg.reads_only,
        },
    )
}

/// Run every (policy, size) cell over a trace file.
pub fn rgr_trace(path: &Path, cfg: &RgrTraceConfig) -> Result<RgrReport> {
    let array = build_array(cfg)?;
    let tenant_map = TenantMap::parse(&cfg.tenant_map)?;
    let fail_at = match &cfg.fail_at {
        None => FailAt::Start,
        Some(s) => FailAt::parse(s)?,
    };
    // Names are checked before any pass over the trace.
    let policies = parse_policy_list(&cfg.policies, &all_policies())?;
    // Sizes: blocks, bytes, or a share of the unique blocks (one extra pass).
    let unique = if sizes::needs_unique(&cfg.sizes) {
        let mut seen = FxHashSet::default();
        for a in stream(path, cfg)? {
            seen.insert(tenant_map.block(&a?));
        }
        Some(seen.len() as u64)
    } else {
        None
    };
    let size_blocks = sizes::parse_sizes(&cfg.sizes, cfg.block_size, unique)?;
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
    Ok(RgrReport {
        cells,
        unique_blocks: unique,
        skipped: skipped_probe.skipped,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rgr::from_tuples;
    use crate::array::Level;
    use crate::trace::Op;
    use proptest::prelude::*;

    fn raid(level: Level, n: u32, failed: &[u32]) -> Arc<SharedArray> {
        let a = Arc::new(SharedArray::new(Array::new(ArrayConfig::new(level, n)).unwrap()));
        for &d in failed {
            RgrArray::fail(&*a, d).unwrap();
        }
        a
    }

    fn cfg(policies: &[&str], size: u64, failed: &[u32]) -> RgrRun {
        RgrRun {
            failed: failed.to_vec(),
            fail_at: FailAt::Start,
            policies: policies.iter().map(|s| s.to_string()).collect(),
            sizes: vec![size],
            tenant_map: TenantMap::Key,
            block_size: 4096,
            miss_trace: None,
        }
    }

    /// Figure 1 with MD's RAID-5 (5 disks, left-symmetric, 64 KiB chunks =
    /// 16 blocks): block 0 is on disk 0; with disk 0 failed a read miss
    /// reads the 4 other units of its row (a); block 16 (disk 1) costs 1 (b).
    #[test]
    fn figure_1_with_md_raid5() {
        let a = raid(Level::Raid5, 5, &[0]);
        assert_eq!(a.disk_of(0), 0);
        assert_eq!(a.disk_of(16), 1);
        assert_eq!(a.miss_ops(0, false), MissOps { reads: 4, writes: 0 });
        assert_eq!(a.miss_ops(16, false), MissOps { reads: 1, writes: 0 });
        assert_eq!(a.penalty(0), 4);
        // the paper's write discussion: a short write whose parity survives is a
        // read-modify-write (2 reads + 2 writes, MP 4)
        let w = a.miss_ops(16, true);
        assert_eq!(w.reads + w.writes, 4, "{w:?}");
    }

    #[test]
    fn raid6_two_failures_penalty() {
        let a = raid(Level::Raid6, 6, &[0, 1]);
        // a block on a failed disk: every surviving unit of its row, n - 2 = 4
        let lost = (0..64 * 16).find(|&b| a.disk_of(b) == 0).unwrap();
        assert_eq!(a.penalty(lost), 4);
        assert_eq!(a.miss_ops(lost, false).reads, 4);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The policies' penalty is what the array's read plan really costs.
        #[test]
        fn penalty_matches_plan(block in 0u64..100_000, n in 3u32..9, f in 0u32..9) {
            let a = raid(Level::Raid5, n, &[f % n]);
            prop_assert_eq!(a.penalty(block) as u64, a.miss_ops(block, false).reads);
        }

        /// No failed disk, reads only: RGR == miss ratio over MD's RAID-5.
        #[test]
        fn no_failure_rgr_is_miss_ratio(seq in prop::collection::vec(0u64..400, 1..300), cap in 1u64..64, n in 3u32..9) {
            let v: Vec<_> = seq.iter().enumerate().map(|(i, &b)| (i as f64, 0, b * 7, Op::Read)).collect();
            let arr: Arc<dyn RgrArray> = raid(Level::Raid5, n, &[]);
            let r = run(from_tuples(v), arr, &cfg(&["lru", "lfu", "vdf-lru", "vdf-lfu", "gds", "vdf-clock"], cap, &[])).unwrap();
            for c in &r {
                prop_assert_eq!(c.surviving_reads, c.misses);
                prop_assert_eq!(c.surviving_writes, 0);
                prop_assert_eq!(c.rgr, c.miss_ratio);
            }
        }

        /// A cache that holds every block never evicts: every policy pays the
        /// same (cold misses only), VDF or not.
        #[test]
        fn full_cache_all_policies_equal(seq in prop::collection::vec(0u64..200, 1..200), n in 3u32..9) {
            let v: Vec<_> = seq.iter().enumerate().map(|(i, &b)| (i as f64, 0, b * 5, Op::Read)).collect();
            let arr: Arc<dyn RgrArray> = raid(Level::Raid5, n, &[0]);
            let r = run(from_tuples(v), arr, &cfg(&["lru", "lfu", "vdf-lru", "vdf-lfu", "gds"], 200, &[0])).unwrap();
            for c in &r[1..] {
                prop_assert_eq!(c.surviving_reads, r[0].surviving_reads);
            }
        }
    }
}

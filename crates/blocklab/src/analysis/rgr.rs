//! RGR (Requests Generation Ratio, VDF paper §3.1): block operations on
//! surviving disks caused by the cache's misses, divided by the block
//! accesses presented to the cache.
//!
//! "This is the ratio of the number of requested blocks to the surviving disks
//! and the number of the requested blocks to buffer cache ... If a block is
//! serviced by the cache, the corresponding miss penalty MP_i = 0."
//!
//! How a run works:
//! - The trace is streamed once as block accesses ([`BlockStream`]); every
//!   (policy, size) cell sees the same accesses and shares one array, whose
//!   failure state therefore changes at the same access for every cell.
//! - The array's logical block of an access is chosen by [`TenantMap`]:
//!   `key` (default) uses the cache key `tenant << 40 | block`, so the volumes
//!   of a multi-tenant trace are distinct data laid out one after another
//!   (each tenant starts 2^40 blocks after the previous one); `ignore` uses the
//!   block number alone, as if every tenant addressed the same volume (what a
//!   simulator keyed by the logical offset, like the paper's VDF-Sim, sees on a
//!   single-volume trace).
//! - Failed disks fail at the start, or when the stream reaches `--fail-at`
//!   (a time in seconds, or a request index counted after the reads-only
//!   filter). Fault-aware policies see the switch at their next eviction.
//! - Every miss runs the array's plan (a one-block read, or for a write miss a
//!   one-block write: read-modify-write or reconstruct-write as MD chooses)
//!   through a counted executor; the blocks its disk operations touch on
//!   surviving disks are the miss's cost. Hits cost nothing (MP_i = 0; dirty
//!   data destage is not modelled, as in the paper's discussion of writes).
//!   Without failures and with reads only, every miss costs exactly one read,
//!   so RGR equals the miss ratio.

use crate::cache::fault::{build_fault_aware, FaultMap};
use crate::cache::{Access, Policy, NEVER};
use crate::error::{Error, Result};
use crate::trace::blocks::{block_key, BlockAccess, BlockOptions, BlockStream};
use crate::trace::Op;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The array as RGR needs it: placement and penalties (for the policies),
/// failing a disk during the run, and the surviving-disk cost of a miss.
pub trait RgrArray: FaultMap {
    /// Fail `disk` now (idempotent).
    fn fail(&self, disk: u32) -> Result<()>;
    /// Block reads and writes on surviving disks a miss of `block` causes.
    fn miss_ops(&self, block: u64, write: bool) -> MissOps;
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MissOps {
    pub reads: u64,
    pub writes: u64,
}

/// When the failed disks fail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailAt {
    Start,
    /// At the first access whose time is >= this many seconds.
    Time(f64),
    /// Before the first block of this request (0-based, after filtering).
    Request(u64),
}

impl FailAt {
    /// `30`, `30s`, `2.5s` (seconds) or `1000req` (request index).
    pub fn parse(s: &str) -> Result<FailAt> {
        let t = s.trim();
        let bad = || {
            Error::config(format!(
                "bad --fail-at `{s}`: expected seconds (`30`, `2.5s`) or a request index (`1000req`)"
            ))
        };
        if let Some(n) = t.strip_suffix("req") {
            return n.trim().parse::<u64>().map(FailAt::Request).map_err(|_| bad());
        }
        let n = t.strip_suffix('s').unwrap_or(t);
        match n.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(FailAt::Time(x)),
            _ => Err(bad()),
        }
    }
}

/// How a (tenant, block) access becomes an array logical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantMap {
    /// tenant << 40 | block: tenants are separate volumes.
    Key,
    /// The block number alone: tenants share one volume.
    Ignore,
}

impl TenantMap {
    pub fn parse(s: &str) -> Result<TenantMap> {
        match s {
            "key" | "offset" => Ok(TenantMap::Key),
            "ignore" => Ok(TenantMap::Ignore),
            other => Err(Error::unknown("tenant mapping", other, &["key", "ignore"])),
        }
    }

    #[inline]
    pub fn block(self, a: &BlockAccess) -> u64 {
        match self {
            TenantMap::Key => a.key,
            TenantMap::Ignore => a.block,
        }
    }
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

/// What to run.
#[derive(Debug, Clone)]
pub struct RgrRun {
    pub failed: Vec<u32>,
    pub fail_at: FailAt,
    pub policies: Vec<String>,
    pub sizes: Vec<u64>,
    pub tenant_map: TenantMap,
    pub block_size: u64,
    /// Write the misses of each cell as a native CSV trace.
    pub miss_trace: Option<PathBuf>,
}

/// Miss-trace writer: native CSV, contiguous blocks of one request merged.
struct MissWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: String,
    pending: Option<(f64, Op, u64, u64, u32)>,
}

impl MissWriter {
    fn create(path: &Path) -> Result<Self> {
        let f = std::fs::File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let mut w = MissWriter {
            out: std::io::BufWriter::new(f),
            path: path.display().to_string(),
            pending: None,
        };
        writeln!(w.out, "{}", crate::trace::native_csv::HEADER).map_err(|e| Error::io(&w.path, e))?;
        Ok(w)
    }

    fn push(&mut self, a: &BlockAccess, bs: u64) -> Result<()> {
        let off = a.block * bs;
        if let Some(p) = &mut self.pending {
            if p.0 == a.time && p.1 == a.op && p.4 == a.tenant && p.2 + p.3 == off {
                p.3 += bs;
                return Ok(());
            }
        }
        self.flush_pending()?;
        self.pending = Some((a.time, a.op, off, bs, a.tenant));
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        if let Some((t, op, off, len, tenant)) = self.pending.take() {
            writeln!(self.out, "{t},{},{off},{len},{tenant}", op.letter()).map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        self.flush_pending()?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }
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

struct CellState {
    policy: Box<dyn Policy>,
    cell: RgrCell,
    misses_out: Option<MissWriter>,
}

/// Run every cell over `stream` with `array`.
pub fn run<I>(stream: I, array: Arc<dyn RgrArray>, run: &RgrRun) -> Result<Vec<RgrCell>>
where
    I: Iterator<Item = Result<(BlockAccess, u64)>>,
{
    let n = array.ndisks();
    for &d in &run.failed {
        if d >= n {
            return Err(Error::config(format!(
                "failed disk {d} does not exist: the array has disks 0..{}",
                n - 1
            )));
        }
    }
    if run.policies.is_empty() || run.sizes.is_empty() {
        return Err(Error::config("need at least one policy and one cache size"));
    }
    let single = run.policies.len() * run.sizes.len() == 1;
    let faults: Arc<dyn FaultMap> = array.clone();
    let mut cells = Vec::new();
    for p in &run.policies {
        for &s in &run.sizes {
            let cap = usize::try_from(s).map_err(|_| Error::config("cache size too large"))?;
            let misses_out = match &run.miss_trace {
                Some(out) => Some(MissWriter::create(&miss_trace_path(out, p, s, single))?),
                None => None,
            };
            cells.push(CellState {
                policy: build_fault_aware(p, cap, faults.clone())?,
                cell: RgrCell {
                    policy: p.clone(),
                    cache_blocks: s,
                    accesses: 0,
                    misses: 0,
                    surviving_reads: 0,
                    surviving_writes: 0,
                    rgr: 0.0,
                    miss_ratio: 0.0,
                },
                misses_out,
            });
        }
    }
    let mut failed = false;
    let fail_now = |array: &Arc<dyn RgrArray>| -> Result<()> {
        for &d in &run.failed {
            array.fail(d)?;
        }
        Ok(())
    };
    if run.fail_at == FailAt::Start {
        fail_now(&array)?;
        failed = true;
    }
    for item in stream {
        let (a, request_index) = item?;
        if !failed {
            let due = match run.fail_at {
                FailAt::Start => true,
                FailAt::Time(t) => a.time >= t,
                FailAt::Request(r) => request_index >= r,
            };
            if due {
                fail_now(&array)?;
                failed = true;
            }
        }
        let block = run.tenant_map.block(&a);
        let write = a.op == Op::Write;
        let acc = Access {
            block,
            next_use: NEVER,
            write,
        };
        // The cost of a miss depends only on the block and the array state: compute once.
        let mut cost: Option<MissOps> = None;
        for c in cells.iter_mut() {
            c.cell.accesses += 1;
            if !c.policy.access(&acc) {
                c.cell.misses += 1;
                let ops = *cost.get_or_insert_with(|| array.miss_ops(block, write));
                c.cell.surviving_reads += ops.reads;
                c.cell.surviving_writes += ops.writes;
                if let Some(w) = &mut c.misses_out {
                    w.push(&a, run.block_size)?;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(cells.len());
    for c in cells {
        let mut cell = c.cell;
        if cell.accesses > 0 {
            cell.rgr = (cell.surviving_reads + cell.surviving_writes) as f64 / cell.accesses as f64;
            cell.miss_ratio = cell.misses as f64 / cell.accesses as f64;
        }
        if let Some(w) = c.misses_out {
            w.finish()?;
        }
        out.push(cell);
    }
    Ok(out)
}

/// Block accesses of a stream with the (0-based) index of their request.
pub fn with_request_index(mut s: BlockStream) -> impl Iterator<Item = Result<(BlockAccess, u64)>> {
    std::iter::from_fn(move || {
        let a = s.next()?;
        let idx = s.requests().saturating_sub(1);
        Some(a.map(|a| (a, idx)))
    })
}

/// Accesses from plain (time, tenant, block, op) tuples (tests, Python).
pub fn from_tuples(v: Vec<(f64, u32, u64, Op)>) -> impl Iterator<Item = Result<(BlockAccess, u64)>> {
    v.into_iter().enumerate().map(|(i, (time, tenant, block, op))| {
        Ok((
            BlockAccess {
                time,
                key: block_key(tenant, block)?,
                block,
                tenant,
                op,
            },
            i as u64,
        ))
    })
}

/// Options of the block stream used by RGR.
pub fn block_options(block_size: u64, reads_only: bool) -> BlockOptions {
    BlockOptions { block_size, reads_only }
}

/// Test array over [`ModMap`](crate::cache::fault::ModMap): reads cost the
/// penalty; a write miss costs a read-modify-write (2 reads, 2 writes) on a
/// healthy disk and a reconstruct-write (n - 2 reads, 1 write) on a failed one.
impl RgrArray for crate::cache::fault::ModMap {
    fn fail(&self, disk: u32) -> Result<()> {
        crate::cache::fault::ModMap::fail(self, disk);
        Ok(())
    }
    fn miss_ops(&self, block: u64, write: bool) -> MissOps {
        let p = self.penalty(block) as u64;
        if !write {
            return MissOps { reads: p, writes: 0 };
        }
        if p == 1 {
            MissOps { reads: 2, writes: 2 }
        } else if p == 0 {
            MissOps::default()
        } else {
            MissOps {
                reads: self.ndisks() as u64 - 2,
                writes: 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::fault::ModMap;
    use proptest::prelude::*;

    fn cfg(policies: &[&str], sizes: &[u64], failed: &[u32], fail_at: FailAt) -> RgrRun {
        RgrRun {
            failed: failed.to_vec(),
            fail_at,
            policies: policies.iter().map(|s| s.to_string()).collect(),
            sizes: sizes.to_vec(),
            tenant_map: TenantMap::Key,
            block_size: 4096,
            miss_trace: None,
        }
    }

    fn reads(blocks: &[u64]) -> Vec<(f64, u32, u64, Op)> {
        blocks
            .iter()
            .enumerate()
            .map(|(i, &b)| (i as f64, 0, b, Op::Read))
            .collect()
    }

    /// Figure 1 of the paper: a 5-disk RAID-5 with one faulty disk; a read
    /// miss on the faulty disk costs 4 surviving-disk reads (RGR 4), a miss on
    /// a surviving disk costs 1 (RGR 1).
    #[test]
    fn figure_1_misses() {
        for (block, want) in [(0u64, 4u64), (1, 1)] {
            let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(5));
            let r = run(
                from_tuples(reads(&[block])),
                arr,
                &cfg(&["lru"], &[4], &[0], FailAt::Start),
            )
            .unwrap();
            assert_eq!(r[0].surviving_reads, want);
            assert_eq!(r[0].rgr, want as f64);
        }
    }

    #[test]
    fn vdf_lowers_rgr_hand_worked() {
        // 3 disks, disk 0 failed (MP 2), cache 2. Blocks 0 (disk 0), 1, 4 (disk 1).
        // Sequence 0 1 4 0 1 4: LRU misses all 6: cost 2+1+1+2+1+1 = 8.
        // VDF-LRU: 0,1 miss; 4 evicts 1 (W 1*2=2 vs block 0: W=2, tie -> older TS = block 0!)
        let seq = [0, 1, 4, 0, 1, 4];
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(3));
        let r = run(
            from_tuples(reads(&seq)),
            arr,
            &cfg(&["lru", "vdf-lru"], &[2], &[0], FailAt::Start),
        )
        .unwrap();
        assert_eq!(r[0].misses, 6);
        assert_eq!(r[0].surviving_reads, 8);
        // VDF-LRU, GTS 0..: 0 (TS0) 1 (TS1); 4 at GTS2: LS0 bottom 0 age 2 W=2,
        // LS1 bottom 1 age 1 W=2 -> tie, older TS: evict 0 (cost 2 later).
        // 0 at GTS3: LS1 bottom 1 age 2 W=4 (only 1 and 4 in LS1: bottom is 1) -> evict 1.
        // 1 at GTS4: LS0 bottom 0 (TS3) age 1 W=1; LS1 bottom 4 (TS2) age 2 W=4 -> evict 4.
        // 4 at GTS5: LS0 0 (TS3) age 2 W=2; LS1 1 (TS4) age 1 W=2 -> tie, older: evict 0.
        assert_eq!(r[1].misses, 6);
        assert_eq!(r[1].surviving_reads, 8);
        // A loop over block 0 (failed disk, MP 4 with 5 disks) and three surviving
        // blocks, cache of 2: LRU misses everything (8 misses on block 0 cost 4 each,
        // 22 others cost 1: 54). VDF-LRU never evicts block 0 once cached: its
        // weight GTS - TS <= 3 while a surviving block's is (GTS - TS) x 4 >= 4.
        let seq: Vec<u64> = (0..30).map(|i| [0, 1, 2, 3][i % 4]).collect();
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(5));
        let r = run(
            from_tuples(reads(&seq)),
            arr,
            &cfg(&["lru", "vdf-lru", "vdf-lfu"], &[2], &[0], FailAt::Start),
        )
        .unwrap();
        assert_eq!((r[0].misses, r[0].surviving_reads), (30, 54));
        assert_eq!((r[1].misses, r[1].surviving_reads), (23, 4 + 22));
        assert!(r[2].surviving_reads < r[0].surviving_reads, "{r:?}");
    }

    #[test]
    fn fail_at_switches_mid_run() {
        let seq: Vec<u64> = (0..20).collect();
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(4));
        let r = run(
            from_tuples(reads(&seq)),
            arr,
            &cfg(&["lru"], &[4], &[1], FailAt::Request(10)),
        )
        .unwrap();
        // misses 0..9 cost 1 each; 10..19: blocks 13, 17 on disk 1 cost 3.
        assert_eq!(r[0].surviving_reads, 10 + 8 + 2 * 3);
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(4));
        let r = run(
            from_tuples(reads(&seq)),
            arr,
            &cfg(&["lru"], &[4], &[1], FailAt::Time(9.5)),
        )
        .unwrap();
        assert_eq!(r[0].surviving_reads, 24);
    }

    #[test]
    fn writes_cost_rmw() {
        let v = vec![(0.0, 0, 1, Op::Write), (1.0, 0, 0, Op::Write), (2.0, 0, 1, Op::Write)];
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(4));
        let r = run(from_tuples(v), arr, &cfg(&["lru"], &[4], &[0], FailAt::Start)).unwrap();
        assert_eq!((r[0].surviving_reads, r[0].surviving_writes), (2 + 2, 2 + 1));
    }

    #[test]
    fn bad_failed_disk() {
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(4));
        assert!(run(from_tuples(reads(&[1])), arr, &cfg(&["lru"], &[4], &[4], FailAt::Start)).is_err());
    }

    #[test]
    fn fail_at_parse() {
        assert_eq!(FailAt::parse("30").unwrap(), FailAt::Time(30.0));
        assert_eq!(FailAt::parse("2.5s").unwrap(), FailAt::Time(2.5));
        assert_eq!(FailAt::parse("100req").unwrap(), FailAt::Request(100));
        assert!(FailAt::parse("x").is_err());
        assert!(FailAt::parse("-1").is_err());
    }

    #[test]
    fn miss_trace_written() {
        let dir = std::env::temp_dir().join(format!("blocklab-rgr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("m.csv");
        let v = vec![
            (0.5, 2, 10, Op::Read),
            (0.5, 2, 11, Op::Read),
            (1.0, 2, 10, Op::Read),
            (2.0, 2, 3, Op::Read),
        ];
        let mut c = cfg(&["lru"], &[4], &[], FailAt::Start);
        c.miss_trace = Some(out.clone());
        let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(4));
        run(from_tuples(v), arr, &c).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            text,
            "timestamp,op,offset,size,tenant\n0.5,R,40960,8192,2\n2,R,12288,4096,2\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// No failed disk, reads only: RGR == miss ratio, for every policy.
        #[test]
        fn no_failure_rgr_is_miss_ratio(seq in prop::collection::vec(0u64..50, 1..300), cap in 1u64..16) {
            let arr: Arc<dyn RgrArray> = Arc::new(ModMap::new(5));
            let r = run(from_tuples(reads(&seq)), arr,
                        &cfg(&["lru", "vdf-lru", "vdf-lfu", "gds"], &[cap], &[], FailAt::Start)).unwrap();
            for c in &r {
                prop_assert_eq!(c.surviving_reads, c.misses);
                prop_assert_eq!(c.rgr, c.miss_ratio);
            }
        }
    }
}

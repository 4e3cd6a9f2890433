//! Command entry points: parameters in (serde, from the CLI or Python),
//! serializable reports out. `blocklab dgraid avail|space|postmark|live|diffusion`
//! and `blocklab fs trace` call these.

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::avail::{self, AvailRow, Failures, Need, ProcessModel, Sampling, Structure};
use super::layer::{Dgraid, DgraidConfig, DgraidLevel, Diffusion, Grouping, ReplicaPlacement};
use super::live::{LiveLayout, LiveSet};
use super::model::{feed, fitting_size, populate_dgraid, populate_plain};
use super::space::{space_overhead, vfat_space_overhead, Postmark, SpaceRow, WriteRow};
use crate::array::{Array, ArrayConfig};
use crate::error::{Error, Result};
use crate::fsmodel::fs::{FileSystem, FsOptions};
use crate::fsmodel::geometry::{MkfsParams, ROOT_INO};
use crate::fsmodel::namespace::{generate, read_listing, EntryType, GenParams, Namespace, NamespaceStats};
use crate::fsmodel::Allocator;

/// Where a namespace comes from: a listing, the generator, or both (the
/// generated tree grafted under `generate_under`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TreeSpec {
    pub listing: Option<String>,
    pub generate: Option<GenParams>,
    pub generate_under: String,
}

impl TreeSpec {
    pub fn load(&self) -> Result<Namespace> {
        let mut ns = match &self.listing {
            Some(p) => read_listing(std::path::Path::new(p))?,
            None => Namespace::new(),
        };
        if let Some(g) = &self.generate {
            let gen = generate(g)?;
            ns.graft(&self.generate_under, &gen)
                .map_err(|m| Error::config(format!("grafting the generated tree: {m}")))?;
        }
        if self.listing.is_none() && self.generate.is_none() {
            return Err(Error::config("no tree: give a listing (--tree) or generator sizes"));
        }
        Ok(ns)
    }
}

/// `0..16` (inclusive), `0..16:2`, `0,1,4`, `3`.
pub fn parse_counts(s: &str) -> Result<Vec<u32>> {
    let bad = || {
        Error::config(format!(
            "bad --failed-count `{s}`: expected e.g. 4, 0,1,4 or 0..16 (inclusive) or 0..16:2"
        ))
    };
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, rest)) = part.split_once("..") {
            let (b, step) = match rest.split_once(':') {
                Some((b, st)) => (b, st.trim().parse::<u32>().map_err(|_| bad())?),
                None => (rest, 1),
            };
            let a: u32 = a.trim().parse().map_err(|_| bad())?;
            let b: u32 = b.trim().parse().map_err(|_| bad())?;
            if step == 0 || a > b {
                return Err(bad());
            }
            out.extend((a..=b).step_by(step as usize));
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

fn mkfs_for(ns: &Namespace, block_size: u64, size: u64, fill: f64) -> MkfsParams {
    let size = if size == 0 {
        fitting_size(ns, block_size, fill)
    } else {
        size
    };
    MkfsParams::new(size, block_size)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AvailParams {
    pub tree: TreeSpec,
    pub block_size: u64,
    /// File-system size in bytes (0: fitted to the tree at `fill`).
    pub size: u64,
    pub fill: f64,
    pub level: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub placement: String,
    pub popular_copies: u32,
    pub popular_dirs: Vec<String>,
    pub exec_dirs: Vec<String>,
    pub lib_dirs: Vec<String>,
    pub processes: usize,
    pub failed_counts: String,
    /// One given set of failed disks (`0,1`) instead of failure counts.
    pub failed_disks: Option<String>,
    pub trials: u64,
    pub seed: u64,
    pub exact_limit: u64,
    /// `md` or `block`; None: md for RAID levels, block for D-GRAID.
    pub semantics: Option<String>,
    pub chunk_bytes: u64,
    pub layout: Option<String>,
    pub disk_blocks: u64,
}

impl Default for AvailParams {
    fn default() -> Self {
        let pm = ProcessModel::default();
        AvailParams {
            tree: TreeSpec::default(),
            block_size: 4096,
            size: 0,
            fill: 0.5,
            level: "dgraid0".into(),
            disks: 8,
            meta_copies: 1,
            grouping: "file".into(),
            placement: "rotate".into(),
            popular_copies: 1,
            popular_dirs: pm.exec_dirs.iter().chain(&pm.lib_dirs).cloned().collect(),
            exec_dirs: pm.exec_dirs,
            lib_dirs: pm.lib_dirs,
            processes: 1000,
            failed_counts: "0..4".into(),
            failed_disks: None,
            trials: 200,
            seed: 1,
            exact_limit: 5000,
            semantics: None,
            chunk_bytes: 64 * 1024,
            layout: None,
            disk_blocks: 0,
        }
    }
}

/// One row of `dgraid avail`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AvailOut {
    pub level: String,
    pub semantics: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub popular_copies: u32,
    #[serde(flatten)]
    pub row: AvailRow,
}

#[derive(Debug, Clone, Serialize)]
pub struct AvailReport {
    pub tree: NamespaceStats,
    pub fs_bytes: u64,
    pub block_size: u64,
    pub spills: u64,
    pub rows: Vec<AvailOut>,
}

const LEVELS: &[&str] = &["dgraid0", "dgraid1", "raid0", "raid1", "raid10", "raid5", "raid6"];

/// `blocklab dgraid avail`.
pub fn availability(p: &AvailParams) -> Result<AvailReport> {
    if !LEVELS.contains(&p.level.as_str()) {
        return Err(Error::unknown("level", &p.level, LEVELS));
    }
    if p.disks == 0 || p.disks > 64 {
        return Err(Error::config(format!("--disks must be 1..=64, got {}", p.disks)));
    }
    if p.trials == 0 {
        return Err(Error::config("--trials must be at least 1"));
    }
    let smp = Sampling {
        trials: p.trials,
        seed: p.seed,
        exact_limit: p.exact_limit,
    };
    let failures = match &p.failed_disks {
        Some(list) => {
            let mut m = 0u64;
            for part in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let d: u32 = part
                    .parse()
                    .map_err(|_| Error::config(format!("bad --failed `{list}`: expected disk numbers like 0,1")))?;
                if d >= p.disks {
                    return Err(Error::config(format!(
                        "failed disk {d} does not exist: the array has disks 0..{}",
                        p.disks - 1
                    )));
                }
                m |= 1 << d;
            }
            Failures::Set(m)
        }
        None => {
            let ks = parse_counts(&p.failed_counts)?;
            if let Some(&k) = ks.iter().find(|&&k| k > p.disks) {
                return Err(Error::config(format!(
                    "--failed-count {k} exceeds the {} disks",
                    p.disks
                )));
            }
            Failures::Counts(ks, smp)
        }
    };
    let dgraid = p.level.starts_with("dgraid");
    let semantics = match (p.semantics.as_deref(), dgraid) {
        (None, true) | (Some("block"), _) => "block",
        (None, false) | (Some("md"), false) => "md",
        (Some("md"), true) => {
            return Err(Error::config(
                "D-GRAID isolates faults per file: it has no volume-level failure; use --semantics block",
            ))
        }
        (Some(other), _) => return Err(Error::unknown("semantics", other, &["md", "block"])),
    };
    let grouping = Grouping::parse(&p.grouping)?;
    let placement = ReplicaPlacement::parse(&p.placement)?;
    let ns = p.tree.load()?;
    let mkfs = mkfs_for(&ns, p.block_size, p.size, p.fill);
    let pm = ProcessModel {
        count: p.processes,
        exec_dirs: p.exec_dirs.clone(),
        lib_dirs: p.lib_dirs.clone(),
        zipf_alpha: 1.0,
        seed: p.seed,
    };
    let out = |rows: Vec<AvailRow>, spills: u64, fs_bytes: u64, mc: u32| AvailReport {
        tree: ns.stats(),
        fs_bytes,
        block_size: p.block_size,
        spills,
        rows: rows
            .into_iter()
            .map(|row| AvailOut {
                level: p.level.clone(),
                semantics: semantics.into(),
                disks: p.disks,
                meta_copies: mc,
                grouping: p.grouping.clone(),
                popular_copies: p.popular_copies,
                row,
            })
            .collect(),
    };
    if dgraid {
        let level = DgraidConfig::parse_level(&p.level)?;
        let mut cfg = DgraidConfig::new(level, p.disks, p.meta_copies);
        cfg.grouping = grouping;
        cfg.placement = placement;
        cfg.popular_copies = p.popular_copies;
        cfg.seed = p.seed;
        cfg.disk_blocks = p.disk_blocks;
        let popular = |id: usize| avail::under(&ns.path(id), &p.popular_dirs);
        if cfg.disk_blocks == 0 && p.popular_copies > 1 {
            // Room for the extra copies of the popular files.
            let popular_blocks: u64 = (1..ns.len())
                .filter(|&id| ns.entries[id].kind == EntryType::File && popular(id))
                .map(|id| ns.entries[id].size.div_ceil(p.block_size) + 2)
                .sum();
            let geo = crate::fsmodel::Geometry::mke2fs(&mkfs)?;
            cfg.disk_blocks = Dgraid::member_blocks_for(&cfg, &geo, popular_blocks * p.popular_copies as u64);
        }
        let run = populate_dgraid(&ns, mkfs, cfg, &popular)?;
        let mut s = avail::structure(&ns, &run.fs, &run.inos, &|b| {
            let m = run.layer.disk_mask(b);
            if m == 0 {
                Need::Free
            } else {
                Need::Any(m)
            }
        });
        avail::add_processes(&mut s, &ns, &pm)?;
        let s = Rc::new(s);
        let rows = avail::availability_over(p.disks, &failures, &mut |_| Ok(s.clone()))?;
        let bytes = run.fs.geometry().blocks * p.block_size;
        return Ok(out(rows, run.layer.counts().spills, bytes, p.meta_copies));
    }
    let acfg = ArrayConfig::from_names(&p.level, p.disks, p.chunk_bytes, p.layout.as_deref(), p.block_size)?;
    let bytes = (mkfs.size_bytes / p.block_size) * p.block_size;
    if semantics == "md" {
        let rows = avail::md_availability_over(&acfg, &failures)?;
        return Ok(out(rows, 0, bytes, 1));
    }
    let a = Array::new(acfg)?;
    let (fs, inos) = populate_plain(&ns, mkfs)?;
    let parity = acfg.level.parity_units();
    let mut cache: [Option<Rc<Structure>>; 2] = [None, None];
    let rows = avail::availability_over(p.disks, &failures, &mut |k| {
        let slot = (k > parity) as usize;
        if let Some(s) = &cache[slot] {
            return Ok(s.clone());
        }
        let mut s = avail::structure(&ns, &fs, &inos, &|b| avail::raid_need(&a, b, k));
        avail::add_processes(&mut s, &ns, &pm)?;
        let s = Rc::new(s);
        cache[slot] = Some(s.clone());
        Ok(s)
    })?;
    Ok(out(rows, 0, fs.geometry().blocks * p.block_size, 1))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpaceParams {
    pub tree: TreeSpec,
    pub block_sizes: Vec<u64>,
    pub copies: Vec<u32>,
    pub fill: f64,
    /// VFAT rows too, for these cluster sizes (none by default).
    pub vfat_cluster_sizes: Vec<u64>,
}

impl Default for SpaceParams {
    fn default() -> Self {
        SpaceParams {
            tree: TreeSpec::default(),
            block_sizes: vec![1024, 4096],
            copies: vec![1, 4, 16],
            fill: 0.5,
            vfat_cluster_sizes: Vec::new(),
        }
    }
}

/// `blocklab dgraid space` (Table 1).
pub fn space(p: &SpaceParams) -> Result<Vec<SpaceRow>> {
    if p.block_sizes.is_empty() || p.copies.is_empty() {
        return Err(Error::config("give at least one block size and one copy count"));
    }
    if let Some(&c) = p.copies.iter().find(|&&c| c == 0 || c > 64) {
        return Err(Error::config(format!("--meta-copies must be 1..=64, got {c}")));
    }
    let ns = p.tree.load()?;
    let mut rows = space_overhead(&ns, &p.block_sizes, &p.copies, p.fill)?;
    if !p.vfat_cluster_sizes.is_empty() {
        rows.extend(vfat_space_overhead(&ns, &p.vfat_cluster_sizes, &p.copies, p.fill)?);
    }
    Ok(rows)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostmarkParams {
    pub files: u64,
    pub transactions: u64,
    pub min_size: u64,
    pub max_size: u64,
    pub subdirs: u64,
    pub read_bias: u64,
    pub create_bias: u64,
    pub seed: u64,
    pub flush_every: u64,
    pub block_size: u64,
    pub size: u64,
    pub disks: u32,
    pub copies: Vec<u32>,
    /// `libext2fs` or `linux22` (the kernel the paper's Postmark ran on).
    pub allocator: Allocator,
}

impl Default for PostmarkParams {
    fn default() -> Self {
        let d = Postmark::default();
        PostmarkParams {
            files: d.files,
            transactions: d.transactions,
            min_size: d.min_size,
            max_size: d.max_size,
            subdirs: d.subdirs,
            read_bias: d.read_bias,
            create_bias: d.create_bias,
            seed: d.seed,
            flush_every: d.flush_every,
            block_size: d.block_size,
            size: d.size_bytes,
            disks: 4,
            copies: vec![1, 2, 3, 4],
            allocator: d.allocator,
        }
    }
}

impl PostmarkParams {
    /// The Postmark-like run these parameters describe (the disks and copy
    /// counts are the array's business).
    pub fn workload(&self) -> Postmark {
        Postmark {
            files: self.files,
            transactions: self.transactions,
            min_size: self.min_size,
            max_size: self.max_size,
            subdirs: self.subdirs,
            read_bias: self.read_bias,
            create_bias: self.create_bias,
            seed: self.seed,
            flush_every: self.flush_every,
            block_size: self.block_size,
            size_bytes: self.size,
            allocator: self.allocator,
        }
    }
}

/// `blocklab dgraid postmark` (Table 2, counted).
pub fn postmark(p: &PostmarkParams) -> Result<Vec<WriteRow>> {
    if let Some(&c) = p.copies.iter().find(|&&c| c == 0 || c > p.disks) {
        return Err(Error::config(format!(
            "--meta-copies must be 1..={} (the disks), got {c}",
            p.disks
        )));
    }
    let pm = p.workload();
    pm.write_costs(p.disks, &p.copies)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LiveParams {
    pub tree: TreeSpec,
    pub block_size: u64,
    pub size: u64,
    pub fill: f64,
    pub level: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub disk_blocks: u64,
    /// Synthetic instead: a share of a member of `disk_blocks` blocks.
    pub live_frac: Option<f64>,
    pub layout: String,
    pub max_io: u64,
}

impl Default for LiveParams {
    fn default() -> Self {
        LiveParams {
            tree: TreeSpec::default(),
            block_size: 4096,
            size: 0,
            fill: 0.5,
            level: "dgraid1".into(),
            disks: 4,
            meta_copies: 4,
            grouping: "file".into(),
            disk_blocks: 0,
            live_frac: None,
            layout: "compact".into(),
            max_io: 128,
        }
    }
}

/// Live blocks of each member: `live` (runs), `extents` count, shares.
#[derive(Debug, Clone, Serialize)]
pub struct LiveMember {
    pub disk: u32,
    pub member_blocks: u64,
    pub live_blocks: u64,
    pub live_fraction: f64,
    pub extents: usize,
    pub live: LiveSet,
}

/// `blocklab dgraid live`: what a live-block rebuild of each member copies,
/// from a model run of the tree, or synthetic (`live_frac`, compact/spread).
pub fn live(p: &LiveParams) -> Result<Vec<LiveMember>> {
    let member = |disk: u32, set: LiveSet| LiveMember {
        disk,
        member_blocks: set.member_blocks,
        live_blocks: set.count(),
        live_fraction: set.fraction(),
        extents: set.extents(p.max_io).len(),
        live: set,
    };
    if let Some(f) = p.live_frac {
        if p.disk_blocks == 0 {
            return Err(Error::config("--live-frac needs the member size (--disk-blocks)"));
        }
        let set = LiveSet::synthetic(p.disk_blocks, f, LiveLayout::parse(&p.layout)?)?;
        return Ok((0..p.disks.max(1)).map(|d| member(d, set.clone())).collect());
    }
    let ns = p.tree.load()?;
    let level = DgraidConfig::parse_level(&p.level)?;
    let mut cfg = DgraidConfig::new(level, p.disks, p.meta_copies);
    cfg.grouping = Grouping::parse(&p.grouping)?;
    cfg.disk_blocks = p.disk_blocks;
    let run = populate_dgraid(&ns, mkfs_for(&ns, p.block_size, p.size, p.fill), cfg, &|_| false)?;
    (0..p.disks)
        .map(|d| {
            let set = LiveSet::from_blocks(run.layer.disk_blocks(), &run.layer.live_member_blocks(d))?;
            Ok(member(d, set))
        })
        .collect()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiffusionParams {
    pub disks: u32,
    pub block_size: u64,
    /// File sizes in bytes.
    pub sizes: Vec<u64>,
    pub chunk_bytes: u64,
    pub segment_bytes: u64,
    pub threshold: u64,
    /// The allocator that writes the file (`libext2fs` or `linux22`).
    pub allocator: Allocator,
}

impl Default for DiffusionParams {
    fn default() -> Self {
        DiffusionParams {
            disks: 4,
            block_size: 4096,
            sizes: (12..=26).step_by(2).map(|s| 1u64 << s).collect(),
            chunk_bytes: 64 * 1024,
            segment_bytes: 1 << 20,
            threshold: 2,
            allocator: Allocator::Libext2fs,
        }
    }
}

/// One file size of the Fig 7 analogue: how many disks a sequential read
/// of the whole file keeps busy (blocks read ÷ the busiest disk's blocks),
/// for RAID-0, D-GRAID, and D-GRAID after the file was diffused.
#[derive(Debug, Clone, Serialize)]
pub struct DiffusionRow {
    pub file_bytes: u64,
    pub blocks: u64,
    pub raid0_parallelism: f64,
    pub dgraid_parallelism: f64,
    pub diffused_parallelism: f64,
    pub diffused_segments: u64,
}

/// `blocklab dgraid diffusion` (Fig 7, counted: parallelism, not time).
pub fn diffusion(p: &DiffusionParams) -> Result<Vec<DiffusionRow>> {
    let bs = p.block_size;
    if p.segment_bytes < bs || p.chunk_bytes < bs || p.threshold == 0 {
        return Err(Error::config(
            "segment and chunk must be at least one block; threshold at least 1",
        ));
    }
    let acfg = ArrayConfig::from_names("raid0", p.disks, p.chunk_bytes, None, bs)?;
    let arr = Array::new(acfg)?;
    let mut out = Vec::new();
    for &size in &p.sizes {
        // Members of at least twice the file: it fits its home site.
        let fs_size = ((size * 2 * p.disks as u64).max(64 << 20)).div_ceil(1 << 20) << 20;
        let per_disk = |reads: &[u64]| -> f64 {
            let total: u64 = reads.iter().sum();
            let max = reads.iter().copied().max().unwrap_or(0).max(1);
            total as f64 / max as f64
        };
        let mut res = [0.0f64; 2];
        let mut segs = 0;
        for (i, diffuse) in [false, true].into_iter().enumerate() {
            let mut fs = FileSystem::mkfs(&FsOptions {
                mkfs: MkfsParams::new(fs_size, bs),
                flush_every: 0,
                allocator: p.allocator,
            })?;
            let geo = fs.geometry().clone();
            let mut cfg = DgraidConfig::new(DgraidLevel::L0, p.disks, p.disks);
            if diffuse {
                cfg.diffusion = Some(Diffusion {
                    segment_blocks: p.segment_bytes / bs,
                    threshold: p.threshold,
                    chunk_blocks: p.chunk_bytes / bs,
                });
            }
            let mut layer = Dgraid::new(cfg, &geo)?;
            let ino = fs.create(ROOT_INO, "f", size)?;
            fs.sync();
            feed(&mut layer, &geo, fs.drain_io())?;
            let data: Vec<u64> = fs.inode(ino).expect("made").map.data.clone();
            if diffuse {
                for _ in 0..p.threshold {
                    for &b in &data {
                        layer.read(b, 0);
                    }
                }
            }
            let before = layer.counts().per_disk_reads;
            for &b in &data {
                layer.read(b, 0);
            }
            let after = layer.counts().per_disk_reads;
            let reads: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            res[i] = per_disk(&reads);
            if diffuse {
                segs = layer.counts().diffused_segments;
            }
            // RAID-0 over the same logical blocks.
            if i == 0 {
                let mut r0 = vec![0u64; p.disks as usize];
                for &b in &data {
                    r0[arr.disk_of(b) as usize] += 1;
                }
                out.push(DiffusionRow {
                    file_bytes: size,
                    blocks: data.len() as u64,
                    raid0_parallelism: per_disk(&r0),
                    dgraid_parallelism: 0.0,
                    diffused_parallelism: 0.0,
                    diffused_segments: 0,
                });
            }
        }
        let row = out.last_mut().expect("pushed");
        row.dgraid_parallelism = res[0];
        row.diffused_parallelism = res[1];
        row.diffused_segments = segs;
    }
    Ok(out)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraceParams {
    pub tree: TreeSpec,
    pub block_size: u64,
    pub size: u64,
    pub fill: f64,
}

impl Default for TraceParams {
    fn default() -> Self {
        TraceParams {
            tree: TreeSpec::default(),
            block_size: 4096,
            size: 0,
            fill: 0.5,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    pub requests: u64,
    pub writes: u64,
    pub reads: u64,
    pub fs_bytes: u64,
    pub block_size: u64,
    pub tree: NamespaceStats,
}

/// `blocklab fs trace`: the annotated native-CSV trace of making the file
/// system and copying the tree in (one request per block, in order, at
/// 1 µs intervals).
pub fn write_trace(p: &TraceParams, out: &std::path::Path) -> Result<TraceSummary> {
    use crate::trace::native_csv::{write_annotated, ANNOTATED_HEADER};
    use crate::trace::Request;
    use std::io::Write;
    let ns = p.tree.load()?;
    let mkfs = mkfs_for(&ns, p.block_size, p.size, p.fill);
    let name = out.display().to_string();
    let f = std::fs::File::create(out).map_err(|e| Error::io(&name, e))?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(w, "{ANNOTATED_HEADER}").map_err(|e| Error::io(&name, e))?;
    let mut fs = FileSystem::mkfs(&FsOptions {
        mkfs,
        flush_every: 0,
        allocator: crate::fsmodel::Allocator::Libext2fs,
    })?;
    let bs = p.block_size;
    let mut n = 0u64;
    let mut writes = 0u64;
    let mut emit = |fs: &mut FileSystem| -> Result<()> {
        for x in fs.drain_io() {
            let r = Request {
                time: n as f64 * 1e-6,
                op: x.op,
                offset: x.block * bs,
                len: bs,
                tenant: 0,
                fs: Default::default(),
            };
            write_annotated(&mut w, &r, Some(&x.tag)).map_err(|e| Error::io(&name, e))?;
            n += 1;
            writes += x.op.is_write() as u64;
        }
        Ok(())
    };
    emit(&mut fs)?;
    fs.populate_each(&ns, |_, _, fs| emit(fs))?;
    fs.sync();
    emit(&mut fs)?;
    w.flush().map_err(|e| Error::io(&name, e))?;
    Ok(TraceSummary {
        requests: n,
        writes,
        reads: n - writes,
        fs_bytes: fs.geometry().blocks * bs,
        block_size: bs,
        tree: ns.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_annotated_trace_places_like_the_model_run() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.csv");
        let tree = TreeSpec {
            generate: Some(GenParams {
                dirs: 10,
                files: 80,
                max_file: 1 << 20,
                ..GenParams::default()
            }),
            ..TreeSpec::default()
        };
        let s = write_trace(
            &TraceParams {
                tree: tree.clone(),
                block_size: 1024,
                ..TraceParams::default()
            },
            &out,
        )
        .unwrap();
        for r in [1u32, 3] {
            let rep = place_trace(&PlaceParams {
                trace: out.display().to_string(),
                fs_size: s.fs_bytes,
                block_size: 1024,
                meta_copies: r,
                ..PlaceParams::default()
            })
            .unwrap();
            // The same run straight from the model (same placement decisions).
            let ns = tree.load().unwrap();
            let run = populate_dgraid(
                &ns,
                MkfsParams::new(s.fs_bytes, 1024),
                DgraidConfig::new(DgraidLevel::L0, 4, r),
                &|_| false,
            )
            .unwrap();
            let c = run.layer.counts();
            assert_eq!(rep.counts.unique_metadata_blocks, c.unique_metadata_blocks);
            assert_eq!(rep.counts.physical_writes, c.physical_writes);
            assert_eq!(rep.used, run.layer.used());
        }
        std::fs::write(&out, "0,W,0,1024\n").unwrap();
        let e = place_trace(&PlaceParams {
            trace: out.display().to_string(),
            fs_size: s.fs_bytes,
            block_size: 1024,
            ..PlaceParams::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 1") && e.contains("owner"), "{e}");
    }

    #[test]
    fn counts_parse_lists_and_inclusive_ranges() {
        assert_eq!(parse_counts("0..4").unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(parse_counts("0..8:4,9").unwrap(), vec![0, 4, 8, 9]);
        assert_eq!(parse_counts("3").unwrap(), vec![3]);
        for bad in ["", "x", "4..1", "0..4:0", "-1"] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn availability_rejects_impossible_requests() {
        let tree = TreeSpec {
            generate: Some(GenParams {
                dirs: 5,
                files: 20,
                ..GenParams::default()
            }),
            ..TreeSpec::default()
        };
        let base = AvailParams {
            tree,
            disks: 4,
            ..AvailParams::default()
        };
        let bad = [
            AvailParams {
                level: "raid7".into(),
                ..base.clone()
            },
            AvailParams {
                failed_counts: "5".into(),
                ..base.clone()
            },
            AvailParams {
                semantics: Some("md".into()),
                ..base.clone()
            },
            AvailParams {
                meta_copies: 5,
                ..base.clone()
            },
            AvailParams {
                level: "dgraid1".into(),
                disks: 3,
                ..base.clone()
            },
            AvailParams {
                grouping: "disk".into(),
                ..base.clone()
            },
        ];
        for p in bad {
            assert!(availability(&p).is_err(), "{:?} {}", p.level, p.failed_counts);
        }
        let ok = availability(&base).unwrap();
        assert_eq!(ok.rows.len(), 5);
        assert_eq!(ok.rows[0].row.files_available, 1.0);
        let again = availability(&base).unwrap();
        assert_eq!(
            serde_json::to_string(&ok.rows).unwrap(),
            serde_json::to_string(&again.rows).unwrap()
        );
    }

    #[test]
    fn diffusion_spreads_large_sequential_reads() {
        let rows = diffusion(&DiffusionParams {
            sizes: vec![4096, 8 << 20],
            ..DiffusionParams::default()
        })
        .unwrap();
        let small = &rows[0];
        assert_eq!((small.raid0_parallelism, small.dgraid_parallelism), (1.0, 1.0));
        let big = &rows[1];
        assert!(big.raid0_parallelism > 3.9);
        assert!(big.dgraid_parallelism < 1.01, "one home site: {big:?}");
        assert!(big.diffused_parallelism > 0.9 * big.raid0_parallelism, "{big:?}");
    }

    #[test]
    fn consecutive_diffused_segments_ascend_on_every_disk() {
        // An 8 MiB file diffused in 1 MiB segments, read in order: on every
        // disk the reads from diffused copies go up (no seek back at a
        // segment's start, also across a segment left undiffused).
        let bs = 4096;
        let mut fs = FileSystem::mkfs(&FsOptions {
            mkfs: MkfsParams::new(128 << 20, bs),
            flush_every: 0,
            allocator: crate::fsmodel::Allocator::Libext2fs,
        })
        .unwrap();
        let geo = fs.geometry().clone();
        let mut cfg = DgraidConfig::new(DgraidLevel::L0, 4, 4);
        cfg.diffusion = Some(Diffusion {
            segment_blocks: 256,
            threshold: 2,
            chunk_blocks: 16,
        });
        let mut layer = Dgraid::new(cfg, &geo).unwrap();
        let ino = fs.create(ROOT_INO, "f", 8 << 20).unwrap();
        fs.sync();
        feed(&mut layer, &geo, fs.drain_io()).unwrap();
        let data: Vec<u64> = fs.inode(ino).expect("made").map.data.clone();
        let home: Vec<crate::dgraid::layer::Copy> = data.iter().map(|&b| layer.read(b, 0).unwrap()).collect();
        for &b in &data {
            layer.read(b, 0);
        }
        assert!(layer.counts().diffused_segments >= 6, "{:?}", layer.counts());
        let mut last = [None::<u64>; 4];
        let mut from_diffused = [0u32; 4];
        for (&b, h) in data.iter().zip(&home) {
            let c = layer.read(b, 0).unwrap();
            if c == *h {
                continue;
            }
            let d = c.disk as usize;
            assert!(
                last[d].is_none_or(|l| c.block > l),
                "disk {d}: {} after {:?}",
                c.block,
                last[d]
            );
            last[d] = Some(c.block);
            from_diffused[d] += 1;
        }
        assert!(from_diffused.iter().all(|&n| n >= 6 * 64), "{from_diffused:?}");
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlaceParams {
    pub trace: String,
    /// Size and block size of the file system the trace addresses (its
    /// static metadata is known by address).
    pub fs_size: u64,
    pub block_size: u64,
    pub level: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub placement: String,
    pub seed: u64,
    pub disk_blocks: u64,
}

impl Default for PlaceParams {
    fn default() -> Self {
        PlaceParams {
            trace: String::new(),
            fs_size: 0,
            block_size: 4096,
            level: "dgraid0".into(),
            disks: 4,
            meta_copies: 1,
            grouping: "file".into(),
            placement: "rotate".into(),
            seed: 1,
            disk_blocks: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PlaceReport {
    pub requests: u64,
    pub counts: super::layer::DgraidCounts,
    pub member_blocks: u64,
    pub used: Vec<u64>,
    pub live: Vec<u64>,
}

/// `blocklab dgraid place`: an annotated native-CSV trace through the layer.
/// Without bitmap contents in the trace the live map only grows.
pub fn place_trace(p: &PlaceParams) -> Result<PlaceReport> {
    use crate::trace::native_csv::read_annotated;
    let geo = crate::fsmodel::Geometry::mke2fs(&MkfsParams::new(p.fs_size, p.block_size))?;
    let level = DgraidConfig::parse_level(&p.level)?;
    let mut cfg = DgraidConfig::new(level, p.disks, p.meta_copies);
    cfg.grouping = Grouping::parse(&p.grouping)?;
    cfg.placement = ReplicaPlacement::parse(&p.placement)?;
    cfg.seed = p.seed;
    cfg.disk_blocks = p.disk_blocks;
    let mut layer = Dgraid::new(cfg, &geo)?;
    let bs = p.block_size;
    let mut n = 0u64;
    for rec in read_annotated(std::path::Path::new(&p.trace))? {
        let (lineno, r, tag) = rec?;
        n += 1;
        let err =
            |field: &str, msg: String| Error::parse(p.trace.clone(), crate::error::Location::Line(lineno), field, msg);
        for b in r.blocks(bs) {
            if b >= geo.blocks {
                return Err(err(
                    "offset",
                    format!("block {b} is beyond the {}-block file system (--fs-size)", geo.blocks),
                ));
            }
            match r.op {
                crate::trace::Op::Write => {
                    let t = tag.ok_or_else(|| err("owner", "a write needs its owner and kind".into()))?;
                    layer.write(b, &t)?;
                }
                crate::trace::Op::Read => {
                    layer.read(b, 0);
                }
            }
        }
    }
    Ok(PlaceReport {
        requests: n,
        counts: layer.counts(),
        member_blocks: layer.disk_blocks(),
        used: layer.used().to_vec(),
        live: (0..p.disks).map(|d| layer.live_member_blocks(d).len() as u64).collect(),
    })
}

//! What metadata replication costs: space (Table 1 of the paper) and writes
//! under a metadata-heavy workload (Table 2, Postmark), in the counted sense.
//!
//! Space: the namespace (directory blocks, including a directory's indirect
//! blocks, plus the on-disk inodes of directories) is what D-GRAID
//! replicates beyond what a file needs; `overhead(r)` is the bytes of its r
//! physical copies, measured on the layer after the tree is copied in,
//! divided by the bytes the tree occupies (files, symlinks and directories:
//! data, indirect and directory blocks). The static metadata (inode tables,
//! bitmaps, superblock and descriptor copies) is reported beside it as a
//! share of the volume, since its size is fixed by mke2fs, not by the tree.

use serde::Serialize;

use super::layer::{DgraidConfig, DgraidLevel, Grouping};
use super::model::{feed, fitting_size, populate_dgraid};
use crate::error::{Error, Result};
use crate::fsmodel::fs::{FileSystem, FsOptions};
use crate::fsmodel::geometry::{MkfsParams, ROOT_INO};
use crate::fsmodel::kind::BlockKind;
use crate::fsmodel::namespace::{EntryType, Namespace};
use crate::fsmodel::Allocator;
use crate::trace::synth::SplitMix64;

/// One row of the Table 1 analogue.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SpaceRow {
    /// `ext2` or `vfat`.
    pub fs: &'static str,
    /// The block (ext2) or cluster (VFAT) size.
    pub block_size: u64,
    pub meta_copies: u32,
    pub dirs: u64,
    /// Directory blocks (data and indirect; VFAT: clusters) of one copy.
    pub dir_blocks: u64,
    /// Physical copies of directory blocks held by the layer.
    pub dir_block_copies: u64,
    /// Bytes of the copies of directory blocks and directory inodes (VFAT:
    /// of the directories' clusters and of the FAT blocks in use).
    pub namespace_bytes: u64,
    /// Bytes the tree occupies (one copy).
    pub tree_bytes: u64,
    /// namespace_bytes / tree_bytes, in percent.
    pub overhead_pct: f64,
    /// Static metadata blocks of the volume (inode tables, bitmaps,
    /// superblock and descriptor copies), one copy.
    pub static_blocks: u64,
    /// r × static metadata / volume, in percent.
    pub static_overhead_pct: f64,
    pub volume_bytes: u64,
}

/// Table 1: the space overhead of `r`-way namespace replication for each
/// block size and copy count, measured on a D-GRAID layer of `max(copies)`
/// disks (at least 2) holding `ns`.
pub fn space_overhead(ns: &Namespace, block_sizes: &[u64], copies: &[u32], fill: f64) -> Result<Vec<SpaceRow>> {
    let disks = copies.iter().copied().max().unwrap_or(1).max(2);
    let mut out = Vec::new();
    for &bs in block_sizes {
        let size = fitting_size(ns, bs, fill);
        for &r in copies {
            let mut cfg = DgraidConfig::new(DgraidLevel::L0, disks, r);
            cfg.grouping = Grouping::File;
            let run = populate_dgraid(ns, MkfsParams::new(size, bs), cfg, &|_| false)?;
            let geo = run.fs.geometry();
            let mut dirs = 0u64;
            let mut dir_blocks = 0u64;
            let mut dir_copies = 0u64;
            let mut tree_blocks = 0u64;
            for (_, inode) in run.fs.inodes() {
                let n = inode.map.block_count();
                if inode.kind == EntryType::Dir {
                    dirs += 1;
                    dir_blocks += n;
                    dir_copies += inode
                        .map
                        .all_blocks()
                        .map(|b| run.layer.copies(b).len() as u64)
                        .sum::<u64>();
                }
                tree_blocks += n;
            }
            // The resize inode's DIND block is file-system machinery, not tree.
            tree_blocks -= 1;
            let static_blocks: u64 = (0..geo.group_count()).map(|g| geo.static_blocks_of_group(g)).sum();
            let namespace_bytes = dir_copies * bs + r as u64 * dirs * geo.inode_size;
            let tree_bytes = tree_blocks * bs;
            out.push(SpaceRow {
                fs: "ext2",
                block_size: bs,
                meta_copies: r,
                dirs,
                dir_blocks,
                dir_block_copies: dir_copies,
                namespace_bytes,
                tree_bytes,
                overhead_pct: 100.0 * namespace_bytes as f64 / tree_bytes.max(1) as f64,
                static_blocks,
                static_overhead_pct: 100.0 * (r as u64 * static_blocks) as f64 / geo.blocks as f64,
                volume_bytes: geo.blocks * bs,
            });
        }
    }
    Ok(out)
}

/// Table 1's VFAT rows, in the ext2 rows' shape: replicated are the
/// directories' clusters and the FAT blocks holding entries of clusters in
/// use, r whole copies each (`fsmodel::fat`).
pub fn vfat_space_overhead(ns: &Namespace, cluster_sizes: &[u64], copies: &[u32], fill: f64) -> Result<Vec<SpaceRow>> {
    let rows = crate::fsmodel::fat::space_rows(ns, cluster_sizes, copies, fill)?;
    Ok(rows
        .into_iter()
        .map(|r| SpaceRow {
            fs: "vfat",
            block_size: r.cluster_bytes,
            meta_copies: r.meta_copies,
            dirs: r.usage.dirs,
            dir_blocks: r.usage.dir_clusters,
            dir_block_copies: r.meta_copies as u64 * r.usage.dir_clusters,
            namespace_bytes: r.namespace_bytes,
            tree_bytes: r.tree_bytes,
            overhead_pct: r.overhead_pct,
            static_blocks: r.fat_blocks,
            static_overhead_pct: r.static_overhead_pct,
            volume_bytes: r.volume_bytes,
        })
        .collect())
}

/// Postmark-like workload (Katcher 1997, as the paper ran it: a sync before
/// the deletion phase).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Postmark {
    /// Files created before the transactions.
    pub files: u64,
    pub transactions: u64,
    pub min_size: u64,
    pub max_size: u64,
    pub subdirs: u64,
    /// Of 10 transactions, how many read (the others append).
    pub read_bias: u64,
    /// Of 10 transactions, how many create (the others delete).
    pub create_bias: u64,
    pub seed: u64,
    /// Write back dirty metadata every this many operations (a buffer
    /// cache's periodic flush); 0: only at the syncs.
    pub flush_every: u64,
    pub block_size: u64,
    /// File-system size in bytes.
    pub size_bytes: u64,
    /// The file system's allocator (the paper ran Linux 2.2's).
    pub allocator: Allocator,
}

impl Default for Postmark {
    fn default() -> Self {
        // Sized so that a run writes about as many blocks as the paper's
        // (~75k here, 94k there), flushing about as often as Linux 2.2's
        // 5-second bdflush over its ~65 s run (13 flushes of ~65k operations).
        Postmark {
            files: 5000,
            transactions: 30_000,
            min_size: 512,
            max_size: 10 * 1024,
            subdirs: 10,
            read_bias: 5,
            create_bias: 5,
            seed: 1,
            flush_every: 5000,
            block_size: 4096,
            size_bytes: 2 << 30,
            allocator: Allocator::Libext2fs,
        }
    }
}

/// One row of the Table 2 analogue.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WriteRow {
    /// `raid0` or `dgraidN` (N metadata copies).
    pub config: String,
    pub meta_copies: u32,
    /// Physical blocks written, all copies.
    pub blocks_written: u64,
    /// Physical writes to metadata blocks (all copies); None for RAID-0.
    pub metadata_writes: Option<u64>,
    /// Distinct physical metadata blocks written.
    pub unique_metadata: Option<u64>,
    /// Blocks written if replicas were updated once (lazily): one copy's
    /// writes plus each extra replica written once.
    pub lazy_blocks_written: Option<u64>,
    pub logical_writes: u64,
}

impl Postmark {
    fn check(&self) -> Result<()> {
        if self.min_size > self.max_size || self.read_bias > 10 || self.create_bias > 10 {
            return Err(Error::config("postmark: min size <= max size, biases in 0..=10"));
        }
        Ok(())
    }

    /// Run the workload on a model file system, calling `sink` with the
    /// I/O of every operation.
    pub fn run(&self, sink: &mut dyn FnMut(&mut FileSystem) -> Result<()>) -> Result<FileSystem> {
        self.check()?;
        let mut fs = FileSystem::mkfs(&FsOptions {
            mkfs: MkfsParams::new(self.size_bytes, self.block_size),
            flush_every: self.flush_every,
            allocator: self.allocator,
        })?;
        sink(&mut fs)?;
        let mut rng = SplitMix64::new(self.seed ^ 0x706f_7374);
        let mut dirs = vec![ROOT_INO];
        if self.subdirs > 0 {
            dirs.clear();
        }
        for i in 0..self.subdirs {
            dirs.push(fs.mkdir(ROOT_INO, &format!("s{i}"))?);
            sink(&mut fs)?;
        }
        let span = self.max_size - self.min_size + 1;
        let size = |rng: &mut SplitMix64| self.min_size + rng.next_u64() % span;
        // (directory, name, inode) of the live files.
        let mut live: Vec<(u64, String, u64)> = Vec::new();
        let mut serial = 0u64;
        let mut create =
            |fs: &mut FileSystem, rng: &mut SplitMix64, live: &mut Vec<(u64, String, u64)>| -> Result<()> {
                let d = dirs[(rng.next_u64() % dirs.len() as u64) as usize];
                serial += 1;
                let name = format!("pm{serial:08}");
                let ino = fs.create(d, &name, size(rng))?;
                live.push((d, name, ino));
                Ok(())
            };
        for _ in 0..self.files {
            create(&mut fs, &mut rng, &mut live)?;
            sink(&mut fs)?;
        }
        for _ in 0..self.transactions {
            if !live.is_empty() {
                let (_, _, ino) = live[(rng.next_u64() % live.len() as u64) as usize];
                if rng.next_u64() % 10 < self.read_bias {
                    fs.read_whole(ino)?;
                } else {
                    let n = self.min_size + rng.next_u64() % span;
                    fs.append(ino, n)?;
                }
                sink(&mut fs)?;
            }
            if rng.next_u64() % 10 < self.create_bias || live.is_empty() {
                create(&mut fs, &mut rng, &mut live)?;
            } else {
                let i = (rng.next_u64() % live.len() as u64) as usize;
                let (d, name, _) = live.swap_remove(i);
                fs.unlink(d, &name)?;
            }
            sink(&mut fs)?;
        }
        fs.sync();
        sink(&mut fs)?;
        for (d, name, _) in live.drain(..) {
            fs.unlink(d, &name)?;
            sink(&mut fs)?;
        }
        fs.sync();
        sink(&mut fs)?;
        Ok(fs)
    }

    /// Table 2: RAID-0, then D-GRAID over `disks` disks with each copy count.
    pub fn write_costs(&self, disks: u32, copies: &[u32]) -> Result<Vec<WriteRow>> {
        let mut out = Vec::new();
        let fs = self.run(&mut |fs| {
            fs.drain_io();
            Ok(())
        })?;
        let c = fs.counts();
        out.push(WriteRow {
            config: "raid0".into(),
            meta_copies: 1,
            blocks_written: c.writes,
            metadata_writes: None,
            unique_metadata: None,
            lazy_blocks_written: None,
            logical_writes: c.writes,
        });
        let mut one: Option<(u64, u64)> = None; // (total, unique) with one copy
        for &r in copies {
            let cfg = DgraidConfig::new(DgraidLevel::L0, disks, r);
            let mut layer: Option<super::layer::Dgraid> = None;
            self.run(&mut |fs| {
                let geo = fs.geometry().clone();
                if layer.is_none() {
                    layer = Some(super::layer::Dgraid::new(cfg.clone(), &geo)?);
                }
                feed(layer.as_mut().expect("made"), &geo, fs.drain_io())
            })?;
            let lc = layer.expect("ran").counts();
            if r == 1 || one.is_none() {
                one = Some((lc.physical_writes, lc.unique_metadata_blocks / r as u64));
            }
            let (t1, u1) = one.expect("set");
            out.push(WriteRow {
                config: format!("dgraid{r}"),
                meta_copies: r,
                blocks_written: lc.physical_writes,
                metadata_writes: Some(lc.metadata_writes),
                unique_metadata: Some(lc.unique_metadata_blocks),
                lazy_blocks_written: Some(t1 + (r as u64 - 1) * u1),
                logical_writes: lc.logical_writes,
            });
        }
        Ok(out)
    }
}

/// Kinds D-GRAID replicates, for reports.
pub fn replicated_kinds() -> Vec<&'static str> {
    crate::fsmodel::kind::KINDS
        .iter()
        .filter(|(k, _)| k.is_static() || *k == BlockKind::Directory)
        .map(|(_, n)| *n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsmodel::namespace::{generate, GenParams};

    #[test]
    fn namespace_overhead_is_linear_in_the_copies() {
        let ns = generate(&GenParams {
            dirs: 60,
            files: 600,
            seed: 5,
            max_file: 1 << 20,
            ..GenParams::default()
        })
        .unwrap();
        let rows = space_overhead(&ns, &[1024, 4096], &[1, 4, 16], 0.5).unwrap();
        for bs in [1024, 4096] {
            let r: Vec<&SpaceRow> = rows.iter().filter(|x| x.block_size == bs).collect();
            for x in &r {
                assert_eq!(x.dir_block_copies, x.meta_copies as u64 * x.dir_blocks, "{x:?}");
                assert_eq!(x.namespace_bytes, x.meta_copies as u64 * r[0].namespace_bytes);
                assert!((x.overhead_pct - x.meta_copies as f64 * r[0].overhead_pct).abs() < 1e-9);
            }
            assert!(r[0].dirs == 62, "60 + root + lost+found");
        }
        // Larger blocks waste more of each directory block.
        let one = |bs| {
            rows.iter()
                .find(|x| x.block_size == bs && x.meta_copies == 1)
                .unwrap()
                .overhead_pct
        };
        assert!(one(4096) > one(1024));
    }

    #[test]
    fn vfat_rows_are_linear_in_the_copies_beside_the_ext2_rows() {
        let ns = generate(&GenParams {
            dirs: 30,
            files: 300,
            seed: 3,
            max_file: 1 << 20,
            ..GenParams::default()
        })
        .unwrap();
        let rows = vfat_space_overhead(&ns, &[1024, 4096], &[1, 4, 16], 0.5).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            let one = rows
                .iter()
                .find(|x| x.block_size == r.block_size && x.meta_copies == 1)
                .unwrap();
            assert_eq!(r.fs, "vfat");
            assert!((r.overhead_pct - r.meta_copies as f64 * one.overhead_pct).abs() < 1e-9);
            assert_eq!(r.dirs, 31, "30 + the root");
        }
    }

    #[test]
    fn postmark_on_linux22_spreads_its_directories_over_the_groups() {
        // 256 MiB of 1 KiB blocks: 32 groups. Linux 2.2 puts each new
        // directory in the emptiest group; libext2fs in its parent's.
        let groups = |allocator| {
            let pm = Postmark {
                files: 40,
                transactions: 100,
                subdirs: 4,
                block_size: 1024,
                size_bytes: 256 << 20,
                allocator,
                ..Postmark::default()
            };
            let fs = pm
                .run(&mut |fs| {
                    fs.drain_io();
                    Ok(())
                })
                .unwrap();
            (0..4)
                .map(|i| fs.geometry().group_of_inode(fs.resolve(&format!("s{i}")).unwrap()))
                .collect::<std::collections::BTreeSet<u64>>()
        };
        assert_eq!(groups(Allocator::Libext2fs).into_iter().collect::<Vec<_>>(), vec![0]);
        assert_eq!(groups(Allocator::Linux22).len(), 4);
        let bad = serde_json::from_str::<crate::dgraid::run::PostmarkParams>(r#"{"allocator": "linux26"}"#)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("allocator") && bad.contains("linux22"), "{bad}");
    }

    #[test]
    fn replica_writes_scale_exactly_with_the_copies() {
        let pm = Postmark {
            files: 150,
            transactions: 400,
            size_bytes: 64 << 20,
            flush_every: 100,
            ..Postmark::default()
        };
        let rows = pm.write_costs(4, &[1, 2, 3, 4]).unwrap();
        assert_eq!(rows[0].config, "raid0");
        let d1 = &rows[1];
        let (m1, u1) = (d1.metadata_writes.unwrap(), d1.unique_metadata.unwrap());
        assert!(m1 > u1 && u1 > 0);
        for row in &rows[1..] {
            let k = row.meta_copies as u64;
            assert_eq!(row.metadata_writes.unwrap(), k * m1, "{row:?}");
            assert_eq!(row.unique_metadata.unwrap(), k * u1, "{row:?}");
            assert_eq!(row.blocks_written - d1.blocks_written, (k - 1) * m1);
            assert_eq!(row.lazy_blocks_written.unwrap() - d1.blocks_written, (k - 1) * u1);
            assert_eq!(row.logical_writes, rows[0].blocks_written);
        }
    }
}

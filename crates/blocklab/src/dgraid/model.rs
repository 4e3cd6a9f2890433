//! The glue: a namespace copied into the ext2 model with its block I/O fed
//! through the D-GRAID layer (oracle mode: the layer sees each block's tag).

use super::layer::{Dgraid, DgraidConfig};
use crate::error::Result;
use crate::fsmodel::fs::{FileSystem, FsOptions, NDIR};
use crate::fsmodel::geometry::{default_inode_ratio, Geometry, MkfsParams};
use crate::fsmodel::kind::BlockIo;
use crate::fsmodel::namespace::{EntryType, Namespace};
use crate::trace::Op;

/// Feed the model's block I/O to the layer: writes are placed, block-bitmap
/// writes also refresh the live map, reads are served (no failed disk).
pub fn feed(layer: &mut Dgraid, geo: &Geometry, io: Vec<BlockIo>) -> Result<()> {
    for x in io {
        match x.op {
            Op::Write => {
                layer.write(x.block, &x.tag)?;
                if let (Some(bits), Some(g)) = (&x.bitmap, geo.group_of_block(x.block)) {
                    let grp = &geo.groups[g as usize];
                    layer.bitmap_written(grp.start, bits, grp.end - grp.start + 1);
                }
            }
            Op::Read => {
                layer.read(x.block, 0);
            }
        }
    }
    Ok(())
}

/// A file-system size that holds `ns` with blocks of `bs` bytes filled to
/// about `fill` (0 < fill ≤ 1), with inodes for every entry; whole MiB.
pub fn fitting_size(ns: &Namespace, bs: u64, fill: f64) -> u64 {
    let apb = bs / 4;
    let mut blocks = 0u64;
    let mut dir_bytes = 0u64;
    for e in &ns.entries {
        match e.kind {
            EntryType::File => {
                let n = e.size.div_ceil(bs);
                blocks += n;
                if n > NDIR {
                    blocks += (n - NDIR).div_ceil(apb) + 2;
                }
            }
            EntryType::Symlink => blocks += 1,
            EntryType::Dir => dir_bytes += 24,
            EntryType::Special => {}
        }
        dir_bytes += crate::fsmodel::fs::rec_len(e.name.len() as u64);
    }
    blocks += dir_bytes.div_ceil(bs) * 2 + ns.len() as u64 / 8 + 64;
    let fill = fill.clamp(0.01, 1.0);
    let mut size = ((blocks * bs) as f64 / fill) as u64;
    // Enough inodes (and room for the inode tables themselves).
    loop {
        let ratio = default_inode_ratio(size).max(bs);
        if size / ratio >= ns.len() as u64 + 64 {
            break;
        }
        size += size / 4 + (1 << 20);
    }
    (size.div_ceil(1 << 20) + 1) << 20
}

/// A populated model and the layer its I/O went through.
pub struct DgraidRun {
    pub fs: FileSystem,
    pub layer: Dgraid,
    /// Inode of each namespace entry.
    pub inos: Vec<u64>,
}

/// Make the file system, copy `ns` in (entries for which `popular` holds
/// get the layer's popular-copies treatment), write it back, all through
/// the layer.
pub fn populate_dgraid(
    ns: &Namespace,
    mkfs: MkfsParams,
    cfg: DgraidConfig,
    popular: &dyn Fn(usize) -> bool,
) -> Result<DgraidRun> {
    let mut fs = FileSystem::mkfs(&FsOptions {
        mkfs,
        flush_every: 0,
        allocator: crate::fsmodel::Allocator::Libext2fs,
    })?;
    let geo = fs.geometry().clone();
    let mut layer = Dgraid::new(cfg, &geo)?;
    feed(&mut layer, &geo, fs.drain_io())?;
    let inos = fs.populate_each(ns, |id, ino, fs| {
        if id != 0 && popular(id) {
            layer.mark_popular(ino);
        }
        feed(&mut layer, &geo, fs.drain_io())
    })?;
    fs.sync();
    feed(&mut layer, &geo, fs.drain_io())?;
    Ok(DgraidRun { fs, layer, inos })
}

/// The model alone (for the RAID baselines): made, populated, written back.
pub fn populate_plain(ns: &Namespace, mkfs: MkfsParams) -> Result<(FileSystem, Vec<u64>)> {
    let mut fs = FileSystem::mkfs(&FsOptions {
        mkfs,
        flush_every: 0,
        allocator: crate::fsmodel::Allocator::Libext2fs,
    })?;
    let inos = fs.populate_each(ns, |_, _, fs| {
        fs.drain_io();
        Ok(())
    })?;
    fs.sync();
    fs.drain_io();
    Ok((fs, inos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dgraid::layer::{DgraidLevel, Grouping};
    use crate::fsmodel::kind::BlockKind;
    use crate::fsmodel::namespace::{generate, GenParams};

    fn tree() -> Namespace {
        generate(&GenParams {
            dirs: 30,
            files: 400,
            seed: 3,
            max_file: 2 << 20,
            ..GenParams::default()
        })
        .unwrap()
    }

    #[test]
    fn files_live_on_their_home_and_metadata_on_r_disks() {
        let ns = tree();
        let size = fitting_size(&ns, 4096, 0.5);
        for grouping in [Grouping::File, Grouping::Dir] {
            let mut cfg = DgraidConfig::new(DgraidLevel::L0, 8, 3);
            cfg.grouping = grouping;
            // Members large enough for the largest directory: no spills.
            cfg.disk_blocks = size / 4096;
            let run = populate_dgraid(&ns, MkfsParams::new(size, 4096), cfg, &|_| false).unwrap();
            assert_eq!(run.layer.counts().spills, 0);
            let tags = run.fs.block_tags();
            for (&b, t) in &tags {
                let mask = run.layer.disk_mask(b);
                if mask == 0 {
                    assert!(
                        t.kind == BlockKind::InodeTable,
                        "only untouched inode-table blocks stay unmapped"
                    );
                    continue;
                }
                let n = mask.count_ones();
                let replicated = t.kind.is_static() || t.kind == BlockKind::Directory;
                assert_eq!(n, if replicated { 3 } else { 1 }, "{t:?}");
            }
            // Every file's blocks on one disk; with directory grouping the
            // same disk for all files of a directory.
            for (id, e) in ns.entries.iter().enumerate() {
                if e.kind != EntryType::File || e.size == 0 {
                    continue;
                }
                let m = &run.fs.inode(run.inos[id]).unwrap().map;
                let mask = m.all_blocks().fold(0, |a, b| a | run.layer.disk_mask(b));
                assert_eq!(mask.count_ones(), 1, "{grouping:?} {}", ns.path(id));
                if grouping == Grouping::Dir {
                    let home = run.layer.home_of(run.inos[e.parent]).unwrap();
                    assert_eq!(mask, 1 << home);
                }
            }
            // Greedy least-used placement balances the members (per file).
            if grouping == Grouping::File {
                let used = run.layer.used();
                let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
                assert!((*hi as f64) < 1.2 * *lo as f64, "{used:?}");
            }
        }
    }

    #[test]
    fn level_one_mirrors_on_pairs() {
        let ns = tree();
        let size = fitting_size(&ns, 4096, 0.5);
        let cfg = DgraidConfig::new(DgraidLevel::L1, 6, 2);
        let run = populate_dgraid(&ns, MkfsParams::new(size, 4096), cfg, &|_| false).unwrap();
        for (id, e) in ns.entries.iter().enumerate() {
            if e.kind == EntryType::File && e.size > 0 {
                let b = run.fs.inode(run.inos[id]).unwrap().map.data[0];
                let mask = run.layer.disk_mask(b);
                assert_eq!(mask.count_ones(), 2);
                let lo = mask.trailing_zeros();
                assert!(lo.is_multiple_of(2) && mask == 3 << lo, "pair {mask:b}");
            }
        }
    }
}

#[cfg(test)]
mod spill_tests {
    use super::*;
    use crate::dgraid::layer::{DgraidLevel, Grouping};
    use crate::fsmodel::namespace::parse_listing;

    #[test]
    fn a_directory_larger_than_its_home_spills_to_the_least_used_disk() {
        let ns = parse_listing(&b"f 4000000 /big/a\nf 4000000 /big/b\nf 4000 /small/c\n"[..], "t").unwrap();
        let mut cfg = DgraidConfig::new(DgraidLevel::L0, 4, 2);
        cfg.grouping = Grouping::Dir;
        cfg.disk_blocks = 1500; // 6 MB each: /big (8 MB) cannot fit one
        let run = populate_dgraid(&ns, MkfsParams::new(32 << 20, 4096), cfg, &|_| false).unwrap();
        assert!(run.layer.counts().spills > 0);
        let big = run.fs.resolve("big").unwrap();
        let mask = |name: &str| {
            let i = run.fs.resolve(name).unwrap();
            run.fs
                .inode(i)
                .unwrap()
                .map
                .data
                .iter()
                .fold(0, |a, &b| a | run.layer.disk_mask(b))
        };
        let home = run.layer.home_of(big).unwrap();
        // a's data fits its home; b fills it and overflows.
        assert_eq!(mask("big/a"), 1 << home);
        assert!(
            run.layer.used()[home as usize] > 1100,
            "the home filled up: {:?}",
            run.layer.used()
        );
        assert!(
            mask("big/b").count_ones() >= 2,
            "the second file overflows: {:b}",
            mask("big/b")
        );
    }
}

//! Properties of the layer over random file-system histories, and the
//! availability closed forms.

use std::rc::Rc;

use proptest::prelude::*;

use super::avail::{self, binomial, structure, Need, Sampling};
use super::layer::{Dgraid, DgraidConfig, DgraidLevel, Grouping};
use super::model::{feed, populate_dgraid};
use crate::fsmodel::bitmap::Bitmap;
use crate::fsmodel::fs::{FileSystem, FsOptions};
use crate::fsmodel::geometry::{MkfsParams, ROOT_INO};
use crate::fsmodel::namespace::{EntryType, Namespace};
use crate::trace::Op;

#[derive(Debug, Clone)]
enum Act {
    Create(u8, u16),
    Append(u8, u16),
    Overwrite(u8, u16),
    Unlink(u8),
    Mkdir,
    Sync,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => (any::<u8>(), 0u16..20_000).prop_map(|(d, s)| Act::Create(d, s)),
        2 => (any::<u8>(), 1u16..9000).prop_map(|(f, s)| Act::Append(f, s)),
        1 => (any::<u8>(), 1u16..5000).prop_map(|(f, s)| Act::Overwrite(f, s)),
        3 => any::<u8>().prop_map(Act::Unlink),
        1 => Just(Act::Mkdir),
        1 => Just(Act::Sync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The conservative live map holds every block the file system uses and
    /// has written, after every operation; after a sync it is exactly that
    /// set; a live-block rebuild of any member lists every copy of it.
    #[test]
    fn live_map_is_a_superset_and_exact_after_sync(acts in proptest::collection::vec(act(), 1..60), flush in 0u64..6, l1 in any::<bool>()) {
        let mut fs = FileSystem::mkfs(&FsOptions { mkfs: MkfsParams::new(4 << 20, 1024), flush_every: flush, allocator: crate::fsmodel::Allocator::Libext2fs }).unwrap();
        let geo = fs.geometry().clone();
        let level = if l1 { DgraidLevel::L1 } else { DgraidLevel::L0 };
        let mut layer = Dgraid::new(DgraidConfig::new(level, 4, 2), &geo).unwrap();
        let mut written = Bitmap::new(geo.blocks);
        let mut dirs = vec![ROOT_INO];
        let mut files: Vec<(u64, String, u64)> = Vec::new();
        let mut serial = 0;
        let step = |fs: &mut FileSystem, layer: &mut Dgraid, written: &mut Bitmap| {
            let io = fs.drain_io();
            for x in &io {
                if x.op == Op::Write {
                    written.set(x.block);
                }
            }
            feed(layer, &geo, io).unwrap();
            for b in written.ones().collect::<Vec<_>>() {
                if !fs.block_in_use(b) {
                    written.clear(b);
                }
            }
        };
        step(&mut fs, &mut layer, &mut written);
        for a in acts {
            let r = match a {
                Act::Create(d, s) => {
                    serial += 1;
                    let dir = dirs[d as usize % dirs.len()];
                    let name = format!("f{serial}");
                    fs.create(dir, &name, s as u64).map(|i| files.push((dir, name, i)))
                }
                Act::Append(f, s) if !files.is_empty() => fs.append(files[f as usize % files.len()].2, s as u64),
                Act::Overwrite(f, s) if !files.is_empty() => fs.overwrite(files[f as usize % files.len()].2, s as u64 / 2, s as u64),
                Act::Unlink(f) if !files.is_empty() => {
                    let (d, n, _) = files.swap_remove(f as usize % files.len());
                    fs.unlink(d, &n)
                }
                Act::Mkdir => {
                    serial += 1;
                    fs.mkdir(ROOT_INO, &format!("d{serial}")).map(|i| dirs.push(i))
                }
                Act::Sync => {
                    fs.sync();
                    Ok(())
                }
                _ => Ok(()),
            };
            if r.is_err() {
                break; // full: the property still held up to here
            }
            step(&mut fs, &mut layer, &mut written);
            let synced = fs.dirty_blocks().next().is_none();
            for b in 0..geo.blocks {
                let truly = fs.block_in_use(b) && written.get(b);
                if truly {
                    prop_assert!(layer.is_live(b), "block {b} used and written but not live");
                }
                if synced {
                    prop_assert_eq!(layer.is_live(b), truly, "after a sync, block {}", b);
                }
            }
            for d in 0..4u32 {
                let rebuild = layer.live_member_blocks(d);
                for b in written.ones().filter(|&b| fs.block_in_use(b)) {
                    for c in layer.copies(b).into_iter().filter(|c| c.disk == d) {
                        prop_assert!(rebuild.binary_search(&c.block).is_ok(), "disk {d} block {} of live {b} skipped", c.block);
                    }
                }
            }
        }
    }
}

/// A namespace where every directory (the root included) holds files.
fn dense_tree() -> Namespace {
    let mut ns = Namespace::new();
    let mut dirs = vec![0usize];
    for i in 0..12 {
        let parent = dirs[i / 3];
        dirs.push(ns.add(parent, &format!("d{i}"), EntryType::Dir, 0).unwrap());
    }
    for (j, &d) in dirs.iter().enumerate() {
        for f in 0..(1 + j % 4) {
            ns.add(d, &format!("f{f}"), EntryType::File, 3000 + 5000 * f as u64)
                .unwrap();
        }
    }
    ns
}

fn exact() -> Sampling {
    Sampling {
        trials: 10,
        seed: 1,
        exact_limit: 1 << 20,
    }
}

fn dgraid_rows(ns: &Namespace, cfg: DgraidConfig, ks: &[u32]) -> Vec<avail::AvailRow> {
    let d = cfg.disks;
    let run = populate_dgraid(ns, MkfsParams::new(16 << 20, 1024), cfg, &|_| false).unwrap();
    let s = Rc::new(structure(ns, &run.fs, &run.inos, &|b| {
        let m = run.layer.disk_mask(b);
        if m == 0 {
            Need::Free
        } else {
            Need::Any(m)
        }
    }));
    avail::availability_of(d, ks, &exact(), &mut |_| Ok(s.clone())).unwrap()
}

#[test]
fn full_replication_leaves_d_minus_k_over_d_of_directories() {
    let ns = dense_tree();
    for d in [4u32, 6, 8] {
        let mut cfg = DgraidConfig::new(DgraidLevel::L0, d, d);
        cfg.grouping = Grouping::Dir;
        let ks: Vec<u32> = (0..d).collect();
        for r in dgraid_rows(&ns, cfg, &ks) {
            let k = r.failed_count as f64;
            let want = (d as f64 - k) / d as f64;
            assert!(
                (r.dirs_available - want).abs() < 1e-12,
                "D {d} k {k}: {} vs {want}",
                r.dirs_available
            );
            assert_eq!(r.namespace_navigable, 1.0, "full replication keeps the namespace");
            assert_eq!(r.method, "exact");
        }
    }
}

#[test]
fn fewer_failures_than_copies_keep_the_namespace_navigable() {
    let ns = dense_tree();
    for r in 1..=4u32 {
        let cfg = DgraidConfig::new(DgraidLevel::L0, 6, r);
        let rows = dgraid_rows(&ns, cfg, &[0, 1, 2, 3, 4, 5]);
        for row in rows {
            if row.failed_count < r {
                assert_eq!(row.namespace_navigable, 1.0, "r {r} k {}", row.failed_count);
                assert_eq!(row.dirs_reachable, 1.0);
            }
        }
        // With one copy some failure of one disk cuts the namespace.
    }
    let rows = dgraid_rows(&ns, DgraidConfig::new(DgraidLevel::L0, 6, 1), &[1]);
    assert!(rows[0].namespace_navigable < 1.0);
}

#[test]
fn file_grouping_loses_more_directories_than_dir_grouping() {
    let ns = dense_tree();
    let mut cfg = DgraidConfig::new(DgraidLevel::L0, 8, 8);
    let file = dgraid_rows(&ns, cfg.clone(), &[1, 2, 3]);
    cfg.grouping = Grouping::Dir;
    let dir = dgraid_rows(&ns, cfg, &[1, 2, 3]);
    for (f, d) in file.iter().zip(&dir) {
        assert!(f.dirs_available < d.dirs_available, "{f:?} {d:?}");
        // Files: both lose about k/D of them.
        assert!((f.files_available - d.files_available).abs() < 0.15);
    }
}

#[test]
fn raid_block_semantics_and_md_semantics() {
    use crate::array::{Array, ArrayConfig, Level};
    let ns = dense_tree();
    let (fs, inos) = super::model::populate_plain(&ns, MkfsParams::new(16 << 20, 1024)).unwrap();
    let mut cfg = ArrayConfig::new(Level::Raid10, 8);
    cfg.block_size = 1024;
    let a = Array::new(cfg).unwrap();
    let s = Rc::new(structure(&ns, &fs, &inos, &|b| avail::raid_need(&a, b, 0)));
    let block = avail::availability_of(8, &[1, 2, 4], &exact(), &mut |_| Ok(s.clone())).unwrap();
    let md = avail::md_availability(&cfg, &[1, 2, 4], &exact()).unwrap();
    assert_eq!(block[0].files_available, 1.0);
    for (b, m) in block.iter().zip(&md) {
        // Block semantics never does worse than losing the volume.
        assert!(b.files_available >= m.files_available - 1e-12);
    }
    // RAID-0: MD loses everything at one failure.
    let r0 = avail::md_availability(&ArrayConfig::new(Level::Raid0, 8), &[0, 1, 3], &exact()).unwrap();
    assert_eq!(
        r0.iter().map(|r| r.files_available).collect::<Vec<_>>(),
        vec![1.0, 0.0, 0.0]
    );
    assert_eq!(binomial(32, 4), 35960);
}

#[test]
fn monte_carlo_is_seeded_and_close_to_exact() {
    let ns = dense_tree();
    let cfg = DgraidConfig::new(DgraidLevel::L0, 16, 2);
    let run = populate_dgraid(&ns, MkfsParams::new(16 << 20, 1024), cfg, &|_| false).unwrap();
    let s = Rc::new(structure(&ns, &run.fs, &run.inos, &|b| {
        Need::Any(run.layer.disk_mask(b))
    }));
    let mc = Sampling {
        trials: 1500,
        seed: 4,
        exact_limit: 0,
    };
    let a = avail::availability_of(16, &[4], &mc, &mut |_| Ok(s.clone())).unwrap();
    let b = avail::availability_of(16, &[4], &mc, &mut |_| Ok(s.clone())).unwrap();
    assert_eq!(a, b);
    assert_eq!(a[0].method, "monte-carlo");
    let e = avail::availability_of(16, &[4], &exact(), &mut |_| Ok(s.clone())).unwrap();
    assert_eq!(e[0].sets, binomial(16, 4));
    assert!(
        (a[0].files_available - e[0].files_available).abs() < 0.03,
        "{a:?} {e:?}"
    );
}

#[test]
fn rebuild_sources_cover_the_live_blocks_from_surviving_copies() {
    let ns = dense_tree();
    for level in [DgraidLevel::L0, DgraidLevel::L1] {
        let run = populate_dgraid(
            &ns,
            MkfsParams::new(16 << 20, 1024),
            DgraidConfig::new(level, 4, 2),
            &|_| false,
        )
        .unwrap();
        for d in 0..4u32 {
            let src = run.layer.rebuild_sources(d, 1 << d);
            let live = run.layer.live_member_blocks(d);
            assert_eq!(src.iter().map(|x| x.0).collect::<Vec<_>>(), live);
            for (_, s) in &src {
                if let Some(c) = s {
                    assert_ne!(c.disk, d);
                }
            }
            let missing = src.iter().filter(|x| x.1.is_none()).count();
            if level == DgraidLevel::L1 {
                assert_eq!(missing, 0, "level 1: every block has a mirror or replica");
            } else {
                assert!(missing > 0, "level 0 file data has no second copy");
            }
        }
    }
}

/// Owners are u64 (the inferrer's default placement units live above
/// 2^32): two owners equal in their low 32 bits are different units, and a
/// block passed from one to the other is remapped to the new home.
#[test]
fn owners_differing_above_32_bits_are_different_units() {
    use crate::fsmodel::kind::{BlockKind, Tag};
    let geo = crate::fsmodel::Geometry::mke2fs(&MkfsParams::new(8 << 20, 1024)).unwrap();
    let mut layer = Dgraid::new(DgraidConfig::new(DgraidLevel::L0, 4, 1), &geo).unwrap();
    let data = |o| Tag::of(o, BlockKind::Data, 0);
    // Unit 5 gets disk 0 (all empty); unit 2^40+5 the next least used, disk 1.
    layer.write(1000, &data(5)).unwrap();
    let b = 2000;
    layer.write(b, &data((1 << 40) + 5)).unwrap();
    assert_eq!(layer.copies(b)[0].disk, layer.home_of((1 << 40) + 5).unwrap());
    layer.write(b, &data(5)).unwrap();
    assert_eq!(layer.counts().remaps, 1);
    assert_eq!(layer.copies(b)[0].disk, layer.home_of(5).unwrap());
}

/// An xattr block is its owner's: a file's sits on the file's home site
/// alone, a directory's is replicated as the directory's blocks are.
#[test]
fn xattr_blocks_go_with_their_owner_and_a_directorys_are_replicated() {
    use crate::fsmodel::kind::{BlockKind, Tag};
    let geo = crate::fsmodel::Geometry::mke2fs(&MkfsParams::new(8 << 20, 1024)).unwrap();
    let mut layer = Dgraid::new(DgraidConfig::new(DgraidLevel::L0, 4, 3), &geo).unwrap();
    layer.write(1000, &Tag::of(20, BlockKind::Data, 12)).unwrap();
    layer.write(1001, &Tag::of(20, BlockKind::Xattr, 12)).unwrap();
    assert_eq!(layer.copies(1001).len(), 1);
    assert_eq!(layer.copies(1001)[0].disk, layer.home_of(20).unwrap());
    layer.write(1002, &Tag::of(12, BlockKind::Directory, 2)).unwrap();
    layer.write(1003, &Tag::of(12, BlockKind::Xattr, 2)).unwrap();
    assert_eq!(layer.copies(1002).len(), 3);
    assert_eq!(layer.copies(1003).len(), 3);
}

/// The journal (inode 8) is replicated: without it the file system does
/// not mount, so it must survive what the namespace survives.
#[test]
fn the_journals_blocks_are_replicated() {
    use crate::fsmodel::kind::{BlockKind, Tag};
    let geo = crate::fsmodel::Geometry::mke2fs(&MkfsParams::new(8 << 20, 1024)).unwrap();
    let mut layer = Dgraid::new(DgraidConfig::new(DgraidLevel::L0, 4, 4), &geo).unwrap();
    layer.write(1000, &Tag::of(8, BlockKind::Data, 0)).unwrap();
    layer.write(1001, &Tag::of(8, BlockKind::Indirect, 0)).unwrap();
    layer.write(1002, &Tag::of(12, BlockKind::Data, 2)).unwrap();
    assert_eq!(layer.copies(1000).len(), 4);
    assert_eq!(layer.copies(1001).len(), 4);
    assert_eq!(layer.copies(1002).len(), 1);
}

//! The model against the real thing: images made by `mke2fs -t ext2` (and
//! `mke2fs -d` from a tree), read back with `dumpe2fs` and `debugfs`.
//! `make test` installs e2fsprogs when missing; without it these tests fail
//! (they are the evidence that the model's layout is mke2fs's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::fs::{FileSystem, FsOptions};
use super::geometry::{Geometry, Group, MkfsParams};
use super::namespace::{generate, EntryType, GenParams, Namespace};
use crate::trace::synth::SplitMix64;

fn tool(name: &str) -> PathBuf {
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
    {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} not found: install e2fsprogs (`make test` does: apt-get install e2fsprogs)");
}

fn run(cmd: &mut Command) -> String {
    cmd.env("LC_ALL", "C")
        .env("DEBUGFS_PAGER", "__none__")
        .env("PAGER", "__none__");
    let out = cmd.output().expect("run e2fsprogs tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mke2fs(img: &Path, bs: u64, size: u64, tree: Option<&Path>) {
    let _ = std::fs::remove_file(img);
    let mut c = Command::new(tool("mke2fs"));
    c.args(["-q", "-F", "-t", "ext2", "-b", &bs.to_string()]);
    if let Some(t) = tree {
        c.arg("-d").arg(t);
    }
    c.arg(img).arg((size / bs).to_string());
    run(&mut c);
}

/// `a-b` or `a` → (a, b).
fn range(s: &str) -> [u64; 2] {
    let s = s.trim();
    match s.split_once('-') {
        Some((a, b)) => [a.parse().unwrap(), b.parse().unwrap()],
        None => {
            let a = s.parse().unwrap();
            [a, a]
        }
    }
}

fn ranges(s: &str) -> Vec<u64> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .flat_map(|x| {
            let [a, b] = range(x);
            a..=b
        })
        .collect()
}

/// dumpe2fs's groups, with their free blocks and free inodes.
struct Dump {
    groups: Vec<Group>,
    free_blocks: Vec<Vec<u64>>,
    free_inodes: Vec<Vec<u64>>,
    header: BTreeMap<String, String>,
}

fn dumpe2fs(img: &Path) -> Dump {
    let text = run(Command::new(tool("dumpe2fs")).arg(img));
    let mut d = Dump {
        groups: Vec::new(),
        free_blocks: Vec::new(),
        free_inodes: Vec::new(),
        header: BTreeMap::new(),
    };
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Group ") {
            let (g, rest) = rest.split_once(':').unwrap();
            let blocks = rest.split("(Blocks ").nth(1).unwrap().split(')').next().unwrap();
            let [start, end] = range(blocks);
            d.groups.push(Group {
                group: g.parse().unwrap(),
                start,
                end,
                superblock: None,
                descriptors: None,
                reserved_descriptors: None,
                block_bitmap: 0,
                inode_bitmap: 0,
                inode_table: [0, 0],
            });
            continue;
        }
        let Some(g) = d.groups.last_mut() else {
            if let Some((k, v)) = l.split_once(':') {
                d.header.insert(k.trim().to_string(), v.trim().to_string());
            }
            continue;
        };
        let first_num = |s: &str| -> u64 {
            s.split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches(',')
                .parse()
                .unwrap()
        };
        if l.starts_with("Primary superblock at") || l.starts_with("Backup superblock at") {
            let (sb, desc) = l.split_once(", Group descriptors at ").unwrap();
            g.superblock = Some(first_num(sb.rsplit("at ").next().unwrap()));
            g.descriptors = Some(range(desc));
        } else if let Some(r) = l.strip_prefix("Reserved GDT blocks at ") {
            g.reserved_descriptors = Some(range(r));
        } else if let Some(r) = l.strip_prefix("Block bitmap at ") {
            g.block_bitmap = first_num(r);
        } else if let Some(r) = l.strip_prefix("Inode bitmap at ") {
            g.inode_bitmap = first_num(r);
        } else if let Some(r) = l.strip_prefix("Inode table at ") {
            g.inode_table = range(r.split_whitespace().next().unwrap());
        } else if let Some(r) = l.strip_prefix("Free blocks: ") {
            d.free_blocks.push(ranges(r));
        } else if l == "Free blocks:" {
            d.free_blocks.push(Vec::new());
        } else if let Some(r) = l.strip_prefix("Free inodes: ") {
            d.free_inodes.push(ranges(r));
        } else if l == "Free inodes:" {
            d.free_inodes.push(Vec::new());
        }
    }
    d
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[test]
fn geometry_equals_dumpe2fs_for_sizes_and_block_sizes() {
    const MIB: u64 = 1 << 20;
    let cases: &[(u64, u64)] = &[
        (1024, 2 * MIB),                     // floppy class, one group
        (1024, 8 * MIB),                     // small class
        (1024, 64 * MIB),                    // 8 groups: backups in 1, 3, 5, 7
        (1024, 230 * MIB),                   // 29 groups: 9, 25, 27
        (1024, (2 * 8192 + 1 + 120) * 1024), // a last group too small to keep
        (1024, (2 * 8192 + 1 + 900) * 1024), // a short last group that stays
        (2048, 16 * MIB),
        (2048, 200 * MIB),
        (2048, 700 * MIB), // default class (16 KiB per inode)
        (4096, 64 * MIB),
        (4096, 1024 * MIB),
        (4096, 3 * 1024 * MIB + 7 * 4096),
    ];
    let dir = tmpdir();
    let img = dir.path().join("g.img");
    for &(bs, size) in cases {
        mke2fs(&img, bs, size, None);
        let dump = dumpe2fs(&img);
        let geo = Geometry::mke2fs(&MkfsParams::new(size, bs)).unwrap();
        assert_eq!(geo.groups, dump.groups, "block size {bs}, size {size}");
        assert_eq!(geo.blocks.to_string(), dump.header["Block count"], "{bs} {size}");
        assert_eq!(geo.inodes.to_string(), dump.header["Inode count"], "{bs} {size}");
        assert_eq!(geo.inodes_per_group.to_string(), dump.header["Inodes per group"]);
        assert_eq!(
            geo.reserved_gdt_blocks.to_string(),
            dump.header.get("Reserved GDT blocks").cloned().unwrap_or("0".into())
        );
        // A fresh model file system uses exactly the blocks and inodes mke2fs does.
        let fs = FileSystem::mkfs(&FsOptions {
            mkfs: MkfsParams::new(size, bs),
            flush_every: 0,
            allocator: crate::fsmodel::Allocator::Libext2fs,
        })
        .unwrap();
        assert_eq!(fs.free_blocks().to_string(), dump.header["Free blocks"], "{bs} {size}");
        assert_eq!(fs.free_inodes().to_string(), dump.header["Free inodes"], "{bs} {size}");
    }
}

/// A tree with the corner cases: a directory that needs an indirect block,
/// files past the double-indirect boundary, short and long symlinks, a
/// fifo, empty files and directories, and a generated bulk.
fn test_tree(bs: u64) -> Namespace {
    let mut ns = generate(&GenParams {
        dirs: 40,
        files: 300,
        seed: 7,
        max_file: 600 * 1024,
        ..GenParams::default()
    })
    .unwrap();
    let big = ns.add(0, "big", EntryType::Dir, 0).unwrap();
    // 1 KiB blocks: 12 + 256 blocks reach DIND; 4 KiB: 12 + 1024.
    let apb = bs / 4;
    ns.add(big, "dind", EntryType::File, (12 + apb + 3 * apb + 5) * bs)
        .unwrap();
    ns.add(big, "ind", EntryType::File, 13 * bs + 1).unwrap();
    ns.add(big, "empty", EntryType::File, 0).unwrap();
    ns.add(big, "link-long", EntryType::Symlink, 100).unwrap();
    ns.add(big, "link-short", EntryType::Symlink, 9).unwrap();
    ns.add(big, "fifo", EntryType::Special, 0).unwrap();
    ns.add(big, "void", EntryType::Dir, 0).unwrap();
    let wide = ns.add(0, "wide", EntryType::Dir, 0).unwrap();
    // 13+ directory blocks of 1 KiB: 900 entries of 16 bytes.
    for i in 0..900 {
        ns.add(wide, &format!("e{i:04}"), EntryType::File, (i % 3) * 700)
            .unwrap();
    }
    ns
}

/// Write the namespace as a real tree (non-zero contents, so mke2fs -d
/// makes no holes).
fn materialize(ns: &Namespace, root: &Path) {
    let mut rng = SplitMix64::new(3);
    for id in ns.creation_order() {
        let e = &ns.entries[id];
        let p = root.join(ns.path(id));
        match e.kind {
            EntryType::Dir => std::fs::create_dir(&p).unwrap(),
            EntryType::File => {
                let bytes: Vec<u8> = (0..e.size).map(|_| 1 + (rng.next_u64() % 255) as u8).collect();
                std::fs::write(&p, bytes).unwrap();
            }
            EntryType::Symlink => std::os::unix::fs::symlink("y".repeat(e.size as usize), &p).unwrap(),
            EntryType::Special => {
                run(Command::new("mkfifo").arg(&p));
            }
        }
    }
}

/// debugfs `stat` of every path: (inode, data blocks, IND, DIND, TIND) in order.
/// (inode, data, IND, DIND, TIND) of one path.
type StatBlocks = (u64, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>);

fn debugfs_blocks(img: &Path, paths: &[String]) -> Vec<StatBlocks> {
    let dir = tmpdir();
    let cmds = dir.path().join("cmds");
    let text: String = paths.iter().map(|p| format!("stat /{p}\n")).collect();
    std::fs::write(&cmds, text).unwrap();
    let out = run(Command::new(tool("debugfs")).arg("-f").arg(&cmds).arg(img));
    let mut res = Vec::new();
    for chunk in out.split("debugfs: stat ").skip(1) {
        let ino: u64 = chunk
            .split("Inode: ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let (mut data, mut ind, mut dind, mut tind) = (vec![], vec![], vec![], vec![]);
        if let Some(b) = chunk.split("BLOCKS:\n").nth(1) {
            let list = b.lines().next().unwrap_or("");
            for item in list.split(", ").filter(|s| s.starts_with('(')) {
                let (label, phys) = item[1..].split_once("):").unwrap();
                let phys = range(phys);
                let v: Vec<u64> = (phys[0]..=phys[1]).collect();
                match label {
                    "IND" => ind.extend(v),
                    "DIND" => dind.extend(v),
                    "TIND" => tind.extend(v),
                    _ => data.extend(v),
                }
            }
        }
        res.push((ino, data, ind, dind, tind));
    }
    assert_eq!(res.len(), paths.len());
    res
}

#[test]
fn populated_image_equals_the_model_block_for_block() {
    for bs in [1024u64, 4096] {
        let ns = test_tree(bs);
        let dir = tmpdir();
        let root = dir.path().join("tree");
        std::fs::create_dir(&root).unwrap();
        materialize(&ns, &root);
        let size = if bs == 1024 { 48 << 20 } else { 96 << 20 };
        let img = dir.path().join("p.img");
        mke2fs(&img, bs, size, Some(&root));

        let mut fs = FileSystem::mkfs(&FsOptions {
            mkfs: MkfsParams::new(size, bs),
            flush_every: 0,
            allocator: crate::fsmodel::Allocator::Libext2fs,
        })
        .unwrap();
        let inos = fs.populate(&ns).unwrap();

        // Every path: same inode, same blocks in the same places.
        let ids: Vec<usize> = ns.creation_order();
        let paths: Vec<String> = ids.iter().map(|&i| ns.path(i)).collect();
        let got = debugfs_blocks(&img, &paths);
        let compared: usize = got.iter().map(|g| g.1.len() + g.2.len()).sum();
        assert!(compared > 1000, "{bs}: the image holds the tree ({compared} blocks)");
        for ((&id, path), (ino, data, ind, dind, tind)) in ids.iter().zip(&paths).zip(got) {
            let m = &fs.inode(inos[id]).unwrap().map;
            assert_eq!(inos[id], ino, "{bs}: inode of {path}");
            assert_eq!(m.data, data, "{bs}: data blocks of {path}");
            assert_eq!(m.ind, ind, "{bs}: indirect blocks of {path}");
            assert_eq!(m.dind, dind, "{bs}: double-indirect blocks of {path}");
            assert_eq!((m.tind != 0).then_some(m.tind).into_iter().collect::<Vec<_>>(), tind);
        }
        assert!(fs.inode(fs.resolve("wide").unwrap()).unwrap().map.ind.len() == (bs == 1024) as usize);

        // Free blocks and inodes, group by group, and the kind of every block.
        let dump = dumpe2fs(&img);
        let geo = fs.geometry().clone();
        assert_eq!(geo.groups, dump.groups);
        for (g, grp) in geo.groups.iter().enumerate() {
            let free: Vec<u64> = (grp.start..=grp.end).filter(|&b| !fs.block_in_use(b)).collect();
            assert_eq!(free, dump.free_blocks[g], "{bs}: free blocks of group {g}");
            let ipg = geo.inodes_per_group;
            let free_i: Vec<u64> = (g as u64 * ipg + 1..=(g as u64 + 1) * ipg)
                .filter(|&i| !fs.inode_in_use(i))
                .collect();
            assert_eq!(free_i, dump.free_inodes[g], "{bs}: free inodes of group {g}");
        }
        let tags = fs.block_tags();
        let used = (geo.first_data_block..geo.blocks)
            .filter(|&b| fs.block_in_use(b))
            .count();
        assert_eq!(tags.len(), used, "{bs}: every used block has a kind and owner");
    }
}

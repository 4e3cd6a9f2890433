//! Hand-built images: a superblock and descriptors for the layout the ext2
//! model gives, inodes and directory blocks written in chosen orders.

use super::dirent::build::dir_block;
use super::inode::build::inode;
use super::*;
use crate::fsmodel::geometry::MkfsParams;

const KIB: u64 = 1024;

fn geo(size: u64, bs: u64) -> Geometry {
    Geometry::mke2fs(&MkfsParams::new(size, bs)).unwrap()
}

/// The superblock block (whole fs block) of `g` with mke2fs's ext2 features.
fn sb_block(g: &Geometry) -> Vec<u8> {
    let bs = g.block_size as usize;
    let mut b = vec![0u8; bs];
    let o = (SUPERBLOCK_OFFSET % g.block_size) as usize;
    let mut put32 = |off: usize, v: u64| b[o + off..o + off + 4].copy_from_slice(&(v as u32).to_le_bytes());
    put32(0x00, g.inodes);
    put32(0x04, g.blocks);
    put32(0x14, g.first_data_block);
    put32(0x18, g.block_size.trailing_zeros() as u64 - 10);
    put32(0x20, g.blocks_per_group);
    put32(0x24, g.blocks_per_group);
    put32(0x28, g.inodes_per_group);
    put32(0x4C, 1);
    put32(0x54, 11);
    put32(0x5C, 0x38); // ext_attr, resize_inode, dir_index
    put32(0x60, 0x2); // filetype
    put32(0x64, 0x3); // sparse_super, large_file
    b[o + 0x38..o + 0x3A].copy_from_slice(&0xEF53u16.to_le_bytes());
    b[o + 0x58..o + 0x5A].copy_from_slice(&(g.inode_size as u16).to_le_bytes());
    b[o + 0xCE..o + 0xD0].copy_from_slice(&(g.reserved_gdt_blocks as u16).to_le_bytes());
    b
}

/// The primary descriptor table's blocks.
fn gdt_blocks(g: &Geometry) -> Vec<u8> {
    let mut b = vec![0u8; (g.desc_blocks * g.block_size) as usize];
    for grp in &g.groups {
        let o = grp.group as usize * 32;
        b[o..o + 4].copy_from_slice(&(grp.block_bitmap as u32).to_le_bytes());
        b[o + 4..o + 8].copy_from_slice(&(grp.inode_bitmap as u32).to_le_bytes());
        b[o + 8..o + 12].copy_from_slice(&(grp.inode_table[0] as u32).to_le_bytes());
    }
    b
}

fn inferrer(g: &Geometry, deferred_max: usize) -> Inferrer {
    Inferrer::new(InferConfig {
        block_size: g.block_size,
        deferred_max,
    })
    .unwrap()
}

/// An inferrer that has seen the superblock and descriptors.
fn booted(g: &Geometry, deferred_max: usize) -> Inferrer {
    let mut inf = inferrer(g, deferred_max);
    inf.write_checked(g.superblock(), &sb_block(g)).unwrap();
    let acts = inf.write_checked(g.superblock() + 1, &gdt_blocks(g)).unwrap();
    assert!(matches!(&acts[0], Action::Geometry(x) if x == g), "{acts:?}");
    inf
}

/// The inode-table block holding `ino`, with `rec` in its slot (other
/// slots from `base`, zeros when None).
fn table_block(g: &Geometry, ino: u64, rec: &[u8], base: Option<Vec<u8>>) -> (u64, Vec<u8>) {
    let mut b = base.unwrap_or_else(|| vec![0u8; g.block_size as usize]);
    let per = g.block_size / g.inode_size;
    let off = (((ino - 1) % g.inodes_per_group % per) * g.inode_size) as usize;
    b[off..off + rec.len()].copy_from_slice(rec);
    (g.inode_block(ino), b)
}

fn data(g: &Geometry, byte: u8) -> Vec<u8> {
    vec![byte; g.block_size as usize]
}

fn stores(acts: &[Action]) -> Vec<(u64, Tag)> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Store { block, tag, .. } => Some((*block, *tag)),
            _ => None,
        })
        .collect()
}

#[test]
fn layout_from_the_superblock_and_descriptors_equals_mke2fs() {
    // 1 KiB blocks: superblock in block 1, one group; 4 KiB blocks:
    // superblock inside block 0, several groups with sparse backups.
    for g in [geo(8 << 20, KIB), geo(300 << 20, 4 * KIB), geo(64 << 20, KIB)] {
        booted(&g, 16);
    }
}

#[test]
fn writes_before_the_layout_are_held_then_placed_by_owner() {
    let g = geo(8 << 20, KIB);
    let mut inf = inferrer(&g, 16);
    let d = g.groups[0].inode_table[1] + 10;
    // mke2fs's order: contents and tables first, superblock at the end.
    assert!(inf.write_checked(d, &data(&g, 7)).unwrap().is_empty());
    assert_eq!(inf.deferred(d), Some(&data(&g, 7)[..]));
    let (tb, tbl) = table_block(&g, 12, &inode(0o100644, 1000, 2, &[d as u32]), None);
    assert!(inf.write_checked(tb, &tbl).unwrap().is_empty());
    assert!(inf.write_checked(g.superblock(), &sb_block(&g)).unwrap().is_empty());
    let acts = inf.write_checked(2, &gdt_blocks(&g)).unwrap();
    assert!(matches!(acts[0], Action::Geometry(_)));
    let s = stores(&acts);
    assert!(s.contains(&(d, Tag::of(12, BlockKind::Data, 0))), "{s:?}");
    assert!(s.contains(&(tb, Tag::shared(BlockKind::InodeTable))));
    assert_eq!(inf.deferred(d), None);
    assert_eq!(inf.counts().overflow_placed, 0);
}

#[test]
fn a_zeroed_superblock_area_is_held_until_the_superblock_comes() {
    // mke2fs zeroes the superblock area before anything else.
    let g = geo(8 << 20, KIB);
    let mut inf = inferrer(&g, 16);
    assert!(inf.write_checked(1, &vec![0u8; 1024]).unwrap().is_empty());
    assert!(inf.write_checked(2, &gdt_blocks(&g)).unwrap().is_empty());
    assert!(inf.refused().is_none() && inf.geometry().is_none());
    let acts = inf.write_checked(1, &sb_block(&g)).unwrap();
    assert!(matches!(&acts[0], Action::Geometry(x) if *x == g));
    // The superblock is stored once, with its newest contents.
    let sb: Vec<_> = acts
        .iter()
        .filter(|a| matches!(a, Action::Store { block: 1, .. }))
        .collect();
    assert_eq!(sb.len(), 1);
    assert!(matches!(sb[0], Action::Store { data, .. } if *data == sb_block(&g)));
}

#[test]
fn bad_superblocks_are_refused_naming_the_field() {
    let g = geo(8 << 20, KIB);
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|b| b[0x60] |= 0x80), "64bit"),
        (Box::new(|b| b[0x60] |= 0x10), "meta_bg"),
        (Box::new(|b| b[0x60] |= 0x40), "extents (0x40) is set"),
        (Box::new(|b| b[0x61] |= 0x80), "inline_data"),
        (Box::new(|b| b[0x65] |= 0x02), "bigalloc"),
        (Box::new(|b| b[0x18] = 2), "s_log_block_size"),
        (Box::new(|b| b[0x28] = 0x37), "s_inodes_count"),
    ];
    for (edit, word) in cases {
        let mut inf = inferrer(&g, 16);
        let mut sb = sb_block(&g);
        edit(&mut sb);
        let e = inf.write_checked(1, &sb).unwrap_err().to_string();
        assert!(e.contains(word), "{e}");
        assert!(inf.refused().is_some_and(|r| r.to_string().contains(word)));
        // From then on nothing is answered nor held.
        assert!(Classifier::write(&mut inf, 2, &gdt_blocks(&g)).is_empty());
        assert_eq!(inf.deferred(2), None);
    }
    // Descriptors naming a table past the end.
    let mut inf = inferrer(&g, 16);
    inf.write_checked(1, &sb_block(&g)).unwrap();
    let mut gdt = gdt_blocks(&g);
    gdt[8..12].copy_from_slice(&9_000u32.to_le_bytes());
    let e = inf.write_checked(2, &gdt).unwrap_err().to_string();
    assert!(e.contains("bg_inode_table"), "{e}");
    // A partial block is not accepted.
    let mut inf = inferrer(&g, 16);
    assert!(inf.write_checked(1, &[0u8; 512]).is_err());
}

#[test]
fn indirect_trees_classify_their_children() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let base = g.groups[0].inode_table[1] + 1;
    let (ind, dind, child_ind, leaf, leaf2) = (base, base + 1, base + 2, base + 3, base + 4);
    // Data first: everything deferred.
    let mut ib = vec![0u8; 1024];
    ib[0..4].copy_from_slice(&(leaf as u32).to_le_bytes());
    let mut db = vec![0u8; 1024];
    db[8..12].copy_from_slice(&(child_ind as u32).to_le_bytes());
    let mut cb = vec![0u8; 1024];
    cb[4..8].copy_from_slice(&(leaf2 as u32).to_le_bytes());
    for (b, d) in [
        (ind, &ib),
        (dind, &db),
        (child_ind, &cb),
        (leaf, &data(&g, 1)),
        (leaf2, &data(&g, 2)),
    ] {
        assert!(inf.write_checked(b, d).unwrap().is_empty());
    }
    assert_eq!(inf.deferred_len(), 5);
    let mut ptrs = [0u32; 14];
    ptrs[12] = ind as u32;
    ptrs[13] = dind as u32;
    let (tb, tbl) = table_block(&g, 20, &inode(0o100644, 300 * 1024, 600, &ptrs), None);
    let s = stores(&inf.write_checked(tb, &tbl).unwrap());
    let t = |k| Tag::of(20, k, 0);
    for (b, k) in [
        (ind, BlockKind::Indirect),
        (dind, BlockKind::Indirect),
        (child_ind, BlockKind::Indirect),
        (leaf, BlockKind::Data),
        (leaf2, BlockKind::Data),
    ] {
        assert!(s.contains(&(b, t(k))), "{b}: {s:?}");
    }
    assert_eq!(inf.deferred_len(), 0);
    assert_eq!(inf.counts().released, 5);
}

#[test]
fn directory_blocks_and_parents() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let base = g.groups[0].inode_table[1] + 1;
    let (dirb, fileb) = (base, base + 1);
    // The file's inode and data before its directory: parent unknown (0).
    let (tb, tbl) = table_block(&g, 14, &inode(0o100644, 10, 2, &[fileb as u32]), None);
    inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(
        stores(&inf.write_checked(fileb, &data(&g, 3)).unwrap()),
        vec![(fileb, Tag::of(14, BlockKind::Data, 0))]
    );
    // Directory 13 names file 14: its blocks are retagged with the parent.
    let (tb2, tbl2) = table_block(&g, 13, &inode(0o040755, 1024, 2, &[dirb as u32]), Some(tbl));
    assert_eq!(tb2, tb);
    inf.write_checked(tb2, &tbl2).unwrap();
    let acts = inf
        .write_checked(dirb, &dir_block(1024, &[(13, "."), (2, ".."), (14, "f")]))
        .unwrap();
    assert_eq!(stores(&acts), vec![(dirb, Tag::of(13, BlockKind::Directory, 0))]);
    assert!(acts.contains(&Action::Retag {
        block: fileb,
        tag: Tag::of(14, BlockKind::Data, 13)
    }));
}

#[test]
fn a_block_reused_by_another_file_is_retagged() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let b = g.groups[0].inode_table[1] + 5;
    let (tb, tbl) = table_block(&g, 13, &inode(0o100644, 10, 2, &[b as u32]), None);
    inf.write_checked(tb, &tbl).unwrap();
    inf.write_checked(b, &data(&g, 1)).unwrap();
    // File 13 truncated (no pointers), file 14 takes the block.
    let (_, tbl) = table_block(&g, 13, &inode(0o100644, 0, 0, &[]), Some(tbl));
    let (_, tbl) = table_block(&g, 14, &inode(0o100644, 10, 2, &[b as u32]), Some(tbl));
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert!(
        acts.contains(&Action::Retag {
            block: b,
            tag: Tag::of(14, BlockKind::Data, 0)
        }),
        "{acts:?}"
    );
    assert_eq!(inf.counts().retags, 1);
    // The same inode table written again changes nothing.
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(acts.len(), 1);
}

#[test]
fn a_bitmap_showing_a_block_free_frees_it() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let first = g.groups[0].start;
    let b = g.groups[0].inode_table[1] + 5;
    let deferred_b = b + 1;
    let (tb, tbl) = table_block(&g, 12, &inode(0o100644, 10, 2, &[b as u32]), None);
    inf.write_checked(tb, &tbl).unwrap();
    inf.write_checked(b, &data(&g, 1)).unwrap();
    inf.write_checked(deferred_b, &data(&g, 2)).unwrap();
    // Every block in use but b and deferred_b.
    let mut bm = vec![0xFFu8; 1024];
    for x in [b, deferred_b] {
        let j = x - first;
        bm[(j / 8) as usize] &= !(1 << (j % 8));
    }
    let acts = inf.write_checked(g.groups[0].block_bitmap, &bm).unwrap();
    assert_eq!(
        acts.iter()
            .filter(|a| matches!(a, Action::Free { .. }))
            .collect::<Vec<_>>(),
        vec![&Action::Free { block: b }]
    );
    // The deferred block is dropped (it is free): no Free (never stored), nothing to flush.
    assert_eq!(inf.deferred(deferred_b), None);
    assert!(inf.flush().is_empty());
    assert_eq!(inf.tag_of(b), None);
    // A bitmap showing every block used frees nothing.
    inf.write_checked(b, &data(&g, 1)).unwrap();
    let acts = inf.write_checked(g.groups[0].block_bitmap, &[0xFF; 1024]).unwrap();
    assert!(!acts.iter().any(|a| matches!(a, Action::Free { .. })));
}

#[test]
fn overflow_places_the_oldest_by_default_then_retags_it() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 2);
    let base = g.groups[0].inode_table[1] + 1;
    let blocks = [base, base + 1, base + 2];
    assert!(inf.write_checked(blocks[0], &data(&g, 1)).unwrap().is_empty());
    assert!(inf.write_checked(blocks[1], &data(&g, 2)).unwrap().is_empty());
    // The third write overflows the list of 2: the oldest is placed now.
    let acts = inf.write_checked(blocks[2], &data(&g, 3)).unwrap();
    assert_eq!(
        acts,
        vec![Action::Store {
            block: blocks[0],
            tag: default_tag(blocks[0]),
            data: data(&g, 1)
        }]
    );
    assert_eq!(inf.counts().overflow_placed, 1);
    assert_eq!(inf.deferred(blocks[0]), None);
    // Its owner appears: the placed block is retagged, the held ones stored.
    let ptrs: Vec<u32> = blocks.iter().map(|&b| b as u32).collect();
    let (tb, tbl) = table_block(&g, 15, &inode(0o100644, 3000, 6, &ptrs), None);
    let acts = inf.write_checked(tb, &tbl).unwrap();
    let t = Tag::of(15, BlockKind::Data, 0);
    assert!(
        acts.contains(&Action::Retag {
            block: blocks[0],
            tag: t
        }),
        "{acts:?}"
    );
    let s = stores(&acts);
    assert!(s.contains(&(blocks[1], t)) && s.contains(&(blocks[2], t)));
}

#[test]
fn an_indirect_block_placed_by_default_is_followed_when_its_owner_appears() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 1);
    let base = g.groups[0].inode_table[1] + 1;
    let (ind, leaf) = (base, base + 1);
    let mut ib = vec![0u8; 1024];
    ib[0..4].copy_from_slice(&(leaf as u32).to_le_bytes());
    inf.write_checked(ind, &ib).unwrap();
    inf.write_checked(leaf, &data(&g, 9)).unwrap(); // overflows: ind placed by default
    let flushed = inf.flush(); // leaf placed by default
    assert_eq!(stores(&flushed), vec![(leaf, default_tag(leaf))]);
    let mut ptrs = [0u32; 13];
    ptrs[12] = ind as u32;
    let (tb, tbl) = table_block(&g, 16, &inode(0o100644, 20 * 1024, 44, &ptrs), None);
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert!(acts.contains(&Action::Retag {
        block: ind,
        tag: Tag::of(16, BlockKind::Indirect, 0)
    }));
    assert!(acts.contains(&Action::Retag {
        block: leaf,
        tag: Tag::of(16, BlockKind::Data, 0)
    }));
}

#[test]
fn fast_symlinks_devices_and_extent_inodes_have_no_blocks() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let b = g.groups[0].inode_table[1] + 1;
    inf.write_checked(b, &data(&g, 1)).unwrap();
    let mut l = inode(0o120777, 5, 0, &[]);
    l[0x28..0x2C].copy_from_slice(&(b as u32).to_le_bytes()); // the target's bytes
    let (tb, tbl) = table_block(&g, 12, &l, None);
    let (_, tbl) = table_block(&g, 13, &inode(0o060644, 0, 0, &[b as u32]), Some(tbl));
    let mut e = inode(0o100644, 1024, 2, &[b as u32]);
    e[0x20..0x24].copy_from_slice(&(inode::EXTENTS_FL as u32).to_le_bytes());
    let (_, tbl) = table_block(&g, 14, &e, Some(tbl));
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(stores(&acts), vec![(tb, Tag::shared(BlockKind::InodeTable))]);
    assert_eq!(inf.deferred_len(), 1);
    assert_eq!(inf.counts().extent_inodes, 1);
}

#[test]
fn a_stale_claim_is_undone_when_its_inode_is_deleted() {
    // Block x belongs to file 13. A late write of file 14's inode still
    // points at x (14 held it before 13 did): x is retagged to 14. When
    // 14's deletion is written, x goes back to 13, its remaining claim.
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let x = g.groups[0].inode_table[1] + 5;
    let (tb, tbl) = table_block(&g, 13, &inode(0o100644, 10, 2, &[x as u32]), None);
    inf.write_checked(tb, &tbl).unwrap();
    inf.write_checked(x, &data(&g, 1)).unwrap();
    let (_, tbl) = table_block(&g, 14, &inode(0o100644, 10, 2, &[x as u32]), Some(tbl));
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert!(acts.contains(&Action::Retag {
        block: x,
        tag: Tag::of(14, BlockKind::Data, 0)
    }));
    let mut dead = inode(0o100644, 10, 2, &[x as u32]);
    dead[0x1A..0x1C].copy_from_slice(&0u16.to_le_bytes());
    dead[0x14..0x18].copy_from_slice(&7u32.to_le_bytes());
    let (_, tbl) = table_block(&g, 14, &dead, Some(tbl));
    let acts = inf.write_checked(tb, &tbl).unwrap();
    assert!(
        acts.contains(&Action::Retag {
            block: x,
            tag: Tag::of(13, BlockKind::Data, 0)
        }),
        "{acts:?}"
    );
    // 13 truncated to nothing: no claim is left, x is unknown again.
    let (_, tbl) = table_block(&g, 13, &inode(0o100644, 0, 0, &[]), Some(tbl));
    inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(inf.tag_of(x), None);
}

#[test]
fn a_pointer_dropped_from_an_indirect_block_is_withdrawn() {
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let base = g.groups[0].inode_table[1] + 1;
    let (ind, c1, c2) = (base, base + 1, base + 2);
    let mut ptrs = [0u32; 13];
    ptrs[12] = ind as u32;
    let (tb, tbl) = table_block(&g, 13, &inode(0o100644, 14 * 1024, 30, &ptrs), None);
    inf.write_checked(tb, &tbl).unwrap();
    let mut ib = vec![0u8; 1024];
    ib[0..4].copy_from_slice(&(c1 as u32).to_le_bytes());
    ib[4..8].copy_from_slice(&(c2 as u32).to_le_bytes());
    inf.write_checked(ind, &ib).unwrap();
    assert_eq!(inf.tag_of(c2), Some(Tag::of(13, BlockKind::Data, 0)));
    ib[4..8].copy_from_slice(&0u32.to_le_bytes());
    inf.write_checked(ind, &ib).unwrap();
    assert_eq!(inf.tag_of(c2), None);
    assert_eq!(inf.tag_of(c1), Some(Tag::of(13, BlockKind::Data, 0)));
}

#[test]
fn an_indirect_block_taken_over_withdraws_only_its_old_owners_claims() {
    // Indirect block `ind` of file 13 points at c. File 13 goes; file 14
    // takes `ind` (rewritten while its owner is unknown) and points at c
    // directly. When 14's inode is written, c is 14's data: the claims
    // dropped with `ind`'s old contents are 13's, not 14's.
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let base = g.groups[0].inode_table[1] + 1;
    let (ind, c, c2) = (base, base + 1, base + 2);
    let mut ptrs = [0u32; 13];
    ptrs[12] = ind as u32;
    let (tb, tbl) = table_block(&g, 13, &inode(0o100644, 14 * 1024, 30, &ptrs), None);
    inf.write_checked(tb, &tbl).unwrap();
    let mut ib = vec![0u8; 1024];
    ib[0..4].copy_from_slice(&(c as u32).to_le_bytes());
    inf.write_checked(ind, &ib).unwrap();
    assert_eq!(inf.tag_of(c), Some(Tag::of(13, BlockKind::Data, 0)));
    let (_, tbl) = table_block(&g, 13, &inode(0, 0, 0, &[]), Some(tbl));
    inf.write_checked(tb, &tbl).unwrap();
    let mut ib2 = vec![0u8; 1024];
    ib2[0..4].copy_from_slice(&(c2 as u32).to_le_bytes());
    inf.write_checked(ind, &ib2).unwrap(); // deferred: nobody points at it now
    let mut p14 = [0u32; 13];
    p14[0] = c as u32;
    p14[12] = ind as u32;
    let (_, tbl) = table_block(&g, 14, &inode(0o100644, 14 * 1024, 30, &p14), Some(tbl));
    inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(inf.tag_of(c), Some(Tag::of(14, BlockKind::Data, 0)));
    assert_eq!(inf.tag_of(c2), Some(Tag::of(14, BlockKind::Data, 0)));
    assert_eq!(inf.tag_of(ind), Some(Tag::of(14, BlockKind::Indirect, 0)));
}

#[test]
fn a_block_pointed_at_from_the_inode_and_an_indirect_block_keeps_the_other_claim() {
    // Inode 13 (an old incarnation) points at x directly; its new
    // contents point at x through its indirect block instead. Dropping
    // the direct pointer must not drop the claim through the indirect one.
    let g = geo(8 << 20, KIB);
    let mut inf = booted(&g, 64);
    let base = g.groups[0].inode_table[1] + 1;
    let (ind, x) = (base, base + 1);
    let mut ptrs = [0u32; 13];
    ptrs[0] = x as u32;
    ptrs[12] = ind as u32;
    let (tb, tbl) = table_block(&g, 13, &inode(0o100644, 14 * 1024, 30, &ptrs), None);
    inf.write_checked(tb, &tbl).unwrap();
    let mut ib = vec![0u8; 1024];
    ib[0..4].copy_from_slice(&(x as u32).to_le_bytes());
    inf.write_checked(ind, &ib).unwrap();
    let mut ptrs2 = [0u32; 13];
    ptrs2[0] = (base + 2) as u32;
    ptrs2[12] = ind as u32;
    let (_, tbl) = table_block(&g, 13, &inode(0o100644, 14 * 1024, 30, &ptrs2), Some(tbl));
    inf.write_checked(tb, &tbl).unwrap();
    assert_eq!(inf.tag_of(x), Some(Tag::of(13, BlockKind::Data, 0)));
}

#[test]
fn a_hard_linked_file_belongs_with_the_lowest_directory_naming_it() {
    // File 15 is linked from directories 14 and 13 (one inode-table
    // block holds all three). Whatever the order the directory blocks come
    // in, its parent is 13, the lowest; when 13's entry is removed, 14;
    // when both are gone, it keeps 14.
    let g = geo(8 << 20, KIB);
    let base = g.groups[0].inode_table[1] + 1;
    let (da, db, fb) = (base, base + 1, base + 2);
    for first_a in [true, false] {
        let mut inf = booted(&g, 64);
        let (tb, tbl) = table_block(&g, 13, &inode(0o040755, 1024, 2, &[da as u32]), None);
        let (_, tbl) = table_block(&g, 14, &inode(0o040755, 1024, 2, &[db as u32]), Some(tbl));
        let (_, tbl) = table_block(&g, 15, &inode(0o100644, 10, 2, &[fb as u32]), Some(tbl));
        inf.write_checked(tb, &tbl).unwrap();
        inf.write_checked(fb, &data(&g, 3)).unwrap();
        let ba = dir_block(1024, &[(13, "."), (2, ".."), (15, "x")]);
        let bb = dir_block(1024, &[(14, "."), (2, ".."), (15, "y")]);
        let order = if first_a {
            [(da, &ba), (db, &bb)]
        } else {
            [(db, &bb), (da, &ba)]
        };
        for (b, d) in order {
            inf.write_checked(b, d).unwrap();
        }
        assert_eq!(
            inf.tag_of(fb),
            Some(Tag::of(15, BlockKind::Data, 13)),
            "first_a {first_a}"
        );
        // 13's entry unlinked: 14 is the only directory naming it.
        let acts = inf
            .write_checked(da, &dir_block(1024, &[(13, "."), (2, "..")]))
            .unwrap();
        assert!(acts.contains(&Action::Retag {
            block: fb,
            tag: Tag::of(15, BlockKind::Data, 14)
        }));
        inf.write_checked(db, &dir_block(1024, &[(14, "."), (2, "..")]))
            .unwrap();
        assert_eq!(inf.tag_of(fb), Some(Tag::of(15, BlockKind::Data, 14)));
    }
}

#[test]
fn an_xattr_block_is_its_inodes_and_follows_it() {
    // File 14's i_file_acl names block x: written before or after the
    // inode, x is stored as 14's xattr block; when the inode drops it
    // (the attributes removed), x is unknown again; a directory names 14
    // and x is retagged with its parent.
    let g = geo(8 << 20, KIB);
    let base = g.groups[0].inode_table[1] + 1;
    let (x, dirb) = (base, base + 1);
    let mut rec = inode(0o100644, 0, 2, &[]);
    rec[0x68..0x6C].copy_from_slice(&(x as u32).to_le_bytes());
    for x_first in [true, false] {
        let mut inf = booted(&g, 64);
        let (tb, tbl) = table_block(&g, 14, &rec, None);
        let mut acts = Vec::new();
        if x_first {
            acts.extend(inf.write_checked(x, &data(&g, 9)).unwrap());
            acts.extend(inf.write_checked(tb, &tbl).unwrap());
        } else {
            acts.extend(inf.write_checked(tb, &tbl).unwrap());
            acts.extend(inf.write_checked(x, &data(&g, 9)).unwrap());
        }
        assert!(
            stores(&acts).contains(&(x, Tag::of(14, BlockKind::Xattr, 0))),
            "{acts:?}"
        );
        let (_, tbl) = table_block(&g, 13, &inode(0o040755, 1024, 2, &[dirb as u32]), Some(tbl));
        inf.write_checked(tb, &tbl).unwrap();
        let acts = inf
            .write_checked(dirb, &dir_block(1024, &[(13, "."), (2, ".."), (14, "f")]))
            .unwrap();
        assert!(acts.contains(&Action::Retag {
            block: x,
            tag: Tag::of(14, BlockKind::Xattr, 13)
        }));
        let (_, tbl) = table_block(&g, 14, &inode(0o100644, 0, 0, &[]), Some(tbl));
        inf.write_checked(tb, &tbl).unwrap();
        assert_eq!(inf.tag_of(x), None);
    }
}

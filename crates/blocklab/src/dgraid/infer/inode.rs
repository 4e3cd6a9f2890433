//! One on-disk inode read for what it points to: which of its 15 block
//! pointers are pointers at all (not a fast symlink's target, not a device
//! number), and what kind of block each names; and its extended-attribute
//! block (`i_file_acl`), which any live inode may have.

use super::superblock::u32_at;

const S_IFMT: u64 = 0xF000;
const S_IFDIR: u64 = 0x4000;
const S_IFREG: u64 = 0x8000;
const S_IFLNK: u64 = 0xA000;
/// i_flags: the block map is an extent tree (ext4), not inferred.
pub const EXTENTS_FL: u64 = 0x0008_0000;
/// i_flags: the contents live inside the inode (ext4 inline data).
const INLINE_DATA_FL: u64 = 0x1000_0000;
/// Bytes of i_block: a symlink target shorter than this lives there.
const I_BLOCK_BYTES: u64 = 60;

/// What an inode says about its blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InodeView {
    /// Free, deleted, or an inode without block pointers (device, fifo,
    /// socket, fast symlink, empty file).
    NoBlocks,
    /// Its block map is an extent tree: its blocks stay unknown.
    Extents,
    /// A file, directory or slow symlink with its 15 pointers (0: hole).
    Pointers { dir: bool, ptrs: [u64; 15] },
}

/// Whether the record is an inode in use: a mode, and not deleted (links
/// 0 with a dtime).
fn live(rec: &[u8]) -> bool {
    let mode = u32_at(rec, 0) & 0xFFFF;
    let dtime = u32_at(rec, 0x14);
    let links = u32_at(rec, 0x18) >> 16;
    mode != 0 && !(links == 0 && dtime != 0)
}

/// The inode's extended-attribute block (`i_file_acl`, low 32 bits: its
/// high half counts only with 64bit, which is refused), 0 if none. An
/// inode owning no sectors (`i_blocks` 0) has none, whatever the field.
pub fn xattr_block(rec: &[u8]) -> u64 {
    if !live(rec) || u32_at(rec, 0x1C) == 0 {
        return 0;
    }
    u32_at(rec, 0x68)
}

/// Read an inode record (at least 128 bytes).
pub fn view(rec: &[u8]) -> InodeView {
    let mode = u32_at(rec, 0) & 0xFFFF;
    let size = u32_at(rec, 0x04);
    let i_blocks = u32_at(rec, 0x1C);
    let flags = u32_at(rec, 0x20);
    if !live(rec) {
        return NoBlocks;
    }
    let fmt = mode & S_IFMT;
    let dir = fmt == S_IFDIR;
    if !(dir || fmt == S_IFREG || fmt == S_IFLNK) {
        return NoBlocks;
    }
    if flags & INLINE_DATA_FL != 0 {
        return NoBlocks;
    }
    if flags & EXTENTS_FL != 0 {
        return InodeView::Extents;
    }
    // e2fsprogs' ext2fs_is_fast_symlink: the target fits i_block. And a
    // sanity rule: an inode that owns no 512-byte sectors has no blocks
    // (whatever its pointer bytes hold).
    if (fmt == S_IFLNK && size > 0 && size < I_BLOCK_BYTES) || i_blocks == 0 {
        return NoBlocks;
    }
    let mut ptrs = [0u64; 15];
    for (i, p) in ptrs.iter_mut().enumerate() {
        *p = u32_at(rec, 0x28 + 4 * i);
    }
    InodeView::Pointers { dir, ptrs }
}

use InodeView::NoBlocks;

#[cfg(test)]
pub(crate) mod build {
    //! Inode records for tests.

    pub fn inode(mode: u16, size: u32, i_blocks: u32, ptrs: &[u32]) -> Vec<u8> {
        let mut r = vec![0u8; 256];
        r[0..2].copy_from_slice(&mode.to_le_bytes());
        r[4..8].copy_from_slice(&size.to_le_bytes());
        r[0x1A..0x1C].copy_from_slice(&1u16.to_le_bytes());
        r[0x1C..0x20].copy_from_slice(&i_blocks.to_le_bytes());
        for (i, p) in ptrs.iter().enumerate() {
            r[0x28 + 4 * i..0x2C + 4 * i].copy_from_slice(&p.to_le_bytes());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::build::inode;
    use super::*;

    #[test]
    fn kinds_of_inodes() {
        assert_eq!(view(&[0u8; 256]), NoBlocks);
        let f = inode(0o100644, 3000, 6, &[600, 601, 602]);
        match view(&f) {
            InodeView::Pointers { dir, ptrs } => {
                assert!(!dir);
                assert_eq!(&ptrs[..4], &[600, 601, 602, 0]);
            }
            other => panic!("{other:?}"),
        }
        // A fast symlink's target bytes are not pointers.
        let mut l = inode(0o120777, 11, 0, &[]);
        l[0x28..0x33].copy_from_slice(b"/etc/passwd");
        assert_eq!(view(&l), NoBlocks);
        // A slow symlink has one data block.
        assert!(matches!(
            view(&inode(0o120777, 200, 2, &[700])),
            InodeView::Pointers { dir: false, .. }
        ));
        // A character device stores its number in i_block[0].
        assert_eq!(view(&inode(0o020644, 0, 0, &[0x0501])), NoBlocks);
        let mut e = inode(0o100644, 4096, 8, &[0xF30A]);
        e[0x20..0x24].copy_from_slice(&(EXTENTS_FL as u32).to_le_bytes());
        assert_eq!(view(&e), InodeView::Extents);
        // Deleted: links 0 and a dtime.
        let mut d = inode(0o100644, 3000, 6, &[600]);
        d[0x1A..0x1C].copy_from_slice(&0u16.to_le_bytes());
        d[0x14..0x18].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(view(&d), NoBlocks);
    }

    #[test]
    fn the_xattr_block_of_live_inodes_only() {
        // An empty file whose one block (2 sectors) is its xattr block.
        let mut f = inode(0o100644, 0, 2, &[]);
        f[0x68..0x6C].copy_from_slice(&900u32.to_le_bytes());
        assert_eq!(xattr_block(&f), 900);
        // A device or a fast symlink may have one too.
        let mut c = inode(0o020644, 0, 2, &[0x0501]);
        c[0x68..0x6C].copy_from_slice(&901u32.to_le_bytes());
        assert_eq!(xattr_block(&c), 901);
        // Deleted: none.
        f[0x1A..0x1C].copy_from_slice(&0u16.to_le_bytes());
        f[0x14..0x18].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(xattr_block(&f), 0);
        assert_eq!(xattr_block(&inode(0o100644, 10, 2, &[600])), 0);
    }
}

//! Directory blocks read for the inodes they name: each entry's inode has
//! the directory as its parent. "." and ".." are skipped (they name the
//! directory itself and its parent, not children). A malformed entry ends
//! the walk of that block: what came before it stands.

use super::superblock::u32_at;

/// The inodes named in a directory block (in entry order, not "." or "..").
pub fn children(block: &[u8], filetype: bool) -> Vec<u64> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 8 <= block.len() {
        let ino = u32_at(block, off);
        let rec_len = u16::from_le_bytes([block[off + 4], block[off + 5]]) as usize;
        let name_len = if filetype {
            block[off + 6] as usize
        } else {
            u16::from_le_bytes([block[off + 6], block[off + 7]]) as usize
        };
        if rec_len < 8 || !rec_len.is_multiple_of(4) || off + rec_len > block.len() || 8 + name_len > rec_len {
            break;
        }
        let name = &block[off + 8..off + 8 + name_len];
        if ino != 0 && name != b"." && name != b".." {
            out.push(ino);
        }
        off += rec_len;
    }
    out
}

/// Whether `block` parses as a directory block: a chain of valid entries
/// ending exactly at the block's end, the first naming an inode.
pub fn is_dir_block(block: &[u8], filetype: bool) -> bool {
    let mut off = 0usize;
    while off + 8 <= block.len() {
        let rec_len = u16::from_le_bytes([block[off + 4], block[off + 5]]) as usize;
        let name_len = if filetype {
            block[off + 6] as usize
        } else {
            u16::from_le_bytes([block[off + 6], block[off + 7]]) as usize
        };
        if rec_len < 8 || !rec_len.is_multiple_of(4) || off + rec_len > block.len() || 8 + name_len > rec_len {
            return false;
        }
        off += rec_len;
    }
    off == block.len() && u32_at(block, 0) != 0
}

#[cfg(test)]
pub(crate) mod build {
    //! Directory blocks for tests.

    /// A block of `size` bytes holding `entries` (inode, name); the last
    /// entry's record reaches the end.
    pub fn dir_block(size: usize, entries: &[(u32, &str)]) -> Vec<u8> {
        let mut b = vec![0u8; size];
        let mut off = 0;
        for (i, (ino, name)) in entries.iter().enumerate() {
            let min = (8 + name.len() + 3) & !3;
            let rec = if i + 1 == entries.len() { size - off } else { min };
            b[off..off + 4].copy_from_slice(&ino.to_le_bytes());
            b[off + 4..off + 6].copy_from_slice(&(rec as u16).to_le_bytes());
            b[off + 6] = name.len() as u8;
            b[off + 7] = 1;
            b[off + 8..off + 8 + name.len()].copy_from_slice(name.as_bytes());
            off += rec;
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::build::dir_block;
    use super::*;

    #[test]
    fn entries_and_a_corrupt_record() {
        let b = dir_block(1024, &[(12, "."), (2, ".."), (13, "a"), (0, "gone"), (14, "bb")]);
        assert_eq!(children(&b, true), vec![13, 14]);
        let mut bad = b.clone();
        // The third entry's rec_len made 3: the walk stops there.
        bad[24 + 4] = 3;
        assert_eq!(children(&bad, true), Vec::<u64>::new());
        assert_eq!(children(&[0u8; 1024], true), Vec::<u64>::new());
        assert!(is_dir_block(&b, true));
        assert!(!is_dir_block(&bad, true) && !is_dir_block(&[0u8; 1024], true));
    }
}

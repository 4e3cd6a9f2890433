//! Directory blocks read for the inodes they name: each entry's inode has
//! the directory as its parent. "." and ".." are skipped (they name the
//! directory itself and its parent, not children). A malformed entry ends
//! the walk of that block: what came before it stands.

use super::superblock::u32_at;

/// The entries of a directory block, (inode, name) in order, up to the
/// first malformed one; `off` is where the walk stopped.
struct Entries<'a> {
    block: &'a [u8],
    filetype: bool,
    off: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (b, off) = (self.block, self.off);
        if off + 8 > b.len() {
            return None;
        }
        let rec_len = u16::from_le_bytes([b[off + 4], b[off + 5]]) as usize;
        let name_len = if self.filetype {
            b[off + 6] as usize
        } else {
            u16::from_le_bytes([b[off + 6], b[off + 7]]) as usize
        };
        if rec_len < 8 || !rec_len.is_multiple_of(4) || off + rec_len > b.len() || 8 + name_len > rec_len {
            return None;
        }
        self.off += rec_len;
        Some((u32_at(b, off), &b[off + 8..off + 8 + name_len]))
    }
}

fn entries(block: &[u8], filetype: bool) -> Entries<'_> {
    Entries {
        block,
        filetype,
        off: 0,
    }
}

/// The inodes named in a directory block (in entry order, not "." or "..").
pub fn children(block: &[u8], filetype: bool) -> Vec<u64> {
    entries(block, filetype)
        .filter(|&(ino, name)| ino != 0 && name != b"." && name != b"..")
        .map(|(ino, _)| ino)
        .collect()
}

/// Whether `block` parses as a directory block: a chain of valid entries
/// ending exactly at the block's end, the first naming an inode.
pub fn is_dir_block(block: &[u8], filetype: bool) -> bool {
    let mut walk = entries(block, filetype);
    for _ in walk.by_ref() {} // to the end, or to the first malformed entry
    walk.off == block.len() && u32_at(block, 0) != 0
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

//! The bytes of one member write, and where they live.
//!
//! A data unit that a request writes as it came (a whole block of the
//! request, on a data member) need not be copied into a member buffer: the
//! member write can name the request's own bytes. A sequential writer moves
//! every user byte once less that way (the copy was ~9 % of the machine's CPU
//! in a profile of 1 MiB writes through NBD). Parity, merged partial blocks
//! and old units kept as they are still go through a buffer built here.
//!
//! Only io_uring's vectored writes take the request's bytes as they are;
//! every other path (checksummed members, fault injection, the plain
//! fallback, rebuild) asks for [`MemberWrite::contiguous`], which copies
//! them into one aligned buffer first, as before.

use std::borrow::Cow;

use super::members::{AlignedBuf, ALIGN};
use crate::array::DiskOp;

/// At most this many pieces per member write (each an iovec; the kernel
/// takes 1,024): a write scattered wider is built whole instead.
pub const MAX_PIECES: usize = 256;

/// A run of a member write's bytes.
pub enum Piece<'u> {
    /// The request's own bytes: whole blocks, starting `ALIGN`-aligned.
    User(&'u [u8]),
    /// Bytes computed here (parity, old units, merged edges).
    Built(AlignedBuf),
}

impl Piece<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::User(u) => u,
            Piece::Built(b) => b,
        }
    }
}

/// One member write of a plan: where, and its bytes as pieces in member
/// order (a write over several stripes of a member holds data units of the
/// request and parity units in turn).
pub struct MemberWrite<'u> {
    pub op: DiskOp,
    pub pieces: Vec<Piece<'u>>,
}

impl<'u> MemberWrite<'u> {
    pub fn built(op: DiskOp, buf: AlignedBuf) -> Self {
        MemberWrite {
            op,
            pieces: vec![Piece::Built(buf)],
        }
    }

    /// Whether any of the bytes are the request's own.
    pub fn borrows(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::User(_)))
    }

    /// The write's bytes in one aligned buffer: borrowed when built here in
    /// one piece, a copy otherwise.
    pub fn contiguous(&self) -> Cow<'_, AlignedBuf> {
        if let [Piece::Built(b)] = &self.pieces[..] {
            return Cow::Borrowed(b);
        }
        let mut buf = AlignedBuf::scratch(self.byte_len());
        let mut at = 0;
        for p in &self.pieces {
            let b = p.bytes();
            buf[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        Cow::Owned(buf)
    }

    /// Memory ranges (address, length) of the bytes, in order.
    pub fn parts(&self) -> Vec<(usize, usize)> {
        self.pieces
            .iter()
            .map(|p| (p.bytes().as_ptr() as usize, p.bytes().len()))
            .collect()
    }

    /// Byte count of the write.
    pub fn byte_len(&self) -> usize {
        self.pieces.iter().map(|p| p.bytes().len()).sum()
    }

    /// The write's blocks (`bs` bytes each), in order.
    pub fn blocks(&self, bs: usize) -> impl Iterator<Item = &[u8]> {
        self.pieces.iter().flat_map(move |p| p.bytes().chunks_exact(bs))
    }
}

/// Where each block of a member write comes from, as [`split`] groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Bytes `start..end` of the request's data.
    User(usize, usize),
    /// `count` blocks from the write's block `at`, to be built.
    Built(u64, u64),
}

/// Group a write's `n` blocks of `bs` bytes into pieces: `user(i)` is where
/// block `i` starts in the request's data `data`, if it is the request's own
/// unit. Adjacent blocks of the request join one piece; a block whose bytes
/// do not start `ALIGN`-aligned in memory (O_DIRECT needs it) is built. More
/// than [`MAX_PIECES`] pieces: the whole write is built.
pub fn split(data: &[u8], n: u64, bs: usize, user: impl Fn(u64) -> Option<usize>) -> Vec<Source> {
    let base = data.as_ptr() as usize;
    let mut out: Vec<Source> = Vec::new();
    for i in 0..n {
        let s = user(i).filter(|s| (base + s).is_multiple_of(ALIGN));
        match (s, out.last_mut()) {
            (Some(s), Some(Source::User(_, e))) if *e == s => *e += bs,
            (Some(s), _) => out.push(Source::User(s, s + bs)),
            (None, Some(Source::Built(_, c))) => *c += 1,
            (None, _) => out.push(Source::Built(i, 1)),
        }
    }
    if out.len() > MAX_PIECES {
        return vec![Source::Built(0, n)];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Cause, DiskOpKind};

    fn op(nblocks: u32) -> DiskOp {
        DiskOp {
            disk: 1,
            block: 7,
            nblocks,
            kind: DiskOpKind::Write,
            cause: Cause::User,
        }
    }

    #[test]
    fn blocks_group_into_pieces_and_unaligned_ones_are_built() {
        let buf = AlignedBuf::scratch(8 * 4096);
        // Blocks 0-1 are request blocks 2-3, block 2 is parity, blocks 3-4
        // are request blocks 6 and 4 (not adjacent in memory).
        let at = |i: u64| [Some(2), Some(3), None, Some(6), Some(4)][i as usize].map(|b| b * 4096);
        let got = split(&buf, 5, 4096, at);
        use Source::*;
        assert_eq!(
            got,
            vec![User(8192, 16384), Built(2, 1), User(24576, 28672), User(16384, 20480)]
        );
        // From an unaligned base every request block is built, as one piece.
        assert_eq!(split(&buf[512..], 5, 4096, at), vec![Built(0, 5)]);
        // Too scattered: built whole.
        let many = (MAX_PIECES + 1) as u64;
        let alternate = |i: u64| i.is_multiple_of(2).then_some(i as usize * 4096);
        assert_eq!(split(&vec![0u8; many as usize * 4096], many, 4096, alternate).len(), 1);
    }

    #[test]
    fn a_write_reads_as_its_pieces_in_order() {
        let mut buf = AlignedBuf::scratch(4 * 4096);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i / 4096) as u8 + 10;
        }
        let mut parity = AlignedBuf::scratch(4096);
        parity.fill(99);
        let w = MemberWrite {
            op: op(4),
            pieces: vec![
                Piece::User(&buf[8192..16384]),
                Piece::Built(parity),
                Piece::User(&buf[..4096]),
            ],
        };
        assert!(w.borrows());
        assert_eq!(w.byte_len(), 4 * 4096);
        let tags: Vec<u8> = w.blocks(4096).map(|b| b[0]).collect();
        assert_eq!(tags, [12, 13, 99, 10]);
        let c = w.contiguous();
        assert!(matches!(c, Cow::Owned(_)));
        assert_eq!((c[0], c[4096], c[8192], c[12288 + 4095]), (12, 13, 99, 10));
        assert!((c.as_ptr() as usize).is_multiple_of(ALIGN));
        let parts = w.parts();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], (buf.as_ptr() as usize + 8192, 8192));
        assert_eq!(parts[2], (buf.as_ptr() as usize, 4096));
        let b = MemberWrite::built(op(1), AlignedBuf::zeroed(4096));
        assert!(!b.borrows());
        assert!(matches!(b.contiguous(), Cow::Borrowed(_)));
    }
}

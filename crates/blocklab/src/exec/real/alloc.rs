//! Which parts of the array were never written or were trimmed, for NBD's
//! `base:allocation`: found in the member files, which are created sparse
//! (`set_len`), written, and punched only by a TRIM of whole stripes
//! (`trim.rs`: every member's units of those stripes at once).
//!
//! A block is reported a hole only when that is certain: every member is
//! present and in service (a failed member misses writes; a spare being
//! rebuilt is being filled), nothing is on the bad-block list, and the
//! member holding the block's data (the first copy on mirrors) has a hole
//! there (SEEK_DATA / SEEK_HOLE). Every write puts its data on that
//! member, so a hole there means the block was never written, or trimmed
//! since, and reads as zeroes. With checksums the block's entry must also
//! be an all-zero block's (a trim writes it so): a hole punched in a written
//! block by anything else (damage the reads repair from redundancy, its
//! checksum entry zero) is data, or a sparse copy would skip it. Anything
//! else — an error, a file system without sparse-file support, a truncated
//! member — is reported as data, the safe answer.

use super::RealArray;

/// Blocks examined per query; a client asks again for the rest.
const MAX_BLOCKS: u64 = 16 * 1024;

/// What one member file is known to hold around a position.
#[derive(Clone, Copy)]
struct Known {
    lo: u64,
    hi: u64,
    hole: bool,
}

fn probe(fd: std::os::fd::RawFd, file_len: u64, pos: u64) -> Known {
    let data = Known {
        lo: pos,
        hi: pos + 1,
        hole: false,
    };
    if pos >= file_len {
        return data; // a truncated member: say data
    }
    // SAFETY: lseek on a descriptor we hold open; it only moves the offset,
    // which no read or write here uses (they are positional).
    let d = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
    if d < 0 {
        return if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
            // No data from here to the end of the file.
            Known {
                lo: pos,
                hi: file_len,
                hole: true,
            }
        } else {
            data
        };
    }
    let d = d as u64;
    if d > pos {
        return Known {
            lo: pos,
            hi: d,
            hole: true,
        };
    }
    // SAFETY: as above.
    let h = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_HOLE) };
    if h <= pos as libc::off_t {
        return data;
    }
    Known {
        lo: pos,
        hi: h as u64,
        hole: false,
    }
}

impl RealArray {
    /// `[offset, offset + len)` as runs of (bytes, never written) from
    /// `offset`; may cover less than `len` (at most `MAX_BLOCKS` blocks).
    pub fn allocation(&self, offset: u64, len: u64) -> Vec<(u64, bool)> {
        let bs = self.bs as u64;
        let live = self.live.read().unwrap();
        let certain = live.array.failed().is_empty()
            && !live.recovering.iter().any(|&r| r)
            && live.members.iter().all(Option::is_some)
            && self.bad.lock().unwrap().is_empty();
        if !certain || len == 0 {
            return vec![(len, false)];
        }
        let members: Vec<(std::os::fd::RawFd, u64)> = live
            .members
            .iter()
            .map(|m| {
                let m = m.as_ref().expect("checked above");
                (m.raw_fd(), m.image_len().unwrap_or(0))
            })
            .collect();
        let zero_sum = super::members::block_sum(&vec![0u8; self.bs]);
        let mut known: Vec<Option<Known>> = vec![None; members.len()];
        let end = (offset + len).min((offset / bs + MAX_BLOCKS) * bs);
        let mut runs: Vec<(u64, bool)> = Vec::new();
        let mut at = offset;
        while at < end {
            let b = at / bs;
            let next = ((b + 1) * bs).min(end);
            let p = live.array.map(b);
            let (disk, pos) = (p.disks[0] as usize, p.disk_block * bs);
            let k = match known[disk] {
                Some(k) if k.lo <= pos && pos < k.hi => k,
                _ => {
                    let k = probe(members[disk].0, members[disk].1, pos);
                    known[disk] = Some(k);
                    k
                }
            };
            let hole = k.hole
                && pos + bs <= k.hi
                && live.members[disk]
                    .as_ref()
                    .expect("checked above")
                    .sum_is(p.disk_block, zero_sum);
            match runs.last_mut() {
                Some(r) if r.1 == hole => r.0 += next - at,
                _ => runs.push((next - at, hole)),
            }
            at = next;
        }
        runs
    }
}

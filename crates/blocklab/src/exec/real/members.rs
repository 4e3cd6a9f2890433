//! Member files: plain images (member block b at byte b × block size), each
//! with an optional checksum sidecar, and the fault hook that simulates a
//! crash at a chosen member write.
//!
//! Checksums (`--checksums`): `disk-I.sum` holds 4 bytes per member block,
//! its CRC-32 with 0 taken as 1, so that a written entry is never zero.
//! Zero is what a sidecar reads where nothing was ever written: a hole
//! punched in it (with the block's own hole, the pair would otherwise pass
//! as an all-zero block: lost data served as zeroes), its tail cut off, or
//! a sidecar recreated empty. Such an entry matches no block, so the block is
//! rebuilt from redundancy. Creating a member therefore writes the sums of
//! its all-zero blocks (4 bytes per block: 1 MiB per GiB of 4 KiB blocks).
//! A block whose stored and computed sums differ is "bad": the executor
//! treats it as an erasure and rebuilds it from redundancy.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use super::identity::{self, Identity};
pub use crate::exec::buf::{AlignedBuf, ALIGN};

/// What a block read from a member turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    Ok,
    /// Past the end of the file (a truncated member).
    Short,
    /// The read failed.
    IoError,
    /// Read, but its checksum does not match.
    BadSum,
    /// Listed as unreadable (a rebuild could not produce it).
    Listed,
}

/// Crash injection: after `budget` more member writes every write fails, as
/// if the process had been killed; the write that hits the limit applies
/// only a prefix of its blocks (a kill lands between page copies).
#[derive(Debug, Default)]
pub struct Faults {
    /// Writes left before the crash; negative: no crash planned.
    budget: AtomicI64,
    crashed: AtomicBool,
    /// Seed of the prefix length of the torn write.
    tear: AtomicU64,
}

/// The error of a write refused after the simulated crash.
pub fn crashed_error() -> io::Error {
    io::Error::other("simulated crash (kill -9)")
}

impl Faults {
    pub fn none() -> Faults {
        Faults {
            budget: AtomicI64::new(-1),
            ..Default::default()
        }
    }

    /// Crash at the `n`-th member write from now (n ≥ 1); `tear` picks how
    /// much of that write lands.
    pub fn crash_after(&self, n: u64, tear: u64) {
        self.tear.store(tear, Ordering::SeqCst);
        self.budget.store(n as i64, Ordering::SeqCst);
    }

    /// Whether a crash is planned or has happened (writes must then go one
    /// by one through [`Faults::admit`]).
    pub fn armed(&self) -> bool {
        self.budget.load(Ordering::SeqCst) >= 0 || self.has_crashed()
    }

    pub fn has_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    /// Account for one write of `blocks` blocks: Ok(None) to write it all,
    /// Ok(Some(k)) to write only the first k blocks then fail, Err when the
    /// process is already "dead".
    pub fn admit(&self, blocks: usize) -> io::Result<Option<usize>> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(crashed_error());
        }
        if self.budget.load(Ordering::SeqCst) < 0 {
            return Ok(None);
        }
        let left = self.budget.fetch_sub(1, Ordering::SeqCst);
        if left > 1 {
            return Ok(None);
        }
        if left <= 0 {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(crashed_error());
        }
        self.crashed.store(true, Ordering::SeqCst);
        Ok(Some((self.tear.load(Ordering::SeqCst) % (blocks as u64 + 1)) as usize))
    }
}

/// The stored form of a block's checksum: never 0, the value of an entry
/// never written.
#[inline]
pub fn block_sum(block: &[u8]) -> u32 {
    crc32fast::hash(block).max(1)
}

/// Checksum entries written at once when a member is created.
const BLOCK_SUM_PIECE: usize = 1 << 16;

/// One member: its image and, with checksums, its sidecar.
#[derive(Debug)]
pub struct Member {
    pub path: PathBuf,
    file: File,
    sums: Option<File>,
    pub direct: bool,
}

pub fn member_path(dir: &Path, disk: u32) -> PathBuf {
    dir.join(format!("disk-{disk}.img"))
}

pub fn sums_path(dir: &Path, disk: u32) -> PathBuf {
    dir.join(format!("disk-{disk}.sum"))
}

/// Open a file for reading and writing, with O_DIRECT when asked and the
/// file system allows it (falls back silently otherwise).
fn open_rw(path: &Path, direct: bool) -> io::Result<(File, bool)> {
    if direct {
        if let Ok(f) = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            return Ok((f, true));
        }
    }
    Ok((OpenOptions::new().read(true).write(true).open(path)?, false))
}

impl Member {
    /// Create (or truncate to) a fresh, all-zero member of `bytes` bytes of
    /// data, carrying identity `id` (and its checksum file, with checksums).
    pub fn create(dir: &Path, bytes: u64, checksums: bool, bs: u64, id: &Identity) -> io::Result<()> {
        let f = File::create(member_path(dir, id.role))?;
        f.set_len(identity::image_len(bytes))?;
        identity::write(&f, identity::image_id_offset(bytes), id, identity::Kind::Image)?;
        f.sync_all()?;
        if checksums {
            let s = File::create(sums_path(dir, id.role))?;
            // Every entry written: a zero entry is never valid.
            let entries = bytes / bs;
            let piece: Vec<u8> = block_sum(&vec![0u8; bs as usize]).to_le_bytes().repeat(BLOCK_SUM_PIECE);
            let mut at = 0u64;
            while at < entries {
                let n = (entries - at).min(BLOCK_SUM_PIECE as u64) as usize;
                write_all_at(&s, &piece[..4 * n], 4 * at)?;
                at += n as u64;
            }
            identity::write(&s, identity::sums_id_offset(bytes, bs), id, identity::Kind::Sums)?;
            s.sync_all()?;
        }
        Ok(())
    }

    /// Whether `block`'s checksum entry is `zero_sum`, an all-zero block's
    /// (always, without checksums). A hole punched in a written block keeps
    /// the block's own entry (or, punched too, a zero entry that matches
    /// nothing), so it does not pass for a never-written block.
    pub fn sum_is(&self, block: u64, zero_sum: u32) -> bool {
        match &self.sums {
            None => true,
            Some(s) => read_sums(s, block, 1)[0] == zero_sum,
        }
    }

    /// Give a checksum file made by [`Member::open`] (it was missing) its identity block.
    pub fn write_sums_identity(&self, id: &Identity, disk_bytes: u64, bs: u64) -> io::Result<()> {
        if let Some(s) = &self.sums {
            identity::write(s, identity::sums_id_offset(disk_bytes, bs), id, identity::Kind::Sums)?;
            s.sync_data()?;
        }
        Ok(())
    }

    /// Bring the image's identity block to `id` and make it durable (the
    /// state file's next generation, written before the state file).
    pub fn write_identity(&self, id: &Identity, disk_bytes: u64) -> io::Result<()> {
        identity::write(
            &self.file,
            identity::image_id_offset(disk_bytes),
            id,
            identity::Kind::Image,
        )?;
        self.file.sync_data()
    }

    pub fn open(dir: &Path, disk: u32, checksums: bool, direct: bool) -> io::Result<Member> {
        let path = member_path(dir, disk);
        let (file, direct) = open_rw(&path, direct)?;
        let sums = if checksums {
            Some(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(sums_path(dir, disk))?,
            )
        } else {
            None
        };
        Ok(Member {
            path,
            file,
            sums,
            direct,
        })
    }

    /// Read `buf.len() / bs` blocks from member block `block`; returns the
    /// state of each block (checksums verified when kept).
    pub fn read_blocks(&self, block: u64, buf: &mut [u8], bs: usize) -> Vec<BlockState> {
        let n = buf.len() / bs;
        let mut states = vec![BlockState::Ok; n];
        let mut done = 0usize;
        let base = block * bs as u64;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], base + done as u64) {
                Ok(0) => break,
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Find out block by block which ones fail.
                    for i in done / bs..n {
                        let b = &mut buf[i * bs..(i + 1) * bs];
                        states[i] = match self.file.read_at(b, base + (i * bs) as u64) {
                            Ok(k) if k == bs => BlockState::Ok,
                            Ok(_) => BlockState::Short,
                            Err(_) => BlockState::IoError,
                        };
                    }
                    done = buf.len();
                    break;
                }
            }
        }
        if done < buf.len() {
            for (i, st) in states.iter_mut().enumerate().skip(done / bs) {
                *st = BlockState::Short;
                buf[i * bs..(i + 1) * bs].fill(0);
            }
        }
        self.check_sums(block, buf, bs, &mut states);
        states
    }

    /// With checksums kept, mark the blocks read whole into `buf` (from
    /// member block `block`) whose checksum does not match.
    pub fn check_sums(&self, block: u64, buf: &[u8], bs: usize, states: &mut [BlockState]) {
        if let Some(sums) = &self.sums {
            let stored = read_sums(sums, block, states.len());
            for (i, st) in states.iter_mut().enumerate() {
                if *st == BlockState::Ok && block_sum(&buf[i * bs..(i + 1) * bs]) != stored[i] {
                    *st = BlockState::BadSum;
                }
            }
        }
    }

    /// The image's descriptor (I/O submitted through io_uring).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// Whether the member keeps a checksum file.
    pub fn has_sums(&self) -> bool {
        self.sums.is_some()
    }

    /// Read member blocks from `block` straight into the memory ranges
    /// `parts` (address, length), in order, with one `preadv`. Ok(false) when
    /// the image ends first (a truncated member).
    ///
    /// # Safety
    /// Every range must be valid for writes, and no other reference may
    /// read or write it during the call.
    pub unsafe fn read_into(&self, block: u64, parts: &[(usize, usize)], bs: usize) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let mut iov = super::uring::iovecs(parts);
        let total: usize = parts.iter().map(|p| p.1).sum();
        let mut done = 0usize;
        let mut first = 0usize;
        while done < total {
            let cnt = (iov.len() - first).min(1024) as libc::c_int;
            // SAFETY: the iovecs describe valid, exclusively borrowed memory (caller's contract).
            let r = unsafe {
                libc::preadv(
                    self.file.as_raw_fd(),
                    iov[first..].as_ptr(),
                    cnt,
                    (block * bs as u64 + done as u64) as libc::off_t,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                return Ok(false);
            }
            let mut r = r as usize;
            done += r;
            while first < iov.len() && r >= iov[first].iov_len {
                r -= iov[first].iov_len;
                first += 1;
            }
            if r > 0 {
                iov[first].iov_base = (iov[first].iov_base as usize + r) as *mut libc::c_void;
                iov[first].iov_len -= r;
            }
        }
        Ok(true)
    }

    /// Write blocks from member block `block` (and their checksums).
    pub fn write_blocks(&self, block: u64, data: &[u8], bs: usize, faults: &Faults) -> io::Result<()> {
        let n = data.len() / bs;
        let limit = faults.admit(n)?;
        let len = limit.map_or(data.len(), |k| k * bs);
        write_all_at(&self.file, &data[..len], block * bs as u64)?;
        if limit.is_some() {
            return Err(crashed_error());
        }
        if let Some(sums) = &self.sums {
            let mut raw = Vec::with_capacity(4 * n);
            for i in 0..n {
                raw.extend_from_slice(&block_sum(&data[i * bs..(i + 1) * bs]).to_le_bytes());
            }
            let limit = faults.admit(n)?;
            let len = limit.map_or(raw.len(), |k| 4 * k);
            write_all_at(sums, &raw[..len], block * 4)?;
            if limit.is_some() {
                return Err(crashed_error());
            }
        }
        Ok(())
    }

    /// Punch member blocks `block..block + n` out of the image
    /// (`fallocate(PUNCH_HOLE | KEEP_SIZE)`: they read as zeroes, the file
    /// keeps its size) and make their checksums the all-zero block's, so a
    /// punched block verifies as the zeroes it reads as. For crash injection
    /// a punch counts as a write of `n` blocks (a torn one punches a prefix).
    /// A file system that cannot punch answers `EOPNOTSUPP` before anything
    /// changed (the caller writes zeroes instead).
    pub fn punch_blocks(&self, block: u64, n: u64, bs: usize, faults: &Faults) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let limit = faults.admit(n as usize)?;
        let k = limit.map_or(n, |k| k as u64);
        if k > 0 {
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            let (at, len) = ((block * bs as u64) as libc::off_t, (k * bs as u64) as libc::off_t);
            // SAFETY: fallocate on a descriptor we hold open; no memory is passed.
            if unsafe { libc::fallocate(self.file.as_raw_fd(), mode, at, len) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if limit.is_some() {
            return Err(crashed_error());
        }
        if let Some(sums) = &self.sums {
            let zero = block_sum(&vec![0u8; bs]).to_le_bytes();
            let raw: Vec<u8> = (0..n).flat_map(|_| zero).collect();
            let limit = faults.admit(n as usize)?;
            let len = limit.map_or(raw.len(), |k| 4 * k);
            write_all_at(sums, &raw[..len], block * 4)?;
            if limit.is_some() {
                return Err(crashed_error());
            }
        }
        Ok(())
    }

    /// Rewrite the checksums of blocks from `block` to match `data` (the
    /// data itself is left alone): resync after a crash trusts the data.
    pub fn write_sums(&self, block: u64, data: &[u8], bs: usize, faults: &Faults) -> io::Result<()> {
        let Some(sums) = &self.sums else { return Ok(()) };
        let n = data.len() / bs;
        let mut raw = Vec::with_capacity(4 * n);
        for i in 0..n {
            raw.extend_from_slice(&block_sum(&data[i * bs..(i + 1) * bs]).to_le_bytes());
        }
        let limit = faults.admit(n)?;
        let len = limit.map_or(raw.len(), |k| 4 * k);
        write_all_at(sums, &raw[..len], block * 4)?;
        if limit.is_some() {
            return Err(crashed_error());
        }
        Ok(())
    }

    /// The image's length in bytes.
    pub fn image_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Grow a truncated image back to `bytes` (the tail reads as zeroes).
    pub fn extend(&self, bytes: u64) -> io::Result<()> {
        self.file.set_len(bytes)
    }

    /// Make everything written so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()?;
        if let Some(s) = &self.sums {
            s.sync_data()?;
        }
        Ok(())
    }
}

fn read_sums(f: &File, block: u64, n: usize) -> Vec<u32> {
    let mut raw = vec![0u8; 4 * n];
    let mut done = 0;
    while done < raw.len() {
        match f.read_at(&mut raw[done..], block * 4 + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An unreadable sidecar: every block's sum is unknown (0),
            // which matches no block: all are rebuilt.
            Err(_) => break,
        }
    }
    raw.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn write_all_at(f: &File, mut data: &[u8], mut at: u64) -> io::Result<()> {
    while !data.is_empty() {
        match f.write_at(data, at) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "short write")),
            Ok(k) => {
                data = &data[k..];
                at += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

//! The member reads or writes of one request, in flight together: submitted
//! at once through io_uring (one ring per worker thread), so a request over
//! eight members waits for the slowest of them, not for their sum, without a
//! thread per member. MD issues a stripe's member I/O together for the same
//! reason.
//!
//! Where io_uring is not available (an old kernel, a seccomp filter,
//! `kernel.io_uring_disabled`, or `BLOCKLAB_NO_URING` set) [`submit`] says
//! so and the caller does the I/O one call at a time. Callers check every
//! result and redo anything short or failed with their plain path, so the
//! two ways leave the same bytes and report the same errors.

use std::io;
use std::os::fd::RawFd;

/// One positioned vectored read or write.
pub struct Job {
    pub fd: RawFd,
    pub offset: u64,
    pub iov: Vec<libc::iovec>,
    pub write: bool,
}

/// iovecs for the memory ranges `parts` (address, length).
pub fn iovecs(parts: &[(usize, usize)]) -> Vec<libc::iovec> {
    parts
        .iter()
        .map(|&(p, l)| libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: l,
        })
        .collect()
}

impl Job {
    /// Read from `offset` into the memory ranges `parts` (address, length), in order.
    pub fn read(fd: RawFd, offset: u64, parts: &[(usize, usize)]) -> Job {
        Job {
            fd,
            offset,
            iov: iovecs(parts),
            write: false,
        }
    }

    /// Read from `offset` into `buf`.
    pub fn read_into(fd: RawFd, offset: u64, buf: &mut [u8]) -> Job {
        Job::read(fd, offset, &[(buf.as_mut_ptr() as usize, buf.len())])
    }

    /// Write the memory ranges `parts` (address, length), in order, at `offset`.
    pub fn write(fd: RawFd, offset: u64, parts: &[(usize, usize)]) -> Job {
        Job {
            write: true,
            ..Job::read(fd, offset, parts)
        }
    }

    /// The bytes the job moves when it completes whole.
    pub fn len(&self) -> usize {
        self.iov.iter().map(|v| v.iov_len).sum()
    }
}

/// Whether the process may use io_uring at all (read once).
fn allowed() -> bool {
    use std::sync::OnceLock;
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os("BLOCKLAB_NO_URING").is_none())
}

#[cfg(target_os = "linux")]
mod ring {
    use super::*;
    use io_uring::{opcode, types, IoUring};
    use std::cell::RefCell;

    /// Entries of each thread's ring: more jobs go in batches.
    const ENTRIES: u32 = 64;

    thread_local! {
        /// None: not tried yet; Some(None): this thread cannot have a ring.
        static RING: RefCell<Option<Option<IoUring>>> = const { RefCell::new(None) };
    }

    /// # Safety
    /// As [`super::submit`].
    pub unsafe fn submit(jobs: &[Job]) -> Option<Vec<io::Result<usize>>> {
        RING.with(|cell| {
            let mut slot = cell.borrow_mut();
            let ring = slot.get_or_insert_with(|| IoUring::new(ENTRIES).ok()).as_mut()?;
            let mut out: Vec<Option<io::Result<usize>>> = (0..jobs.len()).map(|_| None).collect();
            for (base, batch) in jobs
                .chunks(ENTRIES as usize)
                .enumerate()
                .map(|(i, b)| (i * ENTRIES as usize, b))
            {
                {
                    let mut sq = ring.submission();
                    for (k, j) in batch.iter().enumerate() {
                        let fd = types::Fd(j.fd);
                        let e = if j.write {
                            opcode::Writev::new(fd, j.iov.as_ptr(), j.iov.len() as u32)
                                .offset(j.offset)
                                .build()
                        } else {
                            opcode::Readv::new(fd, j.iov.as_ptr(), j.iov.len() as u32)
                                .offset(j.offset)
                                .build()
                        };
                        // SAFETY: the iovecs and the memory they name outlive the
                        // wait below (caller's contract); the queue has room for
                        // a batch of ENTRIES.
                        unsafe { sq.push(&e.user_data((base + k) as u64)) }.expect("a batch fits the ring");
                    }
                }
                // Every entry is waited for, whatever happens: until then
                // the kernel may use the memory the iovecs name.
                let mut left = batch.len();
                let mut failures = 0;
                while left > 0 {
                    if let Err(e) = ring.submit_and_wait(left) {
                        if e.kind() != io::ErrorKind::Interrupted {
                            failures += 1;
                            assert!(failures < 1000, "io_uring keeps failing with entries in flight: {e}");
                            std::thread::yield_now();
                        }
                    }
                    for cqe in ring.completion() {
                        let r = cqe.result();
                        out[cqe.user_data() as usize] = Some(if r < 0 {
                            Err(io::Error::from_raw_os_error(-r))
                        } else {
                            Ok(r as usize)
                        });
                        left -= 1;
                    }
                }
            }
            Some(
                out.into_iter()
                    .map(|r| r.unwrap_or_else(|| Err(io::Error::other("io_uring lost a completion"))))
                    .collect(),
            )
        })
    }
}

/// Run `jobs` together; per job the bytes it moved or its error. None when
/// io_uring is not available here: do them one by one.
///
/// # Safety
/// Every iovec must name memory valid for the job's direction (writable for
/// reads) until this returns, and no other reference may touch memory a read
/// fills, nor write memory a write sends, meanwhile.
pub unsafe fn submit(jobs: &[Job]) -> Option<Vec<io::Result<usize>>> {
    if !allowed() || jobs.is_empty() {
        return None;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the caller's contract.
        unsafe { ring::submit(jobs) }
    }
    #[cfg(not(target_os = "linux"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn reads_and_writes_of_several_files_complete_together() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<std::fs::File> = (0..3)
            .map(|i| {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(dir.path().join(format!("f{i}")))
                    .unwrap();
                f.write_all_at(&[i as u8; 8192], 0).unwrap();
                f
            })
            .collect();
        // Write 100 bytes at 10 in each file from two buffers, then read back
        // 8192 bytes of each, the last one past its end (short).
        let (a, b) = ([0xaau8; 60], [0xbbu8; 40]);
        let writes: Vec<Job> = files
            .iter()
            .map(|f| {
                Job::write(
                    f.as_raw_fd(),
                    10,
                    &[(a.as_ptr() as usize, 60), (b.as_ptr() as usize, 40)],
                )
            })
            .collect();
        let Some(done) = (unsafe { submit(&writes) }) else {
            // No io_uring on this kernel: the callers' plain path is all there is.
            return;
        };
        assert!(done.iter().all(|r| matches!(r, Ok(100))));
        let mut bufs = vec![vec![0u8; 8192]; 3];
        let reads: Vec<Job> = files
            .iter()
            .zip(bufs.iter_mut())
            .enumerate()
            .map(|(i, (f, buf))| Job::read_into(f.as_raw_fd(), if i == 2 { 4096 } else { 0 }, buf))
            .collect();
        let got = unsafe { submit(&reads) }.unwrap();
        let n: Vec<usize> = got.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(n, vec![8192, 8192, 4096], "the last read is short: the file ends");
        for (i, buf) in bufs.iter().enumerate().take(2) {
            assert_eq!(buf[..10], [i as u8; 10]);
            assert_eq!(buf[10..70], [0xaa; 60]);
            assert_eq!(buf[70..110], [0xbb; 40]);
            assert_eq!(buf[110..], [i as u8; 8082]);
        }
        // An error comes back per job.
        let bad = [Job::write(-1, 0, &[(a.as_ptr() as usize, a.len())])];
        let r = unsafe { submit(&bad) }.unwrap();
        assert_eq!(r[0].as_ref().unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}

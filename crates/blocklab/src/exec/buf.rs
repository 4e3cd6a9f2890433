//! Aligned, recycled I/O buffers, shared by the real executor (O_DIRECT
//! member I/O) and the NBD server (read replies handed to the executor).

/// Alignment of every I/O buffer (O_DIRECT needs the logical block size).
pub const ALIGN: usize = 4096;

/// A 4 KiB-aligned byte buffer. Buffers are recycled through a small pool:
/// large fresh allocations are mapped and zeroed by the kernel page by page,
/// which costs more than the I/O they carry. A buffer from the pool holds
/// whatever its last user left; every user overwrites all of it.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

/// Recycled buffers, by capacity (a power of two), and their total bytes.
struct Pool {
    bufs: Vec<(usize, usize)>,
    bytes: usize,
}
static POOL: std::sync::Mutex<Pool> = std::sync::Mutex::new(Pool {
    bufs: Vec::new(),
    bytes: 0,
});
const POOL_MAX: usize = 64;
const POOL_MAX_CAP: usize = 64 << 20;
/// What the pool may keep in all: without it, a burst of large requests (a
/// client pipelining 32 MiB writes) left the server at its high-water mark
/// for good (64 buffers of up to 64 MiB).
pub const POOL_MAX_BYTES: usize = 128 << 20;

/// Bytes held by freed buffers waiting for reuse.
pub fn pooled_bytes() -> usize {
    POOL.lock().unwrap().bytes
}

impl AlignedBuf {
    /// A buffer of `len` bytes, all zero.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let mut b = AlignedBuf::scratch(len);
        b.fill(0);
        b
    }

    /// A buffer of `len` bytes with unspecified (but initialized) contents.
    pub fn scratch(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
                cap: 0,
            };
        }
        let cap = len.next_power_of_two().max(ALIGN);
        if cap <= POOL_MAX_CAP {
            let mut pool = POOL.lock().unwrap();
            if let Some(i) = pool.bufs.iter().position(|&(c, _)| c == cap) {
                let (_, addr) = pool.bufs.swap_remove(i);
                pool.bytes -= cap;
                let ptr = std::ptr::NonNull::new(addr as *mut u8).expect("pooled pointers are not null");
                return AlignedBuf { ptr, len, cap };
            }
        }
        let layout = std::alloc::Layout::from_size_align(cap, ALIGN).expect("buffer size fits a layout");
        // SAFETY: the layout has a non-zero size. Zeroed once, so that the
        // bytes are always initialized.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, cap }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut b = AlignedBuf::scratch(self.len());
        b.copy_from_slice(self);
        b
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        if self.cap <= POOL_MAX_CAP {
            let mut pool = POOL.lock().unwrap();
            if pool.bufs.len() < POOL_MAX && pool.bytes + self.cap <= POOL_MAX_BYTES {
                pool.bufs.push((self.cap, self.ptr.as_ptr() as usize));
                pool.bytes += self.cap;
                return;
            }
        }
        let layout = std::alloc::Layout::from_size_align(self.cap, ALIGN).expect("same layout as allocated");
        // SAFETY: allocated in `scratch` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_at_most_its_byte_bound() {
        // Twelve 32 MiB buffers freed at once would keep 384 MiB in the old
        // pool (64 buffers of any size up to 64 MiB).
        let bufs: Vec<AlignedBuf> = (0..12).map(|_| AlignedBuf::scratch(32 << 20)).collect();
        drop(bufs);
        assert!(pooled_bytes() <= POOL_MAX_BYTES, "pool holds {} bytes", pooled_bytes());
        // Reuse still works: a buffer of a pooled size comes back initialized.
        let b = AlignedBuf::zeroed(32 << 20);
        assert!(b.iter().all(|&x| x == 0));
    }
}

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

/// Recycled buffers, by capacity (a power of two).
static POOL: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
const POOL_MAX: usize = 64;
const POOL_MAX_CAP: usize = 64 << 20;

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
            if let Some(i) = pool.iter().position(|&(c, _)| c == cap) {
                let (_, addr) = pool.swap_remove(i);
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
            if pool.len() < POOL_MAX {
                pool.push((self.cap, self.ptr.as_ptr() as usize));
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

//! An array shared by the part of a stack that plans its I/O (and fails or
//! rebuilds its disks) and the fault-aware caches above it, which read its
//! placement and miss penalties (see `cache::fault`). One thread runs a
//! stack; the lock only makes the sharing safe to express.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::Array;
use crate::cache::fault::FaultMap;

pub struct SharedArray {
    inner: RwLock<Array>,
}

impl SharedArray {
    pub fn new(array: Array) -> Self {
        SharedArray {
            inner: RwLock::new(array),
        }
    }

    pub fn get(&self) -> RwLockReadGuard<'_, Array> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get_mut(&self) -> RwLockWriteGuard<'_, Array> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl FaultMap for SharedArray {
    fn ndisks(&self) -> u32 {
        self.get().ndisks()
    }
    fn disk_of(&self, block: u64) -> u32 {
        self.get().disk_of(block)
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.get().is_failed(disk)
    }
    fn any_failed(&self) -> bool {
        !self.get().failed().is_empty()
    }
    fn penalty(&self, block: u64) -> u32 {
        self.get().read_penalty(block).unwrap_or(0)
    }
}

/// The array as the caches of a stack see it: stack block `b` is array
/// block `b mod capacity` when the stack folds addresses (`wrap`); with
/// `fit = "scale"` it is where the target places it: its stack chunk's
/// array chunk when the span is stretched onto a larger array
/// (`stretch_block`), `⌊b · capacity / span⌋` when it is compressed.
pub struct FoldedFaults {
    pub array: Arc<SharedArray>,
    /// Capacity in blocks when addresses are folded.
    pub modulo: Option<u64>,
    /// (span, capacity, chunk blocks) when addresses are scaled.
    pub scale: Option<(u64, u64, u64)>,
}

impl FoldedFaults {
    #[inline]
    fn fold(&self, block: u64) -> u64 {
        match self.scale {
            Some((span, cap, chunk)) if cap >= span => crate::stack::target::stretch_block(block, span, cap, chunk),
            Some((span, cap, _)) => crate::stack::target::scale_block(block, 1, span, cap),
            None => self.modulo.map_or(block, |m| block % m),
        }
    }
}

impl FaultMap for FoldedFaults {
    fn ndisks(&self) -> u32 {
        self.array.ndisks()
    }
    fn disk_of(&self, block: u64) -> u32 {
        self.array.disk_of(self.fold(block))
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.array.is_failed(disk)
    }
    fn any_failed(&self) -> bool {
        self.array.any_failed()
    }
    fn penalty(&self, block: u64) -> u32 {
        self.array.penalty(self.fold(block))
    }
}

//! Tests' target: one device that shows every [`Io`] reaching the bottom of
//! a stack to a note before planning it.

use super::layer::{Exec, Io, Target};
use super::result::StackResult;
use super::target::SingleDisk;
use crate::array::plan::IoPlan;
use crate::device::toy::ToyDisk;
use crate::device::DeviceModel;
use crate::error::Result;
use crate::exec::count::CountExecutor;

/// A constant-time disk (1 ms per operation).
pub fn const_disk() -> Result<Box<dyn DeviceModel>> {
    Ok(Box::new(ToyDisk::constant(1.0)))
}

pub struct Recording<F: Fn() -> Result<Box<dyn DeviceModel>> + Send, N> {
    pub inner: SingleDisk<F>,
    note: N,
    /// Whether the stack sees the disk's capacity and sector map (as a real
    /// single-disk target), or unbounded addresses.
    shows_disk: bool,
}

impl<F, N> Recording<F, N>
where
    F: Fn() -> Result<Box<dyn DeviceModel>> + Send,
    N: FnMut(&Io, &dyn Exec) + Send,
{
    pub fn new(make: F, wrap: bool, shows_disk: bool, note: N) -> Self {
        Recording {
            inner: SingleDisk::new(make, wrap).unwrap(),
            note,
            shows_disk,
        }
    }
}

impl<F, N> Target for Recording<F, N>
where
    F: Fn() -> Result<Box<dyn DeviceModel>> + Send,
    N: FnMut(&Io, &dyn Exec) + Send,
{
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        self.inner.devices()
    }
    fn sectors_per_block(&self) -> u64 {
        1
    }
    fn plan(&mut self, io: &Io, exec: &dyn Exec) -> Result<IoPlan> {
        (self.note)(io, exec);
        self.inner.plan(io, exec)
    }
    fn ledger(&self) -> &CountExecutor {
        self.inner.ledger()
    }
    fn capacity_blocks(&self) -> Option<u64> {
        self.shows_disk.then(|| self.inner.capacity_blocks()).flatten()
    }
    fn blocks_of(&self, disk: usize, sector: u64, sectors: u64) -> Option<(u64, u64)> {
        self.shows_disk
            .then(|| self.inner.blocks_of(disk, sector, sectors))
            .flatten()
    }
    fn report(&self, out: &mut StackResult) {
        self.inner.report(out)
    }
}

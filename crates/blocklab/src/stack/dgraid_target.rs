//! A D-GRAID array as the bottom of a stack (`[array] raid = "dgraid0" |
//! "dgraid1"`): the placement layer of `crate::dgraid` over identical
//! devices. Stack blocks are the blocks of the ext2 file system the trace
//! addresses (`array.dgraid.fs_size`; its static metadata is known by
//! address); a write is placed by its file-system annotation
//! ([`crate::trace::FsTag`], from the native CSV trace's `owner,kind,parent`
//! columns), as the paper's oracle mode sees it; a read is served from the
//! first copy on a disk that has not failed (or the diffused copy).
//!
//! Each block's copies become disk operations; consecutive blocks whose
//! copies are consecutive on a disk make one operation. A block with no
//! readable copy (a file whose home site failed, D-GRAID-0; a mirror pair
//! lost) is unreadable; a write whose every copy lies on failed disks is
//! unreadable too (the data cannot be stored). A read of a block the array
//! never saw written (before the trace began) reads nothing: D-GRAID holds
//! no copy of it; such reads are counted (`unmapped_reads`).
//!
//! The trace carries no bitmap contents, so the live map only grows (block
//! reuse by another file still remaps, as the paper's block-reuse
//! detection does); failed disks are not rebuilt here (the `live` rebuild
//! order copies a live map onto a RAID-1/10 array).

use serde::Serialize;

use super::layer::{Exec, Io, Target};
use super::result::{ArrayReport, DeviceFigures, StackResult};
use super::target::ops_by_cause;
use crate::array::plan::{Action, DiskOp, DiskOpKind, IoPlan};
use crate::device::DeviceModel;
use crate::dgraid::layer::DgraidCounts;
use crate::dgraid::{Dgraid, DgraidConfig, DgraidLevel, Grouping};
use crate::error::{Error, Result};
use crate::exec::count::CountExecutor;
use crate::fsmodel::geometry::Geometry;
use crate::timed::executor::TimedExecutor;
use crate::trace::Op;

/// What the D-GRAID array did (the `dgraid` object of a stack result).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DgraidReport {
    pub level: String,
    pub meta_copies: u32,
    pub grouping: String,
    /// Blocks of the file system (the array's logical blocks) and of each member.
    pub fs_blocks: u64,
    pub member_blocks: u64,
    /// Blocks in use on each member, and the live ones of each.
    pub used: Vec<u64>,
    pub live: Vec<u64>,
    /// Reads of blocks the array never saw written (no copy to read).
    pub unmapped_reads: u64,
    /// The layer's counters (placement, copies, diffusion).
    pub counts: DgraidCounts,
}

/// D-GRAID over `disks` devices of one model.
pub struct DgraidArray<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> {
    make: F,
    cfg: DgraidConfig,
    geo: Geometry,
    layer: Dgraid,
    block_size: u64,
    /// Failed disks (bit mask) at the start of a pass, and now.
    initial_failed: u64,
    failed: u64,
    /// Disks that fail at `fail_now` (`array.fail_at`).
    fail_later: u64,
    unmapped_reads: u64,
    ledger: CountExecutor,
}

fn mask(disks: &[u32]) -> u64 {
    disks.iter().fold(0, |m, &d| m | 1 << d)
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> DgraidArray<F> {
    /// The array of `cfg` for the file system `geo` (blocks of `block_size`
    /// bytes), `failed` disks failed from the start; the members must fit
    /// the devices.
    pub fn new(cfg: DgraidConfig, geo: Geometry, block_size: u64, make: F, failed: &[u32]) -> Result<Self> {
        let layer = Dgraid::new(cfg.clone(), &geo)?;
        let device_blocks = make()?.capacity_sectors() * 512 / block_size;
        if layer.disk_blocks() > device_blocks {
            return Err(Error::config(format!(
                "D-GRAID members of {} blocks do not fit the device ({device_blocks} blocks of {block_size} B)",
                layer.disk_blocks()
            )));
        }
        if let Some(&d) = failed.iter().find(|&&d| d >= cfg.disks) {
            return Err(Error::config(format!(
                "disk {d} does not exist: the array has disks 0..{}",
                cfg.disks - 1
            )));
        }
        Ok(DgraidArray {
            make,
            ledger: CountExecutor::new(cfg.disks),
            cfg,
            geo,
            layer,
            block_size,
            initial_failed: mask(failed),
            failed: mask(failed),
            fail_later: 0,
            unmapped_reads: 0,
        })
    }

    /// These disks fail only when [`Target::fail_now`] is called.
    pub fn failing_later(mut self, disks: &[u32]) -> Self {
        self.fail_later = mask(disks);
        self.initial_failed &= !self.fail_later;
        self.failed = self.initial_failed;
        self
    }

    fn is_failed(&self, disk: u32) -> bool {
        self.failed >> disk & 1 == 1
    }

    fn failed_list(&self) -> Vec<u32> {
        (0..self.cfg.disks).filter(|&d| self.is_failed(d)).collect()
    }

    /// The plan of blocks `first..first + n`: per block, the copies to
    /// write (or the one to read); runs on a disk make one operation.
    fn plan_blocks(&mut self, io: &Io, first: u64, n: u64) -> Result<IoPlan> {
        let kind = if io.op == Op::Write {
            DiskOpKind::Write
        } else {
            DiskOpKind::Read
        };
        let tag = match io.op {
            Op::Write => Some(io.fs.get().ok_or_else(|| {
                Error::config(format!(
                    "a write to a D-GRAID array needs its file-system annotation (block {first}): \
                     give a native CSV trace with the owner,kind columns (blocklab fs trace writes them)"
                ))
            })?),
            Op::Read => None,
        };
        let mut plan = IoPlan::default();
        // Per disk: the run being gathered (first physical block, length).
        let mut runs: Vec<Option<(u64, u64)>> = vec![None; self.cfg.disks as usize];
        let flush = |plan: &mut IoPlan, disk: usize, run: (u64, u64)| {
            plan.push(
                Action::Disk(DiskOp {
                    disk: disk as u32,
                    kind,
                    block: run.0,
                    nblocks: run.1 as u32,
                    cause: io.cause,
                }),
                &[],
            );
        };
        for b in first..first + n {
            let copies = match &tag {
                Some(t) => {
                    let all = self.layer.write(b, t)?;
                    let alive: Vec<_> = all.into_iter().filter(|c| !self.is_failed(c.disk)).collect();
                    if alive.is_empty() {
                        plan.push(Action::Unreadable { block: b }, &[]);
                    }
                    alive
                }
                None => {
                    if self.layer.copies(b).is_empty() {
                        self.unmapped_reads += 1;
                        continue;
                    }
                    match self.layer.read(b, self.failed) {
                        Some(c) => vec![c],
                        None => {
                            plan.push(Action::Unreadable { block: b }, &[]);
                            continue;
                        }
                    }
                }
            };
            for c in copies {
                let d = c.disk as usize;
                match runs[d] {
                    Some((s, len)) if s + len == c.block && len < u32::MAX as u64 => runs[d] = Some((s, len + 1)),
                    Some(run) => {
                        flush(&mut plan, d, run);
                        runs[d] = Some((c.block, 1));
                    }
                    None => runs[d] = Some((c.block, 1)),
                }
            }
        }
        for (d, run) in runs.into_iter().enumerate() {
            if let Some(run) = run {
                flush(&mut plan, d, run);
            }
        }
        Ok(plan)
    }
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> Target for DgraidArray<F> {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        // A pass starts from an empty array (the trace writes what it reads).
        self.layer = Dgraid::new(self.cfg.clone(), &self.geo)?;
        self.failed = self.initial_failed;
        self.unmapped_reads = 0;
        self.ledger = CountExecutor::new(self.cfg.disks);
        (0..self.cfg.disks).map(|_| (self.make)()).collect()
    }

    fn sectors_per_block(&self) -> u64 {
        self.block_size / 512
    }

    fn plan(&mut self, io: &Io, _exec: &dyn Exec) -> Result<IoPlan> {
        let n = io.nblocks.max(1);
        let end = io.first.checked_add(n).unwrap_or(u64::MAX);
        if end > self.geo.blocks {
            return Err(Error::config(format!(
                "request at block {} ({n} blocks) is beyond the {}-block file system (array.dgraid.fs_size)",
                io.first, self.geo.blocks
            )));
        }
        let plan = self.plan_blocks(io, io.first, n)?;
        self.ledger.run(&plan);
        Ok(plan)
    }

    fn ledger(&self) -> &CountExecutor {
        &self.ledger
    }

    fn capacity_blocks(&self) -> Option<u64> {
        Some(self.geo.blocks)
    }

    fn fail_now(&mut self, _ex: Option<&mut TimedExecutor>) -> Result<()> {
        self.failed |= self.fail_later;
        Ok(())
    }

    fn report(&self, out: &mut StackResult) {
        let summary = self.ledger.summary();
        let by_cause = ops_by_cause(&summary);
        let level = match self.cfg.level {
            DgraidLevel::L0 => "dgraid0",
            DgraidLevel::L1 => "dgraid1",
        };
        let grouping = match self.cfg.grouping {
            Grouping::File => "file",
            Grouping::Dir => "dir",
        };
        out.array = Some(ArrayReport {
            level: level.to_string(),
            disks: self.cfg.disks,
            layout: grouping.to_string(),
            chunk_bytes: self.cfg.diffusion.map_or(0, |d| d.chunk_blocks * self.block_size),
            block_size: self.block_size,
            capacity_blocks: Some(self.geo.blocks),
            failed: self.failed_list(),
            rebuilt: Vec::new(),
            ops_by_cause: by_cause,
            surviving_reads: summary.read.blocks,
            surviving_writes: summary.write.blocks,
            rgr: 0.0,
            unreadable_blocks: summary.unreadable_blocks,
        });
        out.devices = DeviceFigures::from_ledger(&self.ledger, self.cfg.disks);
        out.dgraid = Some(DgraidReport {
            level: level.to_string(),
            meta_copies: self.cfg.meta_copies,
            grouping: grouping.to_string(),
            fs_blocks: self.geo.blocks,
            member_blocks: self.layer.disk_blocks(),
            used: self.layer.used().to_vec(),
            live: (0..self.cfg.disks)
                .map(|d| self.layer.live_member_blocks(d).len() as u64)
                .collect(),
            unmapped_reads: self.unmapped_reads,
            counts: self.layer.counts(),
        });
    }
}

//! The bottom of a stack: one device addressed in 512-byte sectors, or a RAID
//! array of identical devices whose plans come from `crate::array`.
//!
//! Both fold addresses beyond their capacity back onto it when asked
//! (`wrap`): stack block `b` lands at `b mod capacity`, and an operation
//! that runs past the end continues at the start (two operations). Every
//! plan a target makes is tallied in its ledger (a counted executor), so the
//! operations per disk and per cause are known in both executors.

use crate::array::stripe_cache::StripeCache;
use std::sync::Arc;

use super::layer::{Exec, Io, Target};
use super::result::{ArrayReport, CauseTally, DeviceFigures, StackResult};
use crate::array::plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan};
use crate::array::shared::{FoldedFaults, SharedArray};
use crate::array::{Array, Level};
use crate::cache::fault::FaultMap;
use crate::device::DeviceModel;
use crate::error::{Error, Result};
use crate::exec::count::CountExecutor;
use crate::timed::engine::Ns;
use crate::timed::executor::{Step, TimedExecutor};
use crate::timed::rebuild::{RebuildConfig, RebuildReport, Rebuilder};
use crate::trace::Op;

/// Sectors `[first, first + count)` of a byte range (a zero-length request
/// still touches one sector).
pub fn sector_range(offset: u64, len: u64) -> (u64, u64) {
    let first = offset / 512;
    let end = (offset + len).div_ceil(512);
    (first, end.saturating_sub(first).max(1))
}

/// Pieces of `[first, first + n)` folded onto `[0, capacity)`: one piece,
/// or two when the folded range runs past the end.
pub(crate) fn fold(first: u64, n: u64, capacity: u64) -> [(u64, u64); 2] {
    let f = first % capacity;
    let head = n.min(capacity - f);
    [(f, head), (0, n - head)]
}

fn kind(op: Op) -> DiskOpKind {
    if op == Op::Write {
        DiskOpKind::Write
    } else {
        DiskOpKind::Read
    }
}

/// Sectors in a unit of `device.scale_addresses`'s spreading: 1 MiB, so
/// runs up to 1 MiB within a unit stay contiguous on the device.
pub const SPREAD_UNIT_SECTORS: u64 = 2048;

/// The device unit that stack unit `u` lands on when addresses are spread
/// by `factor` (≥ 1): ⌊u·factor⌋. Distinct units land on distinct units, in
/// order.
fn spread_unit(u: u64, factor: f64) -> u64 {
    (u as f64 * factor).floor() as u64
}

/// `[first, first + n)` of the stack spread by `factor` onto the device
/// (constant occupancy, `device.scale_addresses`): each 1 MiB unit of the
/// stack's sectors lands whole on its own device unit, as (device sector,
/// count) pieces in stack order, contiguous ones merged.
pub fn spread(first: u64, n: u64, factor: f64) -> Vec<(u64, u64)> {
    let mut pieces: Vec<(u64, u64)> = Vec::new();
    let mut s = first;
    while s < first + n {
        let u = s / SPREAD_UNIT_SECTORS;
        let len = (SPREAD_UNIT_SECTORS - s % SPREAD_UNIT_SECTORS).min(first + n - s);
        let at = spread_unit(u, factor) * SPREAD_UNIT_SECTORS + s % SPREAD_UNIT_SECTORS;
        match pieces.last_mut() {
            Some((pat, plen)) if *pat + *plen == at => *plen += len,
            _ => pieces.push((at, len)),
        }
        s += len;
    }
    pieces
}

/// The inverse of [`spread`] for the device sectors `[sector, sector + n)`:
/// the stack sectors of their first part that some stack unit lands on,
/// continued while the stack sectors stay contiguous; `None`: no stack
/// unit lands there (the gaps the spreading leaves).
pub fn unspread(sector: u64, n: u64, factor: f64) -> Option<(u64, u64)> {
    let stack_unit = |c: u64| {
        let u = (c as f64 / factor).ceil() as u64;
        [u.saturating_sub(1), u, u + 1]
            .into_iter()
            .find(|&v| spread_unit(v, factor) == c)
    };
    let mut out: Option<(u64, u64)> = None;
    let mut d = sector;
    while d < sector + n {
        let c = d / SPREAD_UNIT_SECTORS;
        let len = (SPREAD_UNIT_SECTORS - d % SPREAD_UNIT_SECTORS).min(sector + n - d);
        match (stack_unit(c), out.as_mut()) {
            (Some(u), Some((f, m))) if *f + *m == u * SPREAD_UNIT_SECTORS + d % SPREAD_UNIT_SECTORS => *m += len,
            (Some(_), Some(_)) => break,
            (Some(u), None) => out = Some((u * SPREAD_UNIT_SECTORS + d % SPREAD_UNIT_SECTORS, len)),
            (None, Some(_)) => break,
            (None, None) => {}
        }
        d += len;
    }
    out
}

/// The plan of one request on one disk addressed in sectors: an operation
/// per non-empty piece (one, or two when the range was folded).
pub(crate) fn sector_plan(disk: u32, op: Op, pieces: impl IntoIterator<Item = (u64, u64)>, cause: Cause) -> IoPlan {
    let mut p = IoPlan::default();
    for (at, n) in pieces.into_iter().filter(|&(_, n)| n > 0) {
        p.push(
            Action::Disk(DiskOp {
                disk,
                kind: kind(op),
                block: at,
                nblocks: n as u32,
                cause,
            }),
            &[],
        );
    }
    p
}

/// One device addressed in 512-byte sectors (DiskSim's unit).
pub struct SingleDisk<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> {
    make: F,
    capacity: u64,
    /// Fold addresses beyond the capacity back onto the disk instead of failing.
    pub wrap: bool,
    /// Sectors per stack block (for I/O that comes as blocks).
    spb: u64,
    /// Constant occupancy: the stack's addresses spread by this factor
    /// ([`spread`]); `None`: as they are.
    spread: Option<f64>,
    ledger: CountExecutor,
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> SingleDisk<F> {
    pub fn new(make: F, wrap: bool) -> Result<Self> {
        Self::with_block_size(make, wrap, 4096)
    }

    /// A disk under a stack whose blocks are `block_size` bytes.
    pub fn with_block_size(make: F, wrap: bool, block_size: u64) -> Result<Self> {
        let capacity = make()?.capacity_sectors();
        if capacity == 0 {
            return Err(Error::config("device has no capacity"));
        }
        Ok(SingleDisk {
            make,
            capacity,
            wrap,
            spb: (block_size / 512).max(1),
            spread: None,
            ledger: CountExecutor::new(1),
        })
    }

    /// Spread the stack's addresses by `factor` (≥ 1) over the device:
    /// the data keeps its share of a disk `factor` times larger (Hsu and
    /// Smith's constant occupancy). 1: unchanged.
    pub fn spread_by(mut self, factor: f64) -> Self {
        if factor != 1.0 {
            self.spread = Some(factor);
        }
        self
    }

    /// Capacity in sectors.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Use only the first `share` of the device (short-stroking: LBN 0 is
    /// a disk's outer edge).
    pub fn short_stroked(mut self, share: f64) -> Self {
        if share < 1.0 {
            self.capacity = ((self.capacity as f64 * share) as u64).max(1);
        }
        self
    }
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> Target for SingleDisk<F> {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        self.ledger = CountExecutor::new(1);
        Ok(vec![(self.make)()?])
    }

    fn sectors_per_block(&self) -> u64 {
        1
    }

    fn plan(&mut self, io: &Io, _exec: &dyn Exec) -> Result<IoPlan> {
        let (first, count) = match io.bytes {
            Some((offset, len)) => sector_range(offset, len),
            None => (io.first * self.spb, io.nblocks.max(1) * self.spb),
        };
        if count > self.capacity || count > u32::MAX as u64 {
            return Err(Error::config(format!(
                "request of {} sectors is larger than the device",
                count
            )));
        }
        let spread_pieces = match self.spread {
            Some(f) => spread(first, count, f),
            None => vec![(first, count)],
        };
        let mut pieces = Vec::with_capacity(spread_pieces.len());
        for (at, n) in spread_pieces {
            if at + n > self.capacity {
                if !self.wrap {
                    let spread = match self.spread {
                        Some(f) => format!(" (at device sector {at}: addresses spread by {f})"),
                        None => String::new(),
                    };
                    return Err(Error::config(format!(
                        "request at byte offset {} ({count} sectors){spread} is beyond the device's {} sectors \
                         (use --wrap, or `wrap = true` in a stack file, to fold addresses)",
                        first * 512,
                        self.capacity
                    )));
                }
                pieces.extend(fold(at, n, self.capacity));
            } else {
                pieces.push((at, n));
            }
        }
        let p = sector_plan(0, io.op, pieces, io.cause);
        self.ledger.run(&p);
        Ok(p)
    }

    fn ledger(&self) -> &CountExecutor {
        &self.ledger
    }

    fn capacity_blocks(&self) -> Option<u64> {
        Some(self.capacity / self.spb)
    }

    fn blocks_of(&self, _disk: usize, sector: u64, sectors: u64) -> Option<(u64, u64)> {
        let (sector, sectors) = match self.spread {
            Some(f) => unspread(sector, sectors, f)?,
            None => (sector, sectors),
        };
        let first = sector.div_ceil(self.spb);
        let end = ((sector + sectors).min(self.capacity) / self.spb).min(self.capacity / self.spb);
        (end > first).then_some((first, end - first))
    }

    fn reset_stats(&mut self) {
        self.ledger = CountExecutor::new(1);
    }

    fn report(&self, out: &mut StackResult) {
        out.devices = DeviceFigures::from_ledger(&self.ledger, 1);
    }
}

/// A RAID array of identical devices; I/O becomes the array's plans
/// (degraded when disks have failed, MD's recovery during a rebuild).
///
/// Reads of mirrors choose a copy as MD's read_balance does for rotating
/// disks (see [`balance_read`]).
pub struct ArrayStack<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> {
    array: Arc<SharedArray>,
    make: F,
    /// Logical capacity in array blocks (`u64::MAX`: unbounded, counted runs
    /// without a member size).
    blocks: u64,
    pub wrap: bool,
    /// `array.fit = "scale"`: the trace's span in stack blocks, compressed
    /// onto the array (see [`scale_block`]).
    span: Option<u64>,
    /// Per disk: the block after the last access issued to it.
    head: Vec<u64>,
    /// The array as it is at the start of every pass (failed disks, no spares).
    initial: Array,
    /// Disks that fail at `fail_now` (`array.fail_at`), not from the start.
    fail_later: Vec<u32>,
    rebuild_cfg: Option<RebuildConfig>,
    rebuild: Option<Rebuilder>,
    /// Counted runs: the rebuild ran (at once).
    rebuilt_at_once: Option<RebuildReport>,
    ledger: CountExecutor,
    /// `array.stripe_cache`: MD's stripe heads serving reads while degraded.
    stripe_cache: Option<StripeCache>,
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> ArrayStack<F> {
    /// An array of `make()` devices, sized by them (or by the array's member
    /// size when given: it must fit the device).
    pub fn new(array: Array, make: F, wrap: bool) -> Result<Self> {
        let bs = array.config().block_size;
        let capacity_bytes = make()?.capacity_sectors() * 512;
        let cfg_bytes = array.config().disk_bytes;
        if cfg_bytes > capacity_bytes {
            return Err(Error::config(format!(
                "the array's member size {cfg_bytes} B is larger than the disk ({capacity_bytes} B)"
            )));
        }
        let per_disk = if cfg_bytes != 0 { cfg_bytes } else { capacity_bytes } / bs;
        let r10 = array.config().raid10_layout();
        let blocks = if array.level() == Level::Raid10 && (r10.far > 1 || r10.offset) {
            // Far / offset RAID-10: MD's raid10_size (the far regions split the member).
            array.capacity_blocks_for(per_disk)
        } else {
            // Whole chunks only; every disk holds the same number of rows.
            let rows = per_disk / array.chunk_blocks();
            rows * array.chunk_blocks() * array.data_disks_per_stripe() as u64
        };
        if blocks == 0 {
            return Err(Error::config("the disks are smaller than one chunk"));
        }
        Ok(Self::with_capacity(array, make, wrap, blocks))
    }

    /// An array of the counted executor: it has no disks to run past, so
    /// block numbers are not bounded (`wrap` folds them onto the array's size).
    pub fn counted(array: Array, make: F, wrap: bool) -> Result<Self> {
        if wrap {
            return Self::new(array, make, wrap);
        }
        Ok(Self::with_capacity(array, make, false, u64::MAX))
    }

    fn with_capacity(array: Array, make: F, wrap: bool, blocks: u64) -> Self {
        let n = array.ndisks();
        ArrayStack {
            initial: array.clone(),
            array: Arc::new(SharedArray::new(array)),
            make,
            blocks,
            wrap,
            span: None,
            head: vec![0; n as usize],
            fail_later: Vec::new(),
            rebuild_cfg: None,
            rebuild: None,
            rebuilt_at_once: None,
            ledger: CountExecutor::new(n),
            stripe_cache: None,
        }
    }

    /// Fit the trace's address span of `span` stack blocks onto the array
    /// by linear compression (`array.fit = "scale"`).
    pub fn scaled(mut self, span: u64) -> Self {
        self.span = Some(span);
        self
    }

    /// Reads of the degraded array go through `heads` of MD's stripe heads
    /// (`array.stripe_cache`, see `array::stripe_cache`).
    pub fn with_stripe_cache(mut self, heads: usize) -> Self {
        self.stripe_cache = Some(StripeCache::new(heads));
        self
    }

    /// The failed disks fail only when [`Target::fail_now`] is called.
    pub fn failing_later(mut self, disks: Vec<u32>) -> Self {
        self.fail_later = disks;
        self
    }

    /// Rebuild the failed disks onto spares in the background (see
    /// `timed::rebuild`); fails when the array cannot be rebuilt (no failed
    /// disk, no redundancy, more failures than the level tolerates).
    pub fn with_rebuild(mut self, cfg: RebuildConfig) -> Result<Self> {
        let mut a = self.initial.clone();
        if a.config().disk_bytes == 0 {
            // Members are the model's disks: rebuild every whole chunk row of them.
            let bytes = (self.make)()?.capacity_sectors() * 512;
            let mut c = *a.config();
            c.disk_bytes = bytes;
            a = Array::new(c)?;
            for &d in self.initial.failed() {
                a.fail(d)?;
            }
        }
        let mut probe = a.clone();
        for &d in &self.fail_later {
            probe.fail(d)?;
        }
        Rebuilder::new(&probe, cfg.clone())?;
        self.initial = a.clone();
        *self.array.get_mut() = a;
        self.rebuild_cfg = Some(cfg);
        Ok(self)
    }

    /// 512-byte sectors per array block (the executor's unit).
    pub fn sectors_per_block(&self) -> u64 {
        self.array.get().config().block_size / 512
    }

    /// Capacity in array blocks (`u64::MAX`: unbounded).
    pub fn capacity_blocks(&self) -> u64 {
        self.blocks
    }

    /// The plan of a trace request as is (tenants share the address space).
    pub fn plan_request(&mut self, req: &crate::trace::Request, exec: &dyn Exec) -> Result<IoPlan> {
        let bs = self.sectors_per_block() * 512;
        let io = super::address::AddressMap::new(super::spec::TenantMap::Ignore, bs, None)?.io(req)?;
        Target::plan(self, &io, exec)
    }

    /// The plan of blocks `[first, first + n)` (already within the array).
    fn plan_range(&mut self, op: Op, first: u64, n: u64, exec: &dyn Exec) -> IoPlan {
        let array = self.array.get();
        if op == Op::Write {
            array.plan_write(first, n)
        } else {
            let (head, level, r10) = (&self.head, array.level(), array.config().raid10_layout());
            array.plan_read_with(first, n, &mut |copies| {
                balance_read(copies, level, r10, head, |d| exec.pending(d))
            })
        }
    }

    /// The plan of the `n` blocks of `io` that land at array block `first`
    /// (folded onto the array when `wrap`), counted by the rebuild.
    fn plan_piece(&mut self, io: &Io, first: u64, n: u64, exec: &dyn Exec) -> Result<IoPlan> {
        let end = first
            .checked_add(n)
            .ok_or_else(|| Error::config("block number overflow"))?;
        let mut plan = if end > self.blocks {
            if !self.wrap {
                let at = io.bytes.map_or(first * (self.sectors_per_block() * 512), |b| b.0);
                return Err(Error::config(format!(
                    "request at byte offset {at} is beyond the array's {} blocks \
                     (use --wrap, or `array.wrap = true` in a stack file, to fold addresses)",
                    self.blocks
                )));
            }
            let mut p = IoPlan::default();
            for (at, len) in fold(first, n, self.blocks).into_iter().filter(|&(_, l)| l > 0) {
                let part = self.plan_range(io.op, at, len, exec);
                p.append(part);
            }
            p
        } else {
            self.plan_range(io.op, first, n, exec)
        };
        if io.cause != Cause::User {
            plan.retag(Cause::User, io.cause);
        }
        if let Some(r) = self.rebuild.as_mut() {
            // The rebuild counts the I/O it competes with, and its order may
            // watch what users access (PRO's popularity).
            r.user_request(&self.array.get(), first..first + n, &plan, exec.now());
        }
        Ok(plan)
    }
}

/// `array.fit = "scale"` when the array is at least as large as the span:
/// stack chunk `s` (of `chunk` blocks) lands whole on array chunk
/// ⌊s · chunk · capacity / span / chunk⌋, so that every stack block has one
/// array block whatever request carries it — the placement the fault-aware
/// caches see (`array::shared::FoldedFaults`) is the one the plans use.
/// (Stretching each request's first block alone, as [`scale_block`] does,
/// put a request's later blocks at other array blocks than the same blocks
/// starting a request.) Distinct stack chunks land on distinct array chunks,
/// in order.
pub fn stretch_block(block: u64, span: u64, capacity: u64, chunk: u64) -> u64 {
    let chunk = chunk.max(1);
    let s = block / chunk;
    let c = (s as u128 * chunk as u128 * capacity as u128 / span.max(1) as u128) as u64 / chunk;
    (c * chunk + block % chunk).min(capacity.saturating_sub(1))
}

/// `array.fit = "scale"`: where stack block `first` (of a request of `n`
/// blocks) lands on an array of `capacity` blocks when the trace spans
/// `span` stack blocks: ⌊first · capacity / span⌋ (the span compressed, or
/// stretched, onto the whole array), pulled back so that the request ends
/// within the array. Requests keep their length; the order of addresses,
/// and where the busy regions lie relative to the whole, are kept.
pub fn scale_block(first: u64, n: u64, span: u64, capacity: u64) -> u64 {
    let at = (first as u128 * capacity as u128 / span.max(1) as u128) as u64;
    at.min(capacity.saturating_sub(n))
}

/// Which copy `(disk, disk block)` of a mirrored read to use, as MD's
/// read_balance does for rotating disks (copies in MD's slot order; the
/// first wins ties):
/// * RAID-1 (raid1.c): a copy that continues its disk's last access
///   (sequential) wins, then the first idle disk, then the copy nearest the
///   disk's head;
/// * RAID-10 (raid10.c): with near copies the first idle disk wins; else
///   with far or offset copies the lowest device address (the outer, faster
///   half: no head distance); else the copy nearest the head.
///
/// The head is where the last access issued to the disk ended (MD records
/// it at completion; at issue is the deterministic approximation).
fn balance_read(
    copies: &[(u32, u64)],
    level: Level,
    r10: crate::array::layout::Raid10Layout,
    head: &[u64],
    pending: impl Fn(usize) -> usize,
) -> usize {
    let idle = |&(d, _): &(u32, u64)| pending(d as usize) == 0;
    let nearest = || {
        (0..copies.len())
            .min_by_key(|&i| copies[i].1.abs_diff(head[copies[i].0 as usize]))
            .unwrap_or(0)
    };
    if level == Level::Raid10 {
        if r10.near > 1 {
            if let Some(i) = copies.iter().position(idle) {
                return i;
            }
        }
        if r10.far > 1 {
            return (0..copies.len()).min_by_key(|&i| copies[i].1).unwrap_or(0);
        }
        return nearest();
    }
    if let Some(i) = copies.iter().position(|&(d, at)| head[d as usize] == at) {
        return i;
    }
    copies.iter().position(idle).unwrap_or_else(nearest)
}

impl<F: Fn() -> Result<Box<dyn DeviceModel>> + Send> Target for ArrayStack<F> {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        self.head.iter_mut().for_each(|h| *h = 0);
        // A pass starts as configured again (the previous pass may have
        // failed disks later, or rebuilt them).
        *self.array.get_mut() = self.initial.clone();
        self.rebuild = None;
        self.ledger = CountExecutor::new(self.initial.ndisks());
        if let Some(c) = self.stripe_cache.as_mut() {
            c.clear();
        }
        (0..self.initial.ndisks()).map(|_| (self.make)()).collect()
    }

    fn sectors_per_block(&self) -> u64 {
        ArrayStack::sectors_per_block(self)
    }

    fn plan(&mut self, io: &Io, exec: &dyn Exec) -> Result<IoPlan> {
        let n = io.nblocks.max(1);
        if n > self.blocks {
            return Err(Error::config(format!(
                "request of {n} blocks is larger than the array's {} blocks",
                self.blocks
            )));
        }
        let mut plan = IoPlan::default();
        match self.span {
            // Stretched: each stack chunk of the request lands whole on its own array chunk.
            Some(span) if self.blocks >= span => {
                let chunk = self.array.get().chunk_blocks();
                // (array block, length) of each run of chunks that stays contiguous
                let mut pieces: Vec<(u64, u64)> = Vec::new();
                let mut b = io.first;
                while b < io.first + n {
                    let len = (chunk - b % chunk).min(io.first + n - b);
                    let at = stretch_block(b, span, self.blocks, chunk);
                    match pieces.last_mut() {
                        Some((pat, plen)) if *pat + *plen == at => *plen += len,
                        _ => pieces.push((at, len)),
                    }
                    b += len;
                }
                for (at, len) in pieces {
                    plan.append(self.plan_piece(io, at, len, exec)?);
                }
            }
            Some(span) => plan = self.plan_piece(io, scale_block(io.first, n, span, self.blocks), n, exec)?,
            None => plan = self.plan_piece(io, io.first, n, exec)?,
        }
        if let Some(c) = self.stripe_cache.as_mut() {
            let array = self.array.get();
            if !array.failed().is_empty() {
                plan = c.filter(plan, array.ndisks());
            }
        }
        for op in plan.disk_ops() {
            self.head[op.disk as usize] = op.block + op.nblocks as u64;
        }
        self.ledger.run(&plan);
        Ok(plan)
    }

    fn ledger(&self) -> &CountExecutor {
        &self.ledger
    }

    fn capacity_blocks(&self) -> Option<u64> {
        (self.blocks != u64::MAX).then_some(self.blocks)
    }

    fn faults(&self) -> Option<Arc<dyn FaultMap>> {
        let modulo = (self.wrap && self.blocks != u64::MAX).then_some(self.blocks);
        Some(Arc::new(FoldedFaults {
            array: self.array.clone(),
            modulo,
            scale: self.span.map(|s| (s, self.blocks, self.array.get().chunk_blocks())),
        }))
    }

    fn shared_array(&self) -> Option<Arc<SharedArray>> {
        Some(self.array.clone())
    }

    fn fail_now(&mut self, ex: Option<&mut TimedExecutor>) -> Result<()> {
        {
            let mut a = self.array.get_mut();
            for &d in &self.fail_later {
                a.fail(d)?;
            }
        }
        if let (Some(ex), Some(cfg)) = (ex, &self.rebuild_cfg) {
            // The spares arrive `at` after the failure.
            let cfg = RebuildConfig {
                start: ex.now() + cfg.start,
                ..cfg.clone()
            };
            let r = Rebuilder::new(&self.array.get(), cfg)?;
            r.arm(ex);
            self.rebuild = Some(r);
        }
        Ok(())
    }

    fn start_background(&mut self, ex: &mut TimedExecutor) -> Result<()> {
        // With disks failing later, the rebuild is armed by `fail_now`.
        if let (Some(cfg), true) = (&self.rebuild_cfg, self.fail_later.is_empty()) {
            let r = Rebuilder::new(&self.array.get(), cfg.clone())?;
            r.arm(ex);
            self.rebuild = Some(r);
        }
        Ok(())
    }

    fn background(&mut self, step: Step, ex: &mut TimedExecutor) -> Result<()> {
        let Some(r) = self.rebuild.as_mut() else { return Ok(()) };
        let mut array = self.array.get_mut();
        match step {
            Step::BgWake { token, .. } => r.on_wake(token, &mut array, ex),
            Step::BgDone { tag, .. } => r.on_done(tag, &mut array, ex),
            _ => Ok(()),
        }
    }

    fn rebuild_at_once(&mut self, at: Ns) -> Result<()> {
        let Some(cfg) = self.rebuild_cfg.clone() else {
            return Ok(());
        };
        if self.rebuilt_at_once.is_some() {
            return Ok(());
        }
        let mut array = self.array.get_mut();
        let cfg = RebuildConfig { start: at, ..cfg };
        self.rebuilt_at_once = Some(rebuild_at_once(&mut array, &cfg)?);
        Ok(())
    }

    fn rebuild_start(&self) -> Option<Ns> {
        self.rebuild_cfg.as_ref().map(|c| c.start)
    }

    fn user_done(&mut self, time: Ns, start: Ns, unreadable: bool) {
        if let Some(r) = self.rebuild.as_mut() {
            r.user_done(time, start, unreadable);
        }
    }

    fn reset_stats(&mut self) {
        self.ledger = CountExecutor::new(self.initial.ndisks());
    }

    fn rebuild_report(&self) -> Option<RebuildReport> {
        self.rebuild
            .as_ref()
            .map(|r| r.report())
            .or_else(|| self.rebuilt_at_once.clone())
    }

    fn report(&self, out: &mut StackResult) {
        let a = self.array.get();
        let summary = self.ledger.summary();
        let mut by_cause = ops_by_cause(&summary);
        let rebuild = self.rebuild_report();
        // The rebuild's own operations are counted by the rebuild (the
        // ledger sees the plans of requests and destages).
        if let Some(r) = &rebuild {
            by_cause.insert(
                "rebuild".to_string(),
                CauseTally::new(
                    r.rebuild_reads,
                    r.rebuild_writes,
                    r.rebuild_read_blocks,
                    r.rebuild_write_blocks,
                ),
            );
        }
        out.array = Some(ArrayReport {
            level: a.level().name().to_string(),
            disks: a.ndisks(),
            layout: a.config().layout_name(),
            chunk_bytes: a.config().chunk_bytes,
            block_size: a.config().block_size,
            capacity_blocks: (self.blocks != u64::MAX).then_some(self.blocks),
            failed: a.failed().to_vec(),
            rebuilt: rebuild.filter(|r| r.finished).map(|r| r.disks).unwrap_or_default(),
            ops_by_cause: by_cause,
            surviving_reads: summary.read.blocks,
            surviving_writes: summary.write.blocks,
            rgr: 0.0,
            unreadable_blocks: summary.unreadable_blocks,
        });
        out.devices = DeviceFigures::from_ledger(&self.ledger, a.ndisks());
    }
}

/// The counted executor's rebuild: every step of the rebuild order at once;
/// the spares then become ordinary members.
fn rebuild_at_once(array: &mut Array, cfg: &RebuildConfig) -> Result<RebuildReport> {
    let disks = array.failed().to_vec();
    let mut strategy = crate::rebuild::build_with(&cfg.order, array, &cfg.params)?;
    array.set_rebuilt_unit(cfg.map_unit_rows);
    let rows = array.member_rows().unwrap_or(0);
    let low = cfg.low_priority.unwrap_or(strategy.prefers_low_priority());
    let mut r = RebuildReport {
        disks,
        start_ms: crate::timed::engine::ns_to_ms(cfg.start),
        finished: true,
        rows_total: rows,
        row_kib: array.chunk_blocks() * array.config().block_size / 1024,
        window: cfg.window,
        min_kbps: cfg.min_kbps,
        max_kbps: cfg.max_kbps,
        order: strategy.name().to_string(),
        idle: cfg.idle.name().to_string(),
        throttled: cfg.throttle.unwrap_or(strategy.prefers_speed_rule()),
        priority: if low { "low" } else { "same" }.to_string(),
        map_unit_rows: cfg.map_unit_rows,
        ..Default::default()
    };
    crate::rebuild::rebuild_all(array, &mut *strategy, |plan| {
        for op in plan.disk_ops() {
            match op.kind {
                DiskOpKind::Read => {
                    r.rebuild_reads += 1;
                    r.rebuild_read_blocks += op.nblocks as u64;
                }
                DiskOpKind::Write => {
                    r.rebuild_writes += 1;
                    r.rebuild_write_blocks += op.nblocks as u64;
                }
            }
        }
    })?;
    r.rebuild_rows = strategy.rebuilt_rows();
    r.order_stats = strategy.stats();
    Ok(r)
}

/// The name of a cause in reports.
/// A ledger's operations by cause, as the result reports them.
pub fn ops_by_cause(summary: &crate::exec::count::CountSummary) -> std::collections::BTreeMap<String, CauseTally> {
    summary
        .by_cause
        .iter()
        .map(|(cause, rw)| {
            let t = CauseTally::new(rw.read.ops, rw.write.ops, rw.read.blocks, rw.write.blocks);
            (cause_name(*cause).to_string(), t)
        })
        .collect()
}

pub fn cause_name(c: Cause) -> &'static str {
    match c {
        Cause::User => "user",
        Cause::ReconstructRead => "reconstruct-read",
        Cause::ParityUpdate => "parity-update",
        Cause::Rebuild => "rebuild",
        Cause::Destage => "destage",
    }
}

#[cfg(test)]
mod spread_tests {
    use super::{spread, unspread, SPREAD_UNIT_SECTORS as U};

    #[test]
    fn units_land_whole_on_their_spread_units() {
        // Factor 2.5: stack units 0, 1, 2, 3 land on device units 0, 2, 5, 7.
        assert_eq!(spread(10, 8, 2.5), vec![(10, 8)]);
        assert_eq!(spread(U + 5, 8, 2.5), vec![(2 * U + 5, 8)]);
        assert_eq!(spread(3 * U, 1, 2.5), vec![(7 * U, 1)]);
        // A request across the unit 0 / unit 1 boundary: two pieces.
        assert_eq!(spread(U - 8, 20, 2.5), vec![(U - 8, 8), (2 * U, 12)]);
        // Factor 1 changes nothing: one piece across units.
        assert_eq!(spread(U - 8, 3 * U, 1.0), vec![(U - 8, 3 * U)]);
        // Back: device unit 2 is stack unit 1; device unit 1 is a gap.
        assert_eq!(unspread(2 * U + 5, 8, 2.5), Some((U + 5, 8)));
        assert_eq!(unspread(U, 100, 2.5), None);
        // From a gap into unit 2: only the mapped part.
        assert_eq!(unspread(2 * U - 50, 150, 2.5), Some((U, 100)));
    }

    #[test]
    fn unspread_inverts_spread_piece_by_piece() {
        // Brute force over starts, lengths and factors: each piece maps
        // back to exactly the stack sectors it came from.
        for f in [1.0, 1.5, 2.0, 3.7, 12.7] {
            for first in (0..6 * U).step_by(331) {
                for n in [1, 8, 300, U + 7] {
                    let mut s = first;
                    for (at, len) in spread(first, n, f) {
                        let back = unspread(at, len, f).unwrap();
                        // Merged pieces (factor 1) come back whole too.
                        assert_eq!(back, (s, len), "f {f} first {first} n {n}");
                        s += len;
                    }
                    assert_eq!(s, first + n);
                }
            }
        }
    }
}

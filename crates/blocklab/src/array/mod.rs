//! RAID arrays: layouts, failure state, and the I/O plans they emit.
//!
//! An [`Array`] maps logical blocks (of `block_size` bytes) to member disks
//! exactly as Linux MD does for the same level, layout, chunk size and number
//! of disks (no data offset), keeps a set of failed disks, and turns logical
//! reads and writes into [`IoPlan`]s (see `plans.rs` and `degraded.rs`).

pub mod degraded;
pub mod gf256;
pub mod layout;
pub mod plan;
pub mod plans;
pub mod rebuild;
pub mod rebuilt;
pub mod scrub;
pub mod shared;
pub mod stripe_cache;

use serde::{Deserialize, Serialize};

pub use layout::{Layout, Level, Raid10Geom, Raid10Layout, StripeMap, LAYOUTS, LEVELS, RAID10_LAYOUTS};
pub use plan::{Action, Cause, DiskOp, DiskOpKind, IoPlan, Node};
pub use rebuilt::RebuiltMap;

use crate::error::{Error, Result};

/// Default chunk size, as mdadm's.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 * 1024;
/// MD's RAID-6 syndrome arithmetic supports at most this many disks.
pub const MAX_DISKS: u32 = 255;

/// What an array is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayConfig {
    pub level: Level,
    pub disks: u32,
    pub chunk_bytes: u64,
    /// Only RAID-5/6 choose; other levels take the default.
    pub layout: Layout,
    pub block_size: u64,
    /// Copies of each block: 0 = the level's own (RAID-1: every disk; RAID-10:
    /// near 2; others 1). RAID-10 accepts 2..=disks (near layout when
    /// `raid10` is None; with `raid10` set it must be 0 or near × far).
    pub copies: u32,
    /// RAID-10 layout (`n2`, `f2`, `o2`, `n2f2`, ...); None: near with `copies`.
    #[serde(default)]
    pub raid10: Option<Raid10Layout>,
    /// Bytes of each member used for data (no data offset); 0 = unknown.
    /// Needed by RAID-10 far layouts (the far regions start at fixed
    /// fractions of the member); when given, also bounds the array.
    #[serde(default)]
    pub disk_bytes: u64,
}

impl ArrayConfig {
    /// A config with MD's defaults: 64 KiB chunk, left-symmetric, 4 KiB blocks.
    pub fn new(level: Level, disks: u32) -> ArrayConfig {
        ArrayConfig {
            level,
            disks,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            layout: Layout::default(),
            block_size: 4096,
            copies: 0,
            raid10: None,
            disk_bytes: 0,
        }
    }

    /// `raid5`, `5`, `RAID-5`, ...; unknown names list the valid ones.
    pub fn parse_level(s: &str) -> Result<Level> {
        Level::parse(s)
    }

    /// mdadm layout names (`left-symmetric`, `ls`, `parity-first`, `ddf-N-restart`, ...).
    pub fn parse_layout(s: &str) -> Result<Layout> {
        Layout::parse(s)
    }

    /// Set the layout from its mdadm name: RAID-10 takes `n2`, `f2`, `o2`,
    /// `n2f2`, ...; the other levels the parity layouts.
    pub fn set_layout(&mut self, name: &str) -> Result<()> {
        if self.level == Level::Raid10 {
            self.raid10 = Some(Raid10Layout::parse(name)?);
        } else {
            self.layout = Layout::parse(name)?;
        }
        Ok(())
    }

    /// The RAID-10 layout in force (near with `copies` when none was set).
    pub fn raid10_layout(&self) -> Raid10Layout {
        self.raid10
            .unwrap_or_else(|| Raid10Layout::near(self.effective_copies()))
    }

    /// The layout's name as mdadm spells it (`left-symmetric`, `n2`, `f2`, ...).
    pub fn layout_name(&self) -> String {
        match self.level {
            Level::Raid10 => self.raid10_layout().name(),
            _ => self.layout.name().to_string(),
        }
    }

    /// Build and validate a config from the names a user types (`raid5`,
    /// `left-symmetric`, ...); `layout` None takes the default.
    pub fn from_names(
        level: &str,
        disks: u32,
        chunk_bytes: u64,
        layout: Option<&str>,
        block_size: u64,
    ) -> Result<ArrayConfig> {
        Self::from_names_sized(level, disks, chunk_bytes, layout, block_size, 0)
    }

    /// As [`from_names`](Self::from_names), with each member's size in bytes
    /// (0 = unknown; RAID-10 far layouts need it).
    pub fn from_names_sized(
        level: &str,
        disks: u32,
        chunk_bytes: u64,
        layout: Option<&str>,
        block_size: u64,
        disk_bytes: u64,
    ) -> Result<ArrayConfig> {
        let mut cfg = ArrayConfig::new(Self::parse_level(level)?, disks);
        cfg.chunk_bytes = chunk_bytes;
        cfg.block_size = block_size;
        cfg.disk_bytes = disk_bytes;
        if let Some(l) = layout {
            cfg.set_layout(l)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// The effective number of copies of each data block.
    pub fn effective_copies(&self) -> u32 {
        match (self.level, self.copies) {
            (Level::Raid1, _) => self.disks,
            (Level::Raid10, _) if self.raid10.is_some() => self.raid10.map_or(2, |l| l.copies()),
            (Level::Raid10, 0) => 2,
            (Level::Raid10, c) => c,
            _ => 1,
        }
    }

    /// Reject impossible configurations with a message saying why.
    pub fn validate(&self) -> Result<()> {
        let lvl = self.level.name();
        let min = match self.level {
            Level::Raid0 | Level::Raid1 | Level::Raid4 | Level::Raid5 => 2,
            Level::Raid10 => self.effective_copies().max(2),
            Level::Raid6 => 4,
        };
        if self.disks < min {
            return Err(Error::config(format!(
                "{lvl} needs at least {min} disks, got {}",
                self.disks
            )));
        }
        if self.disks > MAX_DISKS {
            return Err(Error::config(format!(
                "at most {MAX_DISKS} disks are supported, got {}",
                self.disks
            )));
        }
        if self.block_size == 0 || !self.block_size.is_multiple_of(512) {
            return Err(Error::config(format!(
                "block size must be a positive multiple of 512 bytes, got {}",
                self.block_size
            )));
        }
        if self.chunk_bytes == 0 || !self.chunk_bytes.is_multiple_of(self.block_size) {
            return Err(Error::config(format!(
                "chunk size {} is not a positive multiple of the block size {}",
                self.chunk_bytes, self.block_size
            )));
        }
        match self.level {
            Level::Raid1 if self.copies != 0 && self.copies != self.disks => {
                return Err(Error::config(format!(
                    "raid1 keeps one copy per disk: copies must equal disks ({}), got {}",
                    self.disks, self.copies
                )))
            }
            Level::Raid10 if self.copies == 1 => return Err(Error::config("raid10 needs at least 2 copies")),
            Level::Raid0 | Level::Raid4 | Level::Raid5 | Level::Raid6 if self.copies > 1 => {
                return Err(Error::config(format!("{lvl} keeps one copy of each block")))
            }
            _ => {}
        }
        if self.level == Level::Raid10 {
            self.validate_raid10()?;
        } else if self.raid10.is_some() {
            return Err(Error::config(format!("a raid10 layout is not used by {lvl}")));
        }
        if self.disk_bytes != 0 && self.disk_bytes / self.chunk_bytes == 0 {
            return Err(Error::config(format!(
                "member size {} B holds no whole chunk of {} B",
                self.disk_bytes, self.chunk_bytes
            )));
        }
        let layout_ok = match self.level {
            Level::Raid5 => self.layout.is_raid5(),
            Level::Raid6 => true,
            // MD puts RAID-4 parity on the last disk whatever the layout.
            Level::Raid4 => matches!(self.layout, Layout::LeftSymmetric | Layout::ParityLast),
            _ => self.layout == Layout::default(),
        };
        if !layout_ok {
            let why = match self.level {
                Level::Raid5 => "is a RAID-6 layout",
                Level::Raid4 => "is not used: raid4 keeps parity on the last disk",
                _ => "is not used: this level has no parity layout",
            };
            return Err(Error::config(format!(
                "layout {} {why} (level {lvl})",
                self.layout.name()
            )));
        }
        Ok(())
    }

    /// RAID-10: copies against disks, MD's far / offset rules, member size.
    fn validate_raid10(&self) -> Result<()> {
        let l = self.raid10_layout();
        let name = l.name();
        if self.raid10.is_some() && self.copies != 0 && self.copies != l.copies() {
            return Err(Error::config(format!(
                "raid10 layout {name} keeps {} copies, but copies is {}",
                l.copies(),
                self.copies
            )));
        }
        if l.copies() < 2 {
            return Err(Error::config(format!(
                "raid10 layout {name} keeps 1 copy: raid10 needs at least 2 (near × far)"
            )));
        }
        if l.copies() > self.disks {
            return Err(Error::config(format!(
                "raid10 layout {name} keeps {} copies on distinct disks, but the array has {} disks",
                l.copies(),
                self.disks
            )));
        }
        // MD adds a single chunk when a near copy wraps to disk 0, even in
        // offset mode, so with disks not a multiple of near two copies would
        // land on the same place (MD does it; we refuse).
        if l.offset && l.near > 1 && !self.disks.is_multiple_of(l.near) {
            return Err(Error::config(format!(
                "raid10 layout {name}: near copies with offset copies need a number of disks that is a \
                 multiple of near ({}), got {} (MD's mapping would overlap copies)",
                l.near, self.disks
            )));
        }
        if l.is_far() {
            if self.disk_bytes == 0 {
                return Err(Error::config(format!(
                    "raid10 far layout {name} needs each member's size: give --disk-size (e.g. 4GiB)"
                )));
            }
            let chunks = self.disk_bytes / self.chunk_bytes;
            if chunks < l.far as u64 {
                return Err(Error::config(format!(
                    "raid10 far layout {name}: a member of {} B holds {chunks} whole chunk(s) of {} B, \
                     fewer than the {} far regions need",
                    self.disk_bytes, self.chunk_bytes, l.far
                )));
            }
        }
        if l.offset && self.disk_bytes != 0 && self.disk_bytes / self.chunk_bytes < l.far as u64 {
            return Err(Error::config(format!(
                "raid10 offset layout {name}: a member of {} B holds fewer than {} chunks of {} B",
                self.disk_bytes, l.far, self.chunk_bytes
            )));
        }
        Ok(())
    }
}

/// Where one logical block lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The disk holding the block; for mirrors every copy (primary first).
    pub disks: Vec<u32>,
    /// Block offset on `disks[0]`.
    pub disk_block: u64,
    /// Block offset on each of `disks` (they differ only for RAID-10: far and
    /// offset layouts, or near with a number of disks that is not a multiple
    /// of the copies).
    pub disk_blocks: Vec<u64>,
    /// Parity disks of the block's stripe: `[P]`, `[P, Q]` or `[]`.
    pub parity: Vec<u32>,
}

/// A RAID array with a set of failed disks.
#[derive(Debug, Clone)]
pub struct Array {
    cfg: ArrayConfig,
    /// Chunk size in blocks.
    pub(crate) chunk_blocks: u64,
    pub(crate) copies: u32,
    /// RAID-10 geometry (a near-2 placeholder for other levels).
    pub(crate) r10: Raid10Geom,
    failed: Vec<u32>,
    failed_mask: Vec<bool>,
    /// Failed disks being recovered onto a spare: their chunk rows marked
    /// in `rebuilt` (MD's `recovery_offset`, and a bitmap of rows rebuilt
    /// out of order) are in sync.
    recovering_mask: Vec<bool>,
    rebuilt: RebuiltMap,
}

impl Array {
    pub fn new(cfg: ArrayConfig) -> Result<Array> {
        cfg.validate()?;
        let layout = cfg.raid10_layout();
        let stride = if layout.offset {
            1
        } else if layout.far > 1 {
            layout::far_stride(cfg.disk_bytes / cfg.chunk_bytes, layout.far)
        } else {
            u64::MAX
        };
        Ok(Array {
            chunk_blocks: cfg.chunk_bytes / cfg.block_size,
            copies: cfg.effective_copies(),
            r10: Raid10Geom {
                layout,
                disks: cfg.disks,
                stride,
            },
            failed: Vec::new(),
            failed_mask: vec![false; cfg.disks as usize],
            recovering_mask: vec![false; cfg.disks as usize],
            rebuilt: RebuiltMap::new(
                1,
                cfg.disk_bytes
                    .checked_div(cfg.chunk_bytes)
                    .filter(|&r| r > 0)
                    .unwrap_or(u64::MAX),
            ),
            cfg,
        })
    }

    pub fn config(&self) -> &ArrayConfig {
        &self.cfg
    }

    pub fn level(&self) -> Level {
        self.cfg.level
    }

    pub fn ndisks(&self) -> u32 {
        self.cfg.disks
    }

    pub fn chunk_blocks(&self) -> u64 {
        self.chunk_blocks
    }

    /// Data chunks per stripe row: the disks minus parity for RAID-4/5/6,
    /// all disks for RAID-0, 1 for RAID-1, disks / copies (rounded down) for RAID-10
    /// (near; far and offset arrays are sized by [`capacity_blocks_for`](Self::capacity_blocks_for)).
    pub fn data_disks_per_stripe(&self) -> u32 {
        let n = self.cfg.disks;
        match self.cfg.level {
            Level::Raid0 => n,
            Level::Raid1 => 1,
            Level::Raid10 => n / self.copies,
            l => n - l.parity_units(),
        }
    }

    /// MD's array size in blocks for members of `member_blocks` blocks (whole
    /// chunks only). RAID-10 follows `raid10_size`: ⌊⌊C/far⌋·disks/near⌋
    /// chunks; the other levels have the same number of chunk rows on every
    /// member, `data_disks_per_stripe` data chunks per row.
    pub fn capacity_blocks_for(&self, member_blocks: u64) -> u64 {
        let rows = member_blocks / self.chunk_blocks;
        let chunks = match self.cfg.level {
            Level::Raid10 => {
                let l = self.r10.layout;
                (rows / l.far as u64) * self.cfg.disks as u64 / l.near as u64
            }
            _ => rows * self.data_disks_per_stripe() as u64,
        };
        chunks * self.chunk_blocks
    }

    /// The array's size in blocks when the member size is known.
    pub fn capacity_blocks(&self) -> Option<u64> {
        (self.cfg.disk_bytes != 0).then(|| self.capacity_blocks_for(self.cfg.disk_bytes / self.cfg.block_size))
    }

    /// RAID-10: (disk, disk block) of every copy of `block`, in MD's slot order.
    pub fn raid10_copies(&self, block: u64) -> impl Iterator<Item = (u32, u64)> + '_ {
        let (chunk, off) = self.chunk_of(block);
        let cb = self.chunk_blocks;
        self.r10.copies(chunk).map(move |(d, row)| (d, row * cb + off))
    }

    /// RAID-10 inverse map: the logical block and copy slot stored at
    /// `disk_block` of `disk`, or None when that place holds no data (past
    /// the far regions, or past the array's capacity when the size is known).
    pub fn raid10_block_at(&self, disk: u32, disk_block: u64) -> Option<(u64, u32)> {
        let cb = self.chunk_blocks;
        let cap_chunks = self.capacity_blocks().map(|b| b / cb);
        self.r10
            .chunk_at(disk, disk_block / cb, cap_chunks)
            .map(|(chunk, slot)| (chunk * cb + disk_block % cb, slot))
    }

    /// Failures the level survives without losing data (any pattern).
    pub fn tolerated_failures(&self) -> u32 {
        match self.cfg.level {
            Level::Raid0 => 0,
            Level::Raid1 => self.cfg.disks - 1,
            Level::Raid10 => self.copies - 1,
            l => l.parity_units(),
        }
    }

    /// Mark a disk failed (idempotent).
    pub fn fail(&mut self, disk: u32) -> Result<()> {
        if disk >= self.cfg.disks {
            return Err(Error::config(format!(
                "cannot fail disk {disk}: the array has disks 0..{}",
                self.cfg.disks - 1
            )));
        }
        if !self.failed_mask[disk as usize] {
            self.failed_mask[disk as usize] = true;
            self.failed.push(disk);
            self.failed.sort_unstable();
        }
        Ok(())
    }

    /// Failed disks, ascending.
    pub fn failed(&self) -> &[u32] {
        &self.failed
    }

    #[inline]
    pub fn is_failed(&self, disk: u32) -> bool {
        self.failed_mask.get(disk as usize).copied().unwrap_or(false)
    }

    /// Whether `disk` cannot serve member chunk row `row` (disk blocks
    /// `row·chunk .. (row+1)·chunk`): failed, and not a recovering spare
    /// whose row is already rebuilt (below the recovery offset, or marked in
    /// the map of rebuilt units).
    #[inline]
    pub fn is_failed_at(&self, disk: u32, row: u64) -> bool {
        self.is_failed(disk) && !(self.recovering_mask[disk as usize] && self.rebuilt.is_rebuilt(row))
    }

    /// Replace the failed disks `disks` by fresh spares and start recovering
    /// them (MD: the spares are added, `recovery_offset` = 0). Until
    /// [`set_recovered_rows`](Self::set_recovered_rows) moves the offset the
    /// array behaves exactly as degraded.
    pub fn start_recovery(&mut self, disks: &[u32]) -> Result<()> {
        let lvl = self.cfg.level.name();
        if self.tolerated_failures() == 0 {
            return Err(Error::config(format!(
                "{lvl} has no redundancy: a lost disk cannot be rebuilt"
            )));
        }
        if disks.is_empty() {
            return Err(Error::config("rebuild needs failed disks (--failed)"));
        }
        if self.failed.len() as u32 > self.tolerated_failures() {
            return Err(Error::config(format!(
                "{lvl} of {} disks survives {} failure(s), {} disks failed: the data is lost, nothing to rebuild from",
                self.cfg.disks,
                self.tolerated_failures(),
                self.failed.len()
            )));
        }
        for &d in disks {
            if !self.is_failed(d) {
                return Err(Error::config(format!(
                    "disk {d} is not failed: only failed disks are rebuilt"
                )));
            }
        }
        for &d in disks {
            self.recovering_mask[d as usize] = true;
        }
        self.rebuilt.clear();
        Ok(())
    }

    /// Disks being recovered, ascending.
    pub fn recovering(&self) -> Vec<u32> {
        (0..self.cfg.disks)
            .filter(|&d| self.recovering_mask[d as usize])
            .collect()
    }

    /// The recovery offset in member chunk rows (rows below it are rebuilt).
    pub fn recovered_rows(&self) -> u64 {
        self.rebuilt.prefix()
    }

    /// Move the recovery offset: rows `0..rows` of the recovering disks are in sync.
    pub fn set_recovered_rows(&mut self, rows: u64) {
        self.rebuilt.set_prefix(rows);
    }

    /// Row `row` of the recovering disks is rebuilt (out of order: the map
    /// of rebuilt units). Returns true when this completed its map unit, so
    /// that reads of the unit now go to the spares.
    pub fn mark_rebuilt(&mut self, row: u64) -> bool {
        self.rebuilt.mark(row)
    }

    /// Whether member chunk row `row` of the recovering disks is rebuilt.
    pub fn is_rebuilt(&self, row: u64) -> bool {
        self.rebuilt.is_rebuilt(row)
    }

    /// The map of rebuilt units.
    pub fn rebuilt_map(&self) -> &RebuiltMap {
        &self.rebuilt
    }

    /// Resume a recovery (after [`start_recovery`](Self::start_recovery)):
    /// rows below `prefix` and in `runs` (as [`RebuiltMap::runs`] gives
    /// them) are rebuilt on the spares.
    pub fn restore_rebuilt(&mut self, prefix: u64, runs: &[(u64, u64)]) {
        self.rebuilt.restore(prefix, runs);
    }

    /// One bit of the map of rebuilt units per `rows` member chunk rows (at
    /// least 1; default 1). Set before the recovery starts.
    pub fn set_rebuilt_unit(&mut self, rows: u64) {
        let total = self.member_rows().unwrap_or(u64::MAX);
        self.rebuilt = RebuiltMap::new(rows, total);
    }

    /// Recovery is complete: the spares become ordinary members (not failed).
    pub fn finish_recovery(&mut self) {
        for d in 0..self.cfg.disks {
            if self.recovering_mask[d as usize] {
                self.recovering_mask[d as usize] = false;
                self.failed_mask[d as usize] = false;
            }
        }
        self.failed.retain(|&d| self.failed_mask[d as usize]);
        self.rebuilt.clear();
    }

    /// Chunk rows of each member (the unit of a rebuild step), when the
    /// member size is known.
    pub fn member_rows(&self) -> Option<u64> {
        (self.cfg.disk_bytes != 0).then(|| self.cfg.disk_bytes / self.cfg.block_size / self.chunk_blocks)
    }

    /// Split a logical block into (chunk number, offset in chunk).
    #[inline]
    pub(crate) fn chunk_of(&self, block: u64) -> (u64, u64) {
        (block / self.chunk_blocks, block % self.chunk_blocks)
    }

    /// Stripe map (parity levels only) of stripe `stripe`.
    #[inline]
    pub fn stripe_map(&self, stripe: u64) -> StripeMap {
        StripeMap::new(self.cfg.level, self.cfg.layout, self.cfg.disks, stripe)
    }

    /// The (first) disk holding `block`, without allocating.
    #[inline]
    pub fn disk_of(&self, block: u64) -> u32 {
        let (chunk, _) = self.chunk_of(block);
        let n = self.cfg.disks;
        match self.cfg.level {
            Level::Raid0 => (chunk % n as u64) as u32,
            Level::Raid1 => 0,
            Level::Raid10 => ((chunk * self.r10.layout.near as u64) % n as u64) as u32,
            _ => {
                let k = self.data_disks_per_stripe() as u64;
                self.stripe_map(chunk / k).data_disk((chunk % k) as u32)
            }
        }
    }

    /// Where `block` lives.
    pub fn map(&self, block: u64) -> Placement {
        let (chunk, off) = self.chunk_of(block);
        let cb = self.chunk_blocks;
        let n = self.cfg.disks;
        let (disks, disk_blocks, parity) = match self.cfg.level {
            Level::Raid0 => (
                vec![(chunk % n as u64) as u32],
                vec![(chunk / n as u64) * cb + off],
                vec![],
            ),
            Level::Raid1 => ((0..n).collect(), vec![block; n as usize], vec![]),
            Level::Raid10 => {
                let (d, b): (Vec<u32>, Vec<u64>) = self.r10.copies(chunk).map(|(d, row)| (d, row * cb + off)).unzip();
                (d, b, vec![])
            }
            _ => {
                let k = self.data_disks_per_stripe() as u64;
                let stripe = chunk / k;
                let sm = self.stripe_map(stripe);
                (
                    vec![sm.data_disk((chunk % k) as u32)],
                    vec![stripe * cb + off],
                    sm.parity(),
                )
            }
        };
        Placement {
            disk_block: disk_blocks[0],
            disks,
            disk_blocks,
            parity,
        }
    }

    /// Surviving-disk block reads that a read miss of `block` costs: 1 when a
    /// copy is readable directly (a recovering spare counts for the rows
    /// already rebuilt); for a block on a failed disk of a parity level,
    /// every surviving unit of its stripe row (n − 1 with one failure, n − 2
    /// with two in RAID-6); `None` when the block cannot be produced.
    pub fn read_penalty(&self, block: u64) -> Option<u32> {
        if self.failed.is_empty() || self.direct_copy(block).is_some() {
            return Some(1);
        }
        match self.cfg.level {
            Level::Raid0 | Level::Raid1 | Level::Raid10 => None,
            l => {
                let row = self.chunk_of(block).0 / self.data_disks_per_stripe() as u64;
                let lost = (0..self.cfg.disks).filter(|&d| self.is_failed_at(d, row)).count() as u32;
                (lost <= l.parity_units()).then_some(self.cfg.disks - lost)
            }
        }
    }
}

/// Parse a byte size: `65536`, `64KiB`, `64k`, `1MiB`, `4M` (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || Error::config(format!("bad size `{s}`: expected e.g. 65536, 64KiB, 1MiB"));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests;

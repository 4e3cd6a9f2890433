//! RAID levels and Linux MD layouts: where each chunk of a stripe lives.
//!
//! The parity levels follow MD's `raid5_compute_sector` (drivers/md/raid5.c):
//! the array address space is cut into chunks; chunk `c` belongs to stripe
//! `c / k` (k = data disks) as the `c % k`-th data chunk, and every member disk
//! holds exactly one chunk of each stripe at disk offset `stripe * chunk`. The
//! layout only decides which disk holds P (and Q) and in what order the data
//! chunks follow. RAID-10 follows `raid10_find_phys` for the near, far and
//! offset layouts (see [`Raid10Geom`]), RAID-0
//! MD's single-zone striping (all members the same size), RAID-1 full mirrors.
//! There is no data offset: disk block 0 is the first block of the member.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A RAID level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Raid0,
    Raid1,
    Raid10,
    Raid4,
    Raid5,
    Raid6,
}

/// Names accepted for levels (digits alone are accepted as well).
pub const LEVELS: &[&str] = &["raid0", "raid1", "raid10", "raid4", "raid5", "raid6"];

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid10 => "raid10",
            Level::Raid4 => "raid4",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
        }
    }

    pub fn parse(s: &str) -> Result<Level> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("raid").unwrap_or(&t);
        let t = t.strip_prefix('-').unwrap_or(t);
        Ok(match t {
            "0" => Level::Raid0,
            "1" => Level::Raid1,
            "10" => Level::Raid10,
            "4" => Level::Raid4,
            "5" => Level::Raid5,
            "6" => Level::Raid6,
            _ => return Err(Error::unknown("RAID level", s, LEVELS)),
        })
    }

    /// Number of parity units per stripe (0 for non-parity levels).
    pub fn parity_units(self) -> u32 {
        match self {
            Level::Raid4 | Level::Raid5 => 1,
            Level::Raid6 => 2,
            _ => 0,
        }
    }

    pub fn has_parity(self) -> bool {
        self.parity_units() > 0
    }
}

/// An MD layout (`mdadm --layout`). Only RAID-5 and RAID-6 choose one; RAID-4
/// always keeps parity on the last disk. The `Ddf*` and `*6` layouts exist for
/// RAID-6 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// ALGORITHM_LEFT_ASYMMETRIC (0).
    LeftAsymmetric,
    /// ALGORITHM_RIGHT_ASYMMETRIC (1).
    RightAsymmetric,
    /// ALGORITHM_LEFT_SYMMETRIC (2), MD's default.
    #[default]
    LeftSymmetric,
    /// ALGORITHM_RIGHT_SYMMETRIC (3).
    RightSymmetric,
    /// ALGORITHM_PARITY_0 (4): parity on the first disk(s).
    ParityFirst,
    /// ALGORITHM_PARITY_N (5): parity on the last disk(s).
    ParityLast,
    /// ALGORITHM_ROTATING_ZERO_RESTART (8), DDF.
    DdfZeroRestart,
    /// ALGORITHM_ROTATING_N_RESTART (9), DDF.
    DdfNRestart,
    /// ALGORITHM_ROTATING_N_CONTINUE (10), DDF.
    DdfNContinue,
    /// ALGORITHM_LEFT_ASYMMETRIC_6 (16): RAID-5 layout plus Q on the last disk.
    #[serde(rename = "left-asymmetric-6")]
    LeftAsymmetric6,
    /// ALGORITHM_RIGHT_ASYMMETRIC_6 (17).
    #[serde(rename = "right-asymmetric-6")]
    RightAsymmetric6,
    /// ALGORITHM_LEFT_SYMMETRIC_6 (18).
    #[serde(rename = "left-symmetric-6")]
    LeftSymmetric6,
    /// ALGORITHM_RIGHT_SYMMETRIC_6 (19).
    #[serde(rename = "right-symmetric-6")]
    RightSymmetric6,
    /// ALGORITHM_PARITY_0_6 (20).
    #[serde(rename = "parity-first-6")]
    ParityFirst6,
}

/// Layout names as mdadm spells them (lower case; `ls`, `la`, `rs`, `ra` also accepted).
pub const LAYOUTS: &[&str] = &[
    "left-asymmetric",
    "right-asymmetric",
    "left-symmetric",
    "right-symmetric",
    "parity-first",
    "parity-last",
    "ddf-zero-restart",
    "ddf-n-restart",
    "ddf-n-continue",
    "left-asymmetric-6",
    "right-asymmetric-6",
    "left-symmetric-6",
    "right-symmetric-6",
    "parity-first-6",
];

const ALL_LAYOUTS: [Layout; 14] = [
    Layout::LeftAsymmetric,
    Layout::RightAsymmetric,
    Layout::LeftSymmetric,
    Layout::RightSymmetric,
    Layout::ParityFirst,
    Layout::ParityLast,
    Layout::DdfZeroRestart,
    Layout::DdfNRestart,
    Layout::DdfNContinue,
    Layout::LeftAsymmetric6,
    Layout::RightAsymmetric6,
    Layout::LeftSymmetric6,
    Layout::RightSymmetric6,
    Layout::ParityFirst6,
];

impl Layout {
    pub fn name(self) -> &'static str {
        LAYOUTS[ALL_LAYOUTS.iter().position(|&l| l == self).unwrap_or(0)]
    }

    pub fn all() -> &'static [Layout] {
        &ALL_LAYOUTS
    }

    pub fn parse(s: &str) -> Result<Layout> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        let t = match t.as_str() {
            "la" => "left-asymmetric",
            "ra" => "right-asymmetric",
            "ls" => "left-symmetric",
            "rs" => "right-symmetric",
            "parity-last-6" => "parity-last", // MD: ALGORITHM_PARITY_N_6 == PARITY_N
            other => other,
        };
        LAYOUTS
            .iter()
            .position(|&n| n == t)
            .map(|i| ALL_LAYOUTS[i])
            .ok_or_else(|| Error::unknown("layout", s, LAYOUTS))
    }

    /// Usable with RAID-5 (and RAID-6).
    pub fn is_raid5(self) -> bool {
        matches!(
            self,
            Layout::LeftAsymmetric
                | Layout::RightAsymmetric
                | Layout::LeftSymmetric
                | Layout::RightSymmetric
                | Layout::ParityFirst
                | Layout::ParityLast
        )
    }

    /// DDF layouts number the Q syndrome by absolute disk index.
    pub fn is_ddf(self) -> bool {
        matches!(
            self,
            Layout::DdfZeroRestart | Layout::DdfNRestart | Layout::DdfNContinue
        )
    }
}

/// Where the units of one parity stripe live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StripeMap {
    /// Disks in the stripe.
    pub n: u32,
    /// Data units per stripe.
    pub k: u32,
    pub p: u32,
    /// Q disk (RAID-6 only).
    pub q: Option<u32>,
    level: Level,
    layout: Layout,
}

impl StripeMap {
    /// MD's placement of stripe `stripe` for a parity level.
    pub fn new(level: Level, layout: Layout, n: u32, stripe: u64) -> StripeMap {
        let m = level.parity_units();
        let k = n - m;
        let rot = |modulus: u32| (stripe % modulus as u64) as u32;
        let (p, q) = match level {
            Level::Raid4 => (k, None),
            Level::Raid5 => match layout {
                Layout::LeftAsymmetric | Layout::LeftSymmetric => (k - rot(n), None),
                Layout::RightAsymmetric | Layout::RightSymmetric => (rot(n), None),
                Layout::ParityFirst => (0, None),
                _ => (k, None), // ParityLast (validated)
            },
            _ => match layout {
                // P rotates backwards from the last disk, Q right after it
                // (wrapping to disk 0 when P is last).
                Layout::LeftAsymmetric | Layout::LeftSymmetric => {
                    let p = n - 1 - rot(n);
                    (p, Some((p + 1) % n))
                }
                Layout::RightAsymmetric | Layout::RightSymmetric | Layout::DdfZeroRestart => {
                    let p = rot(n);
                    (p, Some((p + 1) % n))
                }
                Layout::DdfNRestart => {
                    let p = n - 1 - ((stripe + 1) % n as u64) as u32;
                    (p, Some((p + 1) % n))
                }
                Layout::DdfNContinue => {
                    let p = n - 1 - rot(n);
                    (p, Some((p + n - 1) % n))
                }
                Layout::ParityFirst => (0, Some(1)),
                Layout::ParityLast => (k, Some(k + 1)),
                Layout::LeftAsymmetric6 | Layout::LeftSymmetric6 => (k - rot(n - 1), Some(n - 1)),
                Layout::RightAsymmetric6 | Layout::RightSymmetric6 => (rot(n - 1), Some(n - 1)),
                Layout::ParityFirst6 => (0, Some(n - 1)),
            },
        };
        StripeMap {
            n,
            k,
            p,
            q,
            level,
            layout,
        }
    }

    /// Disk of the `d`-th data unit (0-based, d < k) of this stripe.
    pub fn data_disk(&self, d: u32) -> u32 {
        let (n, p) = (self.n, self.p);
        match self.level {
            Level::Raid4 => d,
            Level::Raid5 => match self.layout {
                // Asymmetric: data fills the disks in order, skipping P.
                Layout::LeftAsymmetric | Layout::RightAsymmetric => d + (d >= p) as u32,
                // Symmetric: data starts right after P and wraps around.
                Layout::LeftSymmetric | Layout::RightSymmetric => (p + 1 + d) % n,
                Layout::ParityFirst => d + 1,
                _ => d,
            },
            _ => match self.layout {
                Layout::LeftAsymmetric | Layout::RightAsymmetric | Layout::DdfZeroRestart | Layout::DdfNRestart => {
                    if p == n - 1 {
                        d + 1 // Q D D D P
                    } else if d >= p {
                        d + 2 // D D P Q D
                    } else {
                        d
                    }
                }
                Layout::LeftSymmetric | Layout::RightSymmetric => (p + 2 + d) % n,
                Layout::DdfNContinue => (p + 1 + d) % n,
                Layout::ParityFirst => d + 2,
                Layout::ParityLast => d,
                Layout::LeftAsymmetric6 | Layout::RightAsymmetric6 => d + (d >= p) as u32,
                Layout::LeftSymmetric6 | Layout::RightSymmetric6 => (p + 1 + d) % (n - 1),
                Layout::ParityFirst6 => d + 1,
            },
        }
    }

    /// All data disks of the stripe in logical order.
    pub fn data_disks(&self) -> Vec<u32> {
        (0..self.k).map(|d| self.data_disk(d)).collect()
    }

    /// Parity disks: `[P]` or `[P, Q]`.
    pub fn parity(&self) -> Vec<u32> {
        match self.q {
            Some(q) => vec![self.p, q],
            None => vec![self.p],
        }
    }

    /// RAID-6: the position ("slot") of each disk's data in the Q syndrome,
    /// `Q = sum over data disks of g^slot * D`, as MD orders its syndrome
    /// sources: DDF layouts use the disk index; the others count data disks
    /// starting from the disk after Q (or from disk 0 when Q is the last disk).
    /// Returned in logical data order (entry `d` is the slot of data unit `d`).
    pub fn q_slots(&self) -> Vec<u32> {
        let Some(q) = self.q else {
            return (0..self.k).collect();
        };
        if self.layout.is_ddf() {
            return self.data_disks();
        }
        let n = self.n;
        let d0 = if q == n - 1 { 0 } else { q + 1 };
        let mut slot_of_disk = vec![0u32; n as usize];
        let mut next = 0;
        for i in 0..n {
            let disk = (d0 + i) % n;
            if disk != self.p && disk != q {
                slot_of_disk[disk as usize] = next;
                next += 1;
            }
        }
        self.data_disks().iter().map(|&d| slot_of_disk[d as usize]).collect()
    }
}

/// RAID-10 near layout (`raid10_find_phys` with far copies = 1): the copies of
/// chunk `c` occupy the consecutive positions `c*copies .. c*copies+copies` of
/// the row-major (row, disk) grid. Returns (disk, row) per copy.
pub fn raid10_near(chunk: u64, copies: u32, n: u32) -> impl Iterator<Item = (u32, u64)> {
    let first = chunk * copies as u64;
    (0..copies as u64).map(move |i| {
        let pos = first + i;
        ((pos % n as u64) as u32, pos / n as u64)
    })
}

/// A RAID-10 layout as MD's layout word describes it: `near` copies side by
/// side in a row, times `far` copies placed either in far regions of each
/// member (`offset` false) or in the following chunk rows (`offset` true).
/// mdadm's names: `n2` = near 2, `f2` = far 2, `o2` = offset 2; MD's layout
/// word also allows both (`n2f2`, `n2o2`), which mdadm cannot create but the
/// kernel runs. The *far-sets* variants (layout bits 17/18, `use_far_sets`)
/// are not modelled: the far shift always wraps over the whole array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Raid10Layout {
    /// Copies in one chunk row, on consecutive disks (MD's near_copies).
    pub near: u32,
    /// Far or offset copies of each near copy (MD's far_copies; 1 = none).
    pub far: u32,
    /// The far copies sit in the next chunk rows instead of far regions (MD's far_offset).
    pub offset: bool,
}

/// Examples of the RAID-10 layout names `Raid10Layout::parse` takes.
pub const RAID10_LAYOUTS: &[&str] = &["n2", "n3", "f2", "f3", "o2", "o3", "n2f2", "n2o2"];

impl Default for Raid10Layout {
    /// mdadm's default, `n2`.
    fn default() -> Self {
        Raid10Layout::near(2)
    }
}

impl Raid10Layout {
    pub fn near(copies: u32) -> Self {
        Raid10Layout {
            near: copies,
            far: 1,
            offset: false,
        }
    }

    /// Copies of each chunk (near × far).
    pub fn copies(&self) -> u32 {
        self.near * self.far
    }

    /// Far copies in far regions of the members (needs the member size).
    pub fn is_far(&self) -> bool {
        self.far > 1 && !self.offset
    }

    /// MD's layout word: near in bits 0-7, far in bits 8-15, offset in bit 16
    /// (as mdadm's parse_layout_10 builds it: `n2` is 0x102, `f2` 0x201, `o2` 0x10201).
    pub fn md_word(&self) -> u32 {
        self.near | (self.far << 8) | ((self.offset as u32) << 16)
    }

    /// mdadm's name: `n2`, `f2`, `o2`, or `n2f2` / `n2o2` for combined forms.
    pub fn name(&self) -> String {
        let kind = if self.offset { 'o' } else { 'f' };
        match (self.near, self.far) {
            (n, 1) => format!("n{n}"),
            (1, f) => format!("{kind}{f}"),
            (n, f) => format!("n{n}{kind}{f}"),
        }
    }

    /// `n2`, `f2`, `o3`, `near2`, `far2`, `offset2`, `n2f2`, `near=2,far=2`
    /// (the key=value form of MD's reports), case-insensitive. A letter without a
    /// number is not accepted; near and far parts may come in either order.
    pub fn parse(s: &str) -> Result<Raid10Layout> {
        let bad = || Error::unknown("raid10 layout", s, RAID10_LAYOUTS);
        let t: String = s
            .trim()
            .to_ascii_lowercase()
            .chars()
            .filter(|c| !matches!(c, '=' | ',' | '-' | '+' | ' '))
            .collect();
        let (mut near, mut far, mut offset): (Option<u32>, Option<u32>, Option<bool>) = (None, None, None);
        let mut rest = t.as_str();
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let word_end = rest.find(|c: char| c.is_ascii_digit()).ok_or_else(bad)?;
            let (word, tail) = rest.split_at(word_end);
            let num_end = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
            let (num, tail) = tail.split_at(num_end);
            let k: u32 = num.parse().map_err(|_| bad())?;
            match word {
                "n" | "near" if near.is_none() => near = Some(k),
                "f" | "far" if far.is_none() => (far, offset) = (Some(k), Some(false)),
                "o" | "offset" if far.is_none() => (far, offset) = (Some(k), Some(true)),
                "f" | "far" | "o" | "offset" => {
                    return Err(Error::config(format!(
                        "raid10 layout `{s}`: give far (f) or offset (o) copies, not both"
                    )))
                }
                _ => return Err(bad()),
            }
            rest = tail;
        }
        let l = Raid10Layout {
            near: near.unwrap_or(1),
            far: far.unwrap_or(1),
            offset: offset.unwrap_or(false),
        };
        if l.near == 0 || l.far == 0 || l.near > 255 || l.far > 255 {
            return Err(Error::config(format!(
                "raid10 layout `{s}`: near and far copies must be 1..=255 (one byte each in MD's layout word)"
            )));
        }
        Ok(l)
    }
}

/// A RAID-10 layout on a given number of disks and member size: everything
/// MD's `raid10_find_phys` needs (our own derivation, see `copies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raid10Geom {
    pub layout: Raid10Layout,
    pub disks: u32,
    /// Chunk rows between the start of far region k and region k+1: MD's
    /// `stride` in chunks. Far: the member's whole chunks / far (see
    /// `far_stride`); offset: 1; near: unused (u64::MAX).
    pub stride: u64,
}

/// MD's far stride in chunk rows for a member holding `member_chunks` whole
/// chunks. MD's `calc_sectors` goes the long way round: array chunks
/// A = ⌊⌊C/far⌋·disks/near⌋, used chunks per device U = ⌈A·copies/disks⌉,
/// stride = ⌊U/far⌋. Because near·far ≤ disks, the rounding in A loses less
/// than one chunk of U, so U = ⌊C/far⌋·far and the stride is simply ⌊C/far⌋
/// (a unit test checks the long form against this one).
pub fn far_stride(member_chunks: u64, far: u32) -> u64 {
    member_chunks / far as u64
}

impl Raid10Geom {
    /// Where the copies of `chunk` live, as (disk, chunk row) in MD's slot
    /// order: near copy 0, its far copies 1.., near copy 1, its far copies, ...
    ///
    /// Why this is MD's placement: the near copies fill the row-major
    /// (row, disk) grid exactly as the near layout does (chunk c takes
    /// positions c·near .. c·near+near-1, so a near copy that runs past the
    /// last disk continues on disk 0 one row down). With offset copies that
    /// grid row r becomes chunk row r·far, so each group of far rows holds one
    /// grid row and its shifted repeats. Each far (or offset) copy k of a near
    /// copy is the same picture shifted right by k·near disks (wrapping over
    /// the whole array, no far sets) and down by k·stride rows: far region k
    /// for the far layout, the k-th following row for offset.
    pub fn copies(&self, chunk: u64) -> impl Iterator<Item = (u32, u64)> {
        let Raid10Geom { layout, disks, stride } = *self;
        let n = disks as u64;
        let (near, far) = (layout.near as u64, layout.far as u64);
        let first = chunk * near;
        (0..near * far).map(move |slot| {
            let (i, k) = (slot / far, slot % far);
            let pos = first + i;
            let mut row = pos / n;
            if layout.offset {
                // Only the grid row is spread; the wrap of a near copy adds
                // one chunk row (MD adds one chunk), not `far` rows.
                row = (first / n) * far + (row - first / n);
            }
            let disk = (pos % n + k * near) % n;
            (disk as u32, row + k * stride)
        })
    }

    /// The inverse (MD's `raid10_find_virt`, our own derivation): the chunk
    /// and copy slot stored at chunk row `row` of `disk`, or None when that
    /// row of the region holds no chunk position. `capacity_chunks` (if any)
    /// marks the positions past the end of the array as unused.
    pub fn chunk_at(&self, disk: u32, row: u64, capacity_chunks: Option<u64>) -> Option<(u64, u32)> {
        let n = self.disks as u64;
        let (near, far) = (self.layout.near as u64, self.layout.far as u64);
        if disk as u64 >= n {
            return None;
        }
        // Which far copy k this row belongs to, and the grid row it repeats.
        let (k, grid_row) = if far == 1 {
            (0, row)
        } else if self.layout.offset {
            (row % far, row / far)
        } else {
            let k = row / self.stride;
            if k >= far {
                return None;
            }
            (k, row % self.stride)
        };
        // Undo the shift of k·near disks.
        let grid_disk = (disk as u64 + n - (k * near) % n) % n;
        let pos = grid_row * n + grid_disk;
        let (chunk, i) = (pos / near, pos % near);
        if capacity_chunks.is_some_and(|cap| chunk >= cap) {
            return None;
        }
        Some((chunk, (i * far + k) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_are_the_cli_names() {
        for &l in Layout::all() {
            assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{}\"", l.name()));
        }
        assert_eq!(serde_json::to_string(&Level::Raid10).unwrap(), "\"raid10\"");
    }

    #[test]
    fn names_round_trip() {
        for &l in Layout::all() {
            assert_eq!(Layout::parse(l.name()).unwrap(), l);
        }
        assert_eq!(Layout::parse("ls").unwrap(), Layout::LeftSymmetric);
        assert_eq!(Layout::parse("ddf-N-restart").unwrap(), Layout::DdfNRestart);
        for l in LEVELS {
            assert_eq!(Level::parse(l).unwrap().name(), *l);
        }
        assert_eq!(Level::parse("5").unwrap(), Level::Raid5);
        let e = Level::parse("7").unwrap_err().to_string();
        assert!(e.contains("raid5") && e.contains("raid10"), "{e}");
        let e = Layout::parse("sideways").unwrap_err().to_string();
        assert!(e.contains("left-symmetric"), "{e}");
    }
}

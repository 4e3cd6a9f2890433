//! What the tier does with a tenant's reads and writes: the write policies
//! of the research caches (ECI-Cache chooses between write-back and
//! read-only) and the modes production SSD caches ship (dm-cache, bcache,
//! Open CAS, EnhanceIO).
//!
//! | event | wb | wt | ro | wa | wo | pt |
//! |---|---|---|---|---|---|---|
//! | read, cached | SSD | SSD | SSD | SSD | SSD | SSD (only what an earlier mode left) |
//! | read, not cached | array, then fill | same | same | same | array, no fill | array, no fill |
//! | write, cached | SSD, dirty | SSD + array | array, copy dropped | SSD + array | SSD, dirty | array, copy dropped |
//! | write, not cached | SSD, dirty (allocate) | SSD + array (allocate) | array | array (no allocate) | SSD, dirty | array |
//!
//! A read of a cached block is always served by the SSD, whatever the mode:
//! a block left dirty by an earlier mode (ECI switching write-back to
//! read-only) holds the only current copy.

use crate::analysis::write_policy::WritePolicy;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write-back: writes stay in the SSD, dirty, until destaged.
    WriteBack,
    /// Write-through: writes go to the SSD and the array.
    WriteThrough,
    /// Read-only (EnhanceIO, ECI): writes go to the array and drop the cached copy.
    ReadOnly,
    /// Write-around: writes go to the array; a cached copy is updated, nothing is allocated.
    WriteAround,
    /// Write-only (Open CAS, dm-writecache): writes as write-back, read misses are not inserted.
    WriteOnly,
    /// Pass-through: the SSD is bypassed (writes drop a cached copy).
    PassThrough,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::WriteBack => "wb",
            Mode::WriteThrough => "wt",
            Mode::ReadOnly => "ro",
            Mode::WriteAround => "wa",
            Mode::WriteOnly => "wo",
            Mode::PassThrough => "pt",
        }
    }

    /// Whether a read miss is inserted (filled) into the SSD.
    pub fn fills_reads(self) -> bool {
        matches!(
            self,
            Mode::WriteBack | Mode::WriteThrough | Mode::ReadOnly | Mode::WriteAround
        )
    }
}

impl From<WritePolicy> for Mode {
    fn from(p: WritePolicy) -> Mode {
        match p {
            WritePolicy::WriteBack => Mode::WriteBack,
            WritePolicy::ReadOnly => Mode::ReadOnly,
        }
    }
}

/// A tenant's policy as configured: fixed, or ECI's adaptive choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeRule {
    Fixed(Mode),
    /// Write-back or read-only, chosen every window by the share of re-writes.
    Adaptive,
}

impl ModeRule {
    pub const NAMES: &'static [&'static str] = &["wb", "wt", "ro", "wa", "wo", "pt", "adaptive"];

    pub fn parse(s: &str) -> Result<ModeRule> {
        Ok(ModeRule::Fixed(match s {
            "wb" | "write-back" | "back" => Mode::WriteBack,
            "wt" | "write-through" | "through" => Mode::WriteThrough,
            "ro" | "read-only" => Mode::ReadOnly,
            "wa" | "write-around" | "around" => Mode::WriteAround,
            "wo" | "write-only" => Mode::WriteOnly,
            "pt" | "pass-through" => Mode::PassThrough,
            "adaptive" => return Ok(ModeRule::Adaptive),
            other => return Err(Error::unknown("write policy", other, Self::NAMES)),
        }))
    }

    /// The mode a tenant starts with (adaptive: write-back, as ECI).
    pub fn initial(self) -> Mode {
        match self {
            ModeRule::Fixed(m) => m,
            ModeRule::Adaptive => Mode::WriteBack,
        }
    }
}

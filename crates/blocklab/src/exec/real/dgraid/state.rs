//! `dgraid.json`: the state of a D-GRAID array on member files — its
//! configuration, failed and recovering members, the generation (events)
//! written into every live member's identity block, and whether it was
//! closed cleanly. Written as the RAID state file is: pretty JSON, then
//! `# crc32`, to a temporary file renamed over the old one.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dgraid::{DgraidConfig, Grouping, ReplicaPlacement};
use crate::error::{Error, Location, Result};

pub const STATE_FILE: &str = "dgraid.json";
const FORMAT: u32 = 1;

fn default_deferred_max() -> u64 {
    1024
}

pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Whether `dir` holds a D-GRAID array (rather than a RAID one).
pub fn is_dgraid_dir(dir: &Path) -> bool {
    state_path(dir).exists()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DgState {
    pub format: u32,
    pub uuid: String,
    /// `dgraid0` or `dgraid1`.
    pub level: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub placement: String,
    pub seed: u64,
    pub block_size: u64,
    /// Blocks of the exported file-system image (`fs_size` / block size).
    pub fs_blocks: u64,
    /// Blocks of each member.
    pub disk_blocks: u64,
    /// What tells the array each block's owner: `infer` (inference from
    /// the file system's writes, `dgraid::infer`), `tags` (a `tags` file),
    /// or `by-address` (static metadata by address, the rest by extent:
    /// tests).
    pub classifier: String,
    /// Inference's bound on blocks written before their owner is known.
    #[serde(default = "default_deferred_max")]
    pub deferred_max: u64,
    pub failed: Vec<u32>,
    pub recovering: Vec<u32>,
    pub generation: u64,
    /// Closed cleanly (false while open: a crash leaves it false).
    pub clean: bool,
}

impl DgState {
    /// The placement layer's configuration.
    pub fn config(&self) -> Result<DgraidConfig> {
        let level = DgraidConfig::parse_level(&self.level)?;
        let mut cfg = DgraidConfig::new(level, self.disks, self.meta_copies);
        cfg.grouping = Grouping::parse(&self.grouping)?;
        cfg.placement = ReplicaPlacement::parse(&self.placement)?;
        cfg.seed = self.seed;
        cfg.disk_blocks = self.disk_blocks;
        Ok(cfg)
    }

    /// The disks a read may not use: failed, and spares not yet rebuilt.
    pub fn unreadable_mask(&self) -> u64 {
        self.failed.iter().chain(&self.recovering).fold(0, |m, &d| m | 1 << d)
    }

    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        crate::exec::real::state::save_checksummed(self, dir, STATE_FILE)
    }

    pub fn load(dir: &Path) -> Result<DgState> {
        let path = state_path(dir);
        let shown = path.display().to_string();
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&shown, e))?;
        let bad = |field: &str, m: String| Error::parse(&shown, Location::Whole, field, m);
        let end = text
            .rfind("\n# crc32 ")
            .ok_or_else(|| bad("crc32", "missing checksum line".into()))?;
        let (body, tail) = text.split_at(end);
        let want = u32::from_str_radix(tail.trim_start_matches("\n# crc32 ").trim(), 16)
            .map_err(|_| bad("crc32", "checksum is not hex".into()))?;
        if crc32fast::hash(body.as_bytes()) != want {
            return Err(bad("crc32", "checksum mismatch: the state file is damaged".into()));
        }
        let st: DgState = serde_json::from_str(body)
            .map_err(|e| Error::parse(&shown, Location::Line(e.line() as u64), "state", e.to_string()))?;
        if st.format != FORMAT {
            return Err(bad(
                "format",
                format!("unknown format {} (this blocklab reads {FORMAT})", st.format),
            ));
        }
        st.validate(&shown)?;
        Ok(st)
    }

    /// Every field bounded before use (a file can be crafted with a valid
    /// checksum).
    pub fn validate(&self, shown: &str) -> Result<()> {
        let bad = |field: &str, m: String| Err(Error::parse(shown, Location::Whole, field, m));
        if super::super::identity::parse_uuid(&self.uuid).is_none() {
            return bad("uuid", "not 32 hex digits".into());
        }
        if let Err(e) = self.config() {
            return bad("level", e.to_string());
        }
        if let Err(e) = self.config().and_then(|c| c.validate()) {
            return bad("disks", e.to_string());
        }
        if !self.block_size.is_power_of_two() || !(512..=1 << 20).contains(&self.block_size) {
            return bad(
                "block_size",
                format!("{} is not a power of two in 512..=1 MiB", self.block_size),
            );
        }
        if self.fs_blocks == 0 || self.fs_blocks > 1 << 32 {
            return bad("fs_blocks", format!("{} is not in 1..=2^32", self.fs_blocks));
        }
        if self.disk_blocks == 0 || self.disk_blocks > u32::MAX as u64 {
            return bad("disk_blocks", format!("{} is not in 1..2^32", self.disk_blocks));
        }
        if self.deferred_max == 0 || self.deferred_max > 1 << 24 {
            return bad("deferred_max", format!("{} is not in 1..=2^24", self.deferred_max));
        }
        if !["infer", "by-address", "tags"].contains(&self.classifier.as_str()) {
            return bad("classifier", format!("unknown classifier `{}`", self.classifier));
        }
        for (field, list) in [("failed", &self.failed), ("recovering", &self.recovering)] {
            if let Some(d) = list.iter().find(|&&d| d >= self.disks) {
                return bad(field, format!("disk {d} is not a member (0..{})", self.disks));
            }
        }
        Ok(())
    }
}

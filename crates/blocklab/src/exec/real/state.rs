//! The state file `array.json`: what the array is (configuration, checksums
//! on or off), which members are failed or being recovered and how far
//! (MD's `recovery_offset` and the runs of rows rebuilt beyond it), the
//! write-intent bitmap, and the blocks a rebuild could not produce (MD's
//! bad-block log).
//!
//! Written atomically: a temporary file is written and synced, renamed over
//! the old one, and the directory synced; a reader sees the old or the new
//! state, never a mix. The body is pretty JSON followed by a last line
//! `# crc32 XXXXXXXX` over the body's bytes, checked when loading.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::array::ArrayConfig;
use crate::error::{Error, Result};

pub const STATE_FILE: &str = "array.json";
/// 2: checksum entries are never zero (see `members.rs`); members carry an
/// identity block (`identity.rs`) and the state its UUID.
pub const FORMAT: u32 = 2;

/// Largest member, chunk and block a real array may have: the member size
/// times the member count is an offset, and a scrub holds one chunk row of
/// every member in memory, so a crafted size must not overflow or exhaust it.
pub const MAX_MEMBER_BYTES: u64 = 1 << 50;
pub const MAX_CHUNK_BYTES: u64 = 64 << 20;
pub const MAX_BLOCK_BYTES: u64 = 1 << 20;

/// The sizes of `cfg` against the bounds above: Err((field, why)).
pub fn check_sizes(cfg: &ArrayConfig) -> std::result::Result<(), (&'static str, String)> {
    for (field, v, max) in [
        ("config.disk_bytes", cfg.disk_bytes, MAX_MEMBER_BYTES),
        ("config.chunk_bytes", cfg.chunk_bytes, MAX_CHUNK_BYTES),
        ("config.block_size", cfg.block_size, MAX_BLOCK_BYTES),
    ] {
        if v > max {
            return Err((field, format!("{v} B is over the {max} B a real array supports")));
        }
    }
    Ok(())
}

/// A run of member blocks that cannot be read (disk, first block, blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
pub struct BadRange {
    pub disk: u32,
    pub block: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub format: u32,
    /// The array's UUID (32 hex digits), also in every member's identity block.
    /// (Absent in format 1, which is refused by its `format`.)
    #[serde(default)]
    pub uuid: String,
    pub config: ArrayConfig,
    /// Every block carries a checksum (`disk-I.sum`).
    pub checksums: bool,
    /// Failed members, ascending (recovering spares included).
    pub failed: Vec<u32>,
    /// Failed members being rebuilt onto fresh spares.
    pub recovering: Vec<u32>,
    /// Member chunk rows of the spares known rebuilt and durable: all rows
    /// below this one (MD's `recovery_offset`)...
    pub recovered_rows: u64,
    /// ... and these runs `[start, end)` above it (rows rebuilt out of
    /// order: PRO's zones, steps completed out of order). One pair per
    /// stretch of consecutive rebuilt rows; see `docs/real.md` for the cost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rebuilt_runs: Vec<(u64, u64)>,
    /// Member chunk rows per bit of the write-intent bitmap.
    pub bitmap_rows: u64,
    /// Dirty bits, as lowercase hex (bit i = region i; 4 bits per digit).
    pub bitmap: String,
    /// Member blocks a rebuild or repair could not produce.
    #[serde(default)]
    pub bad_blocks: Vec<BadRange>,
    /// Bumped on every write of the file, and written to every live member
    /// before it (the members' events, MD's superblock events).
    pub generation: u64,
}

pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Bits to hex (bit i of the bitmap in digit i / 4, low bit first).
pub fn bits_to_hex(bits: &[bool]) -> String {
    bits.chunks(4)
        .map(|c| {
            let v = c.iter().enumerate().fold(0u32, |a, (i, &b)| a | ((b as u32) << i));
            char::from_digit(v, 16).expect("a nibble")
        })
        .collect()
}

pub fn hex_to_bits(hex: &str, n: usize) -> Result<Vec<bool>> {
    let mut bits = vec![false; n];
    for (i, ch) in hex.chars().enumerate() {
        let v = ch
            .to_digit(16)
            .ok_or_else(|| Error::config(format!("`{ch}` is not a hex digit")))?;
        for j in 0..4 {
            if v & (1 << j) != 0 {
                let at = i * 4 + j;
                if at >= n {
                    return Err(Error::config("more bits than regions"));
                }
                bits[at] = true;
            }
        }
    }
    Ok(bits)
}

/// The field a parse error at 1-based `line` of the pretty body falls in:
/// the nearest key at or above it (an element of a list is on a line of
/// its own, below the list's key).
fn field_at_line(body: &str, line: usize) -> String {
    let lines: Vec<&str> = body.lines().take(line.max(1)).collect();
    lines
        .iter()
        .rev()
        .find_map(|l| {
            let l = l.trim_start().strip_prefix('"')?;
            let (key, rest) = l.split_once('"')?;
            rest.trim_start().starts_with(':').then(|| key.to_string())
        })
        .unwrap_or_else(|| "state".to_string())
}

/// Write `value` as `dir/file` atomically: its JSON, then a line with the
/// CRC-32 of that JSON (a torn or edited file is refused at load), written
/// to a temporary file, synced, renamed over the old one, and the directory
/// synced. The RAID array's and the D-GRAID array's state files are both
/// written so.
pub fn save_checksummed<T: serde::Serialize>(value: &T, dir: &Path, file: &str) -> std::io::Result<()> {
    let body = serde_json::to_string_pretty(value).expect("state serializes");
    let text = format!("{body}\n# crc32 {:08x}\n", crc32fast::hash(body.as_bytes()));
    let tmp = dir.join(format!("{file}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(file))?;
    File::open(dir)?.sync_all()
}

impl State {
    /// Write the state atomically into `dir`.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        save_checksummed(self, dir, STATE_FILE)
    }

    /// Load and verify the state of the array in `dir`.
    pub fn load(dir: &Path) -> Result<State> {
        let path = state_path(dir);
        let shown = path.display().to_string();
        let text = fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::io(&shown, "no array here (create one with `blocklab real create`)")
            } else {
                Error::io(&shown, e)
            }
        })?;
        let bad = |m: &str| Error::parse(&shown, crate::error::Location::Whole, "crc32", m);
        let body_end = text.rfind("\n# crc32 ").ok_or_else(|| bad("missing checksum line"))?;
        let (body, tail) = text.split_at(body_end);
        let want = tail.trim_start_matches("\n# crc32 ").trim();
        let want = u32::from_str_radix(want, 16).map_err(|_| bad("checksum is not hex"))?;
        if crc32fast::hash(body.as_bytes()) != want {
            return Err(bad("checksum mismatch: the state file is damaged"));
        }
        let st: State = serde_json::from_str(body).map_err(|e| {
            Error::parse(
                &shown,
                crate::error::Location::Line(e.line() as u64),
                field_at_line(body, e.line()),
                e.to_string(),
            )
        })?;
        // Format 1 members carry no identity block, and its checksums passed
        // a zeroed entry for an all-zero block: refused, whatever it holds.
        if st.format != FORMAT {
            let why = if st.format == 1 {
                "format 1 arrays have no member identity and checksums that cannot tell a zeroed \
                 block from an unwritten one; copy the data to an array made by this blocklab"
                    .to_string()
            } else {
                format!("unknown format {}", st.format)
            };
            return Err(Error::parse(
                &shown,
                crate::error::Location::Whole,
                "format",
                format!("{why} (this blocklab reads {FORMAT})"),
            ));
        }
        st.validate(&shown)?;
        Ok(st)
    }

    /// Every field against the configuration and the others. A file can be
    /// crafted with a valid checksum, and its numbers are used as divisors,
    /// indexes, sizes and file offsets: each is bounded here, before use.
    pub fn validate(&self, shown: &str) -> Result<()> {
        let bad = |field: &str, m: String| Err(Error::parse(shown, crate::error::Location::Whole, field, m));
        let cfg = &self.config;
        check_sizes(cfg).or_else(|(field, m)| bad(field, m))?;
        cfg.validate()
            .map_err(|e| Error::parse(shown, crate::error::Location::Whole, "config", e.message()))?;
        let probe = crate::array::Array::new(*cfg)?;
        let member_rows = probe.member_rows().unwrap_or(0);
        if member_rows == 0 || probe.capacity_blocks().unwrap_or(0) == 0 {
            return bad(
                "config.disk_bytes",
                format!(
                    "member size {} B holds no whole chunk of {} B",
                    cfg.disk_bytes, cfg.chunk_bytes
                ),
            );
        }
        let member_blocks = cfg.disk_bytes / cfg.block_size;
        let disks = cfg.disks;
        let ascending_disks = |field: &str, list: &[u32]| {
            for (i, &d) in list.iter().enumerate() {
                if d >= disks {
                    return bad(field, format!("disk {d}: the array has disks 0..{}", disks - 1));
                }
                if i > 0 && list[i - 1] >= d {
                    return bad(field, format!("disk {d}: not ascending or listed twice"));
                }
            }
            Ok(())
        };
        ascending_disks("failed", &self.failed)?;
        ascending_disks("recovering", &self.recovering)?;
        if let Some(d) = self.recovering.iter().find(|d| !self.failed.contains(d)) {
            return bad("recovering", format!("disk {d} is not failed"));
        }
        if self.recovered_rows > member_rows {
            return bad(
                "recovered_rows",
                format!("{} is past the member's {member_rows} rows", self.recovered_rows),
            );
        }
        let mut floor = self.recovered_rows;
        for &(start, end) in &self.rebuilt_runs {
            if start < floor || end <= start || end > member_rows {
                return bad(
                    "rebuilt_runs",
                    format!(
                        "run [{start}, {end}): runs must be non-empty, ascending, above recovered_rows \
                         ({}) and within the member's {member_rows} rows",
                        self.recovered_rows
                    ),
                );
            }
            floor = end;
        }
        if self.recovering.is_empty() && (self.recovered_rows != 0 || !self.rebuilt_runs.is_empty()) {
            return bad("recovered_rows", "rows rebuilt with no member recovering".into());
        }
        let min_rows = member_rows.div_ceil(super::bitmap::MAX_REGIONS);
        if self.bitmap_rows < min_rows.max(1) {
            return bad(
                "bitmap_rows",
                format!(
                    "{} rows per region: must be at least {} (at most {} regions)",
                    self.bitmap_rows,
                    min_rows.max(1),
                    super::bitmap::MAX_REGIONS
                ),
            );
        }
        let regions = member_rows.div_ceil(self.bitmap_rows) as usize;
        if self.bitmap.len() > regions.div_ceil(4) {
            return bad(
                "bitmap",
                format!(
                    "{} hex digits for {regions} regions (at most {})",
                    self.bitmap.len(),
                    regions.div_ceil(4)
                ),
            );
        }
        hex_to_bits(&self.bitmap, regions)
            .map_err(|e| Error::parse(shown, crate::error::Location::Whole, "bitmap", e.message()))?;
        for r in &self.bad_blocks {
            let end = r.block.checked_add(r.blocks);
            if r.disk >= disks || r.blocks == 0 || end.is_none_or(|e| e > member_blocks) {
                return bad(
                    "bad_blocks",
                    format!(
                        "disk {} blocks {}+{}: must be a disk 0..{} and a non-empty run within the member's {member_blocks} blocks",
                        r.disk,
                        r.block,
                        r.blocks,
                        disks - 1
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Level;

    fn sample() -> State {
        let mut cfg = ArrayConfig::new(Level::Raid5, 4);
        cfg.disk_bytes = 1 << 20;
        State {
            format: FORMAT,
            uuid: "00112233445566778899aabbccddeeff".into(),
            config: cfg,
            checksums: true,
            failed: vec![2],
            recovering: vec![2],
            recovered_rows: 3,
            rebuilt_runs: vec![(5, 9), (14, 15)],
            bitmap_rows: 1,
            bitmap: bits_to_hex(&[true, false, false, true, true]),
            bad_blocks: vec![BadRange {
                disk: 1,
                block: 7,
                blocks: 2,
            }],
            generation: 9,
        }
    }

    #[test]
    fn round_trip_and_damage_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let st = sample();
        st.save(dir.path()).unwrap();
        assert_eq!(State::load(dir.path()).unwrap(), st);
        assert_eq!(
            hex_to_bits(&st.bitmap, 5).unwrap(),
            vec![true, false, false, true, true]
        );
        // Flip one digit of the body: the checksum catches it.
        let p = state_path(dir.path());
        let text = fs::read_to_string(&p)
            .unwrap()
            .replacen("\"recovered_rows\": 3", "\"recovered_rows\": 4", 1);
        fs::write(&p, text).unwrap();
        let e = State::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        let e = State::load(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("no array here"), "{e}");
    }

    #[test]
    fn format_1_is_refused_with_or_without_checksums() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = sample();
        st.format = 1;
        for checksums in [true, false] {
            st.checksums = checksums;
            st.save(dir.path()).unwrap();
            let e = State::load(dir.path()).unwrap_err().to_string();
            assert!(
                e.contains("field `format`: format 1 arrays have no member identity"),
                "{e}"
            );
        }
    }
}

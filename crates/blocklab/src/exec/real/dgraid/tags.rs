//! The classifier told the answer: a `tags` file beside the members lists
//! `block,owner,kind[,parent]` for the blocks of the file system that will
//! be written (made with `debugfs` from the finished image, or by the file
//! system model). The annotation-driven placement, on real bytes: what
//! inference is measured against, and what makes a file system whose
//! directories and files are placed as the paper places them without
//! inference. Blocks it does not list are tagged by address (the stand-in's
//! rule). It defers nothing.

use std::path::Path;

use rustc_hash::FxHashMap;

use super::by_address::ByAddress;
use crate::dgraid::classify::{store_each, Action, Classifier};
use crate::error::{Error, Location, Result};
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::Geometry;

pub const TAGS_FILE: &str = "tags";

pub struct Tags {
    geo: Geometry,
    tags: FxHashMap<u64, Tag>,
    announced: bool,
}

impl Tags {
    /// Read a tags file (one error naming file, line and field for a bad line).
    pub fn load(path: &Path, geo: Geometry) -> Result<Tags> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, e))?;
        let mut tags = FxHashMap::default();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let bad = |field: &str, m: String| Error::parse(&shown, Location::Line(i as u64 + 1), field, m);
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if !(3..=4).contains(&f.len()) {
                return Err(bad(
                    "line",
                    format!("{} fields; want block,owner,kind[,parent]", f.len()),
                ));
            }
            let num = |s: &str, field: &str| s.parse::<u64>().map_err(|e| bad(field, format!("`{s}`: {e}")));
            let block = num(f[0], "block")?;
            if block >= geo.blocks {
                return Err(bad(
                    "block",
                    format!("{block} is beyond the file system ({} blocks)", geo.blocks),
                ));
            }
            let owner = num(f[1], "owner")?;
            let kind = BlockKind::parse(f[2]).map_err(|e| bad("kind", e.to_string()))?;
            let parent = match f.get(3) {
                Some(p) => num(p, "parent")?,
                None => 0,
            };
            tags.insert(block, Tag::of(owner, kind, parent));
        }
        Ok(Tags {
            geo,
            tags,
            announced: false,
        })
    }
}

impl Classifier for Tags {
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action> {
        let tags = &self.tags;
        store_each(&self.geo, &mut self.announced, block, data, |b| {
            tags.get(&b).copied().unwrap_or_else(|| ByAddress::tag(&self.geo, b))
        })
    }

    fn deferred(&self, _block: u64) -> Option<&[u8]> {
        None
    }

    fn flush(&mut self) -> Vec<Action> {
        Vec::new()
    }
}

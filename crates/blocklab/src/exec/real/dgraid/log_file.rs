//! What the block map (`map.rs`) and the staging log (`stage.rs`) share as
//! files: a header checked before any record is trusted, and a rewrite
//! that is whole on disk before it replaces the old file.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Location, Result};

/// Refuse `f` (`len` bytes, shown as `shown`) unless it starts with
/// `want`; `not_it` says what the file is not, for the error.
pub fn check_header(f: &File, shown: &str, len: u64, want: &[u8], not_it: &str) -> Result<()> {
    let mut h = vec![0u8; want.len()];
    if len < want.len() as u64 || f.read_exact_at(&mut h, 0).is_err() || h != want {
        return Err(Error::parse(shown, Location::Whole, "header", not_it));
    }
    Ok(())
}

/// Write `bytes` to `dir/name.tmp`, sync it, rename it over `dir/name`
/// and sync `dir`: a crash leaves the old file or the new one, whole.
/// Returns the new file open for reading and appending.
pub fn replace_whole(dir: &Path, name: &str, bytes: &[u8]) -> Result<File> {
    let path = dir.join(name);
    let shown = path.display().to_string();
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let f = File::create(&tmp).map_err(|e| Error::io(&shown, e))?;
        f.write_all_at(bytes, 0).map_err(|e| Error::io(&shown, e))?;
        f.sync_all().map_err(|e| Error::io(&shown, e))?;
    }
    fs::rename(&tmp, &path).map_err(|e| Error::io(&shown, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir.display().to_string(), e))?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&shown, e))
}

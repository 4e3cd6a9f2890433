//! A cache layer's misses written as a native CSV trace (`miss_trace`): the
//! input for replaying what reaches the storage below the cache elsewhere.
//! Contiguous blocks of one request are merged into one line.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::trace::Op;

pub struct MissTrace {
    out: std::io::BufWriter<std::fs::File>,
    path: String,
    block_size: u64,
    /// (time, op, offset, len, tenant) of the line being merged.
    pending: Option<(f64, Op, u64, u64, u32)>,
}

impl MissTrace {
    pub fn create(path: &Path, block_size: u64) -> Result<Self> {
        let f = std::fs::File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let mut w = MissTrace {
            out: std::io::BufWriter::new(f),
            path: path.display().to_string(),
            block_size,
            pending: None,
        };
        writeln!(w.out, "{}", crate::trace::native_csv::HEADER).map_err(|e| Error::io(&w.path, e))?;
        Ok(w)
    }

    /// A miss of block `block` of `tenant`'s volume by a request at `time`.
    pub fn push(&mut self, time: f64, op: Op, tenant: u32, block: u64) -> Result<()> {
        let bs = self.block_size;
        let off = block * bs;
        if let Some(p) = &mut self.pending {
            if p.0 == time && p.1 == op && p.4 == tenant && p.2 + p.3 == off {
                p.3 += bs;
                return Ok(());
            }
        }
        self.flush_pending()?;
        self.pending = Some((time, op, off, bs, tenant));
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        if let Some((t, op, off, len, tenant)) = self.pending.take() {
            writeln!(self.out, "{t},{},{off},{len},{tenant}", op.letter()).map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    pub fn finish(&mut self) -> Result<()> {
        self.flush_pending()?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }
}

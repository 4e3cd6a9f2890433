//! From requests to block accesses: the stream every counted simulation eats.
//!
//! A request touching bytes [offset, offset+len) accesses every block of
//! `block_size` it overlaps. Blocks of different tenants are different data,
//! so a block's cache key carries its tenant in the high bits (see [`block_key`]).

use super::{Op, Request, TraceReader};
use crate::error::{Error, Result};

/// Bits of a cache key that hold the block number; the tenant sits above.
pub const BLOCK_BITS: u32 = 40;

/// Cache key of `block` of `tenant`: tenant << 40 | block.
#[inline]
pub fn block_key(tenant: u32, block: u64) -> Result<u64> {
    if block >> BLOCK_BITS != 0 || (tenant as u64) >> (64 - BLOCK_BITS) != 0 {
        return Err(key_overflow(tenant, block));
    }
    Ok(((tenant as u64) << BLOCK_BITS) | block)
}

/// The error of [`block_key`], out of line: the key is made for every block.
#[cold]
#[inline(never)]
fn key_overflow(tenant: u32, block: u64) -> Error {
    Error::config(format!(
        "block {block} of tenant {tenant} does not fit a cache key (blocks < 2^40, tenants < 2^24); use a larger --block-size"
    ))
}

/// One block access.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockAccess {
    pub time: f64,
    /// Cache key: tenant and block (see [`block_key`]).
    pub key: u64,
    /// Block number within the tenant's volume.
    pub block: u64,
    pub tenant: u32,
    pub op: Op,
}

/// Options shared by every block-level consumer.
#[derive(Debug, Clone, Copy)]
pub struct BlockOptions {
    pub block_size: u64,
    /// Drop writes from the stream (the setting of the VDF paper).
    pub reads_only: bool,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            block_size: 4096,
            reads_only: false,
        }
    }
}

impl BlockOptions {
    pub fn validate(&self) -> Result<()> {
        if self.block_size == 0 {
            return Err(Error::config("block size must be positive"));
        }
        Ok(())
    }
}

/// Iterator of block accesses over a trace reader.
pub struct BlockStream {
    reader: TraceReader,
    opts: BlockOptions,
    current: Option<(Request, std::ops::Range<u64>)>,
    requests: u64,
}

impl BlockStream {
    pub fn new(reader: TraceReader, opts: BlockOptions) -> Result<Self> {
        opts.validate()?;
        Ok(BlockStream {
            reader,
            opts,
            current: None,
            requests: 0,
        })
    }

    /// Requests consumed so far (after the reads-only filter).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Malformed records skipped by the reader (`--skip-bad`).
    pub fn skipped(&self) -> u64 {
        self.reader.skipped()
    }
}

impl Iterator for BlockStream {
    type Item = Result<BlockAccess>;
    // Always inlined: called for every block, and out of line (a Request
    // grew) it cost the cache simulator's reader a fifth more.
    #[inline(always)]
    fn next(&mut self) -> Option<Result<BlockAccess>> {
        loop {
            if let Some((req, range)) = &mut self.current {
                if let Some(block) = range.next() {
                    return Some(block_key(req.tenant, block).map(|key| BlockAccess {
                        time: req.time,
                        key,
                        block,
                        tenant: req.tenant,
                        op: req.op,
                    }));
                }
            }
            match self.reader.next()? {
                Err(e) => return Some(Err(e)),
                Ok(req) => {
                    if self.opts.reads_only && req.op == Op::Write {
                        continue;
                    }
                    self.requests += 1;
                    self.current = Some((req, req.blocks(self.opts.block_size)));
                }
            }
        }
    }
}

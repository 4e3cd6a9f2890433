//! The Network Block Device protocol: a server that exports any block
//! device behind the [`Export`] trait to real clients (the Linux kernel's
//! nbd-client, qemu, libnbd's nbdinfo / nbdcopy, fio's nbd engine), and a
//! small synchronous client for tests and measurements.
//!
//! What is implemented (facts from the protocol document, `doc/proto.md`
//! of github.com/NetworkBlockDevice/nbd): the fixed newstyle handshake with
//! `NBD_OPT_EXPORT_NAME`, `ABORT`, `LIST` (every named export), `INFO` and
//! `GO` (by name, the empty name being the first export; replying
//! `INFO_EXPORT`, and `NAME`, `DESCRIPTION`, `BLOCK_SIZE` when asked), every
//! other option answered `NBD_REP_ERR_UNSUP`; the transmission phase with
//! simple replies: `READ`, `WRITE`, `DISC`, `FLUSH`, `TRIM`, `WRITE_ZEROES`
//! (`FUA` honoured on every command, `NO_HOLE` accepted); `CACHE` is not
//! advertised (`NBD_FLAG_SEND_CACHE` unset), so it gets `EINVAL` as the
//! protocol asks; out-of-range, misaligned-to-nothing or unknown requests get
//! `EINVAL` (writes past the end `ENOSPC`), unreadable data `EIO`.
//! `NBD_OPT_STRUCTURED_REPLY` switches the connection to structured replies
//! (reads as one `OFFSET_DATA` chunk, errors as `ERROR` chunks, the rest
//! `NONE`), and then `NBD_OPT_SET_META_CONTEXT` / `LIST_META_CONTEXT` offer
//! `base:allocation`, answered by `NBD_CMD_BLOCK_STATUS` with
//! `BLOCK_STATUS` chunks from [`Export::extents`]. TLS is not offered.

pub mod client;
mod outbox;
pub mod server;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub const FLAG_SEND_CACHE: u16 = 1 << 10;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;

// Information types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and command flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

// Structured reply chunks, and the one meta context offered.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
pub const BASE_ALLOCATION: &str = "base:allocation";
/// The id the server gives `base:allocation` (any 32-bit number would do).
pub const BASE_ALLOCATION_ID: u32 = 1;
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

// Errors.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const ESHUTDOWN: u32 = 108;

/// Largest read or write payload accepted (the protocol's default bound).
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// Why an exported device refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// Bad offset or length (NBD_EINVAL; writes past the end: NBD_ENOSPC).
    OutOfRange(String),
    /// The data cannot be read or written correctly (NBD_EIO).
    Io(String),
}

/// A block device the server can export.
pub trait Export: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError>;
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError>;
    /// Write zeroes, allocated (WRITE_ZEROES with `NO_HOLE`).
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError>;
    /// TRIM, and WRITE_ZEROES without `NO_HOLE`: the range reads back as
    /// zeroes and may become a hole (which TRIM and such a WRITE_ZEROES
    /// allow). By default zeroes are written.
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        self.write_zeroes(offset, len, fua)
    }
    /// Make every completed write durable.
    fn flush(&self) -> Result<(), ExportError>;
    /// The allocation of `[offset, offset + len)` for `base:allocation`, as
    /// runs of (length, `STATE_HOLE | STATE_ZERO` flags) from `offset`,
    /// covering at least one byte. A run may be called a hole only if it
    /// certainly reads back as zeroes and holds nothing written: when
    /// unsure, data (0), which the default says for everything (a written
    /// range reported as a hole would make a sparse copy skip real data).
    fn extents(&self, offset: u64, len: u64) -> Result<Vec<(u64, u32)>, ExportError> {
        let _ = offset;
        Ok(vec![(len, 0)])
    }
    /// A one-line description for `NBD_INFO_DESCRIPTION`.
    fn description(&self) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests;

//! `lbn32`: a bare sequence of little-endian u32 block numbers (e.g. the
//! CloudPhysics w106 resource of the Caffeine simulator). Like `oracle`, each
//! record is one read of one 4096-byte block: `offset = lbn * 4096`,
//! `len = 4096`, tenant 0. The format has no time: a record's time is its
//! index (virtual time, one access per "second").

use super::oracle::ORACLE_BLOCK;
use super::{BinaryFormat, Op, ParseCtx, Request};
use crate::error::Result;

#[derive(Default)]
pub struct Lbn32;

impl BinaryFormat for Lbn32 {
    fn record_size(&self) -> usize {
        4
    }

    fn parse_record(&mut self, rec: &[u8], index: u64, _ctx: &ParseCtx) -> Result<Option<Request>> {
        let lbn = u32::from_le_bytes(rec[0..4].try_into().unwrap()) as u64;
        Ok(Some(Request {
            time: index as f64,
            op: Op::Read,
            offset: lbn * ORACLE_BLOCK,
            len: ORACLE_BLOCK,
            tenant: 0,
            fs: Default::default(),
        }))
    }
}

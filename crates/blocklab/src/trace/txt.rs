//! `txt`: libCacheSim's plain-text trace (its `txt` trace type), one object id
//! per line. Each line is one read of one 4096-byte block, built like an
//! `oracle` record ([`super::oracle::request_of`]), so that with the default
//! `--block-size 4096` the cache key is the object's id. The format has no
//! time: a request's time is its index (0, 1, 2, …).
//!
//! An id of decimal digits is that number (`007` is 7). libCacheSim's
//! `cachesim` reads a txt line as a string and interns it (GLib quarks:
//! distinct strings get distinct ids, in order of first appearance); other ids
//! are interned the same way here, deterministically, counting down from
//! 2^64 − 1 so that they never meet a numeric id — a trace where they would
//! (a numeric id at or above an interned one) is an error rather than a
//! silent merge of two objects. The table of interned ids grows with the
//! distinct non-numeric ids, as libCacheSim's does.
//!
//! Blank lines are skipped; surrounding white space is not part of the id.
//! A line with more than one field, or a numeric id beyond 2^64 − 1, is an
//! error naming the line and the field `obj_id`.

use super::oracle::request_of;
use super::{ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};
use std::collections::HashMap;

#[derive(Default)]
pub struct Txt {
    /// Requests so far: the next request's time.
    index: u64,
    /// Non-numeric ids and the ids given to them.
    interned: HashMap<String, u64>,
    /// The largest numeric id seen so far.
    max_numeric: Option<u64>,
}

impl Txt {
    /// The id standing for the non-numeric id `name`.
    fn intern(&mut self, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<u64> {
        if let Some(&id) = self.interned.get(name) {
            return Ok(id);
        }
        let id = u64::MAX - self.interned.len() as u64;
        if self.max_numeric.is_some_and(|m| m >= id) {
            return Err(clash(lineno, ctx));
        }
        self.interned.insert(name.to_owned(), id);
        Ok(id)
    }
}

/// The error of a numeric id meeting the ids given to non-numeric ones.
fn clash(lineno: u64, ctx: &ParseCtx) -> crate::error::Error {
    ctx.err(
        Location::Line(lineno),
        "obj_id",
        "numeric ids this close to 2^64 - 1 collide with the ids given to the non-numeric ids",
    )
}

impl TextFormat for Txt {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        let id = line.trim();
        if id.is_empty() {
            return Ok(None);
        }
        if id.split_whitespace().nth(1).is_some() {
            return Err(ctx.err(
                Location::Line(lineno),
                "obj_id",
                format!("`{id}`: one object id per line, found more than one field"),
            ));
        }
        let obj_id = if id.bytes().all(|b| b.is_ascii_digit()) {
            let n: u64 = id.parse().map_err(|_| {
                ctx.err(
                    Location::Line(lineno),
                    "obj_id",
                    format!("`{id}` is beyond the largest id (2^64 - 1)"),
                )
            })?;
            let lowest_interned = u64::MAX - (self.interned.len() as u64).saturating_sub(1);
            if !self.interned.is_empty() && n >= lowest_interned {
                return Err(clash(lineno, ctx));
            }
            self.max_numeric = Some(self.max_numeric.map_or(n, |m| m.max(n)));
            n
        } else {
            self.intern(id, lineno, ctx)?
        };
        let mut req = request_of(0, obj_id);
        req.time = self.index as f64;
        self.index += 1;
        Ok(Some(req))
    }
}

//! The stack's address space: how a trace request (tenant, byte offset,
//! length) becomes a range of stack blocks, and the pass over the trace that
//! some stacks need before they can start (the footprint for `%` cache
//! sizes, the volumes' extents for `tenant_map = "concat"`, the future
//! accesses for `opt`).

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use super::layer::Io;
use super::spec::TenantMap;
use crate::array::plan::Cause;
use crate::error::{Error, Result};
use crate::trace::blocks::{block_key, BLOCK_BITS};
use crate::trace::{Op, Request};

/// Volumes of `concat` start at multiples of 1 MiB.
pub const CONCAT_ALIGN_BYTES: u64 = 1 << 20;

/// Maps requests to stack blocks.
#[derive(Debug, Clone)]
pub struct AddressMap {
    map: TenantMap,
    block_size: u64,
    /// `concat`: first stack block of each tenant's volume.
    bases: FxHashMap<u32, u64>,
    /// `concat`: (first stack block, tenant) of each volume with blocks, ascending.
    starts: Vec<(u64, u32)>,
}

impl AddressMap {
    /// `survey` gives the volumes' extents (needed by `concat` only).
    pub fn new(map: TenantMap, block_size: u64, survey: Option<&Survey>) -> Result<Self> {
        let mut bases = FxHashMap::default();
        let mut starts = Vec::new();
        if map == TenantMap::Concat {
            let s = survey.ok_or_else(|| Error::config("internal: concat needs a survey of the trace"))?;
            let align = (CONCAT_ALIGN_BYTES / block_size).max(1);
            let mut at = 0u64;
            for (&tenant, &end) in &s.extents {
                bases.insert(tenant, at);
                if end > 0 {
                    starts.push((at, tenant));
                }
                at = at
                    .checked_add(end.div_ceil(align) * align)
                    .ok_or_else(|| Error::config("the volumes of the trace do not fit one address space"))?;
            }
        }
        Ok(AddressMap {
            map,
            block_size,
            bases,
            starts,
        })
    }

    /// The tenant whose volume holds stack block `block` (the inverse of
    /// [`io`](Self::io); `ignore`: 0, every tenant addresses one volume).
    pub fn tenant_of(&self, block: u64) -> u32 {
        match self.map {
            TenantMap::Ignore => 0,
            TenantMap::Key => (block >> BLOCK_BITS) as u32,
            TenantMap::Concat => {
                let i = self.starts.partition_point(|&(s, _)| s <= block);
                self.starts.get(i.saturating_sub(1)).map_or(0, |&(_, t)| t)
            }
        }
    }

    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    /// `concat`: the first stack block of `tenant`'s volume (None: not a
    /// tenant of the map, or another mapping).
    pub fn first_block(&self, tenant: u32) -> Option<u64> {
        self.bases.get(&tenant).copied()
    }

    /// The identity of block `block` of `tenant` in this mapping (equal
    /// identities are the same stack block).
    #[inline]
    pub fn identity(map: TenantMap, tenant: u32, block: u64) -> Result<u64> {
        match map {
            TenantMap::Ignore => Ok(block),
            TenantMap::Key | TenantMap::Concat => block_key(tenant, block),
        }
    }

    /// The blocks of this map's size a request overlaps (as
    /// `Request::blocks`, with shifts when the size is a power of two: this
    /// runs for every request).
    #[inline]
    fn block_range(&self, req: &Request) -> std::ops::Range<u64> {
        let bs = self.block_size;
        if !bs.is_power_of_two() {
            return req.blocks(bs);
        }
        let shift = bs.trailing_zeros();
        let first = req.offset >> shift;
        if req.len == 0 {
            return first..first;
        }
        first..((req.offset + req.len - 1) >> shift) + 1
    }

    /// The stack I/O of a user request.
    pub fn io(&self, req: &Request) -> Result<Io> {
        self.locate(req).map(|(io, _)| io)
    }

    /// The stack I/O of a user request, and the block of the tenant's
    /// volume its first stack block is.
    #[inline]
    pub fn locate(&self, req: &Request) -> Result<(Io, u64)> {
        let bs = self.block_size;
        let r = self.block_range(req);
        let nblocks = r.end - r.start;
        let (first, base) = match self.map {
            TenantMap::Ignore => (r.start, Some(0)),
            TenantMap::Key => {
                let first = block_key(req.tenant, r.start)?;
                let base = ((req.tenant as u64) << BLOCK_BITS).checked_mul(bs);
                (first, base)
            }
            TenantMap::Concat => {
                let base = *self.bases.get(&req.tenant).ok_or_else(|| {
                    Error::config(format!(
                        "tenant {} was not in the trace when its volumes were measured (the trace changed?)",
                        req.tenant
                    ))
                })?;
                (base + r.start, base.checked_mul(bs))
            }
        };
        let bytes = base.and_then(|b| b.checked_add(req.offset)).map(|off| (off, req.len));
        let io = Io {
            op: req.op,
            first,
            nblocks,
            bytes,
            cause: Cause::User,
            fs: req.fs,
        };
        Ok((io, r.start))
    }
}

/// What a pass over the trace measured.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// Per tenant: one past the highest block touched.
    pub extents: BTreeMap<u32, u64>,
    /// Distinct stack blocks (when asked).
    pub unique: Option<u64>,
    /// The top layer's access stream as next-use indices (for `opt`).
    pub next_use: Option<Vec<u64>>,
}

impl Survey {
    /// The volumes `[[tenant]]` declares (tenant i: `volumes[i]` blocks),
    /// as a survey's extents.
    pub fn declared(volumes: &[u64]) -> Survey {
        Survey {
            extents: volumes.iter().enumerate().map(|(i, &v)| (i as u32, v)).collect(),
            ..Default::default()
        }
    }

    /// Put the declared `volumes` in place of the measured extents, after
    /// checking that the trace stays inside them (`file` names the stack
    /// file in the error).
    pub fn use_declared(&mut self, volumes: &[u64], file: &str) -> Result<()> {
        for (&t, &end) in &self.extents {
            match volumes.get(t as usize) {
                None => {
                    return Err(Error::key(
                        file,
                        "tenant",
                        format!(
                            "the trace has tenant {t}, but [[tenant]] declares {} (tenants 0 to {})",
                            volumes.len(),
                            volumes.len().saturating_sub(1)
                        ),
                    ))
                }
                Some(&v) if end > v => {
                    return Err(Error::key(
                        file,
                        format!("tenant.{t}.size"),
                        format!("the trace reaches block {} of tenant {t}, past its {v} blocks", end - 1),
                    ))
                }
                _ => {}
            }
        }
        self.extents = Survey::declared(volumes).extents;
        Ok(())
    }
}

/// What a survey must measure.
#[derive(Debug, Clone, Copy, Default)]
pub struct SurveyNeeds {
    pub unique: bool,
    /// The trace's tenants (`extents`' keys; a `static` SSD tier shares among them).
    pub tenants: bool,
    /// Next-use indices of the block accesses the top layer will see
    /// (`Some(reads_only)`: whether that layer sees reads only).
    pub next_use: Option<bool>,
    /// The span of the stack blocks the trace touches (`array.fit = "scale"`;
    /// the volumes' extents give it).
    pub span: bool,
    /// The volumes' extents (a cache sized as a share of the storage used).
    pub extents: bool,
}

/// One past the highest stack block the surveyed trace touches under `map`.
pub fn stack_span(map: TenantMap, block_size: u64, survey: &Survey) -> Result<u64> {
    let highest = |s: &Survey| s.extents.values().copied().max().unwrap_or(0);
    match map {
        TenantMap::Ignore => Ok(highest(survey)),
        TenantMap::Key => {
            let mut span = 0;
            for (&t, &end) in &survey.extents {
                if end > 0 {
                    span = span.max(block_key(t, end - 1)? + 1);
                }
            }
            Ok(span)
        }
        TenantMap::Concat => {
            let m = AddressMap::new(map, block_size, Some(survey))?;
            Ok(survey
                .extents
                .iter()
                .map(|(t, &end)| m.bases.get(t).copied().unwrap_or(0) + end)
                .max()
                .unwrap_or(0))
        }
    }
}

/// One pass over `requests` (already filtered by `replay.reads_only`).
pub fn survey(
    requests: impl Iterator<Item = Result<Request>>,
    map: TenantMap,
    block_size: u64,
    needs: SurveyNeeds,
) -> Result<Survey> {
    let mut s = Survey::default();
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let mut keys: Vec<u64> = Vec::new();
    for req in requests {
        let req = req?;
        let r = req.blocks(block_size);
        let end = s.extents.entry(req.tenant).or_insert(0);
        *end = (*end).max(r.end);
        let presented = match needs.next_use {
            Some(reads_only) => !(reads_only && req.op == Op::Write),
            None => false,
        };
        if needs.unique || presented {
            for b in r {
                let k = AddressMap::identity(map, req.tenant, b)?;
                if needs.unique {
                    seen.insert(k);
                }
                if presented {
                    keys.push(k);
                }
            }
        }
    }
    if needs.unique {
        s.unique = Some(seen.len() as u64);
    }
    if needs.next_use.is_some() {
        crate::cache::sim::next_uses_in_place(&mut keys);
        s.next_use = Some(keys);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rq(tenant: u32, offset: u64, len: u64) -> Request {
        Request {
            time: 0.0,
            op: Op::Read,
            offset,
            len,
            tenant,
            fs: Default::default(),
        }
    }

    #[test]
    fn concat_lays_volumes_end_to_end_on_mib_boundaries() {
        let reqs = vec![rq(3, 0, 4096), rq(1, 8192, 4096), rq(3, 2 << 20, 4096)];
        let s = survey(
            reqs.clone().into_iter().map(Ok),
            TenantMap::Concat,
            4096,
            SurveyNeeds::default(),
        )
        .unwrap();
        assert_eq!(s.extents.get(&1), Some(&3));
        assert_eq!(s.extents.get(&3), Some(&513));
        let m = AddressMap::new(TenantMap::Concat, 4096, Some(&s)).unwrap();
        // tenant 1 first (blocks 0..3, one MiB = 256 blocks), then tenant 3 at 256.
        assert_eq!(m.io(&reqs[1]).unwrap().first, 2);
        assert_eq!(m.io(&reqs[0]).unwrap().first, 256);
        assert_eq!(m.io(&reqs[0]).unwrap().bytes, Some((1 << 20, 4096)));
        assert_eq!(m.io(&reqs[2]).unwrap().first, 256 + 512);
        // And back: the tenant of a stack block.
        assert_eq!(
            (m.tenant_of(0), m.tenant_of(255), m.tenant_of(256), m.tenant_of(5000)),
            (1, 1, 3, 3)
        );
    }

    #[test]
    fn key_and_ignore() {
        let m = AddressMap::new(TenantMap::Key, 4096, None).unwrap();
        let io = m.io(&rq(2, 4096 * 5 + 100, 10)).unwrap();
        assert_eq!(io.first, (2 << 40) | 5);
        assert_eq!(m.tenant_of(io.first), 2);
        assert_eq!(io.nblocks, 1);
        assert_eq!(io.bytes, Some(((2u64 << 40) * 4096 + 4096 * 5 + 100, 10)));
        // Tenant ids too large for a byte address keep their blocks only.
        let io = m.io(&rq(5000, 0, 4096)).unwrap();
        assert_eq!(io.bytes, None);
        let m = AddressMap::new(TenantMap::Ignore, 4096, None).unwrap();
        assert_eq!(m.io(&rq(7, 8192, 0)).unwrap().nblocks, 0);
        assert_eq!(m.io(&rq(7, 8192, 8193)).unwrap().nblocks, 3);
    }

    #[test]
    fn unique_and_next_use() {
        let mut reqs = vec![rq(0, 0, 8192), rq(1, 0, 4096), rq(0, 4096, 4096)];
        reqs[1].op = Op::Write;
        let needs = SurveyNeeds {
            unique: true,
            next_use: Some(true),
            ..Default::default()
        };
        let s = survey(reqs.clone().into_iter().map(Ok), TenantMap::Key, 4096, needs).unwrap();
        assert_eq!(s.unique, Some(3));
        // Reads only: accesses 0, 1 (request 0), 1 (request 2): block 1 next at index 2.
        assert_eq!(s.next_use, Some(vec![u64::MAX, 2, u64::MAX]));
        let s = survey(reqs.into_iter().map(Ok), TenantMap::Ignore, 4096, needs).unwrap();
        assert_eq!(s.unique, Some(2));
    }
}

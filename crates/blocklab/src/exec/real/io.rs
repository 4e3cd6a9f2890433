//! The request path of an open array: reads, writes (with the bitmap, the
//! journal and FUA), write-zeroes, flush, and the healing of bad units met
//! on the way.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::gather::Gather;
use super::journal::Place;
use super::members::AlignedBuf;
use super::payload::MemberWrite;
use super::runner::{self, do_reads, plan_rows, read_out, unreadable, write_buffers, Fault, UserData};
use super::scrub::{scrub_row, Fixes, Mode};
use super::state::BadRange;
use super::uring;
use super::{identity, io_err, rebuild, Live, RealArray, ReqError};
use crate::array::IoPlan;

/// Whether a write goes through the gatherer: whole blocks, across a stripe
/// boundary, not made of whole stripes only.
fn gatherable(stripe_blocks: u64, bs: u64, offset: u64, len: u64) -> bool {
    let (first, end) = (offset / bs, (offset + len) / bs);
    offset.is_multiple_of(bs)
        && len.is_multiple_of(bs)
        && first / stripe_blocks != (end - 1) / stripe_blocks
        && (first % stripe_blocks != 0 || end % stripe_blocks != 0)
}

/// Why a write attempt did not complete.
enum Written {
    /// Planned before a rebuild step's spare write to these rows was
    /// published: plan again once it is.
    Stale(Vec<u64>),
    Failed(ReqError),
}

impl RealArray {
    pub(super) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub(super) fn user_start(&self) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        self.last_user_ns.store(self.now_ns().max(1), Ordering::SeqCst);
    }

    pub(super) fn user_end(&self) {
        self.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Show a user request to the rebuild's access monitor (PRO's
    /// popularity, MD's per-member activity) while spares are recovering.
    pub(super) fn observe(&self, first: u64, n: u64, plan: &IoPlan) {
        if !self.monitor.on.load(Ordering::Relaxed) {
            return;
        }
        let mut ev = self.monitor.events.lock().unwrap();
        if ev.len() >= super::MONITOR_MAX {
            ev.pop_front();
        }
        ev.push_back(super::UserEvent {
            blocks: first..first + n,
            plan: plan.clone(),
            at_ns: self.now_ns(),
        });
    }

    pub(super) fn check_range(&self, offset: u64, len: u64) -> std::result::Result<(u64, u64), ReqError> {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ReqError::OutOfRange("offset overflows".into()))?;
        if end > self.size_bytes() {
            return Err(ReqError::OutOfRange(format!(
                "bytes {offset}..{end} are past the end of the array ({} bytes)",
                self.size_bytes()
            )));
        }
        Ok(self.blocks_of(offset, len))
    }

    /// The blocks bytes `offset..offset+len` touch: (first, count).
    fn blocks_of(&self, offset: u64, len: u64) -> (u64, u64) {
        let bs = self.bs as u64;
        let first = offset / bs;
        (first, (offset + len).div_ceil(bs) - first)
    }

    /// Rows a heal of `heal` rows needs locked.
    pub(super) fn heal_lock_rows(&self, live: &Live, heal: &[u64]) -> Vec<u64> {
        let cb = live.array.chunk_blocks();
        let mut rows: Vec<u64> = heal.to_vec();
        for &r in heal {
            rows.extend(plan_rows(&live.array.plan_scrub_row(r), cb));
        }
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// A member image shorter than the member (truncated behind our back):
    /// its missing tail goes on the bad-block list and the image is grown
    /// back, before anything is written past its end. Otherwise a later
    /// write past the end would leave a hole that reads as zeroes, which
    /// without checksums is indistinguishable from data.
    pub(super) fn absorb_truncation(&self, live: &Live) -> std::result::Result<(), ReqError> {
        // The common case (no member short) without taking the lock.
        let full = identity::image_len(self.cfg.disk_bytes);
        let mut short = false;
        for m in live.members.iter().flatten() {
            short |= m.image_len().map_err(io_err)? < full;
        }
        if !short {
            return Ok(());
        }
        let _g = self.truncation.lock().unwrap();
        let bs = self.bs as u64;
        let mut found = Vec::new();
        let mut grown = false;
        for (d, m) in live.members.iter().enumerate() {
            let Some(m) = m else { continue };
            let len = m.image_len().map_err(io_err)?;
            if len < self.cfg.disk_bytes {
                let first = len / bs;
                found.push(BadRange {
                    disk: d as u32,
                    block: first,
                    blocks: self.cfg.disk_bytes / bs - first,
                });
            }
            if len < full {
                // The identity block went with the tail: `persist` below
                // writes it again.
                m.extend(full).map_err(io_err)?;
                grown = true;
            }
        }
        if !grown {
            return Ok(());
        }
        {
            let mut bad = self.bad.lock().unwrap();
            bad.extend(found);
            rebuild::merge_ranges(&mut bad);
        }
        let bm = self.bitmap.lock().unwrap();
        self.persist(live, &bm)
    }

    /// Scrub-and-repair member rows whose units were found bad.
    pub(super) fn heal(&self, live: &Live, heal: &[u64]) -> std::result::Result<(), ReqError> {
        self.stats.heals.fetch_add(1, Ordering::Relaxed);
        self.absorb_truncation(live)?;
        for &r in heal {
            let (_, fixes) = {
                let bad = self.bad.lock().unwrap().clone();
                scrub_row(&self.env(live, &bad), r, Mode::Repair)
            };
            self.apply_fixes(live, &fixes)?;
        }
        Ok(())
    }

    pub(super) fn apply_fixes(&self, live: &Live, fixes: &Fixes) -> std::result::Result<(), ReqError> {
        // Checksums first: a unit rewritten below gets its own checksum,
        // which must not be overwritten by the old data's.
        for (d, b, data) in &fixes.sums {
            let m = live.members[*d as usize].as_ref().expect("scrubbed members are open");
            m.write_sums(*b, data, self.bs, &self.faults).map_err(io_err)?;
        }
        for (d, b, data) in &fixes.units {
            let mut buf = AlignedBuf::zeroed(self.bs);
            buf.copy_from_slice(data);
            let m = live.members[*d as usize].as_ref().expect("scrubbed members are open");
            m.write_blocks(*b, &buf, self.bs, &self.faults).map_err(io_err)?;
        }
        if !fixes.units.is_empty() {
            self.unlist(live, fixes.units.iter().map(|(d, b, _)| (*d, *b)))?;
        }
        Ok(())
    }

    /// Remove written places from the bad-block list.
    pub(super) fn unlist(
        &self,
        live: &Live,
        places: impl Iterator<Item = (u32, u64)>,
    ) -> std::result::Result<(), ReqError> {
        let mut bad = self.bad.lock().unwrap();
        if bad.is_empty() {
            return Ok(());
        }
        let before = bad.len();
        let mut changed = false;
        for (d, b) in places {
            let mut next = Vec::with_capacity(bad.len() + 1);
            for r in bad.iter() {
                if r.disk == d && b >= r.block && b < r.block + r.blocks {
                    changed = true;
                    if b > r.block {
                        next.push(BadRange {
                            blocks: b - r.block,
                            ..*r
                        });
                    }
                    if b + 1 < r.block + r.blocks {
                        next.push(BadRange {
                            disk: d,
                            block: b + 1,
                            blocks: r.block + r.blocks - b - 1,
                        });
                    }
                } else {
                    next.push(*r);
                }
            }
            *bad = next;
        }
        if changed || bad.len() != before {
            drop(bad);
            let bm = self.bitmap.lock().unwrap();
            self.persist(live, &bm)?;
        }
        Ok(())
    }

    /// Run a read plan into `out` (blocks `first..first+n`), healing bad
    /// units once. Row locks must be held by the caller.
    pub(super) fn run_read(
        &self,
        live: &Live,
        plan: &IoPlan,
        first: u64,
        n: u64,
        out: &mut [u8],
    ) -> std::result::Result<(), Fault> {
        let un = unreadable(plan);
        if !un.is_empty() {
            return Err(Fault::Unreadable(un));
        }
        let bad = self.bad.lock().unwrap().clone();
        let env = self.env(live, &bad);
        if runner::read_direct(&env, plan, first, n, out).is_some() {
            return Ok(());
        }
        let reads = do_reads(&env, plan);
        read_out(&env, &reads, first, n, out)
    }

    /// Read `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ReqError> {
        let (first, n) = self.check_range(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        self.user_start();
        let r = self.read_blocks_into(offset, first, n, buf);
        self.user_end();
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        if r.is_err() {
            self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    pub(super) fn read_blocks_into(
        &self,
        offset: u64,
        first: u64,
        n: u64,
        buf: &mut [u8],
    ) -> std::result::Result<(), ReqError> {
        let bs = self.bs as u64;
        let aligned = offset.is_multiple_of(bs) && (buf.len() as u64).is_multiple_of(bs);
        let mut tmp = if aligned {
            Vec::new()
        } else {
            vec![0u8; (n * bs) as usize]
        };
        let live = self.live.read().unwrap();
        let plan = live.array.plan_read(first, n);
        self.observe(first, n, &plan);
        let rows = plan_rows(&plan, live.array.chunk_blocks());
        let out: &mut [u8] = if aligned { buf } else { &mut tmp };
        let res = {
            let _g = self.rows.lock(&rows, false);
            self.run_read(&live, &plan, first, n, out)
        };
        let res = match res {
            Err(Fault::Heal(heal)) => {
                let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(&live, &heal)).collect();
                let _g = self.rows.lock(&all, true);
                self.heal(&live, &heal)?;
                self.run_read(&live, &plan, first, n, out)
            }
            r => r,
        };
        res.map_err(ReqError::from)?;
        if !aligned {
            let skip = (offset - first * bs) as usize;
            let len = buf.len();
            buf.copy_from_slice(&tmp[skip..skip + len]);
        }
        Ok(())
    }

    /// Write `data` at `offset`; with `fua`, durable before returning.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ReqError> {
        self.write_inner(offset, data.len() as u64, Some(data), fua)
    }

    /// Write `len` zero bytes at `offset` (NBD WRITE_ZEROES and TRIM).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        // In pieces, so that a whole-device trim does not lock every row at once.
        let piece = (self.cfg.chunk_bytes * self.cfg.disks as u64).max(1 << 20);
        let mut at = offset;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ReqError::OutOfRange("offset overflows".into()))?;
        self.check_range(offset, len)?;
        while at < end {
            let n = (end - at).min(piece - at % piece);
            self.write_inner(at, n, None, fua)?;
            at += n;
        }
        Ok(())
    }

    pub(super) fn write_inner(
        &self,
        offset: u64,
        len: u64,
        data: Option<&[u8]>,
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        let (first, n) = self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.user_start();
        let r = match (data, &self.gather) {
            (Some(d), Some(g)) if gatherable(g.stripe_blocks, self.bs as u64, offset, len) => {
                self.write_gathered(g, first, n, d, fua)
            }
            _ => self.write_range(offset, len, data, fua),
        };
        self.user_end();
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// Write bytes `offset..offset+len`, planning again while a rebuild
    /// step's spare write to its rows is unpublished.
    fn write_range(&self, offset: u64, len: u64, data: Option<&[u8]>, fua: bool) -> std::result::Result<(), ReqError> {
        loop {
            match self.write_blocks(offset, len, data, fua) {
                Err(Written::Stale(rows)) => self.pending.wait(&rows),
                Err(Written::Failed(e)) => return Err(e),
                Ok(()) => return Ok(()),
            }
        }
    }

    /// A write across stripe boundaries: its whole stripes now, its partial
    /// head and tail stripes through the gatherer, which writes them whole
    /// if the neighbouring requests of a sequential stream fill them.
    fn write_gathered(
        &self,
        g: &Gather,
        first: u64,
        n: u64,
        data: &[u8],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        let (s, bs) = (g.stripe_blocks, self.bs as u64);
        let end = first + n;
        let (head_end, tail_start) = (first.next_multiple_of(s), end / s * s);
        let stream = g.in_stream(first, end);
        let flush = |f: u64, bytes: &[u8], fua: bool| self.write_range(f * bs, bytes.len() as u64, Some(bytes), fua);
        let part = |a: u64, b: u64| &data[((a - first) * bs) as usize..((b - first) * bs) as usize];
        let mut tickets = Vec::with_capacity(2);
        if first != head_end {
            tickets.push(g.deposit(first, part(first, head_end), fua, &flush));
        }
        if end != tail_start {
            tickets.push(g.deposit(tail_start, part(tail_start, end), fua, &flush));
        }
        let mut r = if head_end < tail_start {
            flush(head_end, part(head_end, tail_start), fua)
        } else {
            Ok(())
        };
        // Wait only in a stream with company: the neighbour is then most
        // likely on another worker already. Every part is waited for, so
        // none is left behind to be written later with stale bytes.
        let company = r.is_ok() && stream && self.inflight.load(Ordering::SeqCst) > 1;
        let deadline = company.then(|| Instant::now() + self.gather_wait);
        for t in tickets {
            let w = g.wait(t, deadline, &flush);
            if r.is_ok() {
                r = w;
            }
        }
        r
    }

    /// One attempt at a write: `Stale` when the plan was made before a
    /// rebuild step's spare write to its rows was published (the caller
    /// waits, then plans again).
    fn write_blocks(&self, offset: u64, len: u64, data: Option<&[u8]>, fua: bool) -> std::result::Result<(), Written> {
        let bs = self.bs as u64;
        let (first, n) = self.blocks_of(offset, len);
        let live = self.live.read().unwrap();
        let cb = live.array.chunk_blocks();
        let plan = live.array.plan_write(first, n);
        self.observe(first, n, &plan);
        let head_partial = !offset.is_multiple_of(bs) || (len < bs && !(offset + len).is_multiple_of(bs));
        let tail_partial = !(offset + len).is_multiple_of(bs);
        // Partial first/last blocks are read, merged and written whole.
        let mut edge_plans: Vec<(u64, IoPlan)> = Vec::new();
        if head_partial {
            edge_plans.push((first, live.array.plan_read(first, 1)));
        }
        if tail_partial && (n > 1 || !head_partial) {
            edge_plans.push((first + n - 1, live.array.plan_read(first + n - 1, 1)));
        }
        let mut rows = plan_rows(&plan, cb);
        for (_, p) in &edge_plans {
            rows.extend(plan_rows(p, cb));
        }
        rows.sort_unstable();
        rows.dedup();
        let mut merged: Option<AlignedBuf> = None;
        let mut guards = self.rows.lock(&rows, true);
        let mut healed = false;
        loop {
            if self.pending.any(&rows) {
                return Err(Written::Stale(rows));
            }
            let ready = (|| -> std::result::Result<(), Fault> {
                let un = unreadable(&plan);
                if !un.is_empty() {
                    return Err(Fault::Unreadable(un));
                }
                if !edge_plans.is_empty() && merged.is_none() {
                    let mut full = AlignedBuf::zeroed((n * bs) as usize);
                    for (b, p) in &edge_plans {
                        let i = ((b - first) * bs) as usize;
                        self.run_read(&live, p, *b, 1, &mut full[i..i + bs as usize])?;
                    }
                    let skip = (offset - first * bs) as usize;
                    match data {
                        Some(d) => full[skip..skip + len as usize].copy_from_slice(d),
                        None => full[skip..skip + len as usize].fill(0),
                    }
                    merged = Some(full);
                }
                Ok(())
            })();
            let attempt = ready.and_then(|()| {
                let bad = self.bad.lock().unwrap().clone();
                let env = self.env(&live, &bad);
                let reads = do_reads(&env, &plan);
                let src = match &merged {
                    Some(m) => Some(&m[..]),
                    None => data,
                };
                let user = UserData::new(first, n, src, self.bs);
                write_buffers(&env, &plan, &reads, &user)
            });
            match attempt {
                Ok(bufs) => {
                    let r = self.commit_writes(&live, &bufs, fua);
                    drop(guards);
                    return r.map_err(Written::Failed);
                }
                Err(Fault::Heal(heal)) if !healed => {
                    healed = true;
                    drop(guards);
                    let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(&live, &heal)).collect();
                    guards = self.rows.lock(&all, true);
                    self.heal(&live, &heal).map_err(Written::Failed)?;
                }
                Err(f) => return Err(Written::Failed(f.into())),
            }
        }
    }

    /// Put computed writes in place: bitmap, journal when degraded, the
    /// member writes, FUA.
    pub(super) fn commit_writes(
        &self,
        live: &Live,
        bufs: &[MemberWrite],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        if bufs.is_empty() {
            return Ok(());
        }
        let cb = live.array.chunk_blocks();
        let mut wrows: Vec<u64> = Vec::new();
        for w in bufs {
            wrows.extend(runner::op_rows(&w.op, cb));
        }
        wrows.sort_unstable();
        wrows.dedup();
        let regions = {
            let mut bm = self.bitmap.lock().unwrap();
            let regions = bm.regions_of(&wrows);
            if bm.begin(&regions) {
                if let Err(e) = self.persist(live, &bm) {
                    bm.end(&regions);
                    return Err(e);
                }
            }
            regions
        };
        let res = self
            .absorb_truncation(live)
            .and_then(|_| self.journal_and_write(live, bufs, &wrows, fua));
        self.bitmap.lock().unwrap().end(&regions);
        res?;
        if !self.bad.lock().unwrap().is_empty() {
            self.unlist(
                live,
                bufs.iter()
                    .flat_map(|w| (0..w.op.nblocks as u64).map(move |i| (w.op.disk, w.op.block + i))),
            )?;
        }
        Ok(())
    }

    pub(super) fn journal_and_write(
        &self,
        live: &Live,
        bufs: &[MemberWrite],
        wrows: &[u64],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        let parity = live.array.level().has_parity();
        let journaled = parity && self.durably_degraded(live, wrows);
        if !journaled && self.journal.covers_any(wrows) {
            self.checkpoint_journal(live)?;
        }
        let _gate = journaled.then(|| self.gate.read().unwrap_or_else(|e| e.into_inner()));
        if journaled {
            let mut places = Vec::new();
            let mut units: Vec<&[u8]> = Vec::new();
            for w in bufs {
                for (i, unit) in w.blocks(self.bs).enumerate() {
                    places.push(Place {
                        disk: w.op.disk,
                        block: w.op.block + i as u64,
                    });
                    units.push(unit);
                }
            }
            self.journal
                .append(&places, &units, wrows, &self.faults)
                .map_err(io_err)?;
        }
        self.write_members(live, bufs)?;
        if fua {
            let mut disks: Vec<u32> = bufs.iter().map(|w| w.op.disk).collect();
            disks.sort_unstable();
            disks.dedup();
            for d in disks {
                if let Some(m) = &live.members[d as usize] {
                    m.sync().map_err(io_err)?;
                }
            }
        }
        Ok(())
    }

    /// One member write (and its checksums), from one aligned buffer.
    fn write_member(&self, live: &Live, w: &MemberWrite) -> std::result::Result<(), ReqError> {
        let m = live.members[w.op.disk as usize]
            .as_ref()
            .ok_or_else(|| ReqError::Io(format!("member {} is not open", w.op.disk)))?;
        m.write_blocks(w.op.block, &w.contiguous(), self.bs, &self.faults)
            .map_err(io_err)
    }

    /// The member writes of a request: together through io_uring where it
    /// can, else in parallel threads when the request is large and alone in
    /// flight, else one after the other.
    fn write_members(&self, live: &Live, bufs: &[MemberWrite]) -> std::result::Result<(), ReqError> {
        if bufs.len() > 1 || bufs.iter().any(MemberWrite::borrows) {
            if let Some(r) = self.write_together(live, bufs) {
                return r;
            }
        }
        let bytes: usize = bufs.iter().map(|w| w.byte_len()).sum();
        if bufs.len() > 1 && bytes >= runner::PARALLEL_BYTES && self.inflight.load(Ordering::Relaxed) <= 1 {
            runner::each_in_a_thread(bufs, |w| self.write_member(live, w))
                .into_iter()
                .collect()
        } else {
            bufs.iter().try_for_each(|w| self.write_member(live, w))
        }
    }

    /// The member writes submitted together through io_uring (members
    /// without checksums, no crash injection planned), the request's own
    /// bytes written in place; a write that came back short or failed is
    /// done again the plain way, which reports its error. None: io_uring is
    /// not available or not for this request; nothing was written.
    fn write_together(&self, live: &Live, bufs: &[MemberWrite]) -> Option<std::result::Result<(), ReqError>> {
        if self.faults.armed() {
            return None;
        }
        let bs = self.bs as u64;
        let jobs: Vec<uring::Job> = bufs
            .iter()
            .map(|w| {
                let m = live.members[w.op.disk as usize].as_ref().filter(|m| !m.has_sums())?;
                Some(uring::Job::write(m.raw_fd(), w.op.block * bs, &w.parts()))
            })
            .collect::<Option<_>>()?;
        // SAFETY: the bytes are borrowed, unchanged, until `submit` returns.
        let done = unsafe { uring::submit(&jobs) }?;
        Some(bufs.iter().zip(done).try_for_each(|(w, r)| {
            if matches!(r, Ok(n) if n == w.byte_len()) {
                Ok(())
            } else {
                self.write_member(live, w)
            }
        }))
    }

    /// Make every completed write durable; clear idle bitmap regions.
    pub fn flush(&self) -> std::result::Result<(), ReqError> {
        let live = self.live.read().unwrap();
        let mark = self.bitmap.lock().unwrap().mark();
        self.sync_members(&live)?;
        self.checkpoint_journal(&live)?;
        let mut bm = self.bitmap.lock().unwrap();
        if bm.clear_idle(&mark) {
            self.persist(&live, &bm)?;
        }
        Ok(())
    }

    /// Whether any bitmap region is dirty (the server flushes then).
    pub fn bitmap_dirty(&self) -> bool {
        self.bitmap.lock().unwrap().any_dirty()
    }
}

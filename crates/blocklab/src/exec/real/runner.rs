//! The plan runner: executes an [`IoPlan`] of the array on member files with
//! real bytes.
//!
//! A plan says which member units to read and write and where XOR / P+Q
//! steps sit between them; it carries no bytes. The runner performs the
//! plan's reads, then gives every unit the plan writes its value — user data,
//! an old unit kept as is, or parity computed with the array's GF(2^8) code
//! (`array::gf256`) from the units read — and hands the writes back to the
//! caller, which journals, writes and syncs them. For a read it produces the
//! requested blocks from the units read, reconstructing lost ones.
//!
//! Parity of a row (one block on every member of a stripe) is computed the
//! way the plan read for it: from all the new data when every unwritten unit
//! was read (reconstruct-write), from old data and old parity otherwise
//! (read-modify-write: P' = P ⊕ Σ(D ⊕ D'), Q' = Q ⊕ Σ g^z(D ⊕ D')), or by
//! first solving the old row from what was read (degraded writes). A plan
//! that read too little for any of these is a bug and is reported, not
//! papered over.
//!
//! A unit read whose checksum fails, which lies past the end of a truncated
//! member, whose read failed, or which is on the bad-block list, is an
//! erasure: the runner does not use it, and when that leaves a block
//! unproducible it asks the caller to heal the row (scrub it with repair)
//! and retry, or, past the level's redundancy, fails the request.

use std::collections::HashMap;

use super::members::{AlignedBuf, BlockState, Member};
use super::payload::{self, MemberWrite, Piece, Source};
use super::state::BadRange;
use super::uring;
use crate::array::gf256::{self, Unit};
use crate::array::layout::{Level, StripeMap};
use crate::array::{Action, Array, DiskOp, DiskOpKind, IoPlan};

/// Why a plan could not be run to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Logical blocks that cannot be produced: more failures than the level
    /// tolerates.
    Unreadable(Vec<u64>),
    /// Units read were bad; these member rows need healing before a retry.
    Heal(Vec<u64>),
    /// A member could not be written (or the process "crashed").
    Io(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Unreadable(b) => write!(
                f,
                "{} block(s) cannot be read (more failures than the level tolerates), first {}",
                b.len(),
                b.first().copied().unwrap_or(0)
            ),
            Fault::Heal(r) => write!(f, "bad units in {} member row(s) could not be repaired", r.len()),
            Fault::Io(m) => write!(f, "member I/O error: {m}"),
        }
    }
}

/// What a plan runs against: the array (its failed set), the member files,
/// the block size, and the bad-block list.
pub struct Env<'a> {
    pub array: &'a Array,
    pub members: &'a [Option<Member>],
    pub bs: usize,
    pub bad: &'a [BadRange],
    pub checksums: bool,
    /// Issue a request's member I/O from several threads (when the request
    /// is alone: with others in flight the members are busy anyway).
    pub parallel: bool,
}

/// One read of the plan and what came back.
struct Run {
    disk: u32,
    block: u64,
    n: u64,
    buf: AlignedBuf,
    states: Vec<BlockState>,
}

/// The units a plan read.
#[derive(Default)]
pub struct Reads {
    runs: Vec<Run>,
}

impl Reads {
    fn find(&self, disk: u32, block: u64) -> Option<(&Run, usize)> {
        self.runs
            .iter()
            .find(|r| r.disk == disk && block >= r.block && block < r.block + r.n)
            .map(|r| (r, (block - r.block) as usize))
    }

    /// The unit at (`disk`, `block`) if it was read and is good.
    pub fn unit(&self, disk: u32, block: u64, bs: usize) -> Option<&[u8]> {
        let (r, i) = self.find(disk, block)?;
        (r.states[i] == BlockState::Ok).then(|| &r.buf[i * bs..(i + 1) * bs])
    }

    /// The unit's bytes whatever its state (None if not read).
    pub fn raw(&self, disk: u32, block: u64, bs: usize) -> Option<(&[u8], BlockState)> {
        let (r, i) = self.find(disk, block)?;
        Some((&r.buf[i * bs..(i + 1) * bs], r.states[i]))
    }

    /// Every unit read that is not good: (disk, block, state).
    pub fn bad_units(&self) -> Vec<(u32, u64, BlockState)> {
        let mut out = Vec::new();
        for r in &self.runs {
            for (i, &s) in r.states.iter().enumerate() {
                if s != BlockState::Ok {
                    out.push((r.disk, r.block + i as u64, s));
                }
            }
        }
        out
    }

    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.buf.len() as u64).sum()
    }

    /// Add the units `other` read (reads kept from earlier steps).
    pub fn append(&mut self, other: Reads) {
        self.runs.extend(other.runs);
    }
}

/// Whether (disk, block) is on the bad-block list.
pub fn listed(bad: &[BadRange], disk: u32, block: u64) -> bool {
    bad.iter()
        .any(|r| r.disk == disk && block >= r.block && block < r.block + r.blocks)
}

fn read_op(env: &Env, op: &DiskOp) -> Run {
    let n = op.nblocks as u64;
    let mut buf = AlignedBuf::scratch(n as usize * env.bs);
    let states = match env.members.get(op.disk as usize).and_then(|m| m.as_ref()) {
        Some(m) => {
            let mut st = m.read_blocks(op.block, &mut buf, env.bs);
            mark_listed(env, op, &mut st);
            st
        }
        None => vec![BlockState::IoError; n as usize],
    };
    Run {
        disk: op.disk,
        block: op.block,
        n,
        buf,
        states,
    }
}

/// Blocks on the bad-block list are not to be used, whatever they hold.
fn mark_listed(env: &Env, op: &DiskOp, states: &mut [BlockState]) {
    if !env.bad.is_empty() {
        for (i, s) in states.iter_mut().enumerate() {
            if listed(env.bad, op.disk, op.block + i as u64) {
                *s = BlockState::Listed;
            }
        }
    }
}

/// The reads `ops` in flight together through io_uring (see `uring.rs`);
/// an op that came back short or failed is read again the plain way, which
/// finds out block by block what is wrong. None: no io_uring here.
fn read_ops_together(env: &Env, ops: &[&DiskOp]) -> Option<Vec<Run>> {
    let mut bufs: Vec<AlignedBuf> = ops
        .iter()
        .map(|o| AlignedBuf::scratch(o.nblocks as usize * env.bs))
        .collect();
    let mut jobs = Vec::with_capacity(ops.len());
    let mut of_job = Vec::with_capacity(ops.len());
    for (i, (op, buf)) in ops.iter().zip(bufs.iter_mut()).enumerate() {
        if let Some(Some(m)) = env.members.get(op.disk as usize) {
            jobs.push(uring::Job::read_into(m.raw_fd(), op.block * env.bs as u64, buf));
            of_job.push(i);
        }
    }
    // SAFETY: each iovec names a buffer of its own, untouched until `submit`
    // returns (it waits for every job).
    let done = unsafe { uring::submit(&jobs) }?;
    let mut whole = vec![false; ops.len()];
    for ((&i, job), r) in of_job.iter().zip(&jobs).zip(done) {
        whole[i] = matches!(r, Ok(n) if n == job.len());
    }
    let runs = ops
        .iter()
        .zip(bufs)
        .zip(whole)
        .map(|((op, buf), whole)| {
            let Some(Some(m)) = env.members.get(op.disk as usize).filter(|_| whole) else {
                return read_op(env, op);
            };
            let mut states = vec![BlockState::Ok; op.nblocks as usize];
            m.check_sums(op.block, &buf, env.bs, &mut states);
            mark_listed(env, op, &mut states);
            Run {
                disk: op.disk,
                block: op.block,
                n: op.nblocks as u64,
                buf,
                states,
            }
        })
        .collect();
    Some(runs)
}

/// Without io_uring, requests at least this large and alone in flight do
/// their member I/O in parallel threads.
pub const PARALLEL_BYTES: usize = 256 * 1024;

/// `f` of every item, each in a thread of its own (member I/O in parallel
/// where io_uring is not available).
pub fn each_in_a_thread<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let hs: Vec<_> = items.iter().map(|i| s.spawn(|| f(i))).collect();
        hs.into_iter()
            .map(|h| h.join().expect("member I/O does not panic"))
            .collect()
    })
}

/// Perform every read of `plan`.
pub fn do_reads(env: &Env, plan: &IoPlan) -> Reads {
    let ops: Vec<&DiskOp> = plan.disk_ops().filter(|o| o.kind == DiskOpKind::Read).collect();
    read_ops(env, &ops)
}

/// Perform the reads `ops`.
pub fn read_ops(env: &Env, ops: &[&DiskOp]) -> Reads {
    if ops.len() > 1 {
        if let Some(runs) = read_ops_together(env, ops) {
            return Reads { runs };
        }
    }
    let bytes: usize = ops.iter().map(|o| o.nblocks as usize * env.bs).sum();
    let runs = if env.parallel && ops.len() > 1 && bytes >= PARALLEL_BYTES {
        each_in_a_thread(ops, |op| read_op(env, op))
    } else {
        ops.iter().map(|op| read_op(env, op)).collect()
    };
    Reads { runs }
}

/// Logical blocks being written and their new bytes (None: zeroes).
pub struct UserData<'a> {
    pub first: u64,
    pub n: u64,
    pub data: Option<&'a [u8]>,
    zeros: Vec<u8>,
    bs: usize,
}

impl<'a> UserData<'a> {
    pub fn new(first: u64, n: u64, data: Option<&'a [u8]>, bs: usize) -> Self {
        UserData {
            first,
            n,
            data,
            zeros: if data.is_none() { vec![0; bs] } else { vec![] },
            bs,
        }
    }

    /// No user data (rebuild, resync).
    pub fn none(bs: usize) -> Self {
        UserData {
            first: 0,
            n: 0,
            data: None,
            zeros: vec![],
            bs,
        }
    }

    /// Where logical block `l`'s bytes start in the request, if it writes `l`.
    #[inline]
    fn index(&self, l: u64) -> Option<usize> {
        (l >= self.first && l < self.first + self.n).then(|| (l - self.first) as usize * self.bs)
    }

    /// Where logical block `l`'s new bytes start in the request's data
    /// (None for zeroes: they are not in `data`).
    #[inline]
    pub fn offset(&self, l: u64) -> Option<usize> {
        self.data.and(self.index(l))
    }

    #[inline]
    pub fn get(&self, l: u64) -> Option<&[u8]> {
        let i = self.index(l)?;
        Some(match self.data {
            Some(d) => &d[i..i + self.bs],
            None => &self.zeros,
        })
    }
}

/// What lives at one member place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Data of logical block `.0`.
    Data(u64),
    P,
    Q,
    /// Nothing (RAID-10 places past the far regions).
    Unused,
}

/// The role of member block `block` of `disk`.
pub fn role(a: &Array, disk: u32, block: u64) -> Role {
    let cb = a.chunk_blocks();
    let (row, off) = (block / cb, block % cb);
    match a.level() {
        Level::Raid0 => Role::Data((row * a.ndisks() as u64 + disk as u64) * cb + off),
        Level::Raid1 => Role::Data(block),
        Level::Raid10 => a
            .raid10_block_at(disk, block)
            .map_or(Role::Unused, |(l, _)| Role::Data(l)),
        _ => {
            let sm = a.stripe_map(row);
            if disk == sm.p {
                Role::P
            } else if Some(disk) == sm.q {
                Role::Q
            } else {
                let k = sm.k as u64;
                let d = (0..sm.k)
                    .find(|&d| sm.data_disk(d) == disk)
                    .expect("a disk of the stripe") as u64;
                Role::Data((row * k + d) * cb + off)
            }
        }
    }
}

/// Every copy (disk, member block) of logical block `l`; for parity levels
/// the one data place.
pub fn places(a: &Array, l: u64) -> Vec<(u32, u64)> {
    let cb = a.chunk_blocks();
    match a.level() {
        Level::Raid1 => (0..a.ndisks()).map(|d| (d, l)).collect(),
        Level::Raid10 => a.raid10_copies(l).collect(),
        Level::Raid0 => {
            let (chunk, off) = (l / cb, l % cb);
            let n = a.ndisks() as u64;
            vec![((chunk % n) as u32, (chunk / n) * cb + off)]
        }
        _ => {
            let (chunk, off) = (l / cb, l % cb);
            let k = a.data_disks_per_stripe() as u64;
            let stripe = chunk / k;
            vec![(a.stripe_map(stripe).data_disk((chunk % k) as u32), stripe * cb + off)]
        }
    }
}

/// The member row a heal of logical block `l` scrubs (the row holding its
/// stripe, or its first copy).
pub fn heal_row(a: &Array, l: u64) -> u64 {
    places(a, l)[0].1 / a.chunk_blocks()
}

/// Compute the whole block row `block` of a stripe (indexed by disk) from
/// the units `get` knows; None when more units are missing than the level's
/// parity covers.
pub fn solve_row<'r>(sm: &StripeMap, bs: usize, get: impl Fn(u32) -> Option<&'r [u8]>) -> Option<Vec<Vec<u8>>> {
    let n = sm.n;
    let known: Vec<Option<&[u8]>> = (0..n).map(&get).collect();
    let unknown: Vec<u32> = (0..n).filter(|&d| known[d as usize].is_none()).collect();
    if unknown.len() > (n - sm.k) as usize {
        return None;
    }
    let mut row: Vec<Vec<u8>> = known
        .iter()
        .map(|k| k.map_or_else(|| vec![0u8; bs], |u| u.to_vec()))
        .collect();
    if unknown.is_empty() {
        return Some(row);
    }
    if sm.q.is_none() {
        // RAID-4/5: the missing unit is the XOR of all the others.
        let u = unknown[0] as usize;
        let mut x = vec![0u8; bs];
        for (d, unit) in row.iter().enumerate() {
            if d != u {
                gf256::xor_into(&mut x, unit);
            }
        }
        row[u] = x;
        return Some(row);
    }
    let data_disks = sm.data_disks();
    let q_disk = sm.q.expect("RAID-6");
    let lost: Vec<Unit> = unknown
        .iter()
        .map(|&d| {
            if d == sm.p {
                Unit::P
            } else if d == q_disk {
                Unit::Q
            } else {
                Unit::Data(data_disks.iter().position(|&x| x == d).expect("a data disk"))
            }
        })
        .collect();
    let mut p = std::mem::take(&mut row[sm.p as usize]);
    let mut q = std::mem::take(&mut row[q_disk as usize]);
    let mut data: Vec<Vec<u8>> = data_disks
        .iter()
        .map(|&d| std::mem::take(&mut row[d as usize]))
        .collect();
    {
        let mut refs: Vec<&mut [u8]> = data.iter_mut().map(|v| v.as_mut_slice()).collect();
        gf256::recover(&mut refs, &sm.q_slots(), &mut p, &mut q, &lost).ok()?;
    }
    for (i, &d) in data_disks.iter().enumerate() {
        row[d as usize] = std::mem::take(&mut data[i]);
    }
    row[sm.p as usize] = p;
    row[q_disk as usize] = q;
    Some(row)
}

/// P (and Q) of `data` in logical order.
fn parity_of(sm: &StripeMap, data: &[&[u8]], bs: usize) -> (Vec<u8>, Option<Vec<u8>>) {
    if sm.q.is_none() {
        let mut p = vec![0u8; bs];
        for d in data {
            gf256::xor_into(&mut p, d);
        }
        return (p, None);
    }
    let (mut p, mut q) = (vec![0u8; bs], vec![0u8; bs]);
    gf256::syndrome(data, &sm.q_slots(), &mut p, &mut q);
    (p, Some(q))
}

/// New P and Q of a block row (None: cannot be computed from what was read).
type NewParity = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Gives values to the units a plan writes.
pub struct Filler<'e, 'r, 'u> {
    env: &'e Env<'e>,
    reads: &'r Reads,
    user: &'u UserData<'u>,
    /// New P and Q per block row.
    parity: HashMap<u64, NewParity>,
    /// Solved old rows.
    solved: HashMap<u64, Option<Vec<Vec<u8>>>>,
}

impl<'e, 'r, 'u> Filler<'e, 'r, 'u> {
    pub fn new(env: &'e Env<'e>, reads: &'r Reads, user: &'u UserData<'u>) -> Self {
        Filler {
            env,
            reads,
            user,
            parity: HashMap::new(),
            solved: HashMap::new(),
        }
    }

    fn sm(&self, block: u64) -> StripeMap {
        self.env.array.stripe_map(block / self.env.array.chunk_blocks())
    }

    /// The old value of a unit: read, or solved from its row.
    fn old(&mut self, disk: u32, block: u64) -> Option<Vec<u8>> {
        let bs = self.env.bs;
        if let Some(u) = self.reads.unit(disk, block, bs) {
            return Some(u.to_vec());
        }
        let a = self.env.array;
        match a.level() {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => {
                if !self.solved.contains_key(&block) {
                    let sm = self.sm(block);
                    let reads = self.reads;
                    let row = solve_row(&sm, bs, |d| reads.unit(d, block, bs));
                    self.solved.insert(block, row);
                }
                self.solved[&block].as_ref().map(|r| r[disk as usize].clone())
            }
            _ => match role(a, disk, block) {
                Role::Data(l) => places(a, l)
                    .into_iter()
                    .find_map(|(d, b)| self.reads.unit(d, b, bs))
                    .map(|u| u.to_vec()),
                _ => None,
            },
        }
    }

    /// New P and Q of block row `block` (computed once, then kept).
    fn new_parity(&mut self, block: u64) -> &NewParity {
        if self.parity.contains_key(&block) {
            return &self.parity[&block];
        }
        let bs = self.env.bs;
        let cb = self.env.array.chunk_blocks();
        let sm = self.sm(block);
        let (stripe, off) = (block / cb, block % cb);
        let k = sm.k as u64;
        let logical = |d: u32| (stripe * k + d as u64) * cb + off;
        let reads = self.reads;
        let user = self.user;
        let new: Vec<Option<&[u8]>> = (0..sm.k)
            .map(|d| user.get(logical(d)).or_else(|| reads.unit(sm.data_disk(d), block, bs)))
            .collect();
        let rcw = |views: &[&[u8]]| {
            let (p, q) = parity_of(&sm, views, bs);
            (Some(p), q)
        };
        let mut result = if new.iter().all(|x| x.is_some()) {
            // Reconstruct-write: parity of the new row.
            let views: Vec<&[u8]> = new.iter().map(|x| x.unwrap()).collect();
            rcw(&views)
        } else {
            self.rmw(&sm, block, &logical).unwrap_or((None, None))
        };
        let q_wanted = sm.q.is_some();
        if result.0.is_none() || (q_wanted && result.1.is_none()) {
            // Solve the old row, then reconstruct-write (degraded writes,
            // rebuilds of a parity unit).
            if let Some(row) = solve_row(&sm, bs, |d| reads.unit(d, block, bs)) {
                let views: Vec<&[u8]> = (0..sm.k)
                    .map(|d| user.get(logical(d)).unwrap_or(&row[sm.data_disk(d) as usize]))
                    .collect();
                let (p, q) = rcw(&views);
                result = (result.0.or(p), result.1.or(q));
            }
        }
        self.parity.entry(block).or_insert(result)
    }

    /// Reconstruct-write straight into `dst`: P (`q` false: the XOR of the
    /// new data units) or Q (`q` true) of block row `block`, when every new
    /// data unit (written now or read) is at hand. False (nothing done)
    /// otherwise: [`new_parity`](Self::new_parity) then decides. The same
    /// bytes as `new_parity`'s reconstruct-write, without its buffers, map
    /// and copies (P and Q are written once per block row): the path of
    /// full-stripe writes.
    fn parity_direct(&self, block: u64, q: bool, dst: &mut [u8]) -> bool {
        let sm = self.sm(block);
        if q && sm.q.is_none() {
            return false;
        }
        let bs = self.env.bs;
        let cb = self.env.array.chunk_blocks();
        let (stripe, off) = (block / cb, block % cb);
        let k = sm.k as u64;
        let unit = |d: u32| {
            self.user
                .get((stripe * k + d as u64) * cb + off)
                .or_else(|| self.reads.unit(sm.data_disk(d), block, bs))
        };
        if q {
            let Some(units) = (0..sm.k).map(unit).collect::<Option<Vec<&[u8]>>>() else {
                return false;
            };
            gf256::q_into(&units, &sm.q_slots(), dst);
            return true;
        }
        if !(0..sm.k).all(|d| unit(d).is_some()) {
            return false;
        }
        let u = |d: u32| unit(d).expect("checked above");
        match sm.k {
            1 => dst.copy_from_slice(u(0)),
            _ => gf256::xor_pair_into(dst, u(0), u(1)),
        }
        for d in 2..sm.k {
            gf256::xor_into(dst, u(d));
        }
        true
    }

    /// Read-modify-write: needs the old value of every written data unit
    /// and of the parity units to update.
    fn rmw(&self, sm: &StripeMap, block: u64, logical: &dyn Fn(u32) -> u64) -> Option<NewParity> {
        let bs = self.env.bs;
        let p_old = self.reads.unit(sm.p, block, bs);
        let q_old = sm.q.and_then(|q| self.reads.unit(q, block, bs));
        if p_old.is_none() && q_old.is_none() {
            return None;
        }
        let mut p = p_old.map(|x| x.to_vec());
        let mut q = q_old.map(|x| x.to_vec());
        let slots = sm.q_slots();
        let mut delta = vec![0u8; bs];
        for d in 0..sm.k {
            let Some(new) = self.user.get(logical(d)) else { continue };
            let old = self.reads.unit(sm.data_disk(d), block, bs)?;
            delta.copy_from_slice(old);
            gf256::xor_into(&mut delta, new);
            if let Some(p) = p.as_mut() {
                gf256::xor_into(p, &delta);
            }
            if let Some(q) = q.as_mut() {
                gf256::mul_xor_into(q, &delta, gf256::gpow(slots[d as usize]));
            }
        }
        Some((p, q))
    }

    /// The new value of the unit at (`disk`, `block`) into `dst`.
    pub fn fill(&mut self, disk: u32, block: u64, dst: &mut [u8]) -> Result<(), Fault> {
        let a = self.env.array;
        let missing = || Fault::Heal(vec![block / a.chunk_blocks()]);
        match role(a, disk, block) {
            Role::P if self.parity_direct(block, false, dst) => {}
            Role::Q if self.parity_direct(block, true, dst) => {}
            r @ (Role::P | Role::Q) => {
                let (p, q) = self.new_parity(block);
                let v = if r == Role::P { p } else { q };
                dst.copy_from_slice(v.as_deref().ok_or_else(missing)?);
            }
            // An old unit that was read is copied as is (no owned copy via `old`).
            Role::Data(l) => match self.user.get(l).or_else(|| self.reads.unit(disk, block, self.env.bs)) {
                Some(u) => dst.copy_from_slice(u),
                None => dst.copy_from_slice(&self.old(disk, block).ok_or_else(missing)?),
            },
            Role::Unused => dst.fill(0),
        }
        Ok(())
    }
}

/// How a plan's member writes are handed to the members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// One write per disk op of the plan, in plan order.
    PerOp,
    /// The ops of one member that follow each other on it (a multi-stripe
    /// write puts one chunk per stripe on every member, back to back) as one
    /// write: a system call (and a device doorbell) per run instead of per
    /// chunk. The same bytes land in the same places; only the number of
    /// writes changes. Member writes of one request are unordered anyway
    /// (issued in parallel; the bitmap and journal cover them as a set).
    Coalesced,
}

/// The write ops of `plan`, as `how` submits them.
pub fn write_ops(plan: &IoPlan, how: Submit) -> Vec<DiskOp> {
    let mut ops: Vec<DiskOp> = plan
        .disk_ops()
        .filter(|o| o.kind == DiskOpKind::Write)
        .copied()
        .collect();
    if how == Submit::PerOp || ops.len() < 2 {
        return ops;
    }
    ops.sort_by_key(|o| (o.disk, o.block));
    let mut out: Vec<DiskOp> = Vec::with_capacity(ops.len());
    for op in ops {
        match out.last_mut() {
            Some(last)
                if last.disk == op.disk
                    && last.block + last.nblocks as u64 == op.block
                    && last.nblocks.checked_add(op.nblocks).is_some() =>
            {
                last.nblocks += op.nblocks;
            }
            _ => out.push(op),
        }
    }
    out
}

/// The writes of `plan` with their bytes, runs of adjacent ops on a member
/// merged ([`Submit::Coalesced`]).
pub fn write_buffers<'u>(
    env: &Env,
    plan: &IoPlan,
    reads: &Reads,
    user: &UserData<'u>,
) -> Result<Vec<MemberWrite<'u>>, Fault> {
    write_buffers_as(env, plan, reads, user, Submit::Coalesced)
}

/// The writes of `plan` with their bytes, submitted as `how` says. The
/// request's new data units are named where they are ([`Piece::User`]);
/// everything else is built.
pub fn write_buffers_as<'u>(
    env: &Env,
    plan: &IoPlan,
    reads: &Reads,
    user: &UserData<'u>,
    how: Submit,
) -> Result<Vec<MemberWrite<'u>>, Fault> {
    let bs = env.bs;
    let mut f = Filler::new(env, reads, user);
    let mut out = Vec::new();
    // Without new data (zeroes, rebuilds) every write is built, in one piece.
    let data = user.data.unwrap_or_default();
    for op in write_ops(plan, how) {
        let own = |i: u64| {
            user.data?;
            match role(env.array, op.disk, op.block + i) {
                Role::Data(l) => user.offset(l),
                _ => None,
            }
        };
        let mut pieces = Vec::new();
        for src in payload::split(data, op.nblocks as u64, bs, own) {
            pieces.push(match src {
                Source::User(s, e) => Piece::User(&data[s..e]),
                Source::Built(at, count) => {
                    let mut buf = AlignedBuf::scratch(count as usize * bs);
                    for i in 0..count as usize {
                        f.fill(op.disk, op.block + at + i as u64, &mut buf[i * bs..(i + 1) * bs])?;
                    }
                    Piece::Built(buf)
                }
            });
        }
        out.push(MemberWrite { op, pieces });
    }
    Ok(out)
}

/// Logical blocks a plan marks unreadable.
pub fn unreadable(plan: &IoPlan) -> Vec<u64> {
    plan.nodes
        .iter()
        .filter_map(|n| match n.action {
            Action::Unreadable { block } => Some(block),
            _ => None,
        })
        .collect()
}

/// Healthy reads straight into `out`, without intermediate buffers: only
/// for a plan of nothing but user reads, without checksums or listed blocks,
/// that covers every block of `out` exactly once, with `out` aligned for
/// O_DIRECT. None when that does not apply or a member came back short; the
/// caller then runs the general path (which reports and heals).
pub fn read_direct(env: &Env, plan: &IoPlan, first: u64, n: u64, out: &mut [u8]) -> Option<()> {
    use crate::array::Cause;
    let bs = env.bs;
    if env.checksums || !env.bad.is_empty() || !(out.as_ptr() as usize).is_multiple_of(super::members::ALIGN) {
        return None;
    }
    if out.len() != n as usize * bs {
        return None;
    }
    let a = env.array;
    let mut covered = vec![false; n as usize];
    let base = out.as_mut_ptr() as usize;
    // Per member read: the member, its first block, the memory ranges it fills.
    type Job<'m> = (&'m Member, u64, Vec<(usize, usize)>);
    let mut jobs: Vec<Job> = Vec::new();
    for node in &plan.nodes {
        let Action::Disk(op) = &node.action else { return None };
        if op.kind != DiskOpKind::Read || op.cause != Cause::User {
            return None;
        }
        let m = env.members.get(op.disk as usize)?.as_ref()?;
        let mut parts: Vec<(usize, usize)> = Vec::new();
        for i in 0..op.nblocks as u64 {
            let Role::Data(l) = role(a, op.disk, op.block + i) else {
                return None;
            };
            if l < first || l >= first + n || covered[(l - first) as usize] {
                return None;
            }
            covered[(l - first) as usize] = true;
            let addr = base + (l - first) as usize * bs;
            match parts.last_mut() {
                Some(last) if last.0 + last.1 == addr => last.1 += bs,
                _ => parts.push((addr, bs)),
            }
        }
        jobs.push((m, op.block, parts));
    }
    if !covered.iter().all(|&c| c) {
        return None;
    }
    // SAFETY: the ranges lie in `out` (exclusively borrowed here) and no
    // block is covered twice, so the ranges are disjoint.
    let read = |(m, block, parts): &Job| unsafe { m.read_into(*block, parts, bs) };
    if jobs.len() > 1 {
        let uj: Vec<uring::Job> = jobs
            .iter()
            .map(|(m, block, parts)| uring::Job::read(m.raw_fd(), block * bs as u64, parts))
            .collect();
        // SAFETY: as for `read` above; io_uring waits for every job.
        if let Some(done) = unsafe { uring::submit(&uj) } {
            // A job short or failed is read again the plain way, which
            // tells a truncated member from an error.
            let ok = jobs
                .iter()
                .zip(&uj)
                .zip(done)
                .all(|((j, u), r)| matches!(r, Ok(n) if n == u.len()) || matches!(read(j), Ok(true)));
            return ok.then_some(());
        }
    }
    let ok = if env.parallel && jobs.len() > 1 && out.len() >= PARALLEL_BYTES {
        each_in_a_thread(&jobs, read).into_iter().all(|r| matches!(r, Ok(true)))
    } else {
        jobs.iter().all(|j| matches!(read(j), Ok(true)))
    };
    ok.then_some(())
}

/// Produce logical blocks `first..first + n` into `out` from the units read.
pub fn read_out(env: &Env, reads: &Reads, first: u64, n: u64, out: &mut [u8]) -> Result<(), Fault> {
    let a = env.array;
    let bs = env.bs;
    let mut heal: Vec<u64> = Vec::new();
    let mut solved: HashMap<u64, Option<Vec<Vec<u8>>>> = HashMap::new();
    for i in 0..n {
        let l = first + i;
        let dst = &mut out[i as usize * bs..(i as usize + 1) * bs];
        let pl = places(a, l);
        if let Some(u) = pl.iter().find_map(|&(d, b)| reads.unit(d, b, bs)) {
            dst.copy_from_slice(u);
            continue;
        }
        if a.level().has_parity() {
            let (disk, block) = pl[0];
            let row = solved.entry(block).or_insert_with(|| {
                let sm = a.stripe_map(block / a.chunk_blocks());
                solve_row(&sm, bs, |d| reads.unit(d, block, bs))
            });
            if let Some(row) = row {
                dst.copy_from_slice(&row[disk as usize]);
                continue;
            }
        }
        heal.push(heal_row(a, l));
    }
    if heal.is_empty() {
        Ok(())
    } else {
        heal.sort_unstable();
        heal.dedup();
        Err(Fault::Heal(heal))
    }
}

/// Member rows (chunk rows of `cb` blocks) one disk operation touches.
pub fn op_rows(op: &DiskOp, cb: u64) -> std::ops::RangeInclusive<u64> {
    op.block / cb..=(op.block + op.nblocks as u64 - 1) / cb
}

/// Member rows (chunk rows) touched by the disk operations of `plan`.
pub fn plan_rows(plan: &IoPlan, cb: u64) -> Vec<u64> {
    let mut rows: Vec<u64> = plan.disk_ops().flat_map(|op| op_rows(op, cb)).collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

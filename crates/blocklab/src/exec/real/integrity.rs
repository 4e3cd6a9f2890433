//! The integrity suite (`blocklab real integrity`, `make integrity`):
//! seeded rounds, each of which builds an array, writes a pattern whose
//! every byte is known, injects faults, recovers, and verifies every byte.
//!
//! Faults within the level's redundancy must lose nothing:
//!
//! * `fail` — members failed (up to the level's tolerance), read degraded,
//!   then a spare put in and rebuilt;
//! * `delete` — a member image removed while the array is closed (it opens
//!   degraded), then rebuilt;
//! * `truncate` — a member file cut short (reads past its end fail and are
//!   rebuilt from redundancy, then written back);
//! * `flip`, `zero` — bytes changed silently in a member file (with
//!   `--checksums` any level finds them on read; without, RAID-6's check
//!   locates the wrong unit and repairs it);
//! * `punch` (with `--checksums`) — a hole punched in a member file and in
//!   its checksum sidecar at the same blocks (both read as zeroes): the
//!   zeroed entries must not pass for all-zero blocks;
//! * `crash-write` — a simulated `kill -9` at a random member write, healthy
//!   or degraded (the fault hook stops every later write; a torn write lands
//!   a prefix of its blocks), then a restart: each block of the write in
//!   flight must read back old or new, all others unchanged, and a check
//!   must find no stale parity. Half of the API rounds write a sequential
//!   stream of unaligned requests from four workers instead
//!   (`crash-amid-stream`: partial stripes gathered across requests):
//!   every acknowledged request must read back;
//! * `crash-rebuild` — the same during a rebuild, which then resumes;
//! * `crash-missing` — a crash mid-write, then a member missing at the
//!   restart: a parity level must refuse to start (dirty degraded) rather
//!   than rebuild the lost units from doubtful parity; then either the
//!   member comes back (everything must read back) or the array is forced
//!   (`start_dirty_degraded`: every block reads right or fails, never wrong);
//! * `crash-stale` — the same with a stale copy of the member (taken while
//!   the array was closed, before later writes) put back in its place: it
//!   must be left out, never served;
//! * `swap-rebuild` — two member images (and maybe their checksum files)
//!   swapped while closed: assembled back by identity, then a member is
//!   failed, replaced and rebuilt.
//!
//! Faults beyond redundancy (one member more than the level survives, or
//! with checksums a bad unit in more members of a row than it has parity)
//! must be reported as errors: every block read either returns its right
//! bytes or an error, never wrong bytes.
//!
//! One round in `nbd_every` goes through an NBD server (writes, reads and
//! control requests over sockets, faults injected while it serves) instead
//! of the API. Real `kill -9` of a real server process is exercised by the
//! Python tests (`tests/test_real.py`).

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::control::{self, ServeOptions};
use super::members::{member_path, sums_path, Faults};
use super::rebuild::RebuildOptions;
use super::{OpenConfig, RealArray};
use crate::array::{ArrayConfig, Level};
use crate::error::{Error, Result};
use crate::nbd::client::Client;

mod stack_rounds;

#[derive(Debug, Clone)]
pub struct IntegrityOptions {
    pub rounds: u64,
    pub seed: u64,
    /// Scratch directory (default: a fresh one under the system temp dir).
    pub dir: Option<PathBuf>,
    /// Every n-th round goes through an NBD server (0: none).
    pub nbd_every: u64,
    /// After every n-th round, a stack round (a write-back host cache in
    /// front, a crash; `integrity/stack_rounds.rs`); 0: none.
    pub stack_every: u64,
}

impl Default for IntegrityOptions {
    fn default() -> Self {
        IntegrityOptions {
            rounds: 10_000,
            seed: 1,
            dir: None,
            nbd_every: 4,
            stack_every: 0,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IntegrityReport {
    pub rounds: u64,
    pub seed: u64,
    pub nbd_rounds: u64,
    pub rounds_by_level: BTreeMap<String, u64>,
    pub checksummed_rounds: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    pub within_redundancy_rounds: u64,
    pub beyond_redundancy_rounds: u64,
    pub bytes_written: u64,
    /// Bytes read back and compared with what must be there.
    pub bytes_verified: u64,
    /// Bytes of within-redundancy rounds that read back wrong or not at
    /// all (the target is zero).
    pub bytes_lost: u64,
    /// Block rows a check found inconsistent after recovery (target zero).
    pub stale_rows_after_recovery: u64,
    /// Beyond redundancy: blocks read, how many were refused with an error,
    /// and bytes returned wrong (the target is zero).
    pub beyond_blocks_read: u64,
    pub beyond_errors_reported: u64,
    pub beyond_wrong_bytes: u64,
    /// Restarts refused as dirty degraded (crash plus a lost member).
    #[serde(default)]
    pub dirty_degraded_refused: u64,
    /// Forced dirty-degraded starts: blocks read, refused with an error
    /// (the lost units of dirty rows), and bytes returned wrong (target 0,
    /// counted in `bytes_lost` too).
    #[serde(default)]
    pub dirty_degraded_blocks_read: u64,
    #[serde(default)]
    pub dirty_degraded_errors: u64,
    /// Stack rounds run (`stack_every`), counted in `rounds` too; a failed
    /// one is listed in `failed_stack_rounds` by the round it followed.
    #[serde(default)]
    pub stack_rounds: u64,
    #[serde(default)]
    pub failed_stack_rounds: Vec<u64>,
    /// Rounds where something was lost or wrong, for replaying them.
    pub failed_rounds: Vec<u64>,
    pub seconds: f64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Faults within redundancy (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fail,
    Truncate,
    Flip,
    Zero,
    Punch,
    Delete,
    CrashWrite,
    CrashRebuild,
    CrashMissing,
    CrashStale,
    SwapRebuild,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Fail => "fail",
            Kind::Truncate => "truncate",
            Kind::Flip => "flip",
            Kind::Zero => "zero",
            Kind::Punch => "punch",
            Kind::Delete => "delete",
            Kind::CrashWrite => "crash-write",
            Kind::CrashRebuild => "crash-rebuild",
            Kind::CrashMissing => "crash-missing",
            Kind::CrashStale => "crash-stale",
            Kind::SwapRebuild => "swap-rebuild",
        }
    }
}

/// What one round found.
#[derive(Default)]
struct Tally {
    written: u64,
    verified: u64,
    lost: u64,
    stale: u64,
    beyond_read: u64,
    beyond_errors: u64,
    beyond_wrong: u64,
    refused: u64,
    dd_read: u64,
    dd_errors: u64,
    faults: Vec<&'static str>,
}

/// Reads and writes of a round: through the API or an NBD connection.
enum Io {
    Api(Arc<RealArray>),
    Nbd(Client, Box<control::Serving>),
}

impl Io {
    fn write(&mut self, off: u64, data: &[u8]) -> bool {
        match self {
            Io::Api(a) => a.write(off, data, false).is_ok(),
            Io::Nbd(c, _) => c.write(off, data, false).is_ok(),
        }
    }
    fn read(&mut self, off: u64, buf: &mut [u8]) -> bool {
        match self {
            Io::Api(a) => a.read(off, buf).is_ok(),
            Io::Nbd(c, _) => c.read(off, buf).is_ok(),
        }
    }
    fn array(&self) -> &RealArray {
        match self {
            Io::Api(a) => a,
            Io::Nbd(_, s) => s.array(),
        }
    }
}

fn pick_config(rng: &mut Rng) -> (ArrayConfig, bool) {
    let (level, disks, layout): (&str, u32, Option<&str>) = match rng.below(100) {
        0..=4 => ("raid0", 2 + rng.below(3) as u32, None),
        5..=14 => ("raid1", 2 + rng.below(2) as u32, None),
        15..=19 => ("raid10", 4, Some("n2")),
        20..=24 => ("raid10", 4 + rng.below(2) as u32, Some("f2")),
        25..=29 => ("raid10", 3, Some("o2")),
        30..=34 => ("raid4", 3 + rng.below(3) as u32, None),
        35..=64 => (
            "raid5",
            3 + rng.below(4) as u32,
            Some(
                [
                    "left-symmetric",
                    "left-asymmetric",
                    "right-symmetric",
                    "right-asymmetric",
                ][rng.below(4) as usize],
            ),
        ),
        _ => (
            "raid6",
            4 + rng.below(4) as u32,
            Some(["left-symmetric", "right-asymmetric", "ddf-n-continue", "parity-first"][rng.below(4) as usize]),
        ),
    };
    let chunk = 4096u64 << rng.below(3);
    let rows = 8 + rng.below(25);
    let cfg = ArrayConfig::from_names_sized(level, disks, chunk, layout, 4096, chunk * rows).expect("valid config");
    (cfg, rng.chance(0.5))
}

/// Damage a member file silently: flip bytes or zero a range.
fn damage(dir: &Path, disk: u32, at: u64, len: usize, zero: bool, rng: &mut Rng) {
    let p = member_path(dir, disk);
    let Ok(f) = OpenOptions::new().read(true).write(true).open(&p) else {
        return;
    };
    let mut buf = vec![0u8; len];
    let n = f.read_at(&mut buf, at).unwrap_or(0);
    if n == 0 {
        return;
    }
    for b in &mut buf[..n] {
        *b = if zero { 0 } else { *b ^ (1 + rng.below(255) as u8) };
    }
    let _ = f.write_all_at(&buf[..n], at);
}

/// Punch a hole of `blocks` 4 KiB blocks from member block `block` in a
/// member file and the same entries of its checksum sidecar (zeroes where
/// the file system cannot punch).
fn punch(dir: &Path, disk: u32, block: u64, blocks: u64) {
    use std::os::fd::AsRawFd;
    for (path, unit) in [(member_path(dir, disk), 4096u64), (sums_path(dir, disk), 4)] {
        let Ok(f) = OpenOptions::new().write(true).open(&path) else {
            continue;
        };
        let (at, len) = (block * unit, blocks * unit);
        // SAFETY: fallocate on an open descriptor; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                at as libc::off_t,
                len as libc::off_t,
            )
        };
        if r != 0 {
            let _ = f.write_all_at(&vec![0u8; len as usize], at);
        }
    }
}

/// Verify every byte against `image`; `alt` holds a second acceptable value
/// per 4 KiB block (the write in flight at a crash). Returns (verified,
/// lost) bytes.
fn verify(io: &mut Io, image: &[u8], alt: &BTreeMap<u64, Vec<u8>>) -> (u64, u64) {
    let size = image.len() as u64;
    let step = 64 * 1024u64;
    let (mut verified, mut lost) = (0, 0);
    let mut off = 0;
    while off < size {
        let len = step.min(size - off) as usize;
        let mut buf = vec![0u8; len];
        if io.read(off, &mut buf) {
            for (i, chunk) in buf.chunks(4096).enumerate() {
                let b = off / 4096 + i as u64;
                let want = &image[(b * 4096) as usize..][..chunk.len()];
                let ok = chunk == want || alt.get(&b).is_some_and(|a| a[..chunk.len()] == *chunk);
                if !ok {
                    lost += chunk.iter().zip(want).filter(|(x, y)| x != y).count() as u64;
                }
            }
            verified += len as u64;
        } else {
            lost += len as u64;
        }
        off += len as u64;
    }
    (verified, lost)
}

/// Beyond redundancy: every 4 KiB block returns its bytes or an error.
fn verify_beyond(io: &mut Io, image: &[u8], t: &mut Tally) {
    for (b, want) in image.chunks(4096).enumerate() {
        let mut buf = vec![0u8; want.len()];
        t.beyond_read += 1;
        if io.read(b as u64 * 4096, &mut buf) {
            t.beyond_wrong += buf.iter().zip(want).filter(|(x, y)| x != y).count() as u64;
            t.verified += want.len() as u64;
        } else {
            t.beyond_errors += 1;
        }
    }
}

/// Random writes (aligned or not) mirrored into `image`.
fn scribble(io: &mut Io, image: &mut [u8], rng: &mut Rng, count: usize, t: &mut Tally) -> Result<()> {
    let size = image.len() as u64;
    for _ in 0..count {
        let (off, len) = if rng.chance(0.7) {
            let b = rng.below(size / 4096);
            let n = 1 + rng.below((size / 4096 - b).min(32));
            (b * 4096, n * 4096)
        } else {
            let off = rng.below(size - 1);
            (off, 1 + rng.below((size - off).min(30_000)))
        };
        let data = rng.bytes(len as usize);
        if !io.write(off, &data) {
            return Err(Error::config(format!("a write at {off} failed on a healthy array")));
        }
        image[off as usize..(off + len) as usize].copy_from_slice(&data);
        t.written += len;
    }
    Ok(())
}

/// Four workers write one sequential stream of unaligned requests of 7 to 19
/// blocks (partial stripes gathered across requests) until the crash point:
/// acknowledged requests must read back, the others old or new per block.
fn crash_amid_stream(a: &RealArray, image: &mut [u8], alt: &mut BTreeMap<u64, Vec<u8>>, rng: &mut Rng, t: &mut Tally) {
    let size = image.len() as u64;
    let mut reqs = Vec::new();
    let mut b = rng.below(8).min(size / 4096 - 1);
    while b < size / 4096 {
        let n = (7 + rng.below(13)).min(size / 4096 - b);
        reqs.push((b * 4096, rng.bytes((n * 4096) as usize)));
        b += n;
    }
    let acked = write_from_workers(a, &reqs, 4);
    for ((off, data), ok) in reqs.iter().zip(acked) {
        if ok {
            image[*off as usize..][..data.len()].copy_from_slice(data);
            t.written += data.len() as u64;
        } else {
            for (k, block) in data.chunks(4096).enumerate() {
                alt.insert(off / 4096 + k as u64, block.to_vec());
            }
        }
    }
}

/// Write `reqs` (byte offset, bytes) from `workers` threads that take them
/// in order, as a client with that many requests in flight; whether each
/// was acknowledged.
pub(super) fn write_from_workers(a: &RealArray, reqs: &[(u64, Vec<u8>)], workers: usize) -> Vec<bool> {
    use std::sync::atomic::Ordering;
    use std::sync::Mutex;
    let acked: Vec<AtomicBool> = reqs.iter().map(|_| AtomicBool::new(false)).collect();
    let queue = Mutex::new(reqs.iter().zip(&acked));
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let next = queue.lock().unwrap().next();
                let Some(((off, data), ok)) = next else { break };
                ok.store(a.write(*off, data, false).is_ok(), Ordering::SeqCst);
            });
        }
    });
    acked.into_iter().map(AtomicBool::into_inner).collect()
}

/// The rebuild of round `i`: the orders in turn (PRO's zones of two rows,
/// so that the rows the round wrote while recovering come first), without
/// the speed rule.
fn rebuild_options(i: u64, chunk_bytes: u64) -> RebuildOptions {
    RebuildOptions {
        order: crate::rebuild::ORDERS[(i % crate::rebuild::ORDERS.len() as u64) as usize].into(),
        pro_zone_bytes: 2 * chunk_bytes,
        ..RebuildOptions::unthrottled()
    }
}

fn rebuild_all(a: &RealArray, opts: &RebuildOptions) -> Result<()> {
    let stop = AtomicBool::new(false);
    a.rebuild(opts, &stop)?;
    Ok(())
}

fn stale_rows(a: &RealArray) -> Result<u64> {
    Ok(a.check(false)?.mismatches)
}

/// One round; errors are bugs of the executor (reported, the suite goes on).
fn round(i: u64, seed: u64, base: &Path, via_nbd: bool) -> Result<(Tally, String, bool, bool)> {
    let mut rng = Rng(seed ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let (cfg, checksums) = pick_config(&mut rng);
    let dir = base.join(format!("round-{i}"));
    let _ = fs::remove_dir_all(&dir);
    RealArray::create(&dir, cfg, checksums)?;
    let level = cfg.level;
    let rebuild = rebuild_options(i, cfg.chunk_bytes);
    let tol = match level {
        Level::Raid0 => 0,
        Level::Raid1 => cfg.disks - 1,
        Level::Raid10 => 1,
        Level::Raid6 => 2,
        _ => 1,
    };
    let beyond = tol == 0 || rng.chance(0.12);
    let mut t = Tally::default();
    let faults = Arc::new(Faults::none());
    let open = |f: &Arc<Faults>| {
        RealArray::open(
            &dir,
            OpenConfig {
                faults: Some(f.clone()),
                ..Default::default()
            },
        )
    };
    let mut io = if via_nbd {
        let s = control::serve(
            &dir,
            &ServeOptions {
                listen: "127.0.0.1:0".into(),
                threads: 2,
                bitmap_interval: Duration::from_millis(200),
                ..Default::default()
            },
        )?;
        let c = Client::connect(&s.info.nbd, &s.info.export).map_err(|e| Error::io("nbd", e))?;
        Io::Nbd(c, Box::new(s))
    } else {
        Io::Api(Arc::new(open(&faults)?))
    };
    let size = io.array().size_bytes();
    let mut image = vec![0u8; size as usize];
    // The pattern: the whole array in a few large writes, then small ones.
    let quarter = size.div_ceil(4);
    for q in 0..4 {
        let off = q * quarter;
        if off >= size {
            break;
        }
        let data = rng.bytes((quarter.min(size - off)) as usize);
        if !io.write(off, &data) {
            return Err(Error::config("initial write failed"));
        }
        image[off as usize..off as usize + data.len()].copy_from_slice(&data);
        t.written += data.len() as u64;
    }
    scribble(&mut io, &mut image, &mut rng, 10, &mut t)?;
    let disks = cfg.disks;
    let member = cfg.disk_bytes;
    let mut alt: BTreeMap<u64, Vec<u8>> = BTreeMap::new();

    if beyond {
        // One more failure than the level survives, or checksum-detected
        // damage in too many members of one row.
        let damage_kind = checksums && tol > 0 && !via_nbd && rng.chance(0.4);
        if damage_kind {
            let at = rng.below(member / 4096) * 4096;
            let mut ds: Vec<u32> = (0..disks).collect();
            for k in 0..=tol as usize {
                let j = k + rng.below((ds.len() - k) as u64) as usize;
                ds.swap(k, j);
                damage(&dir, ds[k], at, 4096, false, &mut rng);
            }
            t.faults.push("flip-beyond");
        } else {
            let mut ds: Vec<u32> = (0..disks).collect();
            for k in 0..=tol as usize {
                let j = k + rng.below((ds.len() - k) as u64) as usize;
                ds.swap(k, j);
                match &io {
                    Io::Nbd(..) => {
                        control::fail(&dir, ds[k])?;
                    }
                    Io::Api(a) => {
                        a.fail(ds[k])?;
                    }
                }
                t.faults.push("fail-beyond");
            }
        }
        verify_beyond(&mut io, &image, &mut t);
        finish(io)?;
        let _ = fs::remove_dir_all(&dir);
        return Ok((t, level.name().into(), checksums, true));
    }

    // Within redundancy.
    let silent_ok = checksums || level == Level::Raid6;
    let mut kinds: Vec<Kind> = vec![Kind::Fail, Kind::Truncate];
    if silent_ok {
        kinds.extend([Kind::Flip, Kind::Zero]);
    }
    if checksums {
        kinds.push(Kind::Punch);
    }
    if !via_nbd {
        kinds.extend([
            Kind::Delete,
            Kind::CrashWrite,
            Kind::CrashWrite,
            Kind::CrashRebuild,
            Kind::CrashMissing,
            Kind::CrashStale,
            Kind::SwapRebuild,
        ]);
    }
    let kind = kinds[rng.below(kinds.len() as u64) as usize];
    t.faults.push(kind.name());
    let victim = rng.below(disks as u64) as u32;
    match kind {
        Kind::Fail => {
            let mut failed = vec![victim];
            if tol >= 2 && rng.chance(0.5) {
                let other = (victim + 1 + rng.below(disks as u64 - 1) as u32) % disks;
                failed.push(other);
                t.faults.push("fail");
            }
            for &d in &failed {
                match &io {
                    Io::Nbd(..) => drop(control::fail(&dir, d)?),
                    Io::Api(a) => drop(a.fail(d)?),
                }
            }
            // Degraded reads, degraded writes, then rebuild.
            let (v, l) = verify(&mut io, &image, &alt);
            t.verified += v;
            t.lost += l;
            scribble(&mut io, &mut image, &mut rng, 6, &mut t)?;
            for &d in &failed {
                match &io {
                    Io::Nbd(..) => drop(control::replace(&dir, d)?),
                    Io::Api(a) => drop(a.replace(d)?),
                }
            }
            match &io {
                Io::Nbd(..) => {
                    let stop = AtomicBool::new(false);
                    control::rebuild(&dir, &rebuild, &stop)?;
                }
                Io::Api(a) => rebuild_all(a, &rebuild)?,
            }
        }
        Kind::Truncate => {
            let f = OpenOptions::new()
                .write(true)
                .open(member_path(&dir, victim))
                .map_err(|e| Error::io("member", e))?;
            f.set_len(rng.below(member)).map_err(|e| Error::io("member", e))?;
        }
        Kind::Flip | Kind::Zero => {
            // Up to three places in one member; RAID-6 may take a second member too.
            let mut victims = vec![victim];
            if level == Level::Raid6 && checksums && rng.chance(0.3) {
                victims.push((victim + 1) % disks);
            }
            for &d in &victims {
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(member);
                    let len = 1 + rng.below(if kind == Kind::Zero { 16384 } else { 64 }) as usize;
                    damage(&dir, d, at, len, kind == Kind::Zero, &mut rng);
                }
            }
            if !checksums {
                // Without checksums only a scrub finds them (RAID-6 locates the unit).
                io.array().check(true)?;
            }
        }
        Kind::Punch => {
            // Up to three holes of 1-4 blocks in one member, RAID-6 a second member too.
            let mut victims = vec![victim];
            if level == Level::Raid6 && rng.chance(0.3) {
                victims.push((victim + 1) % disks);
            }
            let blocks = member / 4096;
            for &d in &victims {
                for _ in 0..1 + rng.below(3) {
                    let b = rng.below(blocks);
                    punch(&dir, d, b, (1 + rng.below(4)).min(blocks - b));
                }
            }
        }
        Kind::Delete => {
            finish(io)?; // closed cleanly: with a crash it is `crash-missing`
            fs::remove_file(member_path(&dir, victim)).map_err(|e| Error::io("member", e))?;
            let a = Arc::new(open(&faults)?);
            if a.status().failed != vec![victim] {
                return Err(Error::config("a missing member was not failed at open"));
            }
            let (v, l) = verify(&mut Io::Api(a.clone()), &image, &alt);
            t.verified += v;
            t.lost += l;
            a.replace(victim)?;
            rebuild_all(&a, &rebuild)?;
            io = Io::Api(a);
        }
        Kind::CrashWrite | Kind::CrashRebuild => {
            let degraded = tol > 0 && rng.chance(0.5);
            if degraded || kind == Kind::CrashRebuild {
                io.array().fail(victim)?;
                if kind == Kind::CrashWrite {
                    t.faults.push("fail");
                }
            }
            if kind == Kind::CrashRebuild {
                io.array().replace(victim)?;
                // Writes while recovering land on both sides of the offset.
                scribble(&mut io, &mut image, &mut rng, 4, &mut t)?;
            }
            faults.crash_after(1 + rng.below(40), rng.next());
            let stream = kind == Kind::CrashWrite && matches!(io, Io::Api(_)) && rng.chance(0.5);
            if stream {
                t.faults.push("crash-amid-stream");
                if let Io::Api(a) = &io {
                    crash_amid_stream(a, &mut image, &mut alt, &mut rng, &mut t);
                }
            } else if kind == Kind::CrashWrite {
                write_until_crash(&mut io, &mut image, &mut alt, &mut rng, &mut t);
            } else {
                let stop = AtomicBool::new(false);
                let opts = RebuildOptions {
                    checkpoint_ms: 0,
                    ..rebuild.clone()
                };
                let crashed = io.array().rebuild(&opts, &stop).is_err();
                if !crashed {
                    // The rebuild finished before the crash point: crash now.
                    faults.crash_after(1, 0);
                }
            }
            drop(io); // kill -9
            let a = RealArray::open(&dir, OpenConfig::default())?;
            if !a.status().recovering.is_empty() {
                rebuild_all(&a, &rebuild)?;
            }
            io = Io::Api(Arc::new(a));
        }
        Kind::CrashMissing | Kind::CrashStale => {
            let stale_copy = if kind == Kind::CrashStale {
                // Closed cleanly, copied, then rewritten: the copy is stale.
                finish(io)?;
                let copy = copy_member(&dir, victim, "stale")?;
                io = Io::Api(Arc::new(open(&faults)?));
                scribble(&mut io, &mut image, &mut rng, 4, &mut t)?;
                Some(copy)
            } else {
                None
            };
            crash_mid_write(&mut io, &faults, &mut image, &mut alt, &mut rng, &mut t);
            drop(io); // kill -9
                      // The member goes missing, or its stale copy comes back.
            let aside = dir.join("aside");
            fs::rename(member_path(&dir, victim), &aside).map_err(|e| Error::io("member", e))?;
            if let Some(copy) = &stale_copy {
                put_member(&dir, victim, copy)?;
            }
            match RealArray::open(&dir, OpenConfig::default()) {
                Ok(a) => {
                    // Allowed only when no lost unit needs the dirty
                    // parity (mirrors, RAID-4's parity member, a clean
                    // bitmap): then nothing may read back wrong.
                    let want = if stale_copy.is_some() { "stale" } else { "missing" };
                    let left_out = if stale_copy.is_some() {
                        &a.recovery.stale_members
                    } else {
                        &a.recovery.missing_members
                    };
                    if left_out != &vec![victim] {
                        return Err(Error::config(format!("a {want} member was not left out at open")));
                    }
                    let (v, l) = verify(&mut Io::Api(Arc::new(a)), &image, &alt);
                    t.verified += v;
                    t.lost += l;
                    let a = RealArray::open(&dir, OpenConfig::default())?;
                    a.replace(victim)?;
                    rebuild_all(&a, &rebuild)?;
                    // The surviving parity of rows where only parity was
                    // lost is listed doubtful: a repair recomputes it.
                    a.check(true)?;
                    io = Io::Api(Arc::new(a));
                }
                Err(e) if e.to_string().contains("dirty degraded array") => {
                    t.refused += 1;
                    if rng.chance(0.5) {
                        // Forced: right bytes or errors, never wrong ones.
                        let a = RealArray::open(
                            &dir,
                            OpenConfig {
                                start_dirty_degraded: true,
                                ..Default::default()
                            },
                        )?;
                        for (b, want) in image.chunks(4096).enumerate() {
                            let mut buf = vec![0u8; want.len()];
                            t.dd_read += 1;
                            if a.read(b as u64 * 4096, &mut buf).is_ok() {
                                let ok = buf == want || alt.get(&(b as u64)).is_some_and(|x| x[..buf.len()] == buf);
                                if !ok {
                                    t.lost += buf.iter().zip(want).filter(|(x, y)| x != y).count() as u64;
                                }
                                t.verified += want.len() as u64;
                            } else {
                                t.dd_errors += 1;
                            }
                        }
                        t.faults.push("start-dirty-degraded");
                        a.close()?;
                        let _ = fs::remove_dir_all(&dir);
                        return Ok((t, level.name().into(), checksums, false));
                    }
                    // The real member comes back: the restart resyncs.
                    if stale_copy.is_some() {
                        fs::remove_file(member_path(&dir, victim)).map_err(|e| Error::io("member", e))?;
                    }
                    fs::rename(&aside, member_path(&dir, victim)).map_err(|e| Error::io("member", e))?;
                    io = Io::Api(Arc::new(RealArray::open(&dir, OpenConfig::default())?));
                }
                Err(e) => return Err(e),
            }
        }
        Kind::SwapRebuild => {
            finish(io)?;
            let other = (victim + 1 + rng.below(disks as u64 - 1) as u32) % disks;
            swap_files(&member_path(&dir, victim), &member_path(&dir, other))?;
            if checksums && rng.chance(0.5) {
                swap_files(&sums_path(&dir, victim), &sums_path(&dir, other))?;
            }
            let a = Arc::new(open(&faults)?);
            if a.recovery.reassembled.is_empty() || a.status().health != "healthy" {
                return Err(Error::config("swapped members were not put back"));
            }
            let mut api = Io::Api(a.clone());
            let (v, l) = verify(&mut api, &image, &alt);
            t.verified += v;
            t.lost += l;
            a.fail(victim)?;
            a.replace(victim)?;
            rebuild_all(&a, &rebuild)?;
            drop(a);
            io = api;
        }
    }
    // Verify everything (reads repair what they meet), scrub with repair
    // what reads do not touch (parity, other mirrors) after silent damage,
    // then nothing may be left inconsistent; then lose a member and verify
    // once more.
    let (v, l) = verify(&mut io, &image, &alt);
    t.verified += v;
    t.lost += l;
    if matches!(kind, Kind::Truncate | Kind::Flip | Kind::Zero | Kind::Punch) {
        io.array().check(true)?;
    }
    t.stale += stale_rows(io.array())?;
    // Settle the blocks written at the crash, then lose a member: the
    // parity must reconstruct them.
    let mut now = vec![0u8; size as usize];
    if !alt.is_empty() && io.read(0, &mut now) {
        image.copy_from_slice(&now);
        alt.clear();
    }
    if tol > 0 && io.array().status().failed.is_empty() {
        let d = rng.below(disks as u64) as u32;
        match &io {
            Io::Nbd(..) => drop(control::fail(&dir, d)?),
            Io::Api(a) => drop(a.fail(d)?),
        }
        let (v, l) = verify(&mut io, &image, &alt);
        t.verified += v;
        t.lost += l;
    }
    finish(io)?;
    let _ = fs::remove_dir_all(&dir);
    Ok((t, level.name().into(), checksums, false))
}

/// Write random requests until the crash planned now lands (a simulated
/// kill -9 mid-write); the blocks of the write in flight go into `alt`.
fn crash_mid_write(
    io: &mut Io,
    faults: &Faults,
    image: &mut [u8],
    alt: &mut BTreeMap<u64, Vec<u8>>,
    rng: &mut Rng,
    t: &mut Tally,
) {
    faults.crash_after(1 + rng.below(40), rng.next());
    write_until_crash(io, image, alt, rng, t);
}

/// Write random requests until one fails (the crash armed before lands).
fn write_until_crash(io: &mut Io, image: &mut [u8], alt: &mut BTreeMap<u64, Vec<u8>>, rng: &mut Rng, t: &mut Tally) {
    let size = image.len() as u64;
    loop {
        let b = rng.below(size / 4096);
        let n = 1 + rng.below((size / 4096 - b).min(24));
        let data = rng.bytes((n * 4096) as usize);
        if io.write(b * 4096, &data) {
            image[(b * 4096) as usize..][..data.len()].copy_from_slice(&data);
            t.written += data.len() as u64;
        } else {
            for k in 0..n {
                alt.insert(b + k, data[(k * 4096) as usize..][..4096].to_vec());
            }
            break;
        }
    }
}

/// A copy of member `disk`'s files (image, checksums) next to them.
fn copy_member(dir: &Path, disk: u32, tag: &str) -> Result<Vec<(PathBuf, PathBuf)>> {
    let mut out = Vec::new();
    for p in [member_path(dir, disk), sums_path(dir, disk)] {
        if p.exists() {
            let to = PathBuf::from(format!("{}.{tag}-copy", p.display()));
            fs::copy(&p, &to).map_err(|e| Error::io(p.display().to_string(), e))?;
            out.push((to, p));
        }
    }
    Ok(out)
}

/// Put a copy made by [`copy_member`] back in place of the member's files.
fn put_member(_dir: &Path, _disk: u32, copy: &[(PathBuf, PathBuf)]) -> Result<()> {
    for (from, to) in copy {
        fs::copy(from, to).map_err(|e| Error::io(to.display().to_string(), e))?;
    }
    Ok(())
}

fn swap_files(a: &Path, b: &Path) -> Result<()> {
    let tmp = a.with_extension("swap");
    let e = |e| Error::io(a.display().to_string(), e);
    fs::rename(a, &tmp).map_err(e)?;
    fs::rename(b, a).map_err(e)?;
    fs::rename(&tmp, b).map_err(e)
}

fn finish(io: Io) -> Result<()> {
    match io {
        Io::Api(a) => {
            if let Ok(a) = Arc::try_unwrap(a) {
                a.close()?;
            }
        }
        Io::Nbd(c, s) => {
            let _ = c.disconnect();
            (*s).shutdown()?;
        }
    }
    Ok(())
}

/// Run the suite; `progress` is called after each round and ends the run
/// early by returning false.
pub fn run(
    opts: &IntegrityOptions,
    progress: &mut dyn FnMut(u64, &IntegrityReport) -> bool,
) -> Result<IntegrityReport> {
    let t0 = Instant::now();
    let tmp;
    let base = match &opts.dir {
        Some(d) => {
            fs::create_dir_all(d).map_err(|e| Error::io(d.display().to_string(), e))?;
            d.clone()
        }
        None => {
            tmp = std::env::temp_dir().join(format!("blocklab-integrity-{}", std::process::id()));
            fs::create_dir_all(&tmp).map_err(|e| Error::io(tmp.display().to_string(), e))?;
            tmp.clone()
        }
    };
    let mut rep = IntegrityReport {
        seed: opts.seed,
        ..Default::default()
    };
    for i in 0..opts.rounds {
        let via_nbd = opts.nbd_every > 0 && i % opts.nbd_every == opts.nbd_every - 1;
        let (t, level, checksums, beyond) = match round(i, opts.seed, &base, via_nbd) {
            Ok(x) => x,
            Err(e) => {
                // An executor error in a round is a failure of the suite.
                rep.failed_rounds.push(i);
                eprintln!("blocklab: integrity round {i}: {e}");
                rep.rounds += 1;
                continue;
            }
        };
        rep.rounds += 1;
        rep.nbd_rounds += via_nbd as u64;
        *rep.rounds_by_level.entry(level).or_default() += 1;
        rep.checksummed_rounds += checksums as u64;
        for f in &t.faults {
            *rep.faults.entry((*f).to_string()).or_default() += 1;
        }
        if beyond {
            rep.beyond_redundancy_rounds += 1;
        } else {
            rep.within_redundancy_rounds += 1;
        }
        rep.bytes_written += t.written;
        rep.bytes_verified += t.verified;
        rep.bytes_lost += t.lost;
        rep.stale_rows_after_recovery += t.stale;
        rep.beyond_blocks_read += t.beyond_read;
        rep.beyond_errors_reported += t.beyond_errors;
        rep.beyond_wrong_bytes += t.beyond_wrong;
        rep.dirty_degraded_refused += t.refused;
        rep.dirty_degraded_blocks_read += t.dd_read;
        rep.dirty_degraded_errors += t.dd_errors;
        if t.lost > 0 || t.stale > 0 || t.beyond_wrong > 0 {
            rep.failed_rounds.push(i);
        }
        if opts.stack_every > 0 && i % opts.stack_every == opts.stack_every - 1 {
            match stack_rounds::stack_round(i, opts.seed, &base) {
                Ok((t, level, checksums)) => {
                    rep.rounds += 1;
                    rep.stack_rounds += 1;
                    rep.within_redundancy_rounds += 1;
                    *rep.rounds_by_level.entry(level).or_default() += 1;
                    rep.checksummed_rounds += checksums as u64;
                    for f in &t.faults {
                        *rep.faults.entry((*f).to_string()).or_default() += 1;
                    }
                    rep.bytes_written += t.written;
                    rep.bytes_verified += t.verified;
                    rep.bytes_lost += t.lost;
                    rep.stale_rows_after_recovery += t.stale;
                    if t.lost > 0 || t.stale > 0 {
                        rep.failed_stack_rounds.push(i);
                    }
                }
                Err(e) => {
                    eprintln!("blocklab: integrity stack round after {i}: {e}");
                    rep.rounds += 1;
                    rep.stack_rounds += 1;
                    rep.failed_stack_rounds.push(i);
                }
            }
        }
        if !progress(i, &rep) {
            break;
        }
    }
    if opts.dir.is_none() {
        let _ = fs::remove_dir_all(&base);
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_loses_nothing_and_returns_no_wrong_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let rep = run(
            &IntegrityOptions {
                rounds: 40,
                seed: 7,
                dir: Some(dir.path().to_path_buf()),
                nbd_every: 4,
                stack_every: 0,
            },
            &mut |_, _| true,
        )
        .unwrap();
        assert_eq!(rep.rounds, 40);
        assert!(rep.failed_rounds.is_empty(), "{rep:#?}");
        assert_eq!(
            (rep.bytes_lost, rep.beyond_wrong_bytes, rep.stale_rows_after_recovery),
            (0, 0, 0)
        );
        assert!(rep.bytes_verified > rep.bytes_written / 2);
        assert_eq!(rep.nbd_rounds, 10);
        assert!(rep.faults.len() >= 4, "{:?}", rep.faults);
    }
}
#[cfg(test)]
mod pinned_rounds {
    /// Seed 2, round 197: a RAID-6 whose first member holds only parity
    /// (P), checksums on, a crash mid-write, then a stale copy of that
    /// member put back. It starts (no data unit lost), the surviving Q of
    /// the dirty rows is listed doubtful, and a data unit torn by the crash
    /// (new data, old checksum) used to stay an erasure nothing could
    /// rebuild: 196,608 bytes read as errors. Resync now trusts the data
    /// units of such rows as it does elsewhere.
    #[test]
    fn a_crash_then_a_stale_parity_member_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (t, level, checksums, beyond) = super::round(197, 2, dir.path(), false).unwrap();
        // (If the rounds' draws change, find another such round.)
        assert_eq!(
            (level.as_str(), checksums, beyond, t.faults.as_slice()),
            ("raid6", true, false, &["crash-stale"][..])
        );
        assert_eq!((t.lost, t.stale, t.beyond_wrong), (0, 0, 0));
    }

    /// Seed 1, round 5965: the same on a RAID-4 whose parity member's stale
    /// copy comes back: no surviving parity at all, so no row was listed
    /// doubtful and the torn data unit stayed unreadable.
    #[test]
    fn a_crash_then_a_stale_raid4_parity_member_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (t, level, checksums, beyond) = super::round(5965, 1, dir.path(), false).unwrap();
        assert_eq!(
            (level.as_str(), checksums, beyond, t.faults.as_slice()),
            ("raid4", true, false, &["crash-stale"][..])
        );
        assert_eq!((t.lost, t.stale, t.beyond_wrong), (0, 0, 0));
    }
}

#[cfg(test)]
mod stack_round_tests {
    use super::*;

    #[test]
    fn stack_rounds_lose_nothing_a_completed_flush_covered() {
        let dir = tempfile::tempdir().unwrap();
        let rep = run(
            &IntegrityOptions {
                rounds: 24,
                seed: 3,
                dir: Some(dir.path().to_path_buf()),
                nbd_every: 0,
                stack_every: 1,
            },
            &mut |_, _| true,
        )
        .unwrap();
        assert_eq!(rep.stack_rounds, 24);
        assert!(
            rep.failed_stack_rounds.is_empty() && rep.failed_rounds.is_empty(),
            "{rep:#?}"
        );
        assert_eq!((rep.bytes_lost, rep.stale_rows_after_recovery), (0, 0));
        assert_eq!(rep.faults["crash-stack"], 24);
        // Some with a (mostly write-back) SSD tier under the host caches.
        assert!(rep.faults.get("crash-tier").is_some_and(|&n| n >= 6), "{rep:#?}");
        assert!(rep.bytes_verified > 0);
    }
}

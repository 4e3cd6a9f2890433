//! Member identity (MD's superblock) and assembly by identity.
//!
//! Every member image ends with one 4 KiB identity block, past the member's
//! data (MD's v1.0 superblock also sits at the device's end, so member block
//! b stays at byte b × block size): the array's UUID, the member's role
//! (slot), and the events counter — the state file's `generation` when the
//! member was last brought up to date. Every state-file write first writes
//! the new generation to every live member and syncs it (see
//! `RealArray::persist`), so a member whose events are older than the state
//! file missed a change: it is stale. Each checksum file `disk-I.sum` ends
//! with an identity block too (UUID and role; its events are not kept up to
//! date, a stale sum only makes blocks look bad, and those are rebuilt).
//!
//! Why a trailer rather than a sidecar record: a sidecar file would not
//! move with its image, so a swapped or copied-back image would go unseen.
//!
//! Opening assembles by identity, not by file name: images (and checksum
//! files) found under another role's name are put back under their own
//! names (atomic exchanges, so a crash in between leaves every file with its
//! identity and the next open goes on); a file of another array, or without
//! an identity block, is refused; two files claiming one role are refused;
//! a member whose events are older than the state file is left out (failed,
//! to be replaced and rebuilt), never served.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::members::{member_path, sums_path, write_all_at, AlignedBuf};
use crate::error::{Error, Result};

/// The identity block's size (one page: an O_DIRECT write of it is aligned).
pub const ID_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"BLKLABID";
/// Magic, UUID, role, kind, events, CRC-32 of the bytes before it.
const RECORD: usize = 8 + 16 + 4 + 4 + 8 + 4;

/// Which file of a member an identity block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image = 0,
    Sums = 1,
}

/// What a member file says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub uuid: u128,
    pub role: u32,
    pub events: u64,
}

/// Where the identity block of a member image starts (past its data).
pub fn image_id_offset(disk_bytes: u64) -> u64 {
    disk_bytes.next_multiple_of(ID_BYTES)
}

/// The full length of a member image.
pub fn image_len(disk_bytes: u64) -> u64 {
    image_id_offset(disk_bytes) + ID_BYTES
}

/// Where the identity block of a checksum file starts (past 4 bytes per block).
pub fn sums_id_offset(disk_bytes: u64, bs: u64) -> u64 {
    (disk_bytes / bs * 4).next_multiple_of(ID_BYTES)
}

fn encode(id: &Identity, kind: Kind) -> AlignedBuf {
    let mut b = AlignedBuf::zeroed(ID_BYTES as usize);
    b[0..8].copy_from_slice(MAGIC);
    b[8..24].copy_from_slice(&id.uuid.to_le_bytes());
    b[24..28].copy_from_slice(&id.role.to_le_bytes());
    b[28..32].copy_from_slice(&(kind as u32).to_le_bytes());
    b[32..40].copy_from_slice(&id.events.to_le_bytes());
    let crc = crc32fast::hash(&b[..RECORD - 4]);
    b[RECORD - 4..RECORD].copy_from_slice(&crc.to_le_bytes());
    b
}

/// What was found at an identity block's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Id(Identity),
    /// No (valid) identity block: a foreign or truncated file.
    None,
}

fn decode(b: &[u8], kind: Kind) -> Found {
    if b.len() < RECORD || &b[0..8] != MAGIC {
        return Found::None;
    }
    let crc = u32::from_le_bytes(b[RECORD - 4..RECORD].try_into().unwrap());
    if crc32fast::hash(&b[..RECORD - 4]) != crc || u32::from_le_bytes(b[28..32].try_into().unwrap()) != kind as u32 {
        return Found::None;
    }
    Found::Id(Identity {
        uuid: u128::from_le_bytes(b[8..24].try_into().unwrap()),
        role: u32::from_le_bytes(b[24..28].try_into().unwrap()),
        events: u64::from_le_bytes(b[32..40].try_into().unwrap()),
    })
}

/// Write `id` into `f` at `at` (an aligned buffer: `f` may be O_DIRECT).
pub fn write(f: &File, at: u64, id: &Identity, kind: Kind) -> io::Result<()> {
    write_all_at(f, &encode(id, kind), at)
}

/// Read the identity block of the file at `path`.
pub fn read(path: &Path, at: u64, kind: Kind) -> io::Result<Found> {
    let f = File::open(path)?;
    let mut b = vec![0u8; RECORD];
    let mut done = 0;
    while done < RECORD {
        match f.read_at(&mut b[done..], at + done as u64) {
            Ok(0) => return Ok(Found::None),
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(decode(&b, kind))
}

/// A new array UUID: not reproducible by design (two arrays made from the
/// same command must not take each other's members).
pub fn new_uuid() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    let a = h.finish();
    let b = std::collections::hash_map::RandomState::new().hash_one(a);
    ((a as u128) << 64) | b as u128
}

pub fn uuid_text(u: u128) -> String {
    format!("{u:032x}")
}

pub fn parse_uuid(s: &str) -> Option<u128> {
    (s.len() == 32).then(|| u128::from_str_radix(s, 16).ok()).flatten()
}

/// Exchange two paths atomically (renameat2 RENAME_EXCHANGE), or move `a`
/// to `b` when `b` does not exist.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    if !b.exists() {
        return std::fs::rename(a, b);
    }
    let ca = CString::new(a.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let cb = CString::new(b.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: two valid NUL-terminated paths; no memory is shared.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What assembling found.
#[derive(Debug, Default)]
pub struct Assembly {
    /// Files put back under their own names ("disk-1.img held member 0").
    pub moved: Vec<String>,
    /// Members whose events are older than the state file's (left out).
    pub stale: Vec<u32>,
}

/// The paths of one kind of member file.
fn path_of(dir: &Path, kind: Kind, d: u32) -> std::path::PathBuf {
    match kind {
        Kind::Image => member_path(dir, d),
        Kind::Sums => sums_path(dir, d),
    }
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Read the identities of the present files of `kind` among `disks`,
/// refuse foreign ones and two claims of one role, and put every file back
/// under its role's name. Returns each role's identity (None: no file).
#[allow(clippy::too_many_arguments)]
fn sort_files(
    dir: &Path,
    kind: Kind,
    disks: &[u32],
    n: u32,
    uuid: u128,
    at: u64,
    ignore_foreign: &[u32],
    moved: &mut Vec<String>,
) -> Result<Vec<Option<Identity>>> {
    let mut role_at: Vec<Option<(u32, Identity)>> = vec![None; n as usize]; // role -> (file index, id)
    let mut found: Vec<(u32, Identity)> = Vec::new();
    for &d in disks {
        let p = path_of(dir, kind, d);
        if !p.exists() {
            continue;
        }
        let shown = p.display().to_string();
        let id = match read(&p, at, kind).map_err(|e| Error::io(&shown, e))? {
            Found::Id(id) if id.uuid != uuid && ignore_foreign.contains(&d) => continue,
            Found::Id(id) => id,
            // A failed member's slot may hold anything: it is not opened.
            Found::None if ignore_foreign.contains(&d) => continue,
            Found::None => {
                return Err(Error::config(format!(
                    "{shown}: not a member of this array (no blocklab identity block: a foreign or truncated \
                     file); move it away to start without it"
                )))
            }
        };
        if id.uuid != uuid {
            return Err(Error::config(format!(
                "{shown}: a member of another array (uuid {}, this array is {}); move it away to start without it",
                uuid_text(id.uuid),
                uuid_text(uuid)
            )));
        }
        if id.role >= n {
            return Err(Error::config(format!(
                "{shown}: claims role {} but the array has members 0..{}",
                id.role,
                n - 1
            )));
        }
        if let Some((other, _)) = role_at[id.role as usize] {
            return Err(Error::config(format!(
                "{} and {} both hold member {} of this array (a copy?); move the wrong one away",
                name(&path_of(dir, kind, other)),
                name(&p),
                id.role
            )));
        }
        role_at[id.role as usize] = Some((d, id));
        found.push((d, id));
    }
    // Put each file under its role's name: follow each cycle of the
    // permutation with exchanges (each one atomic).
    let mut holder: Vec<Option<u32>> = vec![None; n as usize]; // file index -> role held there
    for &(d, id) in &found {
        holder[d as usize] = Some(id.role);
    }
    for d in 0..n {
        while let Some(r) = holder[d as usize] {
            if r == d {
                break;
            }
            let (a, b) = (path_of(dir, kind, d), path_of(dir, kind, r));
            exchange(&a, &b).map_err(|e| {
                Error::config(format!(
                    "{} holds member {r} and {} is in its place: could not exchange them ({e}); rename them by hand",
                    name(&a),
                    name(&b)
                ))
            })?;
            moved.push(format!("{} held member {r}: now {}", name(&a), name(&b)));
            holder.swap(d as usize, r as usize);
        }
    }
    if !moved.is_empty() {
        File::open(dir)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    Ok(role_at.into_iter().map(|x| x.map(|(_, id)| id)).collect())
}

/// Assemble the members of the array in `dir` (UUID `uuid`, `n` members,
/// state-file generation `events`): put files back in their roles, refuse
/// foreign or doubled ones, and find the stale members among `expected`
/// (those the state file counts as present). Files in the slots of
/// `failed` members are not opened: a foreign one there is ignored.
#[allow(clippy::too_many_arguments)]
pub fn assemble(
    dir: &Path,
    uuid: u128,
    n: u32,
    events: u64,
    expected: &[u32],
    failed: &[u32],
    disk_bytes: u64,
    bs: u64,
    checksums: bool,
) -> Result<Assembly> {
    let all: Vec<u32> = (0..n).collect();
    let mut asm = Assembly::default();
    let ids = sort_files(
        dir,
        Kind::Image,
        &all,
        n,
        uuid,
        image_id_offset(disk_bytes),
        failed,
        &mut asm.moved,
    )?;
    if checksums {
        sort_files(
            dir,
            Kind::Sums,
            &all,
            n,
            uuid,
            sums_id_offset(disk_bytes, bs),
            failed,
            &mut asm.moved,
        )?;
    }
    for &d in expected {
        if let Some(id) = ids[d as usize] {
            if id.events < events {
                asm.stale.push(d);
            } else if id.events > events + 1 {
                return Err(Error::config(format!(
                    "{}: events {} are newer than the state file's {events} (array.json is older than its \
                     members?)",
                    member_path(dir, d).display(),
                    id.events
                )));
            }
        }
    }
    Ok(asm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_block_round_trips_and_damage_reads_as_none() {
        let id = Identity {
            uuid: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            role: 3,
            events: 42,
        };
        let b = encode(&id, Kind::Image);
        assert_eq!(decode(&b, Kind::Image), Found::Id(id));
        assert_eq!(
            decode(&b, Kind::Sums),
            Found::None,
            "a sums block is not an image block"
        );
        let mut c = b.to_vec();
        c[30] ^= 1;
        assert_eq!(decode(&c, Kind::Image), Found::None);
        assert_eq!(decode(&[0u8; 4096], Kind::Image), Found::None);
        assert_eq!(image_id_offset(65536), 65536);
        assert_eq!(image_id_offset(65537), 69632);
        assert_eq!(sums_id_offset(65536, 4096), 4096);
        assert_eq!(parse_uuid(&uuid_text(id.uuid)), Some(id.uuid));
    }
}

//! D-GRAID on member files: written bytes read back through restarts,
//! failures, crashes, swapped members and live-block rebuilds.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::ops::create;
use super::RealDgraid;
use crate::dgraid::classify::{store_each, Action, Classifier};
use crate::exec::real::members::{member_path, Faults};
use crate::exec::real::rebuild::RebuildOptions;
use crate::exec::real::ReqError;
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::{Geometry, StaticKind};

const BS: u64 = 4096;

/// A D-GRAID array of `disks` members over a 16 MiB file system, placing
/// blocks by address.
fn make(dir: &Path, raid: &str, disks: u32, meta_copies: u32) -> PathBuf {
    let arr = make_inferring(dir, raid, disks, meta_copies);
    // Random bytes are no file system: place them by address.
    let mut st = super::state::DgState::load(&arr).unwrap();
    st.classifier = "by-address".into();
    st.save(&arr).unwrap();
    arr
}

/// The same array with its default classifier (inference from the ext2
/// metadata written to it).
fn make_inferring(dir: &Path, raid: &str, disks: u32, meta_copies: u32) -> PathBuf {
    let arr = dir.join("arr");
    let stack = dir.join("dg.toml");
    std::fs::write(
        &stack,
        format!(
            "[array]\nraid = \"{raid}\"\ndisks = {disks}\n[array.dgraid]\nfs_size = \"16MiB\"\nmeta_copies = {meta_copies}\n[device]\nmodel = \"const:1\"\n"
        ),
    )
    .unwrap();
    create(&arr, &stack, None).unwrap();
    arr
}

/// Contents of block `b` in version `v` (never all zeroes).
fn content(b: u64, v: u64) -> Vec<u8> {
    let mut x = b.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ v.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ 1;
    (0..BS / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

fn read_block(a: &RealDgraid, b: u64) -> Result<Vec<u8>, ReqError> {
    let mut buf = vec![0u8; BS as usize];
    a.read(b * BS, &mut buf).map(|_| buf)
}

/// Blocks a test writes: every static block of the first groups and a
/// spread of the rest.
fn some_blocks(a: &RealDgraid) -> Vec<u64> {
    let n = a.size_bytes() / BS;
    (0..n).filter(|b| b % 7 < 3 || *b < 300).collect()
}

#[test]
fn written_blocks_read_back_identical_after_a_restart_and_unwritten_ones_are_zero() {
    let t = tempfile::tempdir().unwrap();
    let dir = make(t.path(), "dgraid1", 4, 4);
    let a = RealDgraid::open(&dir).unwrap();
    assert_eq!(a.size_bytes(), 16 << 20, "the export is fs_size");
    let blocks = some_blocks(&a);
    for &b in &blocks {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    // A partial write merges with the block's contents.
    a.write(5 * BS + 100, &[0xab; 50], false).unwrap();
    let mut want5 = content(5, 1);
    want5[100..150].fill(0xab);
    let copies: FxHashMap<u64, _> = blocks.iter().map(|&b| (b, a.copies(b))).collect();
    a.close().unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    assert_eq!(
        a.recovery,
        Default::default(),
        "closed cleanly: nothing to recover (the map read back is no journal replayed)"
    );
    let geo = super::default_geometry(&a.lock().st).unwrap();
    for &b in &blocks {
        let want = if b == 5 { want5.clone() } else { content(b, 1) };
        assert!(read_block(&a, b).unwrap() == want, "block {b}");
        assert_eq!(a.copies(b), copies[&b], "block {b}: the map survived the restart");
        let disks: std::collections::BTreeSet<u32> = copies[&b].iter().map(|c| c.disk).collect();
        let n = if geo.classify(b) == StaticKind::Dynamic { 2 } else { 4 };
        assert_eq!(disks.len(), n, "block {b}: copies on distinct disks");
    }
    assert!(read_block(&a, 1).unwrap() == content(1, 1));
    assert!(
        read_block(&a, 4094).unwrap() == vec![0u8; BS as usize],
        "never written: zeroes"
    );
    // Past the export: refused.
    assert!(matches!(
        a.read(16 << 20, &mut [0u8; 512]),
        Err(ReqError::OutOfRange(_))
    ));
    a.close().unwrap();
}

#[test]
fn after_k_failures_every_block_with_a_surviving_copy_reads_identical_and_the_rest_fail() {
    let t = tempfile::tempdir().unwrap();
    // dgraid0: one copy of data; metadata on every member.
    let dir = make(t.path(), "dgraid0", 4, 4);
    let a = RealDgraid::open(&dir).unwrap();
    let blocks = some_blocks(&a);
    for &b in &blocks {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    a.flush().unwrap();
    let geo = super::default_geometry(&a.lock().st).unwrap();
    a.fail(1).unwrap();
    a.fail(3).unwrap();
    let (mut lost, mut kept) = (0, 0);
    for &b in &blocks {
        let survives = a.copies(b).iter().any(|c| c.disk != 1 && c.disk != 3);
        match read_block(&a, b) {
            Ok(d) => {
                assert!(survives, "block {b} read although no copy survives");
                assert!(d == content(b, 1), "block {b}: other bytes");
                kept += 1;
            }
            Err(e) => {
                assert!(!survives, "block {b} failed although a copy survives: {e}");
                assert!(matches!(e, ReqError::Unreadable(_)));
                assert_eq!(geo.classify(b), StaticKind::Dynamic, "metadata is on every member");
                lost += 1;
            }
        }
    }
    assert!(lost > 0 && kept > lost, "lost {lost}, kept {kept}");
    // Restarted degraded: the same.
    a.close().unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    assert_eq!(a.status().failed, vec![1, 3]);
    for &b in &blocks {
        let survives = a.copies(b).iter().any(|c| c.disk != 1 && c.disk != 3);
        assert!(read_block(&a, b).ok() == survives.then(|| content(b, 1)), "block {b}");
    }
    a.close().unwrap();
}

/// Tags each block as the test says (owners change: retags and remaps).
struct Scripted {
    geo: Geometry,
    owner: std::sync::Arc<std::sync::Mutex<FxHashMap<u64, u64>>>,
    announced: bool,
}

impl Classifier for Scripted {
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action> {
        let owners = self.owner.lock().unwrap();
        store_each(&self.geo, &mut self.announced, block, data, |b| {
            if self.geo.classify(b) == StaticKind::Dynamic {
                Tag::of(owners.get(&b).copied().unwrap_or(20), BlockKind::Data, 2)
            } else {
                super::ByAddress::tag(&self.geo, b)
            }
        })
    }
    fn deferred(&self, _block: u64) -> Option<&[u8]> {
        None
    }
    fn flush(&mut self) -> Vec<Action> {
        Vec::new()
    }
}

/// A seeded run of writes whose owners keep changing (blocks freed and
/// reused by other files move between home sites), flushes now and then,
/// and a crash (the array dropped without closing: what `kill -9` leaves
/// in the member files and the map). At restart every block holds its
/// contents as of the last flush or of a later write to it, never anything
/// else.
#[test]
fn a_crash_leaves_each_block_old_or_new_never_other_bytes() {
    for seed in 1..=6u64 {
        let t = tempfile::tempdir().unwrap();
        let dir = make(t.path(), "dgraid0", 4, 1);
        let owners = std::sync::Arc::new(std::sync::Mutex::new(FxHashMap::default()));
        let a = RealDgraid::open(&dir).unwrap();
        let geo = super::default_geometry(&a.lock().st).unwrap();
        a.lock().classifier = Box::new(Scripted {
            geo: geo.clone(),
            owner: owners.clone(),
            announced: false,
        });
        // Dynamic blocks of group 0.
        let pool: Vec<u64> = (0..2000)
            .filter(|&b| geo.classify(b) == StaticKind::Dynamic)
            .take(400)
            .collect();
        // Per block: the versions allowed after the crash.
        let mut allowed: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut version = 0;
        for step in 0..3000 {
            let b = pool[(next() % pool.len() as u64) as usize];
            owners.lock().unwrap().insert(b, 20 + next() % 12);
            version += 1;
            a.write(b * BS, &content(b, version), false).unwrap();
            allowed.entry(b).or_default().push(version);
            if step % 700 == 699 {
                a.flush().unwrap();
                for v in allowed.values_mut() {
                    let last = *v.last().unwrap();
                    *v = vec![last];
                }
            }
        }
        drop(a); // the crash
        let a = RealDgraid::open(&dir).unwrap();
        assert!(a.recovery.journal_records > 0);
        for (&b, vs) in &allowed {
            let got = read_block(&a, b).unwrap();
            assert!(
                vs.iter().any(|&v| got == content(b, v)),
                "seed {seed}: block {b} holds bytes of no version it was written with since the last flush"
            );
        }
        a.close().unwrap();
    }
}

#[test]
fn swapped_member_files_are_put_back_and_a_stale_copy_is_left_out() {
    let t = tempfile::tempdir().unwrap();
    let dir = make(t.path(), "dgraid1", 4, 4);
    let a = RealDgraid::open(&dir).unwrap();
    let blocks = some_blocks(&a);
    for &b in &blocks {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    a.close().unwrap();
    let (p0, p1, tmp) = (member_path(&dir, 0), member_path(&dir, 1), dir.join("x"));
    std::fs::rename(&p0, &tmp).unwrap();
    std::fs::rename(&p1, &p0).unwrap();
    std::fs::rename(&tmp, &p1).unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    assert_eq!(a.recovery.reassembled.len(), 1, "{:?}", a.recovery.reassembled);
    for &b in &blocks {
        assert!(read_block(&a, b).unwrap() == content(b, 1), "block {b}");
    }
    a.close().unwrap();
    // A copy of member 2 taken now, put back after more writes: stale.
    let old = std::fs::read(member_path(&dir, 2)).unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    for &b in &blocks {
        a.write(b * BS, &content(b, 2), false).unwrap();
    }
    a.close().unwrap();
    std::fs::write(member_path(&dir, 2), old).unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    assert_eq!(a.recovery.stale_members, vec![2]);
    assert_eq!(a.status().failed, vec![2]);
    for &b in &blocks {
        assert!(
            read_block(&a, b).unwrap() == content(b, 2),
            "block {b}: never the stale copy"
        );
    }
    a.close().unwrap();
    // A file of another array in a member's place: refused.
    let t2 = tempfile::tempdir().unwrap();
    let other = make(t2.path(), "dgraid1", 4, 4);
    std::fs::copy(member_path(&other, 0), member_path(&dir, 0)).unwrap();
    let e = RealDgraid::open(&dir).err().unwrap().to_string();
    assert!(e.contains("disk-0.img") && e.contains("another array"), "{e}");
}

#[test]
fn a_live_block_rebuild_gives_a_member_whose_live_blocks_equal_the_lost_ones() {
    let t = tempfile::tempdir().unwrap();
    let dir = make(t.path(), "dgraid1", 4, 2);
    let a = RealDgraid::open(&dir).unwrap();
    let blocks = some_blocks(&a);
    for &b in &blocks {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    a.flush().unwrap();
    let live = a.lock().layer.as_ref().unwrap().live_member_blocks(2);
    let before = std::fs::read(member_path(&dir, 2)).unwrap();
    a.fail(2).unwrap();
    a.replace(2).unwrap();
    assert_eq!(a.status().recovering, vec![2]);
    // While recovering the spare is not read.
    for &b in blocks.iter().take(50) {
        assert!(read_block(&a, b).unwrap() == content(b, 1));
    }
    let r = a.rebuild(&RebuildOptions::default(), &AtomicBool::new(false)).unwrap();
    assert!(r.finished);
    assert_eq!(r.rows_done, live.len() as u64, "live blocks only");
    assert!(r.rows_done < r.rows_total / 2, "{} of {}", r.rows_done, r.rows_total);
    assert_eq!(r.order_stats["live_blocks"], live.len() as u64);
    let after = std::fs::read(member_path(&dir, 2)).unwrap();
    for &p in &live {
        let s = (p * BS) as usize..((p + 1) * BS) as usize;
        assert!(after[s.clone()] == before[s], "member block {p}");
    }
    // Now served from the rebuilt member alone where its partner fails.
    a.fail(3).unwrap();
    for &b in &blocks {
        assert!(read_block(&a, b).unwrap() == content(b, 1), "block {b}");
    }
    a.close().unwrap();
}

#[test]
fn a_block_whose_copies_are_all_lost_stays_unreadable_after_a_rebuild() {
    let t = tempfile::tempdir().unwrap();
    let dir = make(t.path(), "dgraid0", 2, 2);
    let a = RealDgraid::open(&dir).unwrap();
    let blocks = some_blocks(&a);
    for &b in &blocks {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    a.fail(0).unwrap();
    a.replace(0).unwrap();
    let r = a.rebuild(&RebuildOptions::default(), &AtomicBool::new(false)).unwrap();
    assert!(r.unrecoverable_blocks > 0);
    a.close().unwrap();
    let a = RealDgraid::open(&dir).unwrap();
    for &b in &blocks {
        let on0 = a.copies(b).iter().all(|c| c.disk == 0);
        match read_block(&a, b) {
            Ok(d) => assert!(!on0 && d == content(b, 1), "block {b}"),
            Err(_) => assert!(on0, "block {b}"),
        }
    }
    // Written again, it reads.
    let b = *blocks
        .iter()
        .find(|&&b| a.copies(b).iter().all(|c| c.disk == 0))
        .unwrap();
    a.write(b * BS, &content(b, 9), false).unwrap();
    assert!(read_block(&a, b).unwrap() == content(b, 9));
    a.close().unwrap();
}

/// A small tree for mke2fs -d: directories, small files, and files large
/// enough for indirect blocks.
fn make_tree(root: &Path) {
    for d in 0..6u64 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in 0..8u64 {
            let len = [100, 5000, 20_000, 70_000, 200_000][((d + f) % 5) as usize];
            let bytes: Vec<u8> = (0..len).map(|i| (i as u64 * 31 + d * 7 + f) as u8).collect();
            let at = if f % 3 == 0 { dir.join("sub") } else { dir.clone() };
            std::fs::write(at.join(format!("f{f}")), bytes).unwrap();
        }
    }
}

/// `mke2fs -t ext2 -b 4096 -d TREE` of 16 MiB, or None without mke2fs.
fn ext2_image(t: &Path) -> Option<Vec<u8>> {
    let tree = t.join("tree");
    make_tree(&tree);
    let img = t.join("img");
    let ok = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-b", "4096", "-d"])
        .arg(&tree)
        .arg(&img)
        .arg("16M")
        .stdout(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("mke2fs not available: skipped");
        return None;
    }
    Some(std::fs::read(&img).unwrap())
}

/// An ext2 image written through inference (the array's default
/// classifier) reads back byte-identical across a restart (inference
/// learns the file system again from the stored metadata); with metadata
/// on every member, after two of four members fail every static metadata
/// and directory block still reads, every other block reads identical or
/// fails, never other bytes.
#[test]
fn an_ext2_image_through_inference_reads_back_and_keeps_its_metadata_after_failures() {
    let t = tempfile::tempdir().unwrap();
    let Some(img) = ext2_image(t.path()) else { return };
    let arr = make_inferring(t.path(), "dgraid0", 4, 4);
    let a = RealDgraid::open(&arr).unwrap();
    for (i, piece) in img.chunks(64 << 10).enumerate() {
        a.write(i as u64 * (64 << 10), piece, false).unwrap();
    }
    if let Err(e) = a.flush() {
        panic!("{e}: {}", serde_json::to_string(&a.status()).unwrap());
    }
    {
        let g = a.lock();
        assert!(g.classifier.refused().is_none());
        assert!(g.geometry.is_some(), "the layout was inferred");
        let dirs = g.tags.values().filter(|t| t.kind == BlockKind::Directory).count();
        assert!(dirs >= 13, "directory blocks inferred: {dirs}");
    }
    a.close().unwrap();
    let a = RealDgraid::open(&arr).unwrap();
    assert!(a.counts().relearned_blocks > 0);
    let mut back = vec![0u8; img.len()];
    a.read(0, &mut back).unwrap();
    assert!(back == img, "the image reads back identical after a restart");
    // Written again after the restart (inference learnt it again): same.
    a.write(0, &img[..1 << 20], false).unwrap();
    a.flush().unwrap();
    a.fail(0).unwrap();
    a.fail(2).unwrap();
    let (mut lost, mut meta) = (0, 0);
    let tags = a.lock().tags.clone();
    for b in 0..img.len() as u64 / BS {
        let want = &img[(b * BS) as usize..((b + 1) * BS) as usize];
        // Naming and system metadata (replicated); a file's indirect blocks
        // live on its home site, with its data.
        let is_meta = tags
            .get(&b)
            .is_some_and(|t| t.kind.is_static() || t.kind == BlockKind::Directory);
        match read_block(&a, b) {
            Ok(d) => {
                assert!(d == want, "block {b}: other bytes");
                meta += is_meta as u64;
            }
            Err(e) => {
                assert!(!is_meta, "metadata block {b} ({:?}) lost: {e}", tags.get(&b));
                lost += 1;
            }
        }
    }
    assert!(lost > 0 && meta > 0, "lost {lost}, metadata read {meta}");
    a.close().unwrap();
}

/// `infer = false` with a tags file: each listed block is placed as its
/// line says (a directory block replicated, a file's blocks on one home
/// site); a bad line is refused naming the file, the line and the field.
#[test]
fn a_tags_file_places_blocks_as_it_says_and_a_bad_line_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let stack = t.path().join("dg.toml");
    std::fs::write(
        &stack,
        "[array]\nraid = \"dgraid0\"\ndisks = 4\n[array.dgraid]\nfs_size = \"16MiB\"\nmeta_copies = 3\n\
         infer = false\ntags = \"t.csv\"\n[device]\nmodel = \"const:1\"\n",
    )
    .unwrap();
    std::fs::write(
        t.path().join("t.csv"),
        "# block,owner,kind,parent\n1000,12,directory,2\n1001,13,data,12\n1002,13,data,12\n2000,13,data,12\n",
    )
    .unwrap();
    let arr = t.path().join("arr");
    create(&arr, &stack, None).unwrap();
    let a = RealDgraid::open(&arr).unwrap();
    for b in [1000u64, 1001, 1002, 2000, 1003] {
        a.write(b * BS, &content(b, 1), false).unwrap();
    }
    let disks = |b: u64| a.copies(b).iter().map(|c| c.disk).collect::<Vec<_>>();
    assert_eq!(disks(1000).len(), 3, "a directory block: meta_copies copies");
    assert_eq!(disks(1001).len(), 1);
    assert_eq!(disks(1001), disks(2000), "one file, one home site");
    assert_eq!(disks(1001), disks(1002));
    a.close().unwrap();
    std::fs::write(t.path().join("t.csv"), "1000,12,directory\n1001,x,data\n").unwrap();
    let e = create(&t.path().join("arr2"), &stack, None).unwrap_err().to_string();
    assert!(
        e.contains("t.csv") && e.contains("line 2") && e.contains("owner"),
        "{e}"
    );
    assert!(!t.path().join("arr2").join("dgraid.json").exists());
}

/// mke2fs writes its tables before the primary superblock and FLUSHes in
/// between: writes held before the layout is known are acknowledged by a
/// FLUSH only because the staging log keeps them. Here an ext2 image is
/// written superblock last (64 KiB pieces from the end), with a FLUSH
/// before the first piece; the array is dropped (a crash) and reopened: the
/// flushed pieces read back (replayed from the log), a later unflushed one
/// may be lost; then the superblock arrives, inference places everything,
/// and the next FLUSH empties the log.
#[test]
fn writes_before_the_layout_survive_a_crash_after_a_flush_and_are_placed_once_it_is_known() {
    let t = tempfile::tempdir().unwrap();
    let Some(img) = ext2_image(t.path()) else { return };
    let arr = make_inferring(t.path(), "dgraid0", 4, 4);
    const PIECE: usize = 64 << 10;
    let pieces: Vec<(u64, &[u8])> = img
        .chunks(PIECE)
        .enumerate()
        .map(|(i, p)| ((i * PIECE) as u64, p))
        .collect();
    let (first, rest) = pieces.split_first().unwrap(); // the superblock's piece
    let a = RealDgraid::open(&arr).unwrap();
    let (flushed, unflushed) = rest.split_at(rest.len() - 3);
    for (off, p) in flushed.iter().rev() {
        a.write(*off, p, false).unwrap();
    }
    a.flush()
        .expect("a FLUSH before the layout is known is durable in the staging log");
    for (off, p) in unflushed.iter().rev() {
        a.write(*off, p, false).unwrap();
    }
    assert!(a.counts().staged_blocks > 0);
    drop(a); // the crash
    let a = RealDgraid::open(&arr).unwrap();
    assert!(a.counts().stage_replayed > 0, "{:?}", a.counts());
    for (off, p) in flushed {
        let mut got = vec![0u8; p.len()];
        a.read(*off, &mut got).unwrap();
        assert!(got == *p, "flushed piece at {off} reads back after the crash");
    }
    for (off, p) in unflushed {
        let mut got = vec![0u8; p.len()];
        a.read(*off, &mut got).unwrap();
        assert!(
            got == *p || got.iter().all(|&x| x == 0),
            "piece at {off}: written or lost, nothing else"
        );
        a.write(*off, p, false).unwrap();
    }
    assert!(a.lock().geometry.is_none(), "no superblock yet");
    a.write(first.0, first.1, false).unwrap();
    a.flush().unwrap();
    {
        let g = a.lock();
        assert!(g.geometry.is_some() && g.stage.is_empty(), "placed: the log is empty");
        let dirs = g.tags.values().filter(|t| t.kind == BlockKind::Directory).count();
        assert!(dirs >= 13, "directory blocks inferred: {dirs}");
    }
    drop(a); // another crash: the map holds everything now
    let a = RealDgraid::open(&arr).unwrap();
    assert_eq!(a.counts().stage_replayed, 0);
    let mut back = vec![0u8; img.len()];
    a.read(0, &mut back).unwrap();
    assert!(back == img, "the image reads back identical");
    a.close().unwrap();
}

/// 64 KiB pieces of `img`: the superblock's first, the rest after.
fn pieces(img: &[u8]) -> Vec<(u64, &[u8])> {
    const PIECE: usize = 64 << 10;
    img.chunks(PIECE)
        .enumerate()
        .map(|(i, p)| ((i * PIECE) as u64, p))
        .collect()
}

/// An ext2 image written superblock last with a FLUSH before the
/// superblock (every other piece staged, acknowledged by that FLUSH); then
/// the superblock, whose write places the held blocks, and a member write
/// fails part-way through that placement (the fault hook at the k-th copy
/// write, torn mid-block; every later member write fails too). The write
/// fails (EIO), and no flushed block is lost or reads back other bytes:
/// before a restart (a block whose placement did not finish is read from
/// the staging log), at the next FLUSH (which places them again: it fails
/// while the members still refuse writes and keeps the log, or succeeds
/// once they take writes again and empties it), and after a crash.
#[test]
fn a_member_write_error_while_placing_staged_writes_loses_no_flushed_block() {
    let t = tempfile::tempdir().unwrap();
    let Some(img) = ext2_image(t.path()) else { return };
    let all = pieces(&img);
    let (first, rest) = all.split_first().unwrap();
    let flushed_read_back = |a: &RealDgraid, k: u64, when: &str| {
        for (off, p) in rest {
            let mut got = vec![0u8; p.len()];
            a.read(*off, &mut got)
                .unwrap_or_else(|e| panic!("k {k} {when}: piece at {off}: {e}"));
            assert!(
                got == *p,
                "k {k} {when}: the flushed piece at {off} reads back other bytes"
            );
        }
    };
    for (k, recovers) in [
        (1, false),
        (2, true),
        (9, false),
        (60, true),
        (700, false),
        (2500, true),
    ] {
        let sub = t.path().join(format!("k{k}"));
        std::fs::create_dir(&sub).unwrap();
        let arr = make_inferring(&sub, "dgraid0", 4, 4);
        let a = RealDgraid::open(&arr).unwrap();
        for (off, p) in rest.iter().rev() {
            a.write(*off, p, false).unwrap();
        }
        a.flush().unwrap();
        let faults = Arc::new(Faults::none());
        faults.crash_after(k, k * 7919);
        a.lock().faults = faults.clone();
        let e = a
            .write(first.0, first.1, false)
            .expect_err("the fault landed while placing");
        assert!(faults.has_crashed(), "k {k}: {e}");
        flushed_read_back(&a, k, "after the failed placement");
        if recovers {
            a.lock().faults = Arc::new(Faults::none());
            a.flush()
                .expect("the members take writes again: the placement completes");
            assert!(
                a.lock().stage.is_empty(),
                "k {k}: placed and committed: the log is empty"
            );
            assert!(a.counts().stage_retried > 0);
        } else {
            let e = a.flush().expect_err("the members still refuse writes").to_string();
            assert!(e.contains("staged") || e.contains("crash"), "k {k}: {e}");
            assert!(!a.lock().stage.is_empty(), "k {k}: the log keeps what is not placed");
        }
        flushed_read_back(&a, k, "after the flush");
        drop(a); // kill -9
        let a = RealDgraid::open(&arr).unwrap();
        flushed_read_back(&a, k, "after a restart");
        a.write(first.0, first.1, false).unwrap();
        a.flush().unwrap();
        assert!(a.lock().stage.is_empty());
        let mut back = vec![0u8; img.len()];
        a.read(0, &mut back).unwrap();
        assert!(back == img, "k {k}: the image reads back identical");
        a.close().unwrap();
    }
}

/// Holds every write until block `GATE` is written (as inference holds
/// mke2fs's tables until the superblock), then places by address; frees
/// the blocks listed in `free` at the next write after that.
struct Gated {
    geo: Geometry,
    announced: bool,
    open: bool,
    held: Vec<(u64, Vec<u8>)>,
    free: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
}

const GATE: u64 = 0;

impl Classifier for Gated {
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action> {
        let geo = self.geo.clone();
        let tag = |b| super::ByAddress::tag(&geo, b);
        let bs = BS as usize;
        if !self.open {
            let n = (data.len() / bs) as u64;
            if !(block..block + n).contains(&GATE) {
                for (i, d) in data.chunks(bs).enumerate() {
                    let b = block + i as u64;
                    self.held.retain(|(x, _)| *x != b);
                    self.held.push((b, d.to_vec()));
                }
                return Vec::new();
            }
            self.open = true;
            let mut out = Vec::new();
            for (b, d) in std::mem::take(&mut self.held) {
                out.extend(store_each(&self.geo, &mut self.announced, b, &d, tag));
            }
            out.extend(store_each(&self.geo, &mut self.announced, block, data, tag));
            return out;
        }
        let mut out: Vec<Action> = self
            .free
            .lock()
            .unwrap()
            .drain(..)
            .map(|block| Action::Free { block })
            .collect();
        out.extend(store_each(&self.geo, &mut self.announced, block, data, tag));
        out
    }
    fn deferred(&self, block: u64) -> Option<&[u8]> {
        self.held.iter().find(|(b, _)| *b == block).map(|(_, d)| d.as_slice())
    }
    fn flush(&mut self) -> Vec<Action> {
        Vec::new()
    }
    fn layout_known(&self) -> bool {
        self.open
    }
}

/// The staging log is bound to the map's epoch. Blocks staged (FLUSHed)
/// and a copy of the log kept; the layout then known (the blocks placed,
/// committed, the log emptied); two of them freed and one written again,
/// committed; then the old log put back — after a clean stop (the map
/// compacted since the log began: nothing of it replays) or after a crash
/// (the map's commits since the log began name every block it holds:
/// nothing replays). Freed blocks read zeroes and the rewritten one its
/// new bytes: nothing comes back. A crash after the layout arrived but
/// before any commit replays all of the log (it is newer than the map).
#[test]
fn a_stale_staging_log_brings_back_no_freed_or_reused_block_and_a_newer_one_replays() {
    let staged: Vec<u64> = (1000..1006).collect();
    for case in ["clean stop", "crash", "crash before the commit"] {
        let t = tempfile::tempdir().unwrap();
        let dir = make(t.path(), "dgraid1", 4, 2);
        let a = RealDgraid::open(&dir).unwrap();
        let free = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let geo = super::default_geometry(&a.lock().st).unwrap();
        a.lock().classifier = Box::new(Gated {
            geo,
            announced: false,
            open: false,
            held: Vec::new(),
            free: free.clone(),
        });
        for &b in &staged {
            a.write(b * BS, &content(b, 1), false).unwrap();
        }
        a.flush().unwrap();
        let stale = std::fs::read(super::stage::stage_path(&dir)).unwrap();
        a.write(GATE * BS, &content(GATE, 1), false).unwrap();
        if case == "crash before the commit" {
            drop(a);
            let a = RealDgraid::open(&dir).unwrap();
            assert_eq!(a.counts().stage_replayed, staged.len() as u64, "{case}");
            for &b in &staged {
                assert!(read_block(&a, b).unwrap() == content(b, 1), "{case}: block {b}");
            }
            a.close().unwrap();
            continue;
        }
        a.flush().unwrap();
        assert!(a.lock().stage.is_empty());
        free.lock().unwrap().extend([1000, 1001, 1002]);
        a.write(1002 * BS, &content(1002, 2), false).unwrap(); // freed, then reused
        a.flush().unwrap();
        for b in [1000, 1001] {
            assert!(read_block(&a, b).unwrap() == vec![0u8; BS as usize], "freed: zeroes");
        }
        if case == "clean stop" {
            a.close().unwrap();
        } else {
            drop(a);
        }
        std::fs::write(super::stage::stage_path(&dir), &stale).unwrap();
        let a = RealDgraid::open(&dir).unwrap();
        for &b in &staged {
            let want = match b {
                1000 | 1001 => vec![0u8; BS as usize],
                1002 => content(b, 2),
                _ => content(b, 1),
            };
            assert!(read_block(&a, b).unwrap() == want, "{case}: block {b} came back");
        }
        let c = a.counts();
        assert_eq!((c.stage_replayed, c.stage_skipped), (0, staged.len() as u64), "{case}");
        a.close().unwrap();
    }
}

/// A member write error part-way through overwriting placed blocks (the
/// fault hook, torn mid-block, at several points): the write fails, and
/// the block it tore reads as an error — never as a mix of old and new
/// bytes — before and after a crash, until it is written again; every
/// other block reads its old bytes or, written before the error, its new.
#[test]
fn a_member_write_error_overwriting_a_placed_block_reads_as_an_error_never_torn_bytes() {
    for (k, raid) in [(1, "dgraid0"), (5, "dgraid0"), (2, "dgraid1"), (7, "dgraid1")] {
        let t = tempfile::tempdir().unwrap();
        let dir = make(t.path(), raid, 4, 2);
        let a = RealDgraid::open(&dir).unwrap();
        let blocks: Vec<u64> = (600..640).collect();
        for &b in &blocks {
            a.write(b * BS, &content(b, 1), false).unwrap();
        }
        a.flush().unwrap();
        let faults = Arc::new(Faults::none());
        faults.crash_after(k, 3);
        a.lock().faults = faults.clone();
        let mut failed = None;
        for &b in &blocks {
            if a.write(b * BS, &content(b, 2), false).is_err() {
                failed = Some(b);
                break;
            }
        }
        let failed = failed.expect("the fault landed");
        a.lock().faults = Arc::new(Faults::none());
        let check = |a: &RealDgraid, when: &str| {
            for &b in &blocks {
                match read_block(a, b) {
                    Ok(d) => assert!(
                        d == content(b, 1) || (b < failed && d == content(b, 2)),
                        "{raid} k {k} {when}: block {b} reads other bytes"
                    ),
                    Err(e) => assert_eq!(b, failed, "{raid} k {k} {when}: block {b}: {e}"),
                }
            }
        };
        check(&a, "after the error");
        assert!(read_block(&a, failed).is_err(), "{raid} k {k}: the torn block");
        a.flush().unwrap();
        drop(a); // kill -9
        let a = RealDgraid::open(&dir).unwrap();
        check(&a, "after a crash");
        a.write(failed * BS, &content(failed, 3), false).unwrap();
        assert!(read_block(&a, failed).unwrap() == content(failed, 3));
        a.close().unwrap();
    }
}

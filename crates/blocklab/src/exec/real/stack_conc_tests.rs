//! A stack on real bytes serving several requests at once: decisions one at
//! a time, their I/O outside the mutex (`inflight.rs`). Reads return the
//! newest acknowledged bytes (or, racing a write, one of the racing
//! writes'), never a block's old bytes from before a destage or a fill.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::stack::{array_config, RealStack};
use super::{OpenConfig, RealArray};
use crate::stack::spec::StackSpec;
use crate::stack::test_util::parse_spec;
use crate::trace::Op;

const MEMBER: u64 = 4 << 20;
const BS: u64 = 4096;
const SECTOR: u64 = 512;

fn spec(layers: &str) -> StackSpec {
    let text = format!(
        "tenant_map = \"ignore\"\n{layers}\n[array]\nraid = \"raid5\"\ndisks = 4\nchunk = \"16KiB\"\n\
         [device]\nmodel = \"const:1\"\n"
    );
    parse_spec(&text, &[], "stack.toml", PathBuf::new()).unwrap()
}

/// The array of `s` in `dir` (and its tier's cache device, if any), opened.
fn open_array(dir: &Path, s: &StackSpec) -> Arc<RealArray> {
    let cfg = array_config(s, MEMBER).unwrap();
    RealArray::create(dir, cfg, false).unwrap();
    let a = Arc::new(RealArray::open(dir, OpenConfig::default()).unwrap());
    if let Some(frames) = super::tier_store::frames(s).unwrap() {
        super::tier_store::create(dir, frames, BS, a.uuid()).unwrap();
    }
    a
}

/// Spin (yielding) until `ready` holds: the other thread got that far.
fn until(ready: impl Fn() -> bool) {
    while !ready() {
        std::thread::yield_now();
    }
}

#[test]
fn a_miss_after_a_destage_still_in_flight_reads_the_destaged_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("[[cache]]\npolicy = \"lru\"\nsize = 2\nwrite = \"back\"\n");
    let a = open_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let new = vec![0x5au8; BS as usize];
    st.write(0, &new, false).unwrap(); // block 0 dirty in the cache only
                                       // Blocks 1 and 2 evict block 0: its destage is decided, not done.
    let d = st
        .decide(0, None, Op::Write, BS, 2 * BS, Some(&vec![7u8; 2 * BS as usize]))
        .unwrap();
    let before = st.io_in_flight();
    assert!(before >= 1, "the destage is in flight");
    std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut buf = vec![0u8; BS as usize];
            st.read(0, &mut buf).unwrap();
            buf
        });
        // The read's decision (a miss, read below) is made before the
        // destage lands: its read must follow the destage.
        until(|| st.io_in_flight() > before);
        d.complete(None).unwrap();
        assert!(
            reader.join().unwrap() == new,
            "the miss read the block's bytes from before its destage"
        );
    });
}

#[test]
fn a_hit_on_a_fill_still_on_the_way_waits_for_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("[[cache]]\npolicy = \"lru\"\nsize = 4\nwrite = \"through\"\n");
    let a = open_array(dir.path(), &s);
    let bytes = vec![0xc3u8; BS as usize];
    a.write(5 * BS, &bytes, false).unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    // A miss on block 5: the cache holds it, its bytes are on the way.
    let d = st.decide(0, None, Op::Read, 5 * BS, BS, None).unwrap();
    std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut buf = vec![0u8; BS as usize];
            st.read(5 * BS, &mut buf).unwrap();
            buf
        });
        until(|| st.result().requests == 2);
        // Another request, decided and done while the fill is not.
        let mut other = vec![1u8; BS as usize];
        st.read(9 * BS, &mut other).unwrap();
        assert_eq!(other, vec![0u8; BS as usize]);
        let mut buf = vec![0u8; BS as usize];
        d.complete(Some(&mut buf)).unwrap();
        assert!(buf == bytes, "the miss's own bytes");
        assert!(reader.join().unwrap() == bytes, "the hit on the fill got other bytes");
    });
    let r = st.result();
    assert_eq!((r.layers[0].read_hits, r.layers[0].misses), (1, 2));
}

/// The bytes write `id` puts in sector `s`: the id, the sector, a pattern
/// of both (a sector mixed from two writes, or from a write and old bytes,
/// is seen).
fn stamp(id: u64, s: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(SECTOR as usize);
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&s.to_le_bytes());
    v.extend((16..SECTOR).map(|i| (id.wrapping_mul(31) ^ s.wrapping_mul(7) ^ i) as u8));
    v
}

/// The write id a sector holds (0: never written, all zero); panics on
/// bytes no write made.
fn id_of(bytes: &[u8], s: u64, what: &str) -> u64 {
    if bytes.iter().all(|&b| b == 0) {
        return 0;
    }
    let id = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert!(
        stamp(id, s) == bytes,
        "{what}: sector {s} holds bytes no write made (mixed or stale)"
    );
    id
}

struct Write {
    id: u64,
    first: u64,
    n: u64,
    start: u64,
    end: u64,
}

struct Read {
    first: u64,
    ids: Vec<u64>,
    start: u64,
    end: u64,
}

fn rng(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Per sector, the writes of `log` covering it.
fn by_sector(log: &[Write], sectors: u64) -> Vec<Vec<&Write>> {
    let mut v: Vec<Vec<&Write>> = (0..sectors).map(|_| Vec::new()).collect();
    for w in log {
        for s in w.first..w.first + w.n {
            v[s as usize].push(w);
        }
    }
    v
}

/// Whether sector `s` may hold `id` at a read from `start` to `end` (the
/// logical clock): written by a write begun before the read ended and not
/// overwritten by a write both begun after it ended and ended before the
/// read began; 0 only when no write ended before the read began.
fn allowed(writes: &[&Write], id: u64, start: u64, end: u64) -> bool {
    if id == 0 {
        return writes.iter().all(|w| w.end > start);
    }
    let Some(w) = writes.iter().find(|w| w.id == id) else {
        return false;
    };
    w.start < end && !writes.iter().any(|w2| w.end < w2.start && w2.end < start)
}

#[test]
fn threads_hammering_a_write_back_cache_and_tier_over_raid5_read_the_newest_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        "[[cache]]\npolicy = \"lru\"\nsize = 24\nwrite = \"back\"\n\
         [tier]\nsize = 96\nwrite_policy = \"wb\"\nmodel = \"const:0.1\"\n",
    );
    let a = open_array(dir.path(), &s);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let span_blocks = 384u64;
    let sectors = span_blocks * BS / SECTOR;
    let clock = AtomicU64::new(1);
    let tick = || clock.fetch_add(1, Ordering::SeqCst);
    let writes = Mutex::new(Vec::<Write>::new());
    let reads = Mutex::new(Vec::<Read>::new());
    std::thread::scope(|sc| {
        for t in 0..6u64 {
            let (st, writes, reads, tick) = (&st, &writes, &reads, &tick);
            sc.spawn(move || {
                let mut seed = 0x9e37 + t * 7919;
                for i in 0..250u64 {
                    let kind = rng(&mut seed) % 20;
                    if kind == 0 {
                        st.flush().unwrap();
                        continue;
                    }
                    // Skewed: half the requests within the first 64 blocks.
                    let area = if rng(&mut seed).is_multiple_of(2) {
                        64
                    } else {
                        span_blocks
                    };
                    let nb = 1 + rng(&mut seed) % 6;
                    let b = rng(&mut seed) % (area - nb);
                    let (mut first, mut n) = (b * BS / SECTOR, nb * BS / SECTOR);
                    if kind >= 15 {
                        // Part of the first and of the last block.
                        let head = rng(&mut seed) % 8;
                        let tail = rng(&mut seed) % 8 * (head + 8 < n) as u64;
                        first += head;
                        n -= head + tail;
                    }
                    if kind >= 9 {
                        let id = (t + 1) << 32 | (i + 1);
                        let data: Vec<u8> = (first..first + n).flat_map(|s| stamp(id, s)).collect();
                        let start = tick();
                        st.write(first * SECTOR, &data, false).unwrap();
                        let end = tick();
                        writes.lock().unwrap().push(Write {
                            id,
                            first,
                            n,
                            start,
                            end,
                        });
                    } else {
                        let mut buf = vec![0u8; (n * SECTOR) as usize];
                        let start = tick();
                        st.read(first * SECTOR, &mut buf).unwrap();
                        let end = tick();
                        let ids = (0..n)
                            .map(|k| {
                                let r = (k * SECTOR) as usize..((k + 1) * SECTOR) as usize;
                                id_of(&buf[r], first + k, "a read through the stack")
                            })
                            .collect();
                        reads.lock().unwrap().push(Read { first, ids, start, end });
                    }
                }
            });
        }
    });
    let writes = writes.into_inner().unwrap();
    let reads = reads.into_inner().unwrap();
    let per = by_sector(&writes, sectors);
    let mut checked = 0;
    for r in &reads {
        for (k, &id) in r.ids.iter().enumerate() {
            let s = r.first + k as u64;
            assert!(
                allowed(&per[s as usize], id, r.start, r.end),
                "sector {s}: a read ({}..{}) returned write {id:#x}, neither the newest acknowledged nor a racing one",
                r.start,
                r.end
            );
            checked += 1;
        }
    }
    assert!(
        checked > 10_000 && writes.len() > 300,
        "{checked} sectors read, {} writes",
        writes.len()
    );
    // All done: each sector holds a write no other followed. Through the
    // stack, and — after a FLUSH and a crash, the tier's journal written
    // back at open — in the array alone.
    let last = |s: u64, id: u64| {
        let w = &per[s as usize];
        allowed(w, id, u64::MAX - 1, u64::MAX) && (id != 0 || w.is_empty())
    };
    let check = |buf: &[u8], what: &str| {
        for s in 0..sectors {
            let r = (s * SECTOR) as usize..((s + 1) * SECTOR) as usize;
            let id = id_of(&buf[r], s, what);
            assert!(last(s, id), "{what}: sector {s} holds write {id:#x}, not the newest");
        }
    };
    let mut buf = vec![0u8; (span_blocks * BS) as usize];
    st.read(0, &mut buf).unwrap();
    check(&buf, "through the stack");
    st.flush().unwrap();
    drop(st);
    drop(Arc::try_unwrap(a).ok().expect("no request holds the array"));
    let a = Arc::new(RealArray::open(dir.path(), OpenConfig::default()).unwrap());
    let st = RealStack::new(&s, a.clone()).unwrap();
    let mut buf = vec![0u8; (span_blocks * BS) as usize];
    a.read(0, &mut buf).unwrap();
    check(&buf, "the array after a crash and the tier's write-back");
    drop(st);
}

//! Attacks on a served stack whose member I/O runs outside its mutex
//! (`inflight.rs`): a destage that fails while requests are in flight must
//! neither let a later read return the block's older bytes nor let the
//! next FLUSH report success; a fill that fails gives its error to every
//! hit waiting on it; a tier frame reused while an old read of it is in
//! flight still gives that read the old block.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::members::Faults;
use super::stack::{array_config, RealStack};
use super::{OpenConfig, RealArray};
use crate::stack::spec::StackSpec;
use crate::stack::test_util::parse_spec;
use crate::trace::Op;

const MEMBER: u64 = 4 << 20;
const BS: u64 = 4096;

/// RAID-5 of 4 members, chunks of 4 blocks: blocks 0..4 on member 0.
fn spec(layers: &str) -> StackSpec {
    let text = format!(
        "tenant_map = \"ignore\"\n{layers}\n[array]\nraid = \"raid5\"\ndisks = 4\nchunk = \"16KiB\"\n\
         allow_loss = true\n[device]\nmodel = \"const:1\"\n"
    );
    parse_spec(&text, &[], "stack.toml", PathBuf::new()).unwrap()
}

fn open_array(dir: &Path, s: &StackSpec, faults: Option<Arc<Faults>>) -> Arc<RealArray> {
    let cfg = array_config(s, MEMBER).unwrap();
    RealArray::create(dir, cfg, false).unwrap();
    let a = Arc::new(
        RealArray::open(
            dir,
            OpenConfig {
                faults,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    if let Some(frames) = super::tier_store::frames(s).unwrap() {
        super::tier_store::create(dir, frames, BS, a.uuid()).unwrap();
    }
    a
}

const WRITE_BACK_2: &str = "[[cache]]\npolicy = \"lru\"\nsize = 2\nwrite = \"back\"\n";

/// Block 0 holds `old` in the array and, acknowledged, `new` dirty in a
/// write-back cache of two blocks.
fn dirty_over_old(st: &RealStack) -> (Vec<u8>, Vec<u8>) {
    let (old, new) = (vec![0x11u8; BS as usize], vec![0x5au8; BS as usize]);
    st.write(0, &old, false).unwrap();
    st.flush().unwrap();
    st.write(0, &new, false).unwrap();
    (old, new)
}

#[test]
fn a_read_after_a_failed_destage_gets_eio_not_the_older_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(WRITE_BACK_2);
    let faults = Arc::new(Faults::none());
    let a = open_array(dir.path(), &s, Some(faults.clone()));
    let st = RealStack::new(&s, a.clone()).unwrap();
    let (old, new) = dirty_over_old(&st);
    // From now on every member write fails (reads still work): the
    // destage of block 0 below cannot land.
    faults.crash_after(1, 0);
    let _ = a.write(40 * BS, &[9u8; BS as usize], false);
    assert!(faults.has_crashed());
    // Blocks 8 and 9 evict block 0: its destage is recorded and fails.
    let d = st.decide(0, None, Op::Read, 8 * BS, 2 * BS, None).unwrap();
    let mut two = vec![0u8; 2 * BS as usize];
    let _ = d.complete(Some(&mut two));
    // Block 0's newest bytes are nowhere now: an error, never the old ones.
    let mut b0 = vec![0u8; BS as usize];
    let r = st.read(0, &mut b0);
    assert!(
        r.is_err() || b0 == new,
        "block 0 read back its bytes from before the failed destage"
    );
    assert!(!(r.is_ok() && b0 == old));
}

#[test]
fn a_flush_after_a_failed_destage_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(WRITE_BACK_2);
    let a = open_array(dir.path(), &s, None);
    let st = RealStack::new(&s, a.clone()).unwrap();
    dirty_over_old(&st);
    // Members 0 and 1 fail: block 0 (on member 0, its row past the
    // redundancy) cannot be written.
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    // Another request evicts block 0; its destage, run outside the mutex
    // by that request, fails (that request's reply says so, not the writer's).
    let mut two = vec![0u8; 2 * BS as usize];
    let _ = st.read(8 * BS, &mut two);
    // The FLUSH covers block 0's acknowledged write: it must not succeed.
    assert!(
        st.flush().is_err(),
        "a FLUSH succeeded although a destage it covers failed"
    );
    // Reported once (as fsync reports a write-back error once).
    assert!(st.flush().is_ok());
}

fn until(ready: impl Fn() -> bool) {
    while !ready() {
        std::thread::yield_now();
    }
}

#[test]
fn every_waiter_on_a_fill_that_fails_gets_eio_and_a_later_write_heals_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("[[cache]]\npolicy = \"lru\"\nsize = 4\nwrite = \"back\"\n");
    let a = open_array(dir.path(), &s, None);
    a.write(5 * BS, &[0xc3u8; BS as usize], false).unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    // A miss on block 5 (member 1): its fill is recorded, not run.
    let d = st.decide(0, None, Op::Read, 5 * BS, BS, None).unwrap();
    let before = st.result().requests;
    std::thread::scope(|sc| {
        let hits: Vec<_> = (0..3)
            .map(|_| {
                sc.spawn(|| {
                    let mut buf = vec![0u8; BS as usize];
                    let r = st.read(5 * BS, &mut buf);
                    (r, buf)
                })
            })
            .collect();
        until(|| st.result().requests == before + 3);
        a.fail(1).unwrap();
        a.fail(2).unwrap();
        let mut buf = vec![0u8; BS as usize];
        let r = d.complete(Some(&mut buf));
        assert!(r.is_err(), "the fill itself");
        for h in hits {
            let (r, _) = h.join().unwrap();
            assert!(r.is_err(), "a waiter on a failed fill got bytes");
        }
    });
    // A later partial write of it: EIO (its older bytes are unknown); a whole one: read back.
    assert!(st.write(5 * BS + 512, &[1u8; 512], false).is_err());
    st.write(5 * BS, &[2u8; BS as usize], false).unwrap();
    let mut buf = vec![0u8; BS as usize];
    st.read(5 * BS, &mut buf).unwrap();
    assert_eq!(buf, vec![2u8; BS as usize]);
}

#[test]
fn a_tier_frame_reused_while_an_old_read_of_it_is_in_flight_reads_the_old_block() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("[tier]\nsize = 4\nwrite_policy = \"wb\"\nmodel = \"const:0.1\"\n");
    let a = open_array(dir.path(), &s, None);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let p0 = vec![0xa0u8; BS as usize];
    st.write(0, &p0, false).unwrap();
    let mut buf = vec![0u8; BS as usize];
    st.read(0, &mut buf).unwrap();
    assert_eq!(buf, p0);
    // A read hit in the tier: the read of its frame is recorded, not run.
    let d = st.decide(0, None, Op::Read, 0, BS, None).unwrap();
    let t = serde_json::to_value(st.result()).unwrap()["tier"].clone();
    assert_eq!((t["read_hits"].as_u64(), t["size"].as_u64()), (Some(2), Some(4)));
    std::thread::scope(|sc| {
        let w = sc.spawn(|| {
            for b in 1..12u64 {
                st.write(b * BS, &vec![b as u8; BS as usize], false).unwrap();
            }
        });
        // Through four frames, the writer's fourth block takes block 0's
        // frame while its old read is still in flight (it must wait for
        // it). Decided: let it run as far as it may.
        until(|| st.result().requests >= 3 + 4);
        for _ in 0..10_000 {
            std::thread::yield_now();
        }
        let mut got = vec![0u8; BS as usize];
        d.complete(Some(&mut got)).unwrap();
        assert!(got == p0, "the old read of a reused frame got the new block's bytes");
        w.join().unwrap();
    });
    for b in 0..12u64 {
        let mut got = vec![0u8; BS as usize];
        st.read(b * BS, &mut got).unwrap();
        let want = if b == 0 { p0.clone() } else { vec![b as u8; BS as usize] };
        assert!(got == want, "block {b}");
    }
}

#[test]
fn two_clients_writing_halves_of_one_block_through_evictions_never_lose_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        "[[cache]]\npolicy = \"lru\"\nsize = 2\nwrite = \"back\"\n\
         [tier]\nsize = 4\nwrite_policy = \"wb\"\nmodel = \"const:0.1\"\n",
    );
    let a = open_array(dir.path(), &s, None);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let half = (BS / 2) as usize;
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        let writers: Vec<_> = (0..2u64)
            .map(|me| {
                let st = &st;
                sc.spawn(move || {
                    let mut last = 0u8;
                    for i in 1..=300u32 {
                        let v = (i % 250 + 1) as u8;
                        st.write(3 * BS + me * half as u64, &vec![v; half], false).unwrap();
                        last = v;
                        if i % 7 == 0 {
                            // Its own half reads its last write, whatever the other half holds.
                            let mut buf = vec![0u8; BS as usize];
                            st.read(3 * BS, &mut buf).unwrap();
                            let mine = &buf[me as usize * half..(me as usize + 1) * half];
                            assert!(mine.iter().all(|&b| b == v), "client {me} lost its update {v}");
                        }
                        if i % 50 == 0 {
                            st.flush().unwrap();
                        }
                    }
                    last
                })
            })
            .collect();
        // Another client pushes block 3 out of the cache and the tier.
        let evictor = sc.spawn(|| {
            let mut b = 10u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let mut buf = vec![0u8; BS as usize];
                st.read(b * BS, &mut buf).unwrap();
                st.write((b + 40) * BS, &vec![1u8; BS as usize], false).unwrap();
                b = 10 + (b + 1) % 20;
            }
        });
        let last: Vec<u8> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        evictor.join().unwrap();
        let mut buf = vec![0u8; BS as usize];
        st.read(3 * BS, &mut buf).unwrap();
        assert!(buf[..half].iter().all(|&b| b == last[0]) && buf[half..].iter().all(|&b| b == last[1]));
    });
}

const WB_TIER_4: &str = "[tier]\nsize = 4\nwrite_policy = \"wb\"\nmodel = \"const:0.1\"\n";

/// The process dies (kill -9): the stack dropped without a FLUSH, the
/// array closed as a crash leaves it; then both opened again.
fn restart(dir: &Path, s: &StackSpec, st: RealStack, a: Arc<RealArray>) -> (RealStack, Arc<RealArray>) {
    drop(st);
    drop(Arc::try_unwrap(a).ok().unwrap());
    let a = Arc::new(RealArray::open(dir, OpenConfig::default()).unwrap());
    (RealStack::new(s, a.clone()).unwrap(), a)
}

fn set_tier_faults(st: &RealStack, on: bool) {
    let f = st.tier_file().expect("a tier");
    f.fail_writes.store(on, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn a_failed_tier_frame_write_is_never_committed_to_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(WB_TIER_4);
    let a = open_array(dir.path(), &s, None);
    let st = RealStack::new(&s, a.clone()).unwrap();
    let (flushed, lost) = (vec![0x11u8; BS as usize], vec![0x5au8; BS as usize]);
    st.write(0, &flushed, false).unwrap();
    st.flush().unwrap();
    // The cache device fails block 0's next frame write (torn: half lands):
    // the write itself fails (as bcache passes a write-back write's error up).
    set_tier_faults(&st, true);
    assert!(st.write(0, &lost, false).is_err());
    set_tier_faults(&st, false);
    let mut b0 = vec![0u8; BS as usize];
    assert!(st.read(0, &mut b0).is_err(), "block 0 read its torn frame");
    assert!(st.flush().is_err(), "a FLUSH covering the failed frame write succeeded");
    // Sticky while the tier holds block 0 dirty in a lost frame: the
    // journal must not take the frame's bytes.
    let second = st.flush();
    let (st, a) = restart(dir.path(), &s, st, a);
    let r = st.read(0, &mut b0);
    assert!(
        r.is_err() || b0 == flushed,
        "after a restart block 0 reads bytes no completed FLUSH covered"
    );
    assert!(second.is_err(), "a second FLUSH succeeded over the lost frame");
    // A later write of the block heals it: FLUSH succeeds, and it survives.
    let healed = vec![0x77u8; BS as usize];
    st.write(0, &healed, false).unwrap();
    st.flush().unwrap();
    set_tier_faults(&st, true);
    let _ = st.write(0, &lost, false);
    set_tier_faults(&st, false);
    st.write(0, &healed, false).unwrap();
    // The failure is reported once, then the healed block commits.
    assert!(st.flush().is_err());
    st.flush().unwrap();
    let (st, _a) = restart(dir.path(), &s, st, a);
    st.read(0, &mut b0).unwrap();
    assert!(b0 == healed, "a healed block lost its flushed write");
}

#[test]
fn a_failed_tier_frame_write_of_a_never_flushed_block_leaves_the_array_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(WB_TIER_4);
    let a = open_array(dir.path(), &s, None);
    let durable = vec![0x3cu8; BS as usize];
    a.write(0, &durable, false).unwrap();
    a.flush().unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    set_tier_faults(&st, true);
    let _ = st.write(0, &[0x5au8; BS as usize], false);
    set_tier_faults(&st, false);
    assert!(st.flush().is_err());
    let second = st.flush();
    let (st, _a) = restart(dir.path(), &s, st, a);
    let mut b0 = vec![0u8; BS as usize];
    let r = st.read(0, &mut b0);
    assert!(
        r.is_err() || b0 == durable,
        "block 0 reads its torn frame after a restart"
    );
    assert!(second.is_err(), "a second FLUSH succeeded over the lost frame");
}

#[test]
fn a_destage_that_failed_commits_no_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(WB_TIER_4);
    let a = open_array(dir.path(), &s, None);
    let older = vec![0x3cu8; BS as usize];
    a.write(0, &older, false).unwrap();
    a.flush().unwrap();
    let st = RealStack::new(&s, a.clone()).unwrap();
    // Block 0's flushed contents live in the journal only.
    let flushed = vec![0x11u8; BS as usize];
    st.write(0, &flushed, false).unwrap();
    st.flush().unwrap();
    // Its frame write fails; then other blocks evict it: the destage reads
    // the lost frame and fails, the array keeps its older bytes.
    set_tier_faults(&st, true);
    let _ = st.write(0, &[0x5au8; BS as usize], false);
    set_tier_faults(&st, false);
    for b in 20..28u64 {
        let _ = st.write(b * BS, &[b as u8; BS as usize], false);
    }
    assert!(st.flush().is_err(), "the failed destage is reported");
    // The next FLUSH succeeds (reported once; block 0 left the tier), but
    // must not tombstone block 0.
    assert!(st.flush().is_ok());
    let mut b0 = vec![0u8; BS as usize];
    assert!(st.read(0, &mut b0).is_err(), "block 0 read the array's older bytes");
    let (st, _a) = restart(dir.path(), &s, st, a);
    let r = st.read(0, &mut b0);
    assert!(
        !(r.is_ok() && b0 == older),
        "block 0 came back with the array's bytes from before its last FLUSH"
    );
    assert!(
        r.is_err() || b0 == flushed,
        "block 0 reads bytes no completed FLUSH covered"
    );
}

//! Gathering of partial-stripe writes, MD's stripe cache for sequential
//! writes: a large write whose head or tail covers only part of a stripe
//! leaves that part here for a moment, so that the neighbouring request of a
//! sequential stream (in flight at the same time, on another worker) can
//! fill the rest. A stripe filled that way is written whole: its parity comes
//! from the new data alone, with no reads of old data or parity. A part that
//! nobody completes is written alone (read-modify-write) once its owner stops
//! waiting.
//!
//! Nothing is acknowledged before it is on the members: each request waits
//! for the write of every stripe part it left here and gets that write's
//! result, so a crash loses only requests that were never answered.
//!
//! Who waits is decided by the caller (`RealArray::write_gathered`): only
//! requests that continue a recent request (a sequential stream) while other
//! requests are in flight; a lone or random writer never waits.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::members::AlignedBuf;
use super::ReqError;

/// Writes `bytes` at array block `first` (`fua`: durable before returning).
pub(super) type FlushFn<'a> = &'a dyn Fn(u64, &[u8], bool) -> Result<(), ReqError>;

/// How many recent requests the stream test remembers.
const RECENT: usize = 64;

pub(super) struct Gather {
    /// Array blocks per stripe (data chunks of one row).
    pub stripe_blocks: u64,
    bs: usize,
    /// Stripes with parts waiting, not yet being written.
    open: Mutex<HashMap<u64, Arc<Slot>>>,
    /// (first, end) blocks of the latest large writes: the stream test.
    recent: Mutex<VecDeque<(u64, u64)>>,
    /// Stripes written whole from the parts of several requests.
    pub gathered: AtomicU64,
    /// Stripe parts written alone (read-modify-write).
    pub alone: AtomicU64,
}

struct Slot {
    st: Mutex<SlotState>,
    cv: Condvar,
}

struct SlotState {
    /// The stripe's bytes; only the blocks in `have` are meaningful.
    /// Aligned: the member writes name its data units as they are.
    buf: AlignedBuf,
    have: Vec<bool>,
    covered: u64,
    fua: bool,
    phase: Phase,
}

enum Phase {
    Open,
    Writing,
    Done(Result<(), ReqError>),
}

/// A request's part left in a stripe: wait on it with [`Gather::wait`].
pub(super) struct Ticket {
    stripe: u64,
    slot: Arc<Slot>,
}

impl Gather {
    pub fn new(stripe_blocks: u64, bs: usize) -> Gather {
        Gather {
            stripe_blocks,
            bs,
            open: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            gathered: AtomicU64::new(0),
            alone: AtomicU64::new(0),
        }
    }

    /// Remember the write of blocks `first..end`; true when it continues a
    /// recent one (starts where one ended, or ends where one started).
    pub fn in_stream(&self, first: u64, end: u64) -> bool {
        let mut recent = self.recent.lock().unwrap();
        let hit = recent.iter().any(|&(f, e)| e == first || f == end);
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back((first, end));
        hit
    }

    /// Stripes with parts waiting.
    #[cfg(test)]
    pub fn open_stripes(&self) -> usize {
        self.open.lock().unwrap().len()
    }

    /// Leave `data` (whole blocks from array block `first`, inside one
    /// stripe) in its stripe. When that completes the stripe, it is written
    /// here, whole, with `flush`.
    pub fn deposit(&self, first: u64, data: &[u8], fua: bool, flush: FlushFn) -> Ticket {
        let sb = self.stripe_blocks;
        let stripe = first / sb;
        let at = (first % sb) as usize;
        let nb = data.len() / self.bs;
        debug_assert!(at + nb <= sb as usize && data.len().is_multiple_of(self.bs));
        let mut open = self.open.lock().unwrap();
        let slot = open
            .entry(stripe)
            .or_insert_with(|| {
                Arc::new(Slot {
                    st: Mutex::new(SlotState {
                        buf: AlignedBuf::scratch(sb as usize * self.bs),
                        have: vec![false; sb as usize],
                        covered: 0,
                        fua: false,
                        phase: Phase::Open,
                    }),
                    cv: Condvar::new(),
                })
            })
            .clone();
        let mut guard = slot.st.lock().unwrap();
        let st = &mut *guard;
        st.buf[at * self.bs..(at + nb) * self.bs].copy_from_slice(data);
        let new = st.have[at..at + nb].iter().filter(|h| !**h).count() as u64;
        st.have[at..at + nb].fill(true);
        st.covered += new;
        st.fua |= fua;
        let ticket = Ticket {
            stripe,
            slot: slot.clone(),
        };
        if st.covered < sb {
            return ticket;
        }
        // Complete: nobody else may add to it now; write it whole.
        open.remove(&stripe);
        let parts = st.take();
        drop(guard);
        drop(open);
        let r = self.write_out(stripe, parts, flush);
        finish(&slot, r);
        ticket
    }

    /// Wait until the ticket's stripe is written and return that write's
    /// result. Until `deadline` (None: not at all) the stripe may still be
    /// completed by others; after it, the parts present are written alone.
    pub fn wait(&self, t: Ticket, deadline: Option<Instant>, flush: FlushFn) -> Result<(), ReqError> {
        let slot = t.slot;
        let mut st = slot.st.lock().unwrap();
        loop {
            match &st.phase {
                Phase::Done(r) => return r.clone(),
                Phase::Writing => st = slot.cv.wait(st).unwrap(),
                Phase::Open => {
                    if let Some(dl) = deadline {
                        let now = Instant::now();
                        if now < dl {
                            st = slot.cv.wait_timeout(st, dl - now).unwrap().0;
                            continue;
                        }
                    }
                    // Take the stripe out of reach of later parts (the map's
                    // lock comes first), unless someone else just did.
                    drop(st);
                    let mut open = self.open.lock().unwrap();
                    st = slot.st.lock().unwrap();
                    if !matches!(st.phase, Phase::Open) {
                        continue;
                    }
                    if open.get(&t.stripe).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                        open.remove(&t.stripe);
                    }
                    drop(open);
                    let parts = st.take();
                    drop(st);
                    let r = self.write_out(t.stripe, parts, flush);
                    finish(&slot, r.clone());
                    return r;
                }
            }
        }
    }

    /// Write a stripe's parts: whole when complete (gathered), else each
    /// run of present blocks on its own (read-modify-write).
    fn write_out(&self, stripe: u64, parts: Parts, flush: FlushFn) -> Result<(), ReqError> {
        let base = stripe * self.stripe_blocks;
        let Parts { buf, have, fua } = parts;
        if have.iter().all(|h| *h) {
            self.gathered.fetch_add(1, Ordering::Relaxed);
            return flush(base, &buf, fua);
        }
        let mut i = 0;
        while i < have.len() {
            if !have[i] {
                i += 1;
                continue;
            }
            let j = i + have[i..].iter().take_while(|h| **h).count();
            self.alone.fetch_add(1, Ordering::Relaxed);
            flush(base + i as u64, &buf[i * self.bs..j * self.bs], fua)?;
            i = j;
        }
        Ok(())
    }
}

/// What a stripe holds when it goes to be written.
struct Parts {
    buf: AlignedBuf,
    have: Vec<bool>,
    fua: bool,
}

impl SlotState {
    /// Its parts, taken to be written: no part can join any more.
    fn take(&mut self) -> Parts {
        self.phase = Phase::Writing;
        Parts {
            buf: std::mem::replace(&mut self.buf, AlignedBuf::scratch(0)),
            have: std::mem::take(&mut self.have),
            fua: self.fua,
        }
    }
}

fn finish(slot: &Slot, r: Result<(), ReqError>) {
    let mut st = slot.st.lock().unwrap();
    st.phase = Phase::Done(r);
    slot.cv.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Records every flush: (first block, blocks, first byte of each block).
    #[derive(Default)]
    struct Rec(Mutex<Vec<(u64, Vec<u8>)>>);

    impl Rec {
        fn flush(&self, first: u64, bytes: &[u8], _fua: bool) -> Result<(), ReqError> {
            self.0
                .lock()
                .unwrap()
                .push((first, bytes.iter().step_by(4).copied().collect()));
            Ok(())
        }
    }

    fn blocks(tags: &[u8]) -> Vec<u8> {
        tags.iter().flat_map(|t| [*t; 4]).collect()
    }

    #[test]
    fn complementary_parts_are_written_as_one_whole_stripe() {
        // Stripes of 4 blocks of 4 bytes; parts of stripe 1 from two requests.
        let g = Gather::new(4, 4);
        let rec = Rec::default();
        let f = |a, b: &[u8], c| rec.flush(a, b, c);
        let t1 = g.deposit(4, &blocks(&[1, 2]), false, &f);
        assert!(rec.0.lock().unwrap().is_empty(), "half a stripe waits");
        let t2 = g.deposit(6, &blocks(&[3, 4]), false, &f);
        assert_eq!(*rec.0.lock().unwrap(), vec![(4, vec![1, 2, 3, 4])]);
        assert_eq!(g.wait(t1, Some(Instant::now() + Duration::from_secs(60)), &f), Ok(()));
        assert_eq!(g.wait(t2, None, &f), Ok(()));
        assert_eq!(rec.0.lock().unwrap().len(), 1);
        assert_eq!(
            (g.gathered.load(Ordering::Relaxed), g.alone.load(Ordering::Relaxed)),
            (1, 0)
        );
    }

    #[test]
    fn a_part_nobody_completes_is_written_alone_at_its_deadline() {
        let g = Gather::new(4, 4);
        let rec = Rec::default();
        let f = |a, b: &[u8], c| rec.flush(a, b, c);
        g.deposit(8, &blocks(&[7]), false, &f);
        let t = g.deposit(10, &blocks(&[8, 9]), false, &f);
        assert_eq!(g.wait(t, Some(Instant::now() + Duration::from_millis(5)), &f), Ok(()));
        // Two runs (block 8, blocks 10..12), each on its own; block 11 unchanged.
        assert_eq!(*rec.0.lock().unwrap(), vec![(8, vec![7]), (10, vec![8, 9])]);
        assert_eq!(g.alone.load(Ordering::Relaxed), 2);
        // The stripe is no longer open: a later part starts a new one.
        g.deposit(9, &blocks(&[5]), false, &f);
        assert_eq!(g.open.lock().unwrap().len(), 1);
    }

    #[test]
    fn the_latest_part_wins_and_a_failed_write_fails_every_request_in_it() {
        let g = Gather::new(2, 4);
        let fail = |_a, _b: &[u8], _c| Err(ReqError::Io("disk gone".into()));
        let t1 = g.deposit(0, &blocks(&[1]), false, &fail);
        let t2 = g.deposit(0, &blocks(&[2]), false, &fail);
        let rec = Rec::default();
        let f = |a, b: &[u8], c| rec.flush(a, b, c);
        let t3 = g.deposit(1, &blocks(&[3]), true, &f);
        assert_eq!(*rec.0.lock().unwrap(), vec![(0, vec![2, 3])]);
        for t in [t1, t2, t3] {
            assert_eq!(g.wait(t, None, &fail), Ok(()));
        }
        let t = g.deposit(2, &blocks(&[4]), false, &f);
        assert_eq!(g.wait(t, None, &fail), Err(ReqError::Io("disk gone".into())));
    }

    #[test]
    fn a_waiter_is_woken_by_the_request_that_completes_its_stripe() {
        let g = Arc::new(Gather::new(4, 4));
        let rec = Arc::new(Rec::default());
        let f = {
            let rec = rec.clone();
            move |a, b: &[u8], c| rec.flush(a, b, c)
        };
        let t = g.deposit(0, &blocks(&[1, 2, 3]), false, &f);
        let other = {
            let (g, f) = (g.clone(), f.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let t = g.deposit(3, &blocks(&[4]), false, &f);
                g.wait(t, None, &f)
            })
        };
        assert_eq!(g.wait(t, Some(Instant::now() + Duration::from_secs(60)), &f), Ok(()));
        assert_eq!(other.join().unwrap(), Ok(()));
        assert_eq!(*rec.0.lock().unwrap(), vec![(0, vec![1, 2, 3, 4])]);
    }

    #[test]
    fn the_stream_test_sees_continuations_either_way() {
        let g = Gather::new(4, 4);
        assert!(!g.in_stream(100, 200));
        assert!(g.in_stream(200, 300), "starts where one ended");
        assert!(g.in_stream(50, 100), "ends where one started");
        assert!(!g.in_stream(1000, 1100), "unrelated");
    }
}

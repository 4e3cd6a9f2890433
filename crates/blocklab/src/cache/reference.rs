//! Deliberately naive reference implementations (test only).
//!
//! Each one restates a policy's definition with plain vectors and linear
//! scans — no hashing, no intrusive lists, no heaps — so that the fast
//! implementations can be checked against them access for access. Vectors are
//! ordered oldest / least recent first (index 0 is the eviction end).
//!
//! Each also states what the policy's file header says about invalidation:
//! `remove` drops a resident block (and, unless said otherwise, everything
//! known about it; ghosts of other blocks stay), `evicted` is the resident
//! block the last access pushed out (`ev`, reset at every access).

use super::fault::FaultMap;
use super::{Access, Policy};
use std::cmp::Ordering;
use std::sync::Arc;

fn pos(v: &[u64], b: u64) -> Option<usize> {
    v.iter().position(|&x| x == b)
}

/// Remove `b` from `v` if there; whether it was.
fn take(v: &mut Vec<u64>, b: u64) -> bool {
    match pos(v, b) {
        Some(i) => {
            v.remove(i);
            true
        }
        None => false,
    }
}

/// Remove the entry of block `b` from a vector of tuples keyed by `.0`.
macro_rules! take_by_block {
    ($v:expr, $b:expr) => {
        match $v.iter().position(|e| e.0 == $b) {
            Some(i) => {
                $v.remove(i);
                true
            }
            None => false,
        }
    };
}

macro_rules! common {
    () => {
        fn capacity(&self) -> usize {
            self.c
        }
        fn evicted(&self) -> Option<u64> {
            self.ev
        }
    };
}

pub struct RefLru {
    c: usize,
    v: Vec<u64>,
    ev: Option<u64>,
}
impl RefLru {
    pub fn new(c: usize) -> Self {
        RefLru { c, v: vec![], ev: None }
    }
}
impl Policy for RefLru {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        if take(&mut self.v, a.block) {
            self.v.push(a.block);
            return true;
        }
        if self.v.len() == self.c {
            self.ev = Some(self.v.remove(0));
        }
        self.v.push(a.block);
        false
    }
    fn contains(&self, b: u64) -> bool {
        pos(&self.v, b).is_some()
    }
    fn remove(&mut self, b: u64) -> bool {
        take(&mut self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

pub struct RefFifo {
    c: usize,
    v: Vec<u64>,
    ev: Option<u64>,
}
impl RefFifo {
    pub fn new(c: usize) -> Self {
        RefFifo { c, v: vec![], ev: None }
    }
}
impl Policy for RefFifo {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        if pos(&self.v, a.block).is_some() {
            return true;
        }
        if self.v.len() == self.c {
            self.ev = Some(self.v.remove(0));
        }
        self.v.push(a.block);
        false
    }
    fn contains(&self, b: u64) -> bool {
        pos(&self.v, b).is_some()
    }
    fn remove(&mut self, b: u64) -> bool {
        take(&mut self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// LFU: (block, count since insertion, time of last access).
pub struct RefLfu {
    c: usize,
    t: u64,
    v: Vec<(u64, u64, u64)>,
    ev: Option<u64>,
}
impl RefLfu {
    pub fn new(c: usize) -> Self {
        RefLfu {
            c,
            t: 0,
            v: vec![],
            ev: None,
        }
    }
}
impl Policy for RefLfu {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        self.t += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 += 1;
            e.2 = self.t;
            return true;
        }
        if self.v.len() == self.c {
            let i = (0..self.v.len()).min_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap();
            self.ev = Some(self.v.remove(i).0);
        }
        self.v.push((a.block, 1, self.t));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.v.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// CLOCK stated as FIFO with reinsertion: a referenced block at the tail gets
/// its bit cleared and goes back to the head.
pub struct RefClock {
    c: usize,
    q: Vec<(u64, bool)>,
    ev: Option<u64>,
}
impl RefClock {
    pub fn new(c: usize) -> Self {
        RefClock { c, q: vec![], ev: None }
    }
}
impl Policy for RefClock {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        if let Some(e) = self.q.iter_mut().find(|e| e.0 == a.block) {
            e.1 = true;
            return true;
        }
        if self.q.len() == self.c {
            loop {
                let (b, r) = self.q.remove(0);
                if !r {
                    self.ev = Some(b);
                    break;
                }
                self.q.push((b, false));
            }
        }
        self.q.push((a.block, false));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.q.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.q, b)
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    common!();
}

/// SIEVE: queue (index 0 = oldest), hand = index it will examine next.
pub struct RefSieve {
    c: usize,
    q: Vec<(u64, bool)>,
    hand: Option<usize>,
    ev: Option<u64>,
}
impl RefSieve {
    pub fn new(c: usize) -> Self {
        RefSieve {
            c,
            q: vec![],
            hand: None,
            ev: None,
        }
    }
    /// Take index `i` out of the queue; a hand on it moves to the next newer
    /// block (none: back to the oldest).
    fn take_at(&mut self, i: usize) -> u64 {
        let (b, _) = self.q.remove(i);
        self.hand = match self.hand {
            Some(h) if h > i => Some(h - 1),
            Some(h) if h == i => (i < self.q.len()).then_some(i),
            h => h,
        };
        b
    }
}
impl Policy for RefSieve {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        if let Some(e) = self.q.iter_mut().find(|e| e.0 == a.block) {
            e.1 = true;
            return true;
        }
        if self.q.len() == self.c {
            let mut i = self.hand.unwrap_or(0);
            while self.q[i].1 {
                self.q[i].1 = false;
                i = if i + 1 == self.q.len() { 0 } else { i + 1 };
            }
            self.hand = Some(i);
            self.ev = Some(self.take_at(i));
        }
        self.q.push((a.block, false));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.q.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        match self.q.iter().position(|e| e.0 == b) {
            Some(i) => {
                self.take_at(i);
                true
            }
            None => false,
        }
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    common!();
}

/// ARC with the four lists as vectors (index 0 = LRU end). With a fault
/// map it is VDF-ARC: once a disk has failed, the block REPLACE takes from
/// T1 or T2 is, among each disk's oldest block of that list (smallest TS),
/// the one with the largest (GTS - TS) / MP, ties to the older TS.
pub struct RefArc {
    c: usize,
    p: f64,
    t1: Vec<u64>,
    t2: Vec<u64>,
    b1: Vec<u64>,
    b2: Vec<u64>,
    ev: Option<u64>,
    faults: Option<Arc<dyn FaultMap>>,
    gts: u64,
    /// (block, TS of last access) of resident blocks
    ts: Vec<(u64, u64)>,
}
impl RefArc {
    pub fn new(c: usize) -> Self {
        RefArc {
            c,
            p: 0.0,
            t1: vec![],
            t2: vec![],
            b1: vec![],
            b2: vec![],
            ev: None,
            faults: None,
            gts: 0,
            ts: vec![],
        }
    }
    fn vdf(c: usize, faults: Arc<dyn FaultMap>) -> Self {
        RefArc {
            faults: Some(faults),
            ..RefArc::new(c)
        }
    }
    fn ts_of(&self, b: u64) -> u64 {
        self.ts.iter().find(|e| e.0 == b).unwrap().1
    }
    /// Index in `list` of the block to take.
    fn victim(&self, list: &[u64]) -> usize {
        let Some(f) = self.faults.as_ref().filter(|f| f.any_failed()) else {
            return 0;
        };
        let mut oldest: Vec<(u64, u64)> = vec![]; // per disk: (block, TS)
        for d in 0..f.ndisks() {
            let mine = list.iter().filter(|&&b| f.disk_of(b) == d).map(|&b| (b, self.ts_of(b)));
            if let Some(o) = mine.min_by_key(|e| e.1) {
                oldest.push(o);
            }
        }
        let g = self.gts;
        oldest.sort_by(|&(a, ta), &(b, tb)| cmp_weight(g - tb, f.penalty(b), g - ta, f.penalty(a)).then(ta.cmp(&tb)));
        pos(list, oldest[0].0).unwrap()
    }
    fn replace(&mut self, in_b2: bool) {
        let t1 = self.t1.len() as f64;
        if (!self.t1.is_empty() && (t1 > self.p || (t1 == self.p && in_b2))) || self.t2.is_empty() {
            let x = self.t1.remove(self.victim(&self.t1));
            self.b1.push(x);
            self.ev = Some(x);
        } else {
            let x = self.t2.remove(self.victim(&self.t2));
            self.b2.push(x);
            self.ev = Some(x);
        }
    }
    fn access_arc(&mut self, x: u64) -> bool {
        // REPLACE frees a slot: only a full cache needs one (a cache with
        // room and ghosts exists only after removals).
        let full = self.t1.len() + self.t2.len() == self.c;
        if take(&mut self.t1, x) || take(&mut self.t2, x) {
            self.t2.push(x);
            return true;
        }
        if let Some(i) = pos(&self.b1, x) {
            let d = (self.b2.len() as f64 / self.b1.len() as f64).max(1.0);
            self.p = (self.p + d).min(self.c as f64);
            if full {
                self.replace(false);
            }
            self.b1.remove(i);
            self.t2.push(x);
            return false;
        }
        if let Some(i) = pos(&self.b2, x) {
            let d = (self.b1.len() as f64 / self.b2.len() as f64).max(1.0);
            self.p = (self.p - d).max(0.0);
            if full {
                self.replace(true);
            }
            self.b2.remove(i);
            self.t2.push(x);
            return false;
        }
        let l1 = self.t1.len() + self.b1.len();
        let all = l1 + self.t2.len() + self.b2.len();
        if full {
            if l1 == self.c {
                if !self.b1.is_empty() {
                    self.b1.remove(0);
                    self.replace(false);
                } else {
                    self.ev = Some(self.t1.remove(self.victim(&self.t1)));
                }
            } else {
                if all >= 2 * self.c {
                    self.b2.remove(0);
                }
                self.replace(false);
            }
        } else if l1 == self.c {
            self.b1.remove(0);
        } else if all >= 2 * self.c {
            self.b2.remove(0);
        }
        self.t1.push(x);
        false
    }
}
impl Policy for RefArc {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let hit = self.access_arc(a.block);
        take_by_block!(self.ts, a.block);
        if let Some(e) = self.ev {
            take_by_block!(self.ts, e);
        }
        self.ts.push((a.block, self.gts));
        self.gts += 1;
        hit
    }
    fn contains(&self, b: u64) -> bool {
        pos(&self.t1, b).is_some() || pos(&self.t2, b).is_some()
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.ts, b);
        take(&mut self.t1, b) || take(&mut self.t2, b)
    }
    fn len(&self) -> usize {
        self.t1.len() + self.t2.len()
    }
    common!();
}

/// OPT: evict the largest next use; ties (never used again) by the most
/// recent access.
pub struct RefOpt {
    c: usize,
    t: u64,
    v: Vec<(u64, u64, u64)>,
    ev: Option<u64>,
}
impl RefOpt {
    pub fn new(c: usize) -> Self {
        RefOpt {
            c,
            t: 0,
            v: vec![],
            ev: None,
        }
    }
}
impl Policy for RefOpt {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        self.t += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 = a.next_use;
            e.2 = self.t;
            return true;
        }
        if self.v.len() == self.c {
            let i = (0..self.v.len()).max_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap();
            self.ev = Some(self.v.remove(i).0);
        }
        self.v.push((a.block, a.next_use, self.t));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.v.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// 2Q with Kin = ⌊c/4⌋, Kout = ⌊c/2⌋; room is made only in a full cache.
pub struct RefTwoQ {
    c: usize,
    kin: usize,
    kout: usize,
    ain: Vec<u64>,
    am: Vec<u64>,
    aout: Vec<u64>,
    ev: Option<u64>,
}
impl RefTwoQ {
    pub fn new(c: usize) -> Self {
        RefTwoQ {
            c,
            kin: (c as f64 * 0.25) as usize,
            kout: (c as f64 * 0.5) as usize,
            ain: vec![],
            am: vec![],
            aout: vec![],
            ev: None,
        }
    }
}
impl Policy for RefTwoQ {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let x = a.block;
        if pos(&self.ain, x).is_some() {
            return true;
        }
        if take(&mut self.am, x) {
            self.am.push(x);
            return true;
        }
        let ghost = take(&mut self.aout, x);
        if self.ain.len() + self.am.len() == self.c {
            if self.ain.len() > self.kin {
                let y = self.ain.remove(0);
                self.ev = Some(y);
                if self.kout > 0 {
                    if self.aout.len() == self.kout {
                        self.aout.remove(0);
                    }
                    self.aout.push(y);
                }
            } else {
                self.ev = Some(self.am.remove(0));
            }
        }
        if ghost {
            self.am.push(x);
        } else {
            self.ain.push(x);
        }
        false
    }
    fn contains(&self, b: u64) -> bool {
        pos(&self.ain, b).is_some() || pos(&self.am, b).is_some()
    }
    fn remove(&mut self, b: u64) -> bool {
        take(&mut self.ain, b) || take(&mut self.am, b)
    }
    fn len(&self) -> usize {
        self.ain.len() + self.am.len()
    }
    common!();
}

/// S3-FIFO: small / main as (block, counter) queues, ghost as ids.
pub struct RefS3Fifo {
    c: usize,
    small_cap: usize,
    ghost_cap: usize,
    evicted: bool,
    small: Vec<(u64, u8)>,
    main: Vec<(u64, u8)>,
    ghost: Vec<u64>,
    ev: Option<u64>,
}
impl RefS3Fifo {
    pub fn new(c: usize) -> Self {
        RefS3Fifo {
            c,
            small_cap: (c as f64 * 0.1) as usize,
            ghost_cap: (c as f64 * 0.9) as usize,
            evicted: false,
            small: vec![],
            main: vec![],
            ghost: vec![],
            ev: None,
        }
    }
}
impl Policy for RefS3Fifo {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let x = a.block;
        if let Some(e) = self.small.iter_mut().chain(self.main.iter_mut()).find(|e| e.0 == x) {
            e.1 = e.1.saturating_add(1);
            return true;
        }
        let ghost = take(&mut self.ghost, x);
        while self.small.len() + self.main.len() + 1 > self.c {
            self.evicted = true;
            if self.main.len() > self.c - self.small_cap || self.small.is_empty() {
                loop {
                    let (b, f) = self.main.remove(0);
                    if f == 0 {
                        self.ev = Some(b);
                        break;
                    }
                    self.main.push((b, f.min(3) - 1));
                }
            } else {
                while let Some(&(b, f)) = self.small.first() {
                    self.small.remove(0);
                    if f >= 2 {
                        self.main.push((b, 0));
                    } else {
                        self.ev = Some(b);
                        if self.ghost_cap > 0 {
                            if self.ghost.len() == self.ghost_cap {
                                self.ghost.remove(0);
                            }
                            self.ghost.push(b);
                        }
                        break;
                    }
                }
            }
        }
        if ghost || (!self.evicted && self.small.len() >= self.small_cap) {
            self.main.push((x, 0));
        } else {
            self.small.push((x, 0));
        }
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.small.iter().chain(&self.main).any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.small, b) || take_by_block!(self.main, b)
    }
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
    common!();
}

/// LRU-2: (block, penultimate access, last access); once-seen blocks first,
/// oldest first; then the oldest penultimate access.
pub struct RefLru2 {
    c: usize,
    t: u64,
    v: Vec<(u64, Option<u64>, u64)>,
    ev: Option<u64>,
}
impl RefLru2 {
    pub fn new(c: usize) -> Self {
        RefLru2 {
            c,
            t: 0,
            v: vec![],
            ev: None,
        }
    }
}
impl Policy for RefLru2 {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        self.t += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 = Some(e.2);
            e.2 = self.t;
            return true;
        }
        if self.v.len() == self.c {
            let once = (0..self.v.len())
                .filter(|&i| self.v[i].1.is_none())
                .min_by_key(|&i| self.v[i].2);
            let i = once.unwrap_or_else(|| (0..self.v.len()).min_by_key(|&i| self.v[i].1.unwrap()).unwrap());
            self.ev = Some(self.v.remove(i).0);
        }
        self.v.push((a.block, None, self.t));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.v.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// MQ: queues of (block, freq, expire), index 0 = LRU end; Qout of (block, freq).
pub struct RefMq {
    c: usize,
    vtime: u64,
    q: Vec<Vec<(u64, u32, u64)>>,
    qout: Vec<(u64, u32)>,
    ev: Option<u64>,
}
impl RefMq {
    const M: usize = 8;
    const LIFE: u64 = 10_000;
    pub fn new(c: usize) -> Self {
        RefMq {
            c,
            vtime: 0,
            q: vec![vec![]; Self::M],
            qout: vec![],
            ev: None,
        }
    }
    fn qnum(f: u32) -> usize {
        ((31 - f.leading_zeros()) as usize).min(Self::M - 1)
    }
    fn adjust(&mut self) {
        self.vtime += 1;
        for k in 1..Self::M {
            if !self.q[k].is_empty() && self.q[k][0].2 < self.vtime {
                let (b, f, _) = self.q[k].remove(0);
                self.q[k - 1].push((b, f, self.vtime + Self::LIFE));
            }
        }
    }
}
impl Policy for RefMq {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let x = a.block;
        for k in 0..Self::M {
            if let Some(i) = self.q[k].iter().position(|e| e.0 == x) {
                let (_, f, _) = self.q[k].remove(i);
                let f = f + 1;
                self.q[Self::qnum(f)].push((x, f, self.vtime + Self::LIFE));
                self.adjust();
                return true;
            }
        }
        let mut f = 1;
        if let Some(i) = self.qout.iter().position(|e| e.0 == x) {
            f = self.qout.remove(i).1 + 1;
        }
        while self.len() + 1 > self.c {
            let k = (0..Self::M).find(|&k| !self.q[k].is_empty()).unwrap();
            let (b, fb, _) = self.q[k].remove(0);
            self.ev = Some(b);
            if self.qout.len() == 4 * self.c {
                self.qout.remove(0);
            }
            self.qout.push((b, fb));
        }
        self.q[Self::qnum(f)].push((x, f, self.vtime + Self::LIFE));
        self.adjust();
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.q.iter().flatten().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        self.q.iter_mut().any(|q| take_by_block!(q, b))
    }
    fn len(&self) -> usize {
        self.q.iter().map(|q| q.len()).sum()
    }
    common!();
}

/// LIRS: stack S (index 0 = bottom), Q and NR (index 0 = oldest), and a
/// status per known block: (block, is_lir, is_resident). S is pruned after
/// every step: its bottom is an LIR block, or S is empty.
pub struct RefLirs {
    c: usize,
    lirs_limit: usize,
    s: Vec<u64>,
    q: Vec<u64>,
    nr: Vec<u64>,
    st: Vec<(u64, bool, bool)>,
    ev: Option<u64>,
}
impl RefLirs {
    pub fn new(c: usize) -> Self {
        let hirs = ((c as f64 * 0.01) as usize).max(1);
        RefLirs {
            c,
            lirs_limit: c.saturating_sub(hirs),
            s: vec![],
            q: vec![],
            nr: vec![],
            st: vec![],
            ev: None,
        }
    }
    fn status(&self, b: u64) -> Option<(bool, bool)> {
        self.st.iter().find(|e| e.0 == b).map(|e| (e.1, e.2))
    }
    fn set(&mut self, b: u64, lir: bool, res: bool) {
        self.st.retain(|e| e.0 != b);
        self.st.push((b, lir, res));
    }
    fn drop_block(&mut self, b: u64) {
        self.st.retain(|e| e.0 != b);
    }
    fn n_lir(&self) -> usize {
        self.st.iter().filter(|e| e.1).count()
    }
    fn prune(&mut self) {
        while let Some(&b) = self.s.first() {
            let (lir, res) = self.status(b).unwrap();
            if lir {
                break;
            }
            self.s.remove(0);
            if !res {
                self.nr.retain(|&y| y != b);
                self.drop_block(b);
            }
        }
    }
    fn put_top(&mut self, b: u64) {
        self.s.retain(|&y| y != b);
        self.s.push(b);
    }
    fn promote(&mut self, b: u64) {
        self.set(b, true, true);
        if self.n_lir() > self.lirs_limit {
            self.prune();
            let y = self.s.remove(0);
            self.set(y, false, true);
            self.q.push(y);
            self.prune();
        }
    }
}
impl Policy for RefLirs {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let hit = self.access_inner(a);
        self.prune();
        while self.s.len() > 2 * self.c && !self.nr.is_empty() {
            let old = self.nr.remove(0);
            self.s.retain(|&y| y != old);
            self.drop_block(old);
        }
        hit
    }
    fn contains(&self, b: u64) -> bool {
        matches!(self.status(b), Some((_, true)))
    }
    /// Forget a resident block entirely (S is then pruned, as always).
    fn remove(&mut self, b: u64) -> bool {
        let Some((_, true)) = self.status(b) else {
            return false;
        };
        self.s.retain(|&y| y != b);
        self.q.retain(|&y| y != b);
        self.drop_block(b);
        self.prune();
        true
    }
    fn len(&self) -> usize {
        self.n_lir() + self.q.len()
    }
    common!();
}

impl RefLirs {
    fn access_inner(&mut self, a: &Access) -> bool {
        let x = a.block;
        match self.status(x) {
            Some((true, _)) => {
                self.put_top(x);
                self.prune();
                return true;
            }
            Some((false, true)) => {
                if pos(&self.s, x).is_some() {
                    self.put_top(x);
                    self.q.retain(|&y| y != x);
                    self.promote(x);
                } else {
                    self.put_top(x);
                    self.q.retain(|&y| y != x);
                    self.q.push(x);
                }
                return true;
            }
            _ => {}
        }
        if self.n_lir() + self.q.len() >= self.c {
            let v = self.q.remove(0);
            self.ev = Some(v);
            if pos(&self.s, v).is_some() {
                self.set(v, false, false);
                self.nr.push(v);
            } else {
                self.drop_block(v);
            }
        }
        if self.status(x).is_some() {
            // Non-resident entry still in S.
            self.nr.retain(|&y| y != x);
            self.put_top(x);
            self.promote(x);
            return false;
        }
        self.put_top(x);
        if self.n_lir() < self.lirs_limit {
            self.set(x, true, true);
        } else {
            self.set(x, false, true);
            self.q.push(x);
        }
        false
    }
}

/// The reference for a policy name.
pub fn build_ref(name: &str, c: usize) -> Box<dyn Policy> {
    match name {
        "lru" => Box::new(RefLru::new(c)),
        "fifo" => Box::new(RefFifo::new(c)),
        "lfu" => Box::new(RefLfu::new(c)),
        "clock" => Box::new(RefClock::new(c)),
        "sieve" => Box::new(RefSieve::new(c)),
        "arc" => Box::new(RefArc::new(c)),
        "opt" => Box::new(RefOpt::new(c)),
        "2q" => Box::new(RefTwoQ::new(c)),
        "s3fifo" => Box::new(RefS3Fifo::new(c)),
        "lru2" => Box::new(RefLru2::new(c)),
        "mq" => Box::new(RefMq::new(c)),
        "lirs" => Box::new(RefLirs::new(c)),
        other => panic!("no reference for {other}"),
    }
}

// ---- fault-aware policies ------------------------------------------------

/// W = age / mp, mp = 0 counting as infinite: compare two weights exactly.
fn cmp_weight(age_a: u64, mp_a: u32, age_b: u64, mp_b: u32) -> Ordering {
    match (mp_a == 0, mp_b == 0) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => (age_a as u128 * mp_b as u128).cmp(&(age_b as u128 * mp_a as u128)),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Base {
    Lru,
    Fifo,
    Clock,
}

/// One base-policy queue of (block, reference bit), index 0 = next victim.
fn touch(q: &mut Vec<(u64, bool)>, base: Base, b: u64) {
    match q.iter().position(|e| e.0 == b) {
        Some(i) => match base {
            Base::Lru => {
                q.remove(i);
                q.push((b, false));
            }
            Base::Fifo => {}
            Base::Clock => q[i].1 = true,
        },
        None => q.push((b, false)),
    }
}

/// The block the queue would evict next; CLOCK first sends referenced blocks
/// round again (bit cleared).
fn candidate(q: &mut Vec<(u64, bool)>) -> Option<u64> {
    while q.first().is_some_and(|e| e.1) {
        let (b, _) = q.remove(0);
        q.push((b, false));
    }
    q.first().map(|e| e.0)
}

/// Victim disk first around LRU (VDF-LRU, Algorithm 1), FIFO or CLOCK: a
/// global queue and one queue per disk; fault-free, the global queue's victim;
/// faulty, among the per-disk victims the largest (GTS - TS) / MP, ties to the
/// older TS.
pub struct RefVdf {
    c: usize,
    base: Base,
    faults: Arc<dyn FaultMap>,
    gts: u64,
    global: Vec<(u64, bool)>,
    local: Vec<Vec<(u64, bool)>>,
    /// (block, TS of last access)
    ts: Vec<(u64, u64)>,
    ev: Option<u64>,
}
impl RefVdf {
    fn new(base: Base, c: usize, faults: Arc<dyn FaultMap>) -> Self {
        let n = faults.ndisks() as usize;
        RefVdf {
            c,
            base,
            faults,
            gts: 0,
            global: vec![],
            local: vec![vec![]; n],
            ts: vec![],
            ev: None,
        }
    }
    fn ts_of(&self, b: u64) -> u64 {
        self.ts.iter().find(|e| e.0 == b).unwrap().1
    }
    fn victim(&mut self) -> u64 {
        if !self.faults.any_failed() {
            return candidate(&mut self.global).unwrap();
        }
        let mut cands = vec![];
        for j in 0..self.local.len() {
            if let Some(b) = candidate(&mut self.local[j]) {
                cands.push((b, self.ts_of(b)));
            }
        }
        let gts = self.gts;
        let f = &self.faults;
        cands
            .sort_by(|&(a, ta), &(b, tb)| cmp_weight(gts - tb, f.penalty(b), gts - ta, f.penalty(a)).then(ta.cmp(&tb)));
        cands[0].0
    }
}
impl Policy for RefVdf {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let b = a.block;
        let d = self.faults.disk_of(b) as usize;
        let hit = if let Some(e) = self.ts.iter_mut().find(|e| e.0 == b) {
            e.1 = self.gts;
            true
        } else {
            if self.ts.len() == self.c {
                let v = self.victim();
                self.ev = Some(v);
                self.remove(v);
            }
            self.ts.push((b, self.gts));
            false
        };
        touch(&mut self.global, self.base, b);
        touch(&mut self.local[d], self.base, b);
        self.gts += 1;
        hit
    }
    fn contains(&self, b: u64) -> bool {
        self.ts.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        let d = self.faults.disk_of(b) as usize;
        take_by_block!(self.global, b);
        take_by_block!(self.local[d], b);
        take_by_block!(self.ts, b)
    }
    fn len(&self) -> usize {
        self.ts.len()
    }
    common!();
}

/// VDF-LFU (Algorithm 2): (block, F, TS); fault-free, the smallest (F, TS);
/// faulty, among each disk's smallest (F, TS) the smallest (F x MP, TS).
pub struct RefVdfLfu {
    c: usize,
    faults: Arc<dyn FaultMap>,
    gts: u64,
    v: Vec<(u64, u64, u64)>,
    ev: Option<u64>,
}
impl Policy for RefVdfLfu {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let now = self.gts;
        self.gts += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 += 1;
            e.2 = now;
            return true;
        }
        if self.v.len() == self.c {
            let fm = &self.faults;
            let i = if !fm.any_failed() {
                (0..self.v.len()).min_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap()
            } else {
                (0..fm.ndisks())
                    .filter_map(|j| {
                        (0..self.v.len())
                            .filter(|&i| fm.disk_of(self.v[i].0) == j)
                            .min_by_key(|&i| (self.v[i].1, self.v[i].2))
                    })
                    .min_by_key(|&i| (self.v[i].1 * fm.penalty(self.v[i].0) as u64, self.v[i].2))
                    .unwrap()
            };
            self.ev = Some(self.v.remove(i).0);
        }
        self.v.push((a.block, 1, now));
        false
    }
    fn contains(&self, b: u64) -> bool {
        self.v.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// GreedyDual-Size, size 1, cost = miss penalty: (block, H, when H was set);
/// evict the smallest (H, set first) and raise L to its H.
pub struct RefGds {
    c: usize,
    faults: Arc<dyn FaultMap>,
    l: u64,
    seq: u64,
    v: Vec<(u64, u64, u64)>,
    ev: Option<u64>,
}
impl Policy for RefGds {
    fn access(&mut self, a: &Access) -> bool {
        self.ev = None;
        let hit = take_by_block!(self.v, a.block);
        if !hit && self.v.len() == self.c {
            let i = (0..self.v.len()).min_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap();
            let (b, h, _) = self.v.remove(i);
            self.l = h;
            self.ev = Some(b);
        }
        let h = self.l + self.faults.penalty(a.block) as u64;
        self.v.push((a.block, h, self.seq));
        self.seq += 1;
        hit
    }
    fn contains(&self, b: u64) -> bool {
        self.v.iter().any(|e| e.0 == b)
    }
    fn remove(&mut self, b: u64) -> bool {
        take_by_block!(self.v, b)
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    common!();
}

/// The reference for any policy name, fault-aware ones included.
pub fn build_ref_fault(name: &str, c: usize, faults: Arc<dyn FaultMap>) -> Box<dyn Policy> {
    match name {
        "vdf-lru" => Box::new(RefVdf::new(Base::Lru, c, faults)),
        "vdf-fifo" => Box::new(RefVdf::new(Base::Fifo, c, faults)),
        "vdf-clock" => Box::new(RefVdf::new(Base::Clock, c, faults)),
        "vdf-arc" => Box::new(RefArc::vdf(c, faults)),
        "vdf-lfu" => Box::new(RefVdfLfu {
            c,
            faults,
            gts: 0,
            v: vec![],
            ev: None,
        }),
        "gds" => Box::new(RefGds {
            c,
            faults,
            l: 0,
            seq: 0,
            v: vec![],
            ev: None,
        }),
        other => build_ref(other, c),
    }
}

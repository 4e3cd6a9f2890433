//! Deliberately naive reference implementations (test only).
//!
//! Each one restates a policy's definition with plain vectors and linear
//! scans — no hashing, no intrusive lists, no heaps — so that the fast
//! implementations can be checked against them access for access. Vectors are
//! ordered oldest / least recent first (index 0 is the eviction end).

use super::{Access, Policy};

fn pos(v: &[u64], b: u64) -> Option<usize> {
    v.iter().position(|&x| x == b)
}

macro_rules! len_cap {
    () => {
        fn capacity(&self) -> usize {
            self.c
        }
    };
}

pub struct RefLru {
    c: usize,
    v: Vec<u64>,
}
impl RefLru {
    pub fn new(c: usize) -> Self {
        RefLru { c, v: vec![] }
    }
}
impl Policy for RefLru {
    fn access(&mut self, a: &Access) -> bool {
        if let Some(i) = pos(&self.v, a.block) {
            self.v.remove(i);
            self.v.push(a.block);
            return true;
        }
        if self.v.len() == self.c {
            self.v.remove(0);
        }
        self.v.push(a.block);
        false
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    len_cap!();
}

pub struct RefFifo {
    c: usize,
    v: Vec<u64>,
}
impl RefFifo {
    pub fn new(c: usize) -> Self {
        RefFifo { c, v: vec![] }
    }
}
impl Policy for RefFifo {
    fn access(&mut self, a: &Access) -> bool {
        if pos(&self.v, a.block).is_some() {
            return true;
        }
        if self.v.len() == self.c {
            self.v.remove(0);
        }
        self.v.push(a.block);
        false
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    len_cap!();
}

/// LFU: (block, count since insertion, time of last access).
pub struct RefLfu {
    c: usize,
    t: u64,
    v: Vec<(u64, u64, u64)>,
}
impl RefLfu {
    pub fn new(c: usize) -> Self {
        RefLfu { c, t: 0, v: vec![] }
    }
}
impl Policy for RefLfu {
    fn access(&mut self, a: &Access) -> bool {
        self.t += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 += 1;
            e.2 = self.t;
            return true;
        }
        if self.v.len() == self.c {
            let i = (0..self.v.len()).min_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap();
            self.v.remove(i);
        }
        self.v.push((a.block, 1, self.t));
        false
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    len_cap!();
}

/// CLOCK stated as FIFO with reinsertion: a referenced block at the tail gets
/// its bit cleared and goes back to the head.
pub struct RefClock {
    c: usize,
    q: Vec<(u64, bool)>,
}
impl RefClock {
    pub fn new(c: usize) -> Self {
        RefClock { c, q: vec![] }
    }
}
impl Policy for RefClock {
    fn access(&mut self, a: &Access) -> bool {
        if let Some(e) = self.q.iter_mut().find(|e| e.0 == a.block) {
            e.1 = true;
            return true;
        }
        if self.q.len() == self.c {
            loop {
                let (b, r) = self.q.remove(0);
                if !r {
                    break;
                }
                self.q.push((b, false));
            }
        }
        self.q.push((a.block, false));
        false
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    len_cap!();
}

/// SIEVE: queue (index 0 = oldest), hand = index it will examine next.
pub struct RefSieve {
    c: usize,
    q: Vec<(u64, bool)>,
    hand: Option<usize>,
}
impl RefSieve {
    pub fn new(c: usize) -> Self {
        RefSieve {
            c,
            q: vec![],
            hand: None,
        }
    }
}
impl Policy for RefSieve {
    fn access(&mut self, a: &Access) -> bool {
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
            self.q.remove(i);
            // The hand rests on the next newer block (now at index i), if any.
            self.hand = if i < self.q.len() { Some(i) } else { None };
        }
        self.q.push((a.block, false));
        false
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    len_cap!();
}

/// ARC with the four lists as vectors (index 0 = LRU end).
pub struct RefArc {
    c: usize,
    p: f64,
    t1: Vec<u64>,
    t2: Vec<u64>,
    b1: Vec<u64>,
    b2: Vec<u64>,
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
        }
    }
    fn replace(&mut self, in_b2: bool) {
        let t1 = self.t1.len() as f64;
        if (!self.t1.is_empty() && (t1 > self.p || (t1 == self.p && in_b2))) || self.t2.is_empty() {
            let x = self.t1.remove(0);
            self.b1.push(x);
        } else {
            let x = self.t2.remove(0);
            self.b2.push(x);
        }
    }
}
impl Policy for RefArc {
    fn access(&mut self, a: &Access) -> bool {
        let x = a.block;
        if let Some(i) = pos(&self.t1, x) {
            self.t1.remove(i);
            self.t2.push(x);
            return true;
        }
        if let Some(i) = pos(&self.t2, x) {
            self.t2.remove(i);
            self.t2.push(x);
            return true;
        }
        if let Some(i) = pos(&self.b1, x) {
            let d = (self.b2.len() as f64 / self.b1.len() as f64).max(1.0);
            self.p = (self.p + d).min(self.c as f64);
            self.replace(false);
            self.b1.remove(i);
            self.t2.push(x);
            return false;
        }
        if let Some(i) = pos(&self.b2, x) {
            let d = (self.b1.len() as f64 / self.b2.len() as f64).max(1.0);
            self.p = (self.p - d).max(0.0);
            self.replace(true);
            self.b2.remove(i);
            self.t2.push(x);
            return false;
        }
        if self.t1.len() + self.t2.len() == self.c {
            if self.t1.len() + self.b1.len() == self.c {
                if !self.b1.is_empty() {
                    self.b1.remove(0);
                    self.replace(false);
                } else {
                    self.t1.remove(0);
                }
            } else {
                if self.t1.len() + self.t2.len() + self.b1.len() + self.b2.len() >= 2 * self.c {
                    self.b2.remove(0);
                }
                self.replace(false);
            }
        }
        self.t1.push(x);
        false
    }
    fn len(&self) -> usize {
        self.t1.len() + self.t2.len()
    }
    len_cap!();
}

/// OPT: evict the largest next use; ties (never used again) by the most
/// recent access.
pub struct RefOpt {
    c: usize,
    t: u64,
    v: Vec<(u64, u64, u64)>,
}
impl RefOpt {
    pub fn new(c: usize) -> Self {
        RefOpt { c, t: 0, v: vec![] }
    }
}
impl Policy for RefOpt {
    fn access(&mut self, a: &Access) -> bool {
        self.t += 1;
        if let Some(e) = self.v.iter_mut().find(|e| e.0 == a.block) {
            e.1 = a.next_use;
            e.2 = self.t;
            return true;
        }
        if self.v.len() == self.c {
            let i = (0..self.v.len()).max_by_key(|&i| (self.v[i].1, self.v[i].2)).unwrap();
            self.v.remove(i);
        }
        self.v.push((a.block, a.next_use, self.t));
        false
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    len_cap!();
}

/// 2Q with Kin = ⌊c/4⌋, Kout = ⌊c/2⌋, Am ≤ c − Kin.
pub struct RefTwoQ {
    c: usize,
    kin: usize,
    kout: usize,
    ain: Vec<u64>,
    am: Vec<u64>,
    aout: Vec<u64>,
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
        }
    }
}
impl Policy for RefTwoQ {
    fn access(&mut self, a: &Access) -> bool {
        let x = a.block;
        if pos(&self.ain, x).is_some() {
            return true;
        }
        if let Some(i) = pos(&self.am, x) {
            self.am.remove(i);
            self.am.push(x);
            return true;
        }
        let ghost = match pos(&self.aout, x) {
            Some(i) => {
                self.aout.remove(i);
                true
            }
            None => false,
        };
        while self.ain.len() + self.am.len() + 1 > self.c {
            if self.ain.len() > self.kin {
                let y = self.ain.remove(0);
                if self.kout > 0 {
                    if self.aout.len() == self.kout {
                        self.aout.remove(0);
                    }
                    self.aout.push(y);
                }
            } else {
                self.am.remove(0);
            }
        }
        if ghost {
            if self.am.len() + 1 > self.c - self.kin {
                self.am.remove(0);
            }
            self.am.push(x);
        } else {
            self.ain.push(x);
        }
        false
    }
    fn len(&self) -> usize {
        self.ain.len() + self.am.len()
    }
    len_cap!();
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
        }
    }
}
impl Policy for RefS3Fifo {
    fn access(&mut self, a: &Access) -> bool {
        let x = a.block;
        if let Some(e) = self.small.iter_mut().chain(self.main.iter_mut()).find(|e| e.0 == x) {
            e.1 = e.1.saturating_add(1);
            return true;
        }
        let ghost = match pos(&self.ghost, x) {
            Some(i) => {
                self.ghost.remove(i);
                true
            }
            None => false,
        };
        while self.small.len() + self.main.len() + 1 > self.c {
            self.evicted = true;
            if self.main.len() > self.c - self.small_cap || self.small.is_empty() {
                loop {
                    let (b, f) = self.main.remove(0);
                    if f == 0 {
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
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
    len_cap!();
}

/// LRU-2: (block, penultimate access, last access); once-seen blocks first,
/// oldest first; then the oldest penultimate access.
pub struct RefLru2 {
    c: usize,
    t: u64,
    v: Vec<(u64, Option<u64>, u64)>,
}
impl RefLru2 {
    pub fn new(c: usize) -> Self {
        RefLru2 { c, t: 0, v: vec![] }
    }
}
impl Policy for RefLru2 {
    fn access(&mut self, a: &Access) -> bool {
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
            self.v.remove(i);
        }
        self.v.push((a.block, None, self.t));
        false
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    len_cap!();
}

/// MQ: queues of (block, freq, expire), index 0 = LRU end; Qout of (block, freq).
pub struct RefMq {
    c: usize,
    vtime: u64,
    q: Vec<Vec<(u64, u32, u64)>>,
    qout: Vec<(u64, u32)>,
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
            if self.qout.len() == 4 * self.c {
                self.qout.remove(0);
            }
            self.qout.push((b, fb));
        }
        self.q[Self::qnum(f)].push((x, f, self.vtime + Self::LIFE));
        self.adjust();
        false
    }
    fn len(&self) -> usize {
        self.q.iter().map(|q| q.len()).sum()
    }
    len_cap!();
}

/// LIRS: stack S (index 0 = bottom), Q and NR (index 0 = oldest), and a
/// status per known block: (block, is_lir, is_resident).
pub struct RefLirs {
    c: usize,
    lirs_limit: usize,
    s: Vec<u64>,
    q: Vec<u64>,
    nr: Vec<u64>,
    st: Vec<(u64, bool, bool)>,
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
        let hit = self.access_inner(a);
        while self.s.len() > 2 * self.c && !self.nr.is_empty() {
            let old = self.nr.remove(0);
            self.s.retain(|&y| y != old);
            self.drop_block(old);
        }
        hit
    }
    fn len(&self) -> usize {
        self.n_lir() + self.q.len()
    }
    len_cap!();
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

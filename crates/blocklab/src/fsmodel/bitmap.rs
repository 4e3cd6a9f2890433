//! A plain bitmap with first-zero search (the allocator's scan).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: u64,
    ones: u64,
}

impl Bitmap {
    pub fn new(len: u64) -> Bitmap {
        Bitmap {
            words: vec![0; len.div_ceil(64) as usize],
            len,
            ones: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bits set.
    pub fn count_ones(&self) -> u64 {
        self.ones
    }

    #[inline]
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Set bit `i`; returns whether it was clear.
    #[inline]
    pub fn set(&mut self, i: u64) -> bool {
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        let was_clear = *w & m == 0;
        *w |= m;
        // A branch, as in `clear`: rustc 1.95.0 at opt-level 3 dropped
        // `self.ones += was_clear as u64` when `set` sat in a loop condition
        // (Linux 2.2's preallocation window: the bits set, the count not).
        if was_clear {
            self.ones += 1;
        }
        was_clear
    }

    /// Clear bit `i`; returns whether it was set.
    #[inline]
    pub fn clear(&mut self, i: u64) -> bool {
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        let was_set = *w & m != 0;
        *w &= !m;
        // Not `self.ones -= was_set as u64`: rustc 1.95.0 at opt-level 3
        // drops that subtraction (the count stayed put in release builds
        // while every bit cleared; debug builds were right).
        if was_set {
            self.ones -= 1;
        }
        was_set
    }

    /// First clear bit in `from..=to` (inclusive, clipped to the length).
    pub fn first_zero(&self, from: u64, to: u64) -> Option<u64> {
        let to = to.min(self.len.checked_sub(1)?);
        let mut i = from;
        while i <= to {
            let wi = (i / 64) as usize;
            let w = self.words[wi] | ((1u64 << (i % 64)) - 1);
            if w != u64::MAX {
                let b = wi as u64 * 64 + (!w).trailing_zeros() as u64;
                return (b <= to).then_some(b);
            }
            i = (wi as u64 + 1) * 64;
        }
        None
    }

    /// First set bit in `from..=to`.
    pub fn first_one(&self, from: u64, to: u64) -> Option<u64> {
        let to = to.min(self.len.checked_sub(1)?);
        let mut i = from;
        while i <= to {
            let wi = (i / 64) as usize;
            let w = self.words[wi] & !((1u64 << (i % 64)) - 1);
            if w != 0 {
                let b = wi as u64 * 64 + w.trailing_zeros() as u64;
                return (b <= to).then_some(b);
            }
            i = (wi as u64 + 1) * 64;
        }
        None
    }

    /// Bits set in `from..=to` (clipped to the length).
    pub fn count_ones_in(&self, from: u64, to: u64) -> u64 {
        let Some(to) = self.len.checked_sub(1).map(|l| to.min(l)) else {
            return 0;
        };
        if from > to {
            return 0;
        }
        let (a, b) = ((from / 64) as usize, (to / 64) as usize);
        let lo = !0u64 << (from % 64);
        let hi = !0u64 >> (63 - to % 64);
        if a == b {
            return (self.words[a] & lo & hi).count_ones() as u64;
        }
        let mid: u64 = self.words[a + 1..b].iter().map(|w| w.count_ones() as u64).sum();
        (self.words[a] & lo).count_ones() as u64 + mid + (self.words[b] & hi).count_ones() as u64
    }

    /// Bits `from..from+n` as words (bit j of the result = bit from+j).
    pub fn extract(&self, from: u64, n: u64) -> Box<[u64]> {
        let mut out = vec![0u64; n.div_ceil(64) as usize];
        for j in 0..n {
            if self.get(from + j) {
                out[(j / 64) as usize] |= 1 << (j % 64);
            }
        }
        out.into_boxed_slice()
    }

    /// Indices of the set bits, ascending.
    pub fn ones(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as u64;
                    w &= w - 1;
                    wi as u64 * 64 + b
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn searches_match_a_linear_scan(bits in proptest::collection::vec(any::<bool>(), 1..300), from in 0u64..300, to in 0u64..300) {
            let mut b = Bitmap::new(bits.len() as u64);
            for (i, &x) in bits.iter().enumerate() { if x { b.set(i as u64); } }
            let n = bits.len() as u64;
            let zero = (from..=to.min(n - 1)).find(|&i| !bits[i as usize]);
            let one = (from..=to.min(n - 1)).find(|&i| bits[i as usize]);
            prop_assert_eq!(b.first_zero(from, to), zero);
            prop_assert_eq!(b.first_one(from, to), one);
            prop_assert_eq!(b.count_ones(), bits.iter().filter(|&&x| x).count() as u64);
            let ones_in = (from..=to.min(n - 1)).filter(|&i| bits[i as usize]).count() as u64;
            prop_assert_eq!(b.count_ones_in(from, to), ones_in);
            let ones: Vec<u64> = b.ones().collect();
            let want: Vec<u64> = (0..n).filter(|&i| bits[i as usize]).collect();
            prop_assert_eq!(ones, want);
            // Clearing every bit again counts down to zero.
            for i in 0..n {
                prop_assert_eq!(b.clear(i), bits[i as usize]);
            }
            prop_assert_eq!(b.count_ones(), 0);
        }
    }
}

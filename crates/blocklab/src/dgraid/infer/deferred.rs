//! The deferred-write list: data-region blocks written before anything
//! says whose they are, with their newest contents, oldest first. A block
//! written again moves to the young end (its owner is likelier to come
//! soon). The bound is the caller's: [`Deferred::pop_oldest`] is how it
//! makes room.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct Deferred {
    next: u64,
    by_age: BTreeMap<u64, u64>,
    blocks: FxHashMap<u64, (u64, Vec<u8>)>,
}

impl Deferred {
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub fn get(&self, block: u64) -> Option<&[u8]> {
        self.blocks.get(&block).map(|(_, d)| d.as_slice())
    }

    /// Hold `data` for `block` (replacing what was held).
    pub fn put(&mut self, block: u64, data: Vec<u8>) {
        if let Some((age, _)) = self.blocks.remove(&block) {
            self.by_age.remove(&age);
        }
        self.by_age.insert(self.next, block);
        self.blocks.insert(block, (self.next, data));
        self.next += 1;
    }

    pub fn take(&mut self, block: u64) -> Option<Vec<u8>> {
        let (age, d) = self.blocks.remove(&block)?;
        self.by_age.remove(&age);
        Some(d)
    }

    pub fn pop_oldest(&mut self) -> Option<(u64, Vec<u8>)> {
        let (_, block) = self.by_age.pop_first()?;
        let (_, d) = self.blocks.remove(&block).expect("indexed");
        Some((block, d))
    }

    /// Everything held, oldest first.
    pub fn drain(&mut self) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(x) = self.pop_oldest() {
            out.push(x);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_and_rewrite_moves_young() {
        let mut d = Deferred::default();
        d.put(5, vec![1]);
        d.put(6, vec![2]);
        d.put(5, vec![3]);
        assert_eq!(d.len(), 2);
        assert_eq!(d.get(5), Some(&[3u8][..]));
        assert_eq!(d.pop_oldest(), Some((6, vec![2])));
        assert_eq!(d.take(5), Some(vec![3]));
        assert_eq!(d.pop_oldest(), None);
    }
}

//! Policy tests: every fast policy against its naive reference on random
//! sequences (proptest), stack and optimality properties, and hand-worked
//! examples.

use super::reference::build_ref;
use super::{build, Access, Policy, NEVER, POLICIES};
use proptest::prelude::*;

/// `next_use[i]`: index of the next access to the same block, or NEVER.
fn next_uses(seq: &[u64]) -> Vec<u64> {
    let mut next = vec![NEVER; seq.len()];
    let mut last = std::collections::HashMap::new();
    for i in (0..seq.len()).rev() {
        if let Some(&j) = last.get(&seq[i]) {
            next[i] = j as u64;
        }
        last.insert(seq[i], i);
    }
    next
}

/// Hit (true) / miss per access, checking len ≤ capacity after each access.
fn run(p: &mut dyn Policy, seq: &[u64]) -> Vec<bool> {
    let next = next_uses(seq);
    seq.iter()
        .zip(&next)
        .map(|(&block, &next_use)| {
            let hit = p.access(&Access {
                block,
                next_use,
                write: false,
            });
            assert!(p.len() <= p.capacity(), "len {} > capacity {}", p.len(), p.capacity());
            hit
        })
        .collect()
}

fn hits(name: &str, cap: usize, seq: &[u64]) -> Vec<bool> {
    run(build(name, cap).unwrap().as_mut(), seq)
}

fn misses(name: &str, cap: usize, seq: &[u64]) -> usize {
    hits(name, cap, seq).iter().filter(|h| !**h).count()
}

fn pattern(s: &str) -> Vec<bool> {
    s.chars().filter(|c| !c.is_whitespace()).map(|c| c == 'H').collect()
}

fn blocks(s: &str) -> Vec<u64> {
    s.chars().filter(|c| !c.is_whitespace()).map(|c| c as u64).collect()
}

/// Random sequences over small universes (so there are hits), mixing a
/// skewed and a looping component.
fn sequences() -> impl Strategy<Value = (Vec<u64>, usize)> {
    (1u64..40, 0usize..400, 1usize..24).prop_flat_map(|(universe, len, cap)| {
        let skewed = prop::collection::vec((0..universe, 0..universe).prop_map(|(a, b)| a.min(b)), len);
        (skewed, Just(cap))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_policy_equals_its_reference((seq, cap) in sequences()) {
        for name in POLICIES {
            let fast = hits(name, cap, &seq);
            let slow = run(build_ref(name, cap).as_mut(), &seq);
            if let Some(i) = fast.iter().zip(&slow).position(|(a, b)| a != b) {
                prop_assert!(false, "{name} cap={cap}: access {i} fast={} ref={}", fast[i], slow[i]);
            }
        }
    }

    #[test]
    fn hits_are_real_and_counts_add_up((seq, cap) in sequences()) {
        for name in POLICIES {
            let h = hits(name, cap, &seq);
            prop_assert_eq!(h.len(), seq.len());
            let mut seen = std::collections::HashSet::new();
            for (i, &b) in seq.iter().enumerate() {
                // A first access can never hit.
                prop_assert!(seen.contains(&b) || !h[i], "{} phantom hit at {}", name, i);
                seen.insert(b);
            }
            let n_hits = h.iter().filter(|x| **x).count();
            prop_assert_eq!(n_hits + misses(name, cap, &seq), seq.len());
        }
    }

    #[test]
    fn stack_policies_never_get_worse_with_size((seq, cap) in sequences()) {
        for name in ["lru", "opt"] {
            prop_assert!(misses(name, cap + 1, &seq) <= misses(name, cap, &seq), "{}", name);
        }
    }

    #[test]
    fn opt_is_optimal((seq, cap) in sequences()) {
        let best = misses("opt", cap, &seq);
        for name in POLICIES {
            prop_assert!(best <= misses(name, cap, &seq), "{} beats opt", name);
        }
    }
}

#[test]
fn long_random_run_matches_reference() {
    // Longer runs reach steady states (ghost lists full, MQ demotions with a
    // short trace would never expire, so use several skews).
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let mut seq = Vec::new();
    for _ in 0..6000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = x % 1000;
        seq.push(if r < 600 { r % 30 } else { r % 300 });
    }
    for name in POLICIES {
        for cap in [1, 5, 32, 100] {
            let fast = hits(name, cap, &seq);
            let slow = run(build_ref(name, cap).as_mut(), &seq);
            assert!(fast == slow, "{name} cap={cap}");
        }
    }
}

#[test]
fn unknown_policy_and_zero_size_are_errors() {
    assert!(build("nope", 10).is_err());
    for name in POLICIES {
        assert!(build(name, 0).is_err());
        assert!(build(name, 1).is_ok());
    }
}

// ---- hand-worked examples ------------------------------------------------

/// The textbook reference string of Belady's anomaly.
const BELADY: &str = "1 2 3 4 1 2 5 1 2 3 4 5";

#[test]
fn fifo_shows_beladys_anomaly() {
    let s = blocks(BELADY);
    assert_eq!(misses("fifo", 3, &s), 9);
    assert_eq!(misses("fifo", 4, &s), 10);
}

#[test]
fn lru_and_opt_textbook_fault_counts() {
    let s = blocks(BELADY);
    assert_eq!(misses("lru", 3, &s), 10);
    assert_eq!(misses("lru", 4, &s), 8);
    assert_eq!(misses("opt", 3, &s), 7);
    assert_eq!(misses("opt", 4, &s), 6);
    // LRU, 3 frames: only the second "1 2" after 4 hits.
    assert_eq!(hits("lru", 3, &s), pattern("MMMMMMMHHMMM"));
}

#[test]
fn clock_gives_a_second_chance_then_sweeps_on() {
    // a gets its bit at the 4th access; d clears it and evicts b; the hand
    // then takes c for b, and a (bit now clear) for e, so a misses.
    let s = blocks("abcadbea");
    assert_eq!(hits("clock", 3, &s), pattern("MMMHMMMM"));
}

#[test]
fn sieve_keeps_its_hand_where_it_stopped() {
    // Same string: SIEVE's hand clears a, evicts b, then stays near the head
    // (c, then d are evicted), so a survives where CLOCK dropped it.
    let s = blocks("abcadbea");
    assert_eq!(hits("sieve", 3, &s), pattern("MMMHMMMH"));
    // FIFO evicts a at d regardless of its hit (b then hits, a misses).
    assert_eq!(hits("fifo", 3, &s), pattern("MMMHMHMM"));
}

#[test]
fn lfu_counts_and_breaks_ties_by_recency() {
    // a has 2 accesses, b 1: b goes.
    assert_eq!(hits("lfu", 2, &blocks("aabcab")), pattern("MHMMHM"));
    // a and b both at 2; a is less recent, so a goes.
    assert_eq!(hits("lfu", 2, &blocks("ababcba")), pattern("MMHHMHM"));
    // Counts reset on eviction: a (3 hits) is evicted only when its count is lowest.
    assert_eq!(hits("lfu", 1, &blocks("aaab")), pattern("MHHM"));
}

#[test]
fn arc_moves_ghost_hits_to_t2() {
    // c=2: b is demoted to B1 by c; the B1 hit on b grows p and demotes a to
    // B2; the B2 hit on a shrinks p and demotes c; then b and a are in T2.
    let s = blocks("abacbabc");
    assert_eq!(hits("arc", 2, &s), pattern("MMHMMMHM"));
}

#[test]
fn opt_evicts_the_farthest_next_use() {
    // c=2: at c, a is used next (index 3) and b at 5: b goes.
    assert_eq!(hits("opt", 2, &blocks("abcacb")), pattern("MMMHHM"));
}

#[test]
fn twoq_keeps_a1in_hits_in_place_and_promotes_ghosts() {
    // c=4: Kin=1, Kout=2. e pushes a to A1out; a comes back into Am (b goes
    // to A1out); a then hits in Am; b comes back from A1out.
    let s = blocks("abcdeaab");
    assert_eq!(hits("2q", 4, &s), pattern("MMMMMMHM"));
}

#[test]
fn lru2_evicts_once_seen_blocks_first() {
    // LRU evicts a at c (older), LRU-2 evicts b (seen once).
    let s = blocks("aabca");
    assert_eq!(hits("lru2", 2, &s), pattern("MHMMH"));
    assert_eq!(hits("lru", 2, &s), pattern("MHMMM"));
}

#[test]
fn mq_protects_frequent_blocks() {
    let s = blocks("aabca");
    assert_eq!(hits("mq", 2, &s), pattern("MHMMH"));
}

#[test]
fn s3fifo_filters_one_hit_wonders() {
    // c=10: S holds 1 block, M 9. Block 1 enters S, 2..10 fill M; 11 pushes
    // 1 out of S into the ghost; 1 comes back into M (11 goes to the ghost);
    // 12 makes M evict its oldest (2, never re-referenced, not remembered).
    let mut s: Vec<u64> = (1..=10).collect();
    s.extend([11, 1, 12, 2, 3]);
    let mut want = vec![false; 14];
    want.push(true);
    assert_eq!(hits("s3fifo", 10, &s), want);
}

#[test]
fn lirs_promotes_a_nonresident_block_with_a_short_reuse_distance() {
    // c=3: 2 LIR + 1 HIR slot. a, b become LIR; c is HIR. d evicts c (kept
    // as a non-resident entry); c's return makes it LIR and demotes a; d's
    // return likewise demotes b; b then hits as a resident HIR block.
    let s = blocks("abcdcdba");
    assert_eq!(hits("lirs", 3, &s), pattern("MMMMMMHM"));
}

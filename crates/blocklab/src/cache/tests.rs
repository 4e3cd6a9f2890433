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

// ---- contains / evicted / remove -----------------------------------------

use super::fault::{all_policies, build_fault_aware, FaultMap, ModMap};
use super::reference::build_ref_fault;
use std::collections::BTreeSet;
use std::sync::Arc;

/// One step of a cache's life: an access, or an invalidation.
#[derive(Debug, Clone, Copy)]
enum Op {
    Get(u64),
    Drop(u64),
}

/// Accesses over a small skewed universe interleaved with removes (0 to 50%
/// of the steps, skewed the same way so they often hit resident blocks).
/// Returns the ops, the capacity, the universe, and the failure plan for the
/// fault-aware policies: disks, failed disk, step of the failure.
#[allow(clippy::type_complexity)]
fn op_sequences() -> impl Strategy<Value = (Vec<Op>, usize, u64, (u32, u32, usize))> {
    (1u64..40, 0usize..400, 1usize..24, 0u32..6).prop_flat_map(|(universe, len, cap, rm)| {
        let op =
            (0..universe, 0..universe, 0u32..10).prop_map(
                move |(a, b, r)| {
                    if r < rm {
                        Op::Drop(a.min(b))
                    } else {
                        Op::Get(a.min(b))
                    }
                },
            );
        let fail = (2u32..7, 0u32..7, 0usize..400).prop_map(|(n, f, at)| (n, f % n, at));
        (prop::collection::vec(op, len), Just(cap), Just(universe), fail)
    })
}

/// The accesses of `ops`, with `next_use` counted in the access stream.
fn accesses_of(ops: &[Op]) -> Vec<Access> {
    let blocks: Vec<u64> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Get(b) => Some(*b),
            Op::Drop(_) => None,
        })
        .collect();
    blocks
        .iter()
        .zip(next_uses(&blocks))
        .map(|(&block, next_use)| Access {
            block,
            next_use,
            write: false,
        })
        .collect()
}

fn resident(p: &dyn Policy, universe: u64) -> BTreeSet<u64> {
    (0..universe).filter(|&b| p.contains(b)).collect()
}

/// Drive a fast policy and its reference through `ops` (a disk of `fail`
/// fails at its step, shared by both), comparing everything observable after
/// every step (`contains` over the universe every `sweep` steps).
fn check_against_reference(
    name: &str,
    cap: usize,
    universe: u64,
    ops: &[Op],
    fail: (u32, u32, usize),
    sweep: usize,
) -> Result<(), TestCaseError> {
    let (ndisks, disk, fail_at) = fail;
    let map = Arc::new(ModMap::new(ndisks));
    let faults: Arc<dyn FaultMap> = map.clone();
    let mut fast = build_fault_aware(name, cap, faults.clone()).unwrap();
    let mut slow = build_ref_fault(name, cap, faults);
    let mut acc = accesses_of(ops).into_iter();
    for (i, op) in ops.iter().enumerate() {
        if i == fail_at {
            map.fail(disk);
        }
        match *op {
            Op::Get(b) => {
                let a = acc.next().unwrap();
                let (f, s) = (fast.access(&a), slow.access(&a));
                prop_assert_eq!(f, s, "{} cap={}: step {} get {} hit", name, cap, i, b);
            }
            Op::Drop(b) => {
                let (f, s) = (fast.remove(b), slow.remove(b));
                prop_assert_eq!(f, s, "{} cap={}: step {} remove {}", name, cap, i, b);
            }
        }
        prop_assert_eq!(
            fast.evicted(),
            slow.evicted(),
            "{} cap={}: step {} evicted",
            name,
            cap,
            i
        );
        prop_assert_eq!(fast.len(), slow.len(), "{} cap={}: step {} len", name, cap, i);
        if i % sweep == 0 || i + 1 == ops.len() {
            for b in 0..universe {
                prop_assert_eq!(
                    fast.contains(b),
                    slow.contains(b),
                    "{} cap={}: step {} contains {}",
                    name,
                    cap,
                    i,
                    b
                );
            }
        }
    }
    Ok(())
}

/// What every policy (and every reference) must satisfy whatever its rules:
/// a hit is exactly an access to a resident block and evicts nothing; a miss
/// evicts one resident block exactly when the cache was full; the resident
/// set changes by the accessed block in and the evicted block out; `remove`
/// drops exactly the block and says whether it was there; `len` counts the
/// resident blocks; `contains` changes nothing.
fn check_residency(p: &mut dyn Policy, universe: u64, ops: &[Op], what: &str) -> Result<(), TestCaseError> {
    let cap = p.capacity();
    let mut acc = accesses_of(ops).into_iter();
    let mut prev = resident(p, universe);
    prop_assert!(prev.is_empty());
    for (i, op) in ops.iter().enumerate() {
        let before_ev = p.evicted();
        let mut want = prev.clone();
        match *op {
            Op::Get(b) => {
                let hit = p.access(&acc.next().unwrap());
                let ev = p.evicted();
                prop_assert_eq!(hit, prev.contains(&b), "{}: step {} hit on {}", what, i, b);
                if hit {
                    prop_assert_eq!(ev, None, "{}: step {} hit evicted", what, i);
                } else {
                    prop_assert_eq!(ev.is_some(), prev.len() == cap, "{}: step {} evicted {:?}", what, i, ev);
                    if let Some(e) = ev {
                        prop_assert!(
                            e != b && want.remove(&e),
                            "{}: step {} evicted {} not resident",
                            what,
                            i,
                            e
                        );
                    }
                    want.insert(b);
                }
            }
            Op::Drop(b) => {
                let was = p.remove(b);
                prop_assert_eq!(was, want.remove(&b), "{}: step {} remove {}", what, i, b);
                prop_assert_eq!(p.evicted(), before_ev, "{}: step {} remove changed evicted", what, i);
            }
        }
        let now = resident(p, universe);
        prop_assert_eq!(&now, &want, "{}: step {} resident set", what, i);
        prop_assert_eq!(p.len(), now.len(), "{}: step {} len", what, i);
        prev = now;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_policy_with_removes_equals_its_reference((ops, cap, universe, fail) in op_sequences()) {
        for name in all_policies() {
            check_against_reference(name, cap, universe, &ops, fail, 1)?;
        }
    }

    #[test]
    fn every_policy_accounts_for_residency((ops, cap, universe, fail) in op_sequences()) {
        let (ndisks, disk, fail_at) = fail;
        for name in all_policies() {
            let map = Arc::new(ModMap::new(ndisks));
            if fail_at < ops.len() / 2 {
                map.fail(disk);
            }
            let mut p = build_fault_aware(name, cap, map.clone()).unwrap();
            check_residency(p.as_mut(), universe, &ops, name)?;
            let mut r = build_ref_fault(name, cap, map);
            check_residency(r.as_mut(), universe, &ops, &format!("reference {name}"))?;
        }
    }
}

/// Long runs reach steady states (ghost lists full, LIRS stack limits) with
/// removes throughout and a disk failing half-way. The working set moves
/// after 2,000 steps (blocks 0..150, then 150..300), so frequent blocks of the
/// first phase sit unused in MQ's upper queues past its lifetime of 10,000
/// ticks and get demoted.
#[test]
fn long_random_run_with_removes_matches_reference() {
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut ops = Vec::new();
    for i in 0..16_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = x % 1000;
        let phase = if i < 2000 { 0 } else { 150 };
        let b = phase + if r < 600 { r % 30 } else { r % 150 };
        ops.push(if (x >> 20).is_multiple_of(8) {
            Op::Drop(b)
        } else {
            Op::Get(b)
        });
    }
    for name in all_policies() {
        for cap in [1, 5, 32, 100] {
            if let Err(e) = check_against_reference(name, cap, 300, &ops, (5, 2, 8000), 64) {
                panic!("{e}");
            }
        }
    }
}

#[test]
fn remove_by_hand() {
    let run = |name: &str, cap: usize, ops: &[Op]| -> Vec<(bool, Option<u64>)> {
        let mut p = build(name, cap).unwrap();
        ops.iter()
            .map(|&op| match op {
                Op::Get(b) => (p.access(&Access::read(b)), p.evicted()),
                Op::Drop(b) => (p.remove(b), p.evicted()),
            })
            .collect()
    };
    use Op::{Drop as D, Get as G};
    // LRU, 2 blocks: 1 2 | remove 1 | 3 fills the hole (no eviction) | 4 evicts 2.
    assert_eq!(
        run("lru", 2, &[G(1), G(2), D(1), D(1), G(3), G(4)]),
        vec![
            (false, None),
            (false, None),
            (true, None),
            (false, None),
            (false, None),
            (false, Some(2))
        ]
    );
    // FIFO, 3 blocks: 1 2 3, remove 2, 4 enters as the newest; 5 evicts 1,
    // then 6 evicts 3 (2 is not skipped over twice, 4 is younger).
    let f = run("fifo", 3, &[G(1), G(2), G(3), D(2), G(4), G(5), G(6)]);
    assert_eq!(
        f[4..].iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![None, Some(1), Some(3)]
    );
    // ARC, 2 blocks: a b, b again (T2), c demotes a to B1; remove b leaves room
    // with a ghost; the ghost hit on a comes back without evicting c.
    let arc = run("arc", 2, &[G(1), G(2), G(2), G(3), D(2), G(1)]);
    assert_eq!(arc[3], (false, Some(1)));
    assert_eq!(arc[5], (false, None));
    // 2Q, 4 blocks (Kin 1): 1..4 fill A1in; 5 pushes 1 to A1out; removing 5
    // leaves room, so 1 comes back into Am with no eviction.
    let q = run("2q", 4, &[G(1), G(2), G(3), G(4), G(5), D(5), G(1)]);
    assert_eq!(q[4], (false, Some(1)));
    assert_eq!(q[6], (false, None));
    // LIRS, 3 blocks (2 LIR): 5 6 LIR, 0 HIR; 0 again turns LIR and demotes 5
    // to a resident HIR outside S. Removing 6 and 0 leaves no LIR block; the
    // hit on 5 pushes it on S, where it would sit at the bottom: it is pruned
    // at once. 1 and 0 become LIR, 1 hits, 5 hits (HIR, not in S, so it stays
    // HIR); 2 then evicts Q's LRU, 5 (not 0, which would be the victim if 5
    // had stayed at the bottom of S and been promoted by its hit).
    let l = run(
        "lirs",
        3,
        &[G(5), G(6), G(0), G(0), D(6), D(0), G(5), G(1), G(0), G(1), G(5), G(2)],
    );
    let hits: Vec<bool> = l.iter().map(|x| x.0).collect();
    assert_eq!(hits, pattern("MMMH HH H MMH H M"));
    assert_eq!(l[11], (false, Some(5)));
}

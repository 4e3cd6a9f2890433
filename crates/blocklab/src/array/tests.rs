//! Layout tables worked out by hand from MD's raid5.c / raid10.c rules, and
//! properties of the mapping and of the plans.

use super::*;
use crate::exec::count::CountExecutor;
use proptest::prelude::*;

fn array(level: Level, layout: Layout, disks: u32, chunk_blocks: u64) -> Array {
    let mut cfg = ArrayConfig::new(level, disks);
    cfg.layout = layout;
    cfg.chunk_bytes = chunk_blocks * cfg.block_size;
    Array::new(cfg).unwrap()
}

/// The stripe rows of a parity array with one-block chunks, as "D0 D1 P Q" strings.
fn rows(level: Level, layout: Layout, disks: u32, stripes: u64) -> Vec<String> {
    let a = array(level, layout, disks, 1);
    let k = a.data_disks_per_stripe() as u64;
    (0..stripes)
        .map(|s| {
            let mut cells = vec![String::from("?"); disks as usize];
            for d in 0..k {
                let pl = a.map(s * k + d);
                assert_eq!(pl.disk_block, s);
                assert_eq!(pl.disks.len(), 1);
                cells[pl.disks[0] as usize] = format!("D{}", s * k + d);
                let par = &pl.parity;
                cells[par[0] as usize] = "P".into();
                if par.len() == 2 {
                    cells[par[1] as usize] = "Q".into();
                }
            }
            cells.join(" ")
        })
        .collect()
}

#[test]
fn raid5_left_symmetric_4_disks() {
    // The classic MD picture (mdadm default).
    assert_eq!(
        rows(Level::Raid5, Layout::LeftSymmetric, 4, 5),
        [
            "D0 D1 D2 P",
            "D4 D5 P D3",
            "D8 P D6 D7",
            "P D9 D10 D11",
            "D12 D13 D14 P"
        ]
    );
}

#[test]
fn raid5_left_asymmetric_4_disks() {
    assert_eq!(
        rows(Level::Raid5, Layout::LeftAsymmetric, 4, 4),
        ["D0 D1 D2 P", "D3 D4 P D5", "D6 P D7 D8", "P D9 D10 D11"]
    );
}

#[test]
fn raid5_right_asymmetric_4_disks() {
    assert_eq!(
        rows(Level::Raid5, Layout::RightAsymmetric, 4, 4),
        ["P D0 D1 D2", "D3 P D4 D5", "D6 D7 P D8", "D9 D10 D11 P"]
    );
}

#[test]
fn raid5_right_symmetric_4_disks() {
    assert_eq!(
        rows(Level::Raid5, Layout::RightSymmetric, 4, 4),
        ["P D0 D1 D2", "D5 P D3 D4", "D7 D8 P D6", "D9 D10 D11 P"]
    );
}

#[test]
fn raid5_parity_first_and_last_and_raid4() {
    assert_eq!(
        rows(Level::Raid5, Layout::ParityFirst, 4, 2),
        ["P D0 D1 D2", "P D3 D4 D5"]
    );
    assert_eq!(
        rows(Level::Raid5, Layout::ParityLast, 4, 2),
        ["D0 D1 D2 P", "D3 D4 D5 P"]
    );
    assert_eq!(
        rows(Level::Raid4, Layout::default(), 4, 2),
        ["D0 D1 D2 P", "D3 D4 D5 P"]
    );
}

#[test]
fn raid5_left_symmetric_5_disks() {
    assert_eq!(
        rows(Level::Raid5, Layout::LeftSymmetric, 5, 5),
        [
            "D0 D1 D2 D3 P",
            "D5 D6 D7 P D4",
            "D10 D11 P D8 D9",
            "D15 P D12 D13 D14",
            "P D16 D17 D18 D19"
        ]
    );
}

#[test]
fn raid6_left_symmetric_5_disks() {
    assert_eq!(
        rows(Level::Raid6, Layout::LeftSymmetric, 5, 5),
        [
            "Q D0 D1 D2 P",
            "D3 D4 D5 P Q",
            "D7 D8 P Q D6",
            "D11 P Q D9 D10",
            "P Q D12 D13 D14"
        ]
    );
}

#[test]
fn raid6_left_asymmetric_5_disks() {
    assert_eq!(
        rows(Level::Raid6, Layout::LeftAsymmetric, 5, 5),
        [
            "Q D0 D1 D2 P",
            "D3 D4 D5 P Q",
            "D6 D7 P Q D8",
            "D9 P Q D10 D11",
            "P Q D12 D13 D14"
        ]
    );
}

#[test]
fn raid6_right_asymmetric_and_ddf_zero_restart_5_disks() {
    let want = [
        "P Q D0 D1 D2",
        "D3 P Q D4 D5",
        "D6 D7 P Q D8",
        "D9 D10 D11 P Q",
        "Q D12 D13 D14 P",
    ];
    assert_eq!(rows(Level::Raid6, Layout::RightAsymmetric, 5, 5), want);
    // Same placement; only the Q syndrome order differs.
    assert_eq!(rows(Level::Raid6, Layout::DdfZeroRestart, 5, 5), want);
}

#[test]
fn raid6_right_symmetric_5_disks() {
    assert_eq!(
        rows(Level::Raid6, Layout::RightSymmetric, 5, 5),
        [
            "P Q D0 D1 D2",
            "D5 P Q D3 D4",
            "D7 D8 P Q D6",
            "D9 D10 D11 P Q",
            "Q D12 D13 D14 P"
        ]
    );
}

#[test]
fn raid6_parity_first_last() {
    assert_eq!(
        rows(Level::Raid6, Layout::ParityFirst, 5, 2),
        ["P Q D0 D1 D2", "P Q D3 D4 D5"]
    );
    assert_eq!(
        rows(Level::Raid6, Layout::ParityLast, 5, 2),
        ["D0 D1 D2 P Q", "D3 D4 D5 P Q"]
    );
    assert_eq!(
        rows(Level::Raid6, Layout::ParityFirst6, 5, 2),
        ["P D0 D1 D2 Q", "P D3 D4 D5 Q"]
    );
}

#[test]
fn raid6_ddf_n_restart_5_disks() {
    assert_eq!(
        rows(Level::Raid6, Layout::DdfNRestart, 5, 5),
        [
            "D0 D1 D2 P Q",
            "D3 D4 P Q D5",
            "D6 P Q D7 D8",
            "P Q D9 D10 D11",
            "Q D12 D13 D14 P"
        ]
    );
}

#[test]
fn raid6_ddf_n_continue_5_disks() {
    assert_eq!(
        rows(Level::Raid6, Layout::DdfNContinue, 5, 5),
        [
            "D0 D1 D2 Q P",
            "D4 D5 Q P D3",
            "D8 Q P D6 D7",
            "Q P D9 D10 D11",
            "P D12 D13 D14 Q"
        ]
    );
}

#[test]
fn raid6_raid5_style_layouts_with_q_last() {
    assert_eq!(
        rows(Level::Raid6, Layout::LeftAsymmetric6, 5, 5),
        [
            "D0 D1 D2 P Q",
            "D3 D4 P D5 Q",
            "D6 P D7 D8 Q",
            "P D9 D10 D11 Q",
            "D12 D13 D14 P Q"
        ]
    );
    assert_eq!(
        rows(Level::Raid6, Layout::RightAsymmetric6, 5, 4),
        ["P D0 D1 D2 Q", "D3 P D4 D5 Q", "D6 D7 P D8 Q", "D9 D10 D11 P Q"]
    );
    assert_eq!(
        rows(Level::Raid6, Layout::LeftSymmetric6, 5, 4),
        ["D0 D1 D2 P Q", "D4 D5 P D3 Q", "D8 P D6 D7 Q", "P D9 D10 D11 Q"]
    );
    assert_eq!(
        rows(Level::Raid6, Layout::RightSymmetric6, 5, 4),
        ["P D0 D1 D2 Q", "D5 P D3 D4 Q", "D7 D8 P D6 Q", "D9 D10 D11 P Q"]
    );
}

#[test]
fn raid6_q_slots_follow_md_syndrome_order() {
    // Left-symmetric: data starts right after Q, so slots are the logical order.
    let a = array(Level::Raid6, Layout::LeftSymmetric, 5, 1);
    assert_eq!(a.stripe_map(2).q_slots(), vec![0, 1, 2]);
    // Q on the last disk: MD starts counting at disk 0. Stripe 1 is "D3 D4 D5 P Q".
    assert_eq!(a.stripe_map(1).q_slots(), vec![0, 1, 2]);
    // Left-symmetric-6 stripe 1 is "D4 D5 P D3 Q": disk order, so D3 (disk 3) is slot 2.
    let a6 = array(Level::Raid6, Layout::LeftSymmetric6, 5, 1);
    assert_eq!(a6.stripe_map(1).q_slots(), vec![2, 0, 1]);
    // Left-asymmetric stripe 2 is "D6 D7 P Q D8": MD counts from the disk after Q (disk 4).
    let a = array(Level::Raid6, Layout::LeftAsymmetric, 5, 1);
    assert_eq!(a.stripe_map(2).q_slots(), vec![1, 2, 0]);
    // DDF numbers by disk index: stripe 1 of N-continue is "D4 D5 Q P D3".
    let a = array(Level::Raid6, Layout::DdfNContinue, 5, 1);
    assert_eq!(a.stripe_map(1).q_slots(), vec![4, 0, 1]);
}

#[test]
fn chunks_of_several_blocks() {
    // Left-symmetric, 3 disks, chunk 2 blocks: stripe 0 = D0 D1 P, stripe 1 = D3 P D2.
    let a = array(Level::Raid5, Layout::LeftSymmetric, 3, 2);
    let got: Vec<(u32, u64, Vec<u32>)> = (0..8)
        .map(|b| {
            let p = a.map(b);
            (p.disks[0], p.disk_block, p.parity)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 0, vec![2]),
            (0, 1, vec![2]), // chunk 0
            (1, 0, vec![2]),
            (1, 1, vec![2]), // chunk 1
            (2, 2, vec![1]),
            (2, 3, vec![1]), // chunk 2 = D2, stripe 1: P on disk 1, data from disk 2
            (0, 2, vec![1]),
            (0, 3, vec![1]), // chunk 3
        ]
    );
}

#[test]
fn raid0_striping() {
    let a = array(Level::Raid0, Layout::default(), 3, 2);
    let got: Vec<(u32, u64)> = (0..8).map(|b| (a.map(b).disks[0], a.map(b).disk_block)).collect();
    assert_eq!(
        got,
        vec![(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (0, 2), (0, 3)]
    );
    assert!(a.map(3).parity.is_empty());
}

#[test]
fn raid1_all_copies() {
    let a = array(Level::Raid1, Layout::default(), 3, 16);
    let p = a.map(77);
    assert_eq!(p.disks, vec![0, 1, 2]);
    assert_eq!(p.disk_blocks, vec![77, 77, 77]);
    assert!(p.parity.is_empty());
}

#[test]
fn raid10_near2() {
    // 4 disks: chunk 0 on disks 0,1 row 0; chunk 1 on 2,3 row 0; chunk 2 on 0,1 row 1.
    let a = array(Level::Raid10, Layout::default(), 4, 1);
    let got: Vec<(Vec<u32>, Vec<u64>)> = (0..3).map(|b| (a.map(b).disks, a.map(b).disk_blocks)).collect();
    assert_eq!(
        got,
        vec![
            (vec![0, 1], vec![0, 0]),
            (vec![2, 3], vec![0, 0]),
            (vec![0, 1], vec![1, 1])
        ]
    );
    // 3 disks: chunk 1's copies straddle rows (disk 2 row 0, disk 0 row 1).
    let a = array(Level::Raid10, Layout::default(), 3, 1);
    let got: Vec<(Vec<u32>, Vec<u64>)> = (0..4).map(|b| (a.map(b).disks, a.map(b).disk_blocks)).collect();
    assert_eq!(
        got,
        vec![
            (vec![0, 1], vec![0, 0]),
            (vec![2, 0], vec![0, 1]),
            (vec![1, 2], vec![1, 1]),
            (vec![0, 1], vec![2, 2]),
        ]
    );
}

#[test]
fn config_validation() {
    let bad = |cfg: ArrayConfig| Array::new(cfg).unwrap_err().to_string();
    assert!(bad(ArrayConfig::new(Level::Raid6, 3)).contains("at least 4"));
    assert!(bad(ArrayConfig::new(Level::Raid5, 1)).contains("at least 2"));
    let mut c = ArrayConfig::new(Level::Raid5, 4);
    c.chunk_bytes = 6000;
    assert!(bad(c).contains("multiple of the block size"));
    let mut c = ArrayConfig::new(Level::Raid5, 4);
    c.layout = Layout::LeftSymmetric6;
    assert!(bad(c).contains("RAID-6 layout"));
    let mut c = ArrayConfig::new(Level::Raid0, 4);
    c.layout = Layout::ParityFirst;
    assert!(bad(c).contains("not used"));
    let mut c = ArrayConfig::new(Level::Raid10, 3);
    c.copies = 4;
    assert!(bad(c).contains("at least 4"));
    let mut a = Array::new(ArrayConfig::new(Level::Raid5, 4)).unwrap();
    assert!(a.fail(4).is_err());
    assert_eq!(parse_bytes("64KiB").unwrap(), 65536);
    assert_eq!(parse_bytes("1m").unwrap(), 1 << 20);
    assert!(parse_bytes("12 parsecs").is_err());
}

#[test]
fn read_penalties() {
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 5, 1);
    assert_eq!(a.read_penalty(0), Some(1));
    a.fail(0).unwrap();
    assert_eq!(a.read_penalty(0), Some(4)); // n - 1
    assert_eq!(a.read_penalty(1), Some(1));
    a.fail(1).unwrap();
    assert_eq!(a.read_penalty(0), None);
    assert_eq!(a.read_penalty(2), Some(1));

    let mut a = array(Level::Raid6, Layout::LeftSymmetric, 6, 1);
    a.fail(2).unwrap();
    let on2 = (0..100).find(|&b| a.disk_of(b) == 2).unwrap();
    assert_eq!(a.read_penalty(on2), Some(5));
    a.fail(3).unwrap();
    assert_eq!(a.read_penalty(on2), Some(4));
    a.fail(4).unwrap();
    assert_eq!(a.read_penalty(on2), None);

    let mut a = array(Level::Raid10, Layout::default(), 4, 1);
    a.fail(0).unwrap();
    assert_eq!(a.read_penalty(0), Some(1));
    a.fail(1).unwrap();
    assert_eq!(a.read_penalty(0), None);
    assert_eq!(a.read_penalty(1), Some(1));
}

// ---------- plans ----------

fn ops(plan: &IoPlan) -> Vec<(u32, DiskOpKind, u64, u32, Cause)> {
    plan.disk_ops()
        .map(|o| (o.disk, o.kind, o.block, o.nblocks, o.cause))
        .collect()
}

fn deps_are_backwards(plan: &IoPlan) -> bool {
    plan.nodes
        .iter()
        .enumerate()
        .all(|(i, n)| n.deps.iter().all(|&d| (d as usize) < i))
}

#[test]
fn healthy_read_is_split_per_chunk_and_merged() {
    // RAID-5 LS, 4 disks, chunk 4 blocks: blocks 2..10 = chunk0[2..4] disk0, chunk1 disk1, chunk2[0..2] disk2.
    let a = array(Level::Raid5, Layout::LeftSymmetric, 4, 4);
    let p = a.plan_read(2, 8);
    assert_eq!(
        ops(&p),
        vec![
            (0, DiskOpKind::Read, 2, 2, Cause::User),
            (1, DiskOpKind::Read, 0, 4, Cause::User),
            (2, DiskOpKind::Read, 0, 2, Cause::User),
        ]
    );
    // Crossing a stripe on the same disk merges: chunks 2 (stripe 0) and 4 (stripe 1) are on
    // disks 2 and 0; on RAID-0 consecutive rows of one disk merge.
    let a = array(Level::Raid0, Layout::default(), 1 + 1, 1);
    let p = a.plan_read(0, 4);
    assert_eq!(
        ops(&p),
        vec![
            (0, DiskOpKind::Read, 0, 2, Cause::User),
            (1, DiskOpKind::Read, 0, 2, Cause::User)
        ]
    );
}

#[test]
fn raid5_small_write_is_read_modify_write() {
    // 5 disks LS chunk 1: block 0 on disk 0, P on disk 4. rmw = 2 reads < rcw = 3.
    let a = array(Level::Raid5, Layout::LeftSymmetric, 5, 1);
    let p = a.plan_write(0, 1);
    assert!(deps_are_backwards(&p));
    assert_eq!(
        ops(&p),
        vec![
            (0, DiskOpKind::Read, 0, 1, Cause::ParityUpdate),
            (4, DiskOpKind::Read, 0, 1, Cause::ParityUpdate),
            (0, DiskOpKind::Write, 0, 1, Cause::User),
            (4, DiskOpKind::Write, 0, 1, Cause::ParityUpdate),
        ]
    );
    assert_eq!(p.nodes[2].action, Action::Xor { units: 3 });
    assert_eq!(p.nodes[2].deps, vec![0, 1]);
    assert_eq!(p.nodes[3].deps, vec![2]);
    // Two of four data units: rmw 3 reads vs rcw 2 reads -> rcw.
    let p = a.plan_write(0, 2);
    let reads: Vec<_> = ops(&p).into_iter().filter(|o| o.1 == DiskOpKind::Read).collect();
    assert_eq!(
        reads,
        vec![
            (2, DiskOpKind::Read, 0, 1, Cause::ParityUpdate),
            (3, DiskOpKind::Read, 0, 1, Cause::ParityUpdate)
        ]
    );
    // 4 disks, one of three data units: rmw 2 = rcw 2, MD takes rcw on ties.
    let a = array(Level::Raid5, Layout::LeftSymmetric, 4, 1);
    let p = a.plan_write(0, 1);
    let reads: Vec<_> = ops(&p)
        .into_iter()
        .filter(|o| o.1 == DiskOpKind::Read)
        .map(|o| o.0)
        .collect();
    assert_eq!(reads, vec![1, 2]);
    // Full stripe: no reads.
    let p = a.plan_write(0, 3);
    assert_eq!(ops(&p).iter().filter(|o| o.1 == DiskOpKind::Read).count(), 0);
    assert_eq!(ops(&p).len(), 4);
}

#[test]
fn raid5_degraded_read_and_writes() {
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 4, 1);
    a.fail(0).unwrap();
    // Read of block 0 (disk 0): read disks 1, 2, 3 (P) and XOR.
    let p = a.plan_read(0, 1);
    assert_eq!(
        ops(&p),
        vec![
            (1, DiskOpKind::Read, 0, 1, Cause::ReconstructRead),
            (2, DiskOpKind::Read, 0, 1, Cause::ReconstructRead),
            (3, DiskOpKind::Read, 0, 1, Cause::ReconstructRead),
        ]
    );
    assert_eq!(
        p.nodes[3],
        Node {
            action: Action::Xor { units: 3 },
            deps: vec![0, 1, 2]
        }
    );
    // Reading blocks 0 and 1 together: disk 1 is read once, as the user's.
    let p = a.plan_read(0, 2);
    assert_eq!(
        ops(&p),
        vec![
            (1, DiskOpKind::Read, 0, 1, Cause::User),
            (2, DiskOpKind::Read, 0, 1, Cause::ReconstructRead),
            (3, DiskOpKind::Read, 0, 1, Cause::ReconstructRead),
        ]
    );
    // Write of the lost block 0: reconstruct-write, reads the other data, writes P only.
    let p = a.plan_write(0, 1);
    assert_eq!(
        ops(&p),
        vec![
            (1, DiskOpKind::Read, 0, 1, Cause::ParityUpdate),
            (2, DiskOpKind::Read, 0, 1, Cause::ParityUpdate),
            (3, DiskOpKind::Write, 0, 1, Cause::ParityUpdate),
        ]
    );
    // Block 3 is in stripe 1 ("D4 D5 P D3"), whose P is on disk 2; block 4 is on the failed disk 0.
    // Writing block 5 (disk 1): rmw needs D5 + P = 2, rcw needs D3 + D4(lost) = 1 + 8 -> rmw.
    let p = a.plan_write(5, 1);
    assert_eq!(
        ops(&p),
        vec![
            (1, DiskOpKind::Read, 1, 1, Cause::ParityUpdate),
            (2, DiskOpKind::Read, 1, 1, Cause::ParityUpdate),
            (1, DiskOpKind::Write, 1, 1, Cause::User),
            (2, DiskOpKind::Write, 1, 1, Cause::ParityUpdate),
        ]
    );
    // Stripe 3 is "P D9 D10 D11": parity on the failed disk -> just write the data.
    let p = a.plan_write(9, 1);
    assert_eq!(ops(&p), vec![(1, DiskOpKind::Write, 3, 1, Cause::User)]);
}

#[test]
fn raid5_too_many_failures_is_unreadable_not_a_crash() {
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 4, 1);
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    let p = a.plan_read(0, 3);
    assert_eq!(ops(&p), vec![(2, DiskOpKind::Read, 0, 1, Cause::User)]);
    let lost: Vec<_> = p
        .nodes
        .iter()
        .filter_map(|n| match n.action {
            Action::Unreadable { block } => Some(block),
            _ => None,
        })
        .collect();
    assert_eq!(lost, vec![0, 1]);
    let mut ex = CountExecutor::new(4);
    ex.run(&p);
    ex.run(&a.plan_write(0, 1));
    assert_eq!(ex.unreadable(), 3);
}

#[test]
fn raid6_two_failures_every_pair() {
    for n in [4u32, 5, 7] {
        for layout in [
            Layout::LeftSymmetric,
            Layout::RightAsymmetric,
            Layout::DdfNContinue,
            Layout::LeftSymmetric6,
        ] {
            for f1 in 0..n {
                for f2 in f1 + 1..n {
                    let mut a = array(Level::Raid6, layout, n, 1);
                    a.fail(f1).unwrap();
                    a.fail(f2).unwrap();
                    let k = (n - 2) as u64;
                    for block in 0..3 * n as u64 * k {
                        let pl = a.map(block);
                        let p = a.plan_read(block, 1);
                        assert!(deps_are_backwards(&p));
                        assert!(!p.nodes.iter().any(|x| matches!(x.action, Action::Unreadable { .. })));
                        let read_disks: Vec<u32> = p.disk_ops().map(|o| o.disk).collect();
                        if a.is_failed(pl.disks[0]) {
                            let want: Vec<u32> = (0..n).filter(|&d| d != f1 && d != f2).collect();
                            assert_eq!(read_disks, want);
                            assert!(p.disk_ops().all(|o| o.block == pl.disk_block && o.nblocks == 1));
                            assert_eq!(a.read_penalty(block), Some(n - 2));
                            let both_data = !pl.parity.contains(&f1) && !pl.parity.contains(&f2);
                            let pq = p.nodes.iter().any(|x| matches!(x.action, Action::PQ { .. }));
                            // Two lost data units or data + P need Q.
                            if both_data || pl.parity[0] == f1 || pl.parity[0] == f2 {
                                assert!(pq);
                            }
                        } else {
                            assert_eq!(read_disks, vec![pl.disks[0]]);
                        }
                        // Writes never touch failed disks and never lose data.
                        let w = a.plan_write(block, 1);
                        assert!(w.disk_ops().all(|o| !a.is_failed(o.disk)));
                        assert!(!w.nodes.iter().any(|x| matches!(x.action, Action::Unreadable { .. })));
                    }
                }
            }
        }
    }
}

#[test]
fn raid6_read_all_when_neither_rmw_nor_rcw_works() {
    // 5 disks LS, stripe 1 = "D3 D4 D5 P Q". Fail disks 0 (D3) and 1 (D4); write D3 only:
    // rmw needs old D3 (lost), rcw needs D4 (lost) -> read every survivor (D5, P, Q), recover, write P, Q.
    let mut a = array(Level::Raid6, Layout::LeftSymmetric, 5, 1);
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    let p = a.plan_write(3, 1);
    assert_eq!(
        ops(&p),
        vec![
            (2, DiskOpKind::Read, 1, 1, Cause::ReconstructRead),
            (3, DiskOpKind::Read, 1, 1, Cause::ReconstructRead),
            (4, DiskOpKind::Read, 1, 1, Cause::ReconstructRead),
            (3, DiskOpKind::Write, 1, 1, Cause::ParityUpdate),
            (4, DiskOpKind::Write, 1, 1, Cause::ParityUpdate),
        ]
    );
}

#[test]
fn mirrors_read_one_survivor_and_write_all() {
    let mut a = array(Level::Raid1, Layout::default(), 3, 16);
    let p = a.plan_read(5, 3);
    assert_eq!(ops(&p), vec![(0, DiskOpKind::Read, 5, 3, Cause::User)]);
    a.fail(0).unwrap();
    assert_eq!(ops(&a.plan_read(5, 3)), vec![(1, DiskOpKind::Read, 5, 3, Cause::User)]);
    assert_eq!(
        ops(&a.plan_write(5, 1)),
        vec![
            (1, DiskOpKind::Write, 5, 1, Cause::User),
            (2, DiskOpKind::Write, 5, 1, Cause::User)
        ]
    );
    a.fail(1).unwrap();
    a.fail(2).unwrap();
    let p = a.plan_read(5, 2);
    assert!(ops(&p).is_empty());
    assert_eq!(p.nodes.len(), 2);

    let mut a = array(Level::Raid10, Layout::default(), 3, 1);
    a.fail(2).unwrap();
    // chunk 1 lives on disk 2 row 0 and disk 0 row 1.
    assert_eq!(ops(&a.plan_read(1, 1)), vec![(0, DiskOpKind::Read, 1, 1, Cause::User)]);
    assert_eq!(
        ops(&a.plan_write(1, 1)),
        vec![(0, DiskOpKind::Write, 1, 1, Cause::User)]
    );
}

// ---------- properties ----------

fn parity_config() -> impl Strategy<Value = (Level, Layout, u32, u64)> {
    (0usize..3, 0usize..14, 2u32..9, 1u64..4).prop_filter_map("valid", |(l, lay, n, cb)| {
        let level = [Level::Raid4, Level::Raid5, Level::Raid6][l];
        let layout = Layout::all()[lay];
        let mut cfg = ArrayConfig::new(level, n);
        cfg.layout = layout;
        cfg.chunk_bytes = cb * 4096;
        cfg.validate().ok().map(|_| (level, layout, n, cb))
    })
}

fn any_config() -> impl Strategy<Value = (Level, Layout, u32, u64)> {
    prop_oneof![
        parity_config(),
        (2u32..7, 1u64..4).prop_map(|(n, cb)| (Level::Raid0, Layout::default(), n, cb)),
        (2u32..5, 1u64..4).prop_map(|(n, cb)| (Level::Raid1, Layout::default(), n, cb)),
        (2u32..7, 1u64..4).prop_map(|(n, cb)| (Level::Raid10, Layout::default(), n, cb)),
    ]
}

/// Brute-force MD choice for one row write: reads of rmw and rcw, infinite
/// (None) when a needed unit is lost; rmw only when strictly fewer.
fn brute_write_reads(sm: &StripeMap, failed: &[u32], written: &[bool]) -> Option<Vec<u32>> {
    let dead = |d: &u32| failed.contains(d);
    let data = sm.data_disks();
    let alive_par: Vec<u32> = sm.parity().into_iter().filter(|p| !dead(p)).collect();
    if alive_par.is_empty() {
        return Some(vec![]);
    }
    let mut rmw: Vec<u32> = data.iter().zip(written).filter(|(_, &w)| w).map(|(&d, _)| d).collect();
    rmw.extend(&alive_par);
    let rcw: Vec<u32> = data.iter().zip(written).filter(|(_, &w)| !w).map(|(&d, _)| d).collect();
    let ok = |v: &Vec<u32>| v.iter().all(|d| !dead(d));
    let mut pick = match (ok(&rmw), ok(&rcw)) {
        (true, true) if rmw.len() < rcw.len() => rmw,
        (_, true) => rcw,
        (true, false) => rmw,
        (false, false) => return None,
    };
    pick.sort_unstable();
    Some(pick)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_block_has_one_home_and_none_collide((level, layout, n, cb) in any_config()) {
        let a = array(level, layout, n, cb);
        let stripes = 2 * n as u64 + 1;
        let nblocks = stripes * cb * a.data_disks_per_stripe().max(1) as u64;
        let mut seen = std::collections::HashSet::new();
        for b in 0..nblocks {
            let p = a.map(b);
            prop_assert_eq!(p.disks.len(), a.config().effective_copies() as usize);
            prop_assert_eq!(p.disk_blocks[0], p.disk_block);
            for (&d, &db) in p.disks.iter().zip(&p.disk_blocks) {
                prop_assert!(d < n);
                prop_assert!(seen.insert((d, db)), "collision at disk {} block {}", d, db);
            }
            prop_assert_eq!(a.disk_of(b), p.disks[0]);
            if !matches!(level, Level::Raid1 | Level::Raid10) {
                let mut distinct = p.disks.clone();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), p.disks.len());
            }
        }
        // Parity positions never collide with data either.
        if level.has_parity() {
            for b in 0..nblocks {
                let p = a.map(b);
                for &q in &p.parity {
                    prop_assert!(!seen.contains(&(q, p.disk_block)));
                }
            }
        }
    }

    #[test]
    fn parity_and_data_cover_each_disk_once((level, layout, n, _cb) in parity_config(), stripe in 0u64..1000) {
        let a = array(level, layout, n, 1);
        let k = a.data_disks_per_stripe() as u64;
        let mut disks: Vec<u32> = (0..k).map(|d| a.map(stripe * k + d).disks[0]).collect();
        let parity = a.map(stripe * k).parity;
        for &p in &parity {
            prop_assert!(!disks.contains(&p));
        }
        prop_assert_eq!(parity.len() as u32, level.parity_units());
        disks.extend(parity);
        disks.sort_unstable();
        prop_assert_eq!(disks, (0..n).collect::<Vec<_>>());
        // The stripe map's view agrees with the block map.
        let sm = a.stripe_map(stripe);
        prop_assert_eq!(sm.q_slots().len() as u64, k);
    }

    #[test]
    fn degraded_read_reads_exactly_the_survivors((level, layout, n, cb) in parity_config(), fail_seed in 0u32..1000, block in 0u64..500) {
        let mut a = array(level, layout, n, cb);
        let f1 = fail_seed % n;
        a.fail(f1).unwrap();
        if level == Level::Raid6 && fail_seed % 2 == 0 {
            a.fail((f1 + 1 + fail_seed / n % (n - 1)) % n).unwrap();
        }
        let pl = a.map(block);
        let p = a.plan_read(block, 1);
        let mut got: Vec<(u32, u64, u32)> = p.disk_ops().map(|o| (o.disk, o.block, o.nblocks)).collect();
        got.sort_unstable();
        if a.is_failed(pl.disks[0]) {
            let want: Vec<(u32, u64, u32)> = (0..n).filter(|&d| !a.is_failed(d)).map(|d| (d, pl.disk_block, 1)).collect();
            prop_assert_eq!(got.len() as u32, a.read_penalty(block).unwrap());
            prop_assert_eq!(got, want);
        } else {
            prop_assert_eq!(got, vec![(pl.disks[0], pl.disk_block, 1)]);
            prop_assert_eq!(a.read_penalty(block), Some(1));
        }
        prop_assert!(deps_are_backwards(&p));
    }

    #[test]
    fn rmw_rcw_choice_matches_brute_force((level, layout, n, _cb) in parity_config(), stripe in 0u64..50, first in 0u64..8, len in 1u64..8, fails in proptest::collection::vec(0u32..9, 0..3)) {
        let mut a = array(level, layout, n, 1);
        let k = a.data_disks_per_stripe() as u64;
        let first = first % k;
        let len = len.min(k - first);
        let mut failed: Vec<u32> = fails.into_iter().map(|f| f % n).collect();
        failed.sort_unstable();
        failed.dedup();
        failed.truncate(level.parity_units() as usize);
        for &f in &failed { a.fail(f).unwrap(); }
        let sm = a.stripe_map(stripe);
        let written: Vec<bool> = (0..k).map(|d| d >= first && d < first + len).collect();
        let p = a.plan_write(stripe * k + first, len);
        let mut reads: Vec<u32> = p.disk_ops().filter(|o| o.kind == DiskOpKind::Read).map(|o| o.disk).collect();
        reads.sort_unstable();
        match brute_write_reads(&sm, &failed, &written) {
            Some(want) => prop_assert_eq!(reads, want),
            // Neither works: every survivor is read.
            None => prop_assert_eq!(reads, (0..n).filter(|d| !failed.contains(d)).collect::<Vec<_>>()),
        }
        // Writes: every surviving written data unit and every surviving parity.
        let mut writes: Vec<u32> = p.disk_ops().filter(|o| o.kind == DiskOpKind::Write).map(|o| o.disk).collect();
        writes.sort_unstable();
        let mut want: Vec<u32> = (0..k as u32).filter(|&d| written[d as usize]).map(|d| sm.data_disk(d)).collect();
        want.extend(sm.parity());
        want.retain(|d| !failed.contains(d));
        want.sort_unstable();
        prop_assert_eq!(writes, want);
        prop_assert!(p.disk_ops().all(|o| o.block == stripe && o.nblocks == 1));
        prop_assert!(deps_are_backwards(&p));
    }

    #[test]
    fn plans_of_ranges_equal_the_sum_of_blocks((level, layout, n, cb) in any_config(), start in 0u64..200, len in 1u64..40, f in 0u32..9) {
        // Reads: the blocks a range plan reads (expanded) are the union of single-block plans.
        let mut a = array(level, layout, n, cb);
        a.fail(f % n).unwrap();
        let expand = |p: &IoPlan| {
            let mut v: Vec<(u32, u64, DiskOpKind)> = vec![];
            for o in p.disk_ops() {
                for i in 0..o.nblocks as u64 { v.push((o.disk, o.block + i, o.kind)); }
            }
            v.sort_unstable_by_key(|x| (x.0, x.1, x.2 as u8));
            v
        };
        let whole = expand(&a.plan_read(start, len));
        let mut parts: Vec<(u32, u64, DiskOpKind)> = (start..start + len).flat_map(|b| expand(&a.plan_read(b, 1))).collect();
        parts.sort_unstable_by_key(|x| (x.0, x.1, x.2 as u8));
        parts.dedup();
        prop_assert_eq!(&whole, &parts);
        // No disk block appears twice in one plan (merging never overlaps).
        let mut dedup = whole.clone();
        dedup.dedup();
        prop_assert_eq!(dedup.len(), whole.len());
        let w = a.plan_write(start, len);
        prop_assert!(deps_are_backwards(&w));
        prop_assert!(w.disk_ops().all(|o| !a.is_failed(o.disk)));
    }
}

// ---------- byte-level check: plans carry enough information ----------
//
// One-block chunks, so a stripe is one row. Each disk holds an 8-byte unit;
// parity is real XOR / P+Q (gf256, Q in MD's slot order). A read plan must
// read enough to produce the block; a write plan must read enough to compute
// the parity it writes, and leave a row from which every block can be read.

const UNIT: usize = 8;

fn next(seed: &mut u64) -> u8 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*seed >> 56) as u8
}

/// Parity units of `data` (logical order): [P] or [P, Q].
fn parity_of(sm: &StripeMap, data: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let (mut p, mut q) = (vec![0u8; UNIT], vec![0u8; UNIT]);
    gf256::syndrome(&views, &sm.q_slots(), &mut p, &mut q);
    if sm.q.is_some() {
        vec![p, q]
    } else {
        vec![p]
    }
}

/// Fill the unknown units (None) of a row, indexed by disk, if at most m are unknown.
fn solve(sm: &StripeMap, known: &[Option<Vec<u8>>]) -> Option<Vec<Vec<u8>>> {
    let data_disks = sm.data_disks();
    let par = sm.parity();
    let unknown: Vec<u32> = (0..sm.n).filter(|&d| known[d as usize].is_none()).collect();
    if unknown.len() > par.len() {
        return None;
    }
    let mut data: Vec<Vec<u8>> = data_disks
        .iter()
        .map(|&d| known[d as usize].clone().unwrap_or(vec![0; UNIT]))
        .collect();
    let mut p = known[sm.p as usize].clone().unwrap_or(vec![0; UNIT]);
    let mut q = sm.q.and_then(|q| known[q as usize].clone()).unwrap_or(vec![0; UNIT]);
    let lost: Vec<gf256::Unit> = unknown
        .iter()
        .map(|&d| {
            if d == sm.p {
                gf256::Unit::P
            } else if Some(d) == sm.q {
                gf256::Unit::Q
            } else {
                gf256::Unit::Data(data_disks.iter().position(|&x| x == d).unwrap())
            }
        })
        .collect();
    let mut refs: Vec<&mut [u8]> = data.iter_mut().map(|v| v.as_mut_slice()).collect();
    if sm.q.is_some() {
        gf256::recover(&mut refs, &sm.q_slots(), &mut p, &mut q, &lost).unwrap();
    } else if let Some(u) = lost.first() {
        // RAID-4/5: the unknown unit is the XOR of all the others.
        let mut x = p.clone();
        for (i, d) in refs.iter().enumerate() {
            if *u != gf256::Unit::Data(i) {
                for j in 0..UNIT {
                    x[j] ^= d[j];
                }
            }
        }
        match u {
            gf256::Unit::Data(i) => refs[*i].copy_from_slice(&x),
            _ => {
                p.fill(0);
                for d in &refs {
                    for j in 0..UNIT {
                        p[j] ^= d[j];
                    }
                }
            }
        }
    }
    let mut row = vec![vec![0u8; UNIT]; sm.n as usize];
    for (i, &d) in data_disks.iter().enumerate() {
        row[d as usize] = data[i].clone();
    }
    row[sm.p as usize] = p;
    if let Some(qd) = sm.q {
        row[qd as usize] = q;
    }
    Some(row)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn plans_work_on_real_bytes((level, layout, n, _cb) in parity_config(), stripe in 0u64..40, first in 0u64..8, len in 1u64..8,
                                fails in proptest::collection::vec(0u32..9, 0..3), seed in any::<u64>()) {
        let mut seed = seed;
        let mut a = array(level, layout, n, 1);
        let mut failed: Vec<u32> = fails.into_iter().map(|f| f % n).collect();
        failed.sort_unstable();
        failed.dedup();
        failed.truncate(level.parity_units() as usize);
        for &f in &failed { a.fail(f).unwrap(); }
        let sm = a.stripe_map(stripe);
        let k = sm.k as u64;
        let (first, len) = (first % k, len.min(k - first % k));
        let data_disks = sm.data_disks();
        // The old row.
        let old_data: Vec<Vec<u8>> = (0..k).map(|_| (0..UNIT).map(|_| next(&mut seed)).collect()).collect();
        let mut disk = vec![vec![0u8; UNIT]; n as usize];
        for (i, &d) in data_disks.iter().enumerate() { disk[d as usize] = old_data[i].clone(); }
        for (p, v) in sm.parity().iter().zip(parity_of(&sm, &old_data)) { disk[*p as usize] = v; }

        // Reads: every block of the row is producible from what its plan reads.
        for d in 0..k {
            let plan = a.plan_read(stripe * k + d, 1);
            let mut known: Vec<Option<Vec<u8>>> = vec![None; n as usize];
            for o in plan.disk_ops() {
                prop_assert!(!a.is_failed(o.disk));
                known[o.disk as usize] = Some(disk[o.disk as usize].clone());
            }
            let target = data_disks[d as usize] as usize;
            let got = match &known[target] { Some(v) => v.clone(), None => solve(&sm, &known).expect("enough units read")[target].clone() };
            prop_assert_eq!(&got, &old_data[d as usize]);
        }

        // Write of data units first..first+len.
        let written: Vec<bool> = (0..k).map(|d| d >= first && d < first + len).collect();
        let mut new_data = old_data.clone();
        for d in first..first + len { new_data[d as usize] = (0..UNIT).map(|_| next(&mut seed)).collect(); }
        let plan = a.plan_write(stripe * k + first, len);
        let read: Vec<bool> = (0..n).map(|d| plan.disk_ops().any(|o| o.disk == d && o.kind == DiskOpKind::Read)).collect();
        let known_old = |d: u32| read[d as usize];
        // New parity from what was read: reconstruct-write, read-modify-write, or recover-then-rcw.
        let new_parity = parity_of(&sm, &new_data);
        let writes_parity = plan.disk_ops().any(|o| o.kind == DiskOpKind::Write && sm.parity().contains(&o.disk));
        if writes_parity {
            let rcw_ok = (0..k).all(|d| written[d as usize] || known_old(data_disks[d as usize]));
            let alive_par: Vec<u32> = sm.parity().into_iter().filter(|&p| !a.is_failed(p)).collect();
            let rmw_ok = (0..k).all(|d| !written[d as usize] || known_old(data_disks[d as usize])) && alive_par.iter().all(|&p| known_old(p));
            let recover_ok = {
                let known: Vec<Option<Vec<u8>>> = (0..n).map(|d| known_old(d).then(|| disk[d as usize].clone())).collect();
                solve(&sm, &known).is_some()
            };
            prop_assert!(rcw_ok || rmw_ok || recover_ok, "write plan reads too little: {:?}", plan);
            if rmw_ok && !rcw_ok {
                // Check the delta formula really gives the new parity from old parity + old/new data.
                let old_par = parity_of(&sm, &old_data);
                let mut delta_data = vec![vec![0u8; UNIT]; k as usize];
                for d in 0..k as usize { for j in 0..UNIT { delta_data[d][j] = old_data[d][j] ^ new_data[d][j]; } }
                let delta = parity_of(&sm, &delta_data);
                for (i, &p) in sm.parity().iter().enumerate() {
                    if !a.is_failed(p) {
                        let via: Vec<u8> = (0..UNIT).map(|j| old_par[i][j] ^ delta[i][j]).collect();
                        prop_assert_eq!(&via, &new_parity[i]);
                    }
                }
            }
        }
        // Apply the writes.
        for o in plan.disk_ops().filter(|o| o.kind == DiskOpKind::Write) {
            prop_assert!(!a.is_failed(o.disk));
            if let Some(i) = data_disks.iter().position(|&x| x == o.disk) {
                prop_assert!(written[i], "plan writes an unwritten data unit");
                disk[o.disk as usize] = new_data[i].clone();
            } else {
                let i = sm.parity().iter().position(|&x| x == o.disk).unwrap();
                disk[o.disk as usize] = new_parity[i].clone();
            }
        }
        // Every block reads back its new value from the surviving disks.
        let known: Vec<Option<Vec<u8>>> = (0..n).map(|d| (!a.is_failed(d)).then(|| disk[d as usize].clone())).collect();
        let row = solve(&sm, &known).unwrap();
        for (i, &d) in data_disks.iter().enumerate() {
            prop_assert_eq!(&row[d as usize], &new_data[i], "data unit {} wrong after write", i);
        }
        for (i, &p) in sm.parity().iter().enumerate() {
            if !a.is_failed(p) {
                prop_assert_eq!(&row[p as usize], &new_parity[i], "stale parity on disk {}", p);
            }
        }
    }
}

#[test]
fn large_degraded_read_stays_compact() {
    // 100 full stripes of RAID-5 (5 disks, 16-block chunks), disk 0 failed: every row reads its
    // 4 survivors; P is read (reconstruct-read) only in the 80 stripes where disk 0 holds data.
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 5, 16);
    a.fail(0).unwrap();
    let p = a.plan_read(0, 100 * 4 * 16);
    let mut ex = CountExecutor::new(5);
    ex.run(&p);
    assert_eq!(ex.total_reads(), 100 * 16 * 4);
    assert_eq!(ex.blocks(DiskOpKind::Read, Cause::ReconstructRead), 80 * 16);
    assert_eq!(ex.unreadable(), 0);
    // One compute step per degraded stripe; reads merged across rows.
    assert_eq!(
        p.nodes
            .iter()
            .filter(|n| matches!(n.action, Action::Xor { .. }))
            .count(),
        80
    );
    assert!(p.nodes.len() < 1000, "{} nodes", p.nodes.len());
    assert!(deps_are_backwards(&p));
}

// ---------- RAID-10 far and offset layouts ----------
//
// The pictures below are worked out by hand from MD's rules (raid10.c,
// `raid10_find_phys` and `calc_sectors`), one-block chunks, "Dk" = a copy of
// chunk k, "." = a place holding no chunk:
//
// * near: chunk c's near copies take grid positions c·near .. c·near+near-1 of
//   the row-major (row, disk) grid (a copy past the last disk goes on disk 0
//   one row down);
// * far (fK): each member is cut into K regions of `stride` = ⌊member chunks /
//   K⌋ rows; region k repeats region 0 shifted right by k·near disks;
// * offset (oK): grid row r becomes chunk row r·K, and the following K-1 rows
//   repeat it shifted right by near, 2·near, ... disks.

/// A RAID-10 array with `cb`-block chunks and members of `member_chunks` chunks.
fn r10(layout: &str, disks: u32, cb: u64, member_chunks: u64) -> Array {
    let mut cfg = ArrayConfig::new(Level::Raid10, disks);
    cfg.chunk_bytes = cb * cfg.block_size;
    cfg.set_layout(layout).unwrap();
    cfg.disk_bytes = member_chunks * cfg.chunk_bytes;
    Array::new(cfg).unwrap()
}

/// Every place of every member, as rows of "Dk" / "." cells (one-block chunks),
/// filled from the forward map of every block of the array.
fn r10_grid(a: &Array, member_chunks: u64) -> Vec<String> {
    let n = a.ndisks() as usize;
    let mut grid = vec![vec![String::from("."); n]; member_chunks as usize];
    for b in 0..a.capacity_blocks().unwrap() {
        let p = a.map(b);
        for (&d, &db) in p.disks.iter().zip(&p.disk_blocks) {
            let cell = &mut grid[db as usize][d as usize];
            assert_eq!(cell, ".", "block {b}: disk {d} block {db} is taken twice");
            *cell = format!("D{b}");
        }
    }
    grid.into_iter().map(|r| r.join(" ")).collect()
}

#[test]
fn raid10_far2_4_disks() {
    // f2, 4 disks of 4 chunks: stride 2, capacity ⌊4/2⌋·4/1 = 8 chunks.
    //   disk:  0  1  2  3
    //   row 0  D0 D1 D2 D3   region 0: RAID-0
    //   row 1  D4 D5 D6 D7
    //   row 2  D3 D0 D1 D2   region 1: same, one disk to the right
    //   row 3  D7 D4 D5 D6
    let a = r10("f2", 4, 1, 4);
    assert_eq!(a.capacity_blocks(), Some(8));
    assert_eq!(
        r10_grid(&a, 4),
        vec!["D0 D1 D2 D3", "D4 D5 D6 D7", "D3 D0 D1 D2", "D7 D4 D5 D6"]
    );
    // Copies in MD's slot order: region 0 first.
    assert_eq!(a.map(3).disks, vec![3, 0]);
    assert_eq!(a.map(3).disk_blocks, vec![0, 2]);
    assert_eq!(a.map(5).disks, vec![1, 2]);
    assert_eq!(a.map(5).disk_blocks, vec![1, 3]);
}

#[test]
fn raid10_far2_3_disks_and_odd_member() {
    // f2, 3 disks of 4 chunks: stride 2, capacity 6.
    //   row 0  D0 D1 D2
    //   row 1  D3 D4 D5
    //   row 2  D2 D0 D1
    //   row 3  D5 D3 D4
    let a = r10("f2", 3, 1, 4);
    assert_eq!(a.capacity_blocks(), Some(6));
    assert_eq!(r10_grid(&a, 4), vec!["D0 D1 D2", "D3 D4 D5", "D2 D0 D1", "D5 D3 D4"]);
    // Members of 5 chunks: the stride is ⌊5/2⌋ = 2 whole chunks, so region 1
    // still starts at row 2 and the last row is unused.
    let a = r10("far2", 3, 1, 5);
    assert_eq!(
        r10_grid(&a, 5),
        vec!["D0 D1 D2", "D3 D4 D5", "D2 D0 D1", "D5 D3 D4", ". . ."]
    );
}

#[test]
fn raid10_offset2_4_and_3_disks() {
    // o2, 4 disks: each grid row is followed by its copy shifted one disk.
    //   row 0  D0 D1 D2 D3
    //   row 1  D3 D0 D1 D2
    //   row 2  D4 D5 D6 D7
    //   row 3  D7 D4 D5 D6
    let a = r10("o2", 4, 1, 4);
    assert_eq!(a.capacity_blocks(), Some(8));
    assert_eq!(
        r10_grid(&a, 4),
        vec!["D0 D1 D2 D3", "D3 D0 D1 D2", "D4 D5 D6 D7", "D7 D4 D5 D6"]
    );
    // o2, 3 disks:
    //   row 0  D0 D1 D2
    //   row 1  D2 D0 D1
    //   row 2  D3 D4 D5
    //   row 3  D5 D3 D4
    let a = r10("offset2", 3, 1, 4);
    assert_eq!(r10_grid(&a, 4), vec!["D0 D1 D2", "D2 D0 D1", "D3 D4 D5", "D5 D3 D4"]);
    assert_eq!(a.map(4).disks, vec![1, 2]);
    assert_eq!(a.map(4).disk_blocks, vec![2, 3]);
    // Offset layouts need no member size.
    let mut cfg = ArrayConfig::new(Level::Raid10, 3);
    cfg.set_layout("o2").unwrap();
    let a = Array::new(cfg).unwrap();
    // Chunk 5 (block 80) sits in grid row 1 on disk 2: chunk rows 2 and 3.
    assert_eq!(a.map(16 * 5).disks, vec![2, 0]);
    assert_eq!(a.map(16 * 5).disk_blocks, vec![16 * 2, 16 * 3]);
}

#[test]
fn raid10_near2_far2_4_and_5_disks() {
    // n2f2, 4 disks of 4 chunks: stride 2, capacity ⌊4/2⌋·4/2 = 4 chunks.
    //   row 0  D0 D0 D1 D1   region 0: near-2
    //   row 1  D2 D2 D3 D3
    //   row 2  D1 D1 D0 D0   region 1: shifted by near = 2 disks
    //   row 3  D3 D3 D2 D2
    let a = r10("n2f2", 4, 1, 4);
    assert_eq!(a.capacity_blocks(), Some(4));
    assert_eq!(
        r10_grid(&a, 4),
        vec!["D0 D0 D1 D1", "D2 D2 D3 D3", "D1 D1 D0 D0", "D3 D3 D2 D2"]
    );
    // MD's slot order: near copy 0, its far copy, near copy 1, its far copy.
    assert_eq!(a.map(0).disks, vec![0, 2, 1, 3]);
    assert_eq!(a.map(0).disk_blocks, vec![0, 2, 0, 2]);
    assert_eq!(a.map(3).disks, vec![2, 0, 3, 1]);
    assert_eq!(a.map(3).disk_blocks, vec![1, 3, 1, 3]);
    // n2f2 on 5 disks (capacity ⌊2·5/2⌋ = 5): chunk 2's second near copy
    // wraps to disk 0 one row down, and its far copy follows it.
    //   row 0  D0 D0 D1 D1 D2
    //   row 1  D2 D3 D3 D4 D4
    //   row 2  D1 D2 D0 D0 D1
    //   row 3  D4 D4 D2 D3 D3
    let a = r10("near2,far2", 5, 1, 4);
    assert_eq!(
        r10_grid(&a, 4),
        vec!["D0 D0 D1 D1 D2", "D2 D3 D3 D4 D4", "D1 D2 D0 D0 D1", "D4 D4 D2 D3 D3"]
    );
    assert_eq!(a.map(2).disks, vec![4, 1, 0, 2]);
    assert_eq!(a.map(2).disk_blocks, vec![0, 2, 1, 3]);
}

#[test]
fn raid10_near_is_unchanged_by_the_layout_option() {
    // `n2` given explicitly is the default; so is `copies = 3` vs `n3`.
    for n in 2..7 {
        let d = array(Level::Raid10, Layout::default(), n, 2);
        let e = r10("n2", n, 2, 100);
        for b in 0..200 {
            assert_eq!(d.map(b), e.map(b));
        }
    }
    let mut cfg = ArrayConfig::new(Level::Raid10, 5);
    cfg.copies = 3;
    let c3 = Array::new(cfg).unwrap();
    let n3 = r10("n3", 5, 16, 100);
    for b in 0..500 {
        assert_eq!(c3.map(b), n3.map(b));
    }
    assert_eq!(n3.config().layout_name(), "n3");
}

#[test]
fn raid10_layout_names_and_errors() {
    let p = |s: &str| Raid10Layout::parse(s);
    assert_eq!(p("n2").unwrap(), Raid10Layout::default());
    assert_eq!(p("F2").unwrap().md_word(), 0x201);
    assert_eq!(p("n2").unwrap().md_word(), 0x102);
    assert_eq!(p("o2").unwrap().md_word(), 0x10201);
    assert_eq!(p("near=2, far=2").unwrap(), p("n2f2").unwrap());
    assert_eq!(p("far2near2").unwrap().name(), "n2f2");
    assert_eq!(p("n2o3").unwrap().name(), "n2o3");
    for name in ["n2", "f3", "o2", "n2f2", "n2o2"] {
        assert_eq!(p(name).unwrap().name(), name);
    }
    assert!(p("f2o2").unwrap_err().to_string().contains("not both"));
    assert!(p("x2").unwrap_err().to_string().contains("n2"));
    assert!(p("f").is_err() && p("").is_err() && p("n0").is_err());

    let cfg = |layout: &str, disks: u32, member_chunks: u64| {
        let mut c = ArrayConfig::new(Level::Raid10, disks);
        c.set_layout(layout)?;
        c.disk_bytes = member_chunks * c.chunk_bytes;
        c.validate()
    };
    let err = |l, d, m| cfg(l, d, m).unwrap_err().to_string();
    assert!(err("f2", 4, 0).contains("--disk-size"), "{}", err("f2", 4, 0));
    assert!(err("n2f2", 4, 0).contains("--disk-size"));
    assert!(err("f2", 4, 1).contains("far regions"), "{}", err("f2", 4, 1));
    assert!(err("f3", 2, 9).contains("at least 3 disks"), "{}", err("f3", 2, 9));
    assert!(err("n2f2", 3, 9).contains("at least 4 disks"));
    assert!(err("n1", 3, 9).contains("at least 2"), "{}", err("n1", 3, 9));
    assert!(err("n2o2", 5, 9).contains("multiple of near"), "{}", err("n2o2", 5, 9));
    assert!(err("o3", 4, 2).contains("fewer than 3 chunks"), "{}", err("o3", 4, 2));
    assert!(cfg("f2", 2, 2).is_ok() && cfg("o2", 2, 0).is_ok() && cfg("n2o2", 4, 2).is_ok());
    // A parity layout is not a raid10 layout, and the reverse.
    let mut c = ArrayConfig::new(Level::Raid10, 4);
    assert!(c.set_layout("left-symmetric").unwrap_err().to_string().contains("f2"));
    let mut c5 = ArrayConfig::new(Level::Raid5, 4);
    assert!(c5.set_layout("f2").is_err());
    c.raid10 = Some(Raid10Layout::near(2));
    c.copies = 3;
    assert!(c.validate().unwrap_err().to_string().contains("copies"));
}

#[test]
fn raid10_far_stride_is_mds_long_form() {
    // MD's calc_sectors: A = ⌊⌊C/far⌋·n/near⌋ array chunks, U = ⌈A·copies/n⌉
    // used chunks per device, stride = ⌊U/far⌋.
    for n in 2u64..10 {
        for near in 1..=n {
            for far in 2..=n / near {
                for c in 0u64..60 {
                    let a = (c / far) * n / near;
                    let u = (a * near * far).div_ceil(n);
                    assert_eq!(
                        u / far,
                        layout::far_stride(c, far as u32),
                        "n {n} near {near} far {far} C {c}"
                    );
                }
            }
        }
    }
}

#[test]
fn raid10_far_degraded_reads_and_writes() {
    // f2 on 4 disks (picture above), disk 0 failed: block 0 (disk 0 row 0,
    // disk 1 row 2) is read from its far copy; writes skip the dead copy.
    let mut a = r10("f2", 4, 1, 4);
    a.fail(0).unwrap();
    assert_eq!(ops(&a.plan_read(0, 1)), vec![(1, DiskOpKind::Read, 2, 1, Cause::User)]);
    assert_eq!(
        ops(&a.plan_write(0, 1)),
        vec![(1, DiskOpKind::Write, 2, 1, Cause::User)]
    );
    assert_eq!(ops(&a.plan_read(1, 1)), vec![(1, DiskOpKind::Read, 0, 1, Cause::User)]);
    // Disks 0 and 1 both failed: block 0 has no copy left; block 1 (disks 1, 2)
    // reads its far copy on disk 2 row 2; block 3 (disks 3, 0) its near copy.
    a.fail(1).unwrap();
    let p = a.plan_read(0, 1);
    assert!(ops(&p).is_empty());
    assert!(matches!(p.nodes[0].action, Action::Unreadable { block: 0 }));
    assert_eq!(a.read_penalty(0), None);
    assert_eq!(a.read_penalty(1), Some(1));
    assert_eq!(ops(&a.plan_read(1, 1)), vec![(2, DiskOpKind::Read, 2, 1, Cause::User)]);
    assert_eq!(ops(&a.plan_read(3, 1)), vec![(3, DiskOpKind::Read, 0, 1, Cause::User)]);

    // n2f2 on 4 disks, disk 0 failed: block 0's slots are (0,r0) (2,r2) (1,r0)
    // (3,r2); MD's read_balance on an idle near>1 array takes the first
    // surviving slot, the far copy on disk 2.
    let mut a = r10("n2f2", 4, 1, 4);
    a.fail(0).unwrap();
    assert_eq!(ops(&a.plan_read(0, 1)), vec![(2, DiskOpKind::Read, 2, 1, Cause::User)]);
    let w: Vec<(u32, u64)> = ops(&a.plan_write(0, 1)).iter().map(|o| (o.0, o.2)).collect();
    assert_eq!(w, vec![(1, 0), (2, 2), (3, 2)]);
    // Three of four copies lost: still readable from the last one.
    a.fail(2).unwrap();
    a.fail(1).unwrap();
    assert_eq!(ops(&a.plan_read(0, 1)), vec![(3, DiskOpKind::Read, 2, 1, Cause::User)]);
}

/// RAID-10 configurations: (layout, disks, chunk blocks, member chunks).
fn raid10_config() -> impl Strategy<Value = (Raid10Layout, u32, u64, u64)> {
    (1u32..4, 1u32..4, any::<bool>(), 2u32..9, 1u64..4, 1u64..13).prop_filter_map(
        "valid raid10",
        |(near, far, offset, n, cb, member)| {
            let l = Raid10Layout {
                near,
                far,
                offset: offset && far > 1,
            };
            let mut cfg = ArrayConfig::new(Level::Raid10, n);
            cfg.raid10 = Some(l);
            cfg.chunk_bytes = cb * cfg.block_size;
            cfg.disk_bytes = member * cfg.chunk_bytes;
            cfg.validate().ok().map(|_| (l, n, cb, member))
        },
    )
}

fn r10_of(l: Raid10Layout, n: u32, cb: u64, member: u64) -> Array {
    let mut cfg = ArrayConfig::new(Level::Raid10, n);
    cfg.raid10 = Some(l);
    cfg.chunk_bytes = cb * cfg.block_size;
    cfg.disk_bytes = member * cfg.chunk_bytes;
    Array::new(cfg).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn raid10_copies_are_distinct_within_the_member_and_never_collide((l, n, cb, member) in raid10_config()) {
        let a = r10_of(l, n, cb, member);
        let member_blocks = member * cb;
        let cap = a.capacity_blocks().unwrap();
        let mut owner = std::collections::HashMap::new();
        for b in 0..cap {
            let p = a.map(b);
            prop_assert_eq!(p.disks.len() as u32, l.copies());
            let mut ds = p.disks.clone();
            ds.sort_unstable();
            ds.dedup();
            prop_assert_eq!(ds.len(), p.disks.len(), "block {} copies share a disk: {:?}", b, p.disks);
            prop_assert_eq!(a.disk_of(b), p.disks[0]);
            for (slot, (&d, &db)) in p.disks.iter().zip(&p.disk_blocks).enumerate() {
                prop_assert!(d < n);
                prop_assert!(db < member_blocks, "block {} copy on disk {} at {} beyond the member ({})", b, d, db, member_blocks);
                prop_assert!(owner.insert((d, db), (b, slot as u32)).is_none(), "collision at disk {} block {}", d, db);
            }
        }
        // Brute-force inverse: every place of every member, against the map above.
        for d in 0..n {
            for db in 0..member_blocks {
                prop_assert_eq!(a.raid10_block_at(d, db), owner.get(&(d, db)).copied(), "disk {} block {}", d, db);
            }
        }
    }

    #[test]
    fn raid10_any_single_failure_keeps_every_block_readable((l, n, cb, member) in raid10_config(), f in 0u32..8) {
        let mut a = r10_of(l, n, cb, member);
        let f = f % n;
        a.fail(f).unwrap();
        let cap = a.capacity_blocks().unwrap();
        for b in 0..cap {
            prop_assert_eq!(a.read_penalty(b), Some(1));
            let p = a.plan_read(b, 1);
            let o = ops(&p);
            prop_assert_eq!(o.len(), 1);
            prop_assert!(o[0].0 != f);
            // It reads the first surviving copy in slot order.
            let first = a.raid10_copies(b).find(|&(d, _)| d != f).unwrap();
            prop_assert_eq!((o[0].0, o[0].2), first);
            let w = a.plan_write(b, 1);
            // Writes go to every surviving copy.
            let mut want: Vec<(u32, u64)> = a.raid10_copies(b).filter(|&(d, _)| d != f).collect();
            let mut got: Vec<(u32, u64)> = w.disk_ops().map(|o| (o.disk, o.block)).collect();
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, want);
        }
        // A range read equals the union of its blocks' reads.
        let len = cap.min(3 * cb + 1);
        let mut whole: Vec<(u32, u64)> = a.plan_read(0, len).disk_ops()
            .flat_map(|o| (0..o.nblocks as u64).map(move |i| (o.disk, o.block + i))).collect();
        let mut parts: Vec<(u32, u64)> = (0..len).flat_map(|b| a.plan_read(b, 1).disk_ops()
            .map(|o| (o.disk, o.block)).collect::<Vec<_>>()).collect();
        whole.sort_unstable();
        parts.sort_unstable();
        prop_assert_eq!(whole, parts);
    }
}

#[test]
fn raid10_near_with_offset_on_odd_disks_would_overlap() {
    // Why validation refuses n2o2 on 5 disks: following MD's rule (a near copy
    // that wraps moves down one chunk, not `far` chunks) chunk 2's second
    // near copy's offset copy and chunk 3's second near copy both land on
    // disk 2, chunk row 2.
    let g = Raid10Geom {
        layout: Raid10Layout::parse("n2o2").unwrap(),
        disks: 5,
        stride: 1,
    };
    let c2: Vec<(u32, u64)> = g.copies(2).collect();
    let c3: Vec<(u32, u64)> = g.copies(3).collect();
    assert_eq!(c2, vec![(4, 0), (1, 1), (0, 1), (2, 2)]);
    assert_eq!(c3, vec![(1, 2), (3, 3), (2, 2), (4, 3)]);
}

// ---------- rebuild (recovery onto a spare) ----------

#[test]
fn recovery_offset_decides_spare_or_reconstruction() {
    // RAID-5 left-symmetric, 4 disks, 2-block chunks: stripe s is chunk row s.
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 4, 2);
    a.fail(1).unwrap();
    a.start_recovery(&[1]).unwrap();
    // Stripe 0: D0 on disk 0, D1 on disk 1 (lost), D2 on disk 2, P on disk 3.
    let lost_block = |s: u64| (0..3).map(|d| s * 6 + d * 2).find(|&b| a.disk_of(b) == 1).unwrap();
    let b0 = lost_block(0);
    let b2 = lost_block(3); // stripe 3 (disk 1 holds data there; P is on disk 0)
                            // Offset 0: both reconstruct.
    assert!(ops(&a.plan_read(b0, 1)).iter().any(|o| o.4 == Cause::ReconstructRead));
    a.set_recovered_rows(1);
    // Row 0 is rebuilt: read the spare directly, no reconstruct-reads.
    let p = a.plan_read(b0, 1);
    assert_eq!(ops(&p), vec![(1, DiskOpKind::Read, 0, 1, Cause::User)]);
    // Row 2 is beyond the offset: still degraded.
    let p = a.plan_read(b2, 1);
    assert!(ops(&p).iter().any(|o| o.4 == Cause::ReconstructRead));
    assert!(ops(&p).iter().all(|o| o.0 != 1));
    // Writes below the offset write the spare (data or parity), above it not.
    let w0 = a.plan_write(b0, 1);
    assert!(ops(&w0)
        .iter()
        .any(|o| o.0 == 1 && o.1 == DiskOpKind::Write && o.4 == Cause::User));
    let w2 = a.plan_write(b2, 1);
    assert!(ops(&w2).iter().all(|o| o.0 != 1));
    // A write to another unit of row 0 updates the spare's parity if disk 1 holds P there.
    for s in 0..4u64 {
        let sm = a.stripe_map(s);
        let any_write_on_1 = (0..3).any(|d| {
            ops(&a.plan_write(s * 6 + d * 2, 1))
                .iter()
                .any(|o| o.0 == 1 && o.1 == DiskOpKind::Write)
        });
        // Every stripe has a unit on disk 1 (data or P); only row 0 is rebuilt.
        assert!(sm.p == 1 || sm.data_disks().contains(&1));
        assert_eq!(any_write_on_1, s < 1, "stripe {s}");
    }
    // Offset past everything, then finish: a healthy array again.
    a.set_recovered_rows(u64::MAX);
    assert_eq!(ops(&a.plan_read(b2, 1)), vec![(1, DiskOpKind::Read, 6, 1, Cause::User)]);
    a.finish_recovery();
    assert!(a.failed().is_empty());
    assert_eq!(ops(&a.plan_read(b2, 1)), vec![(1, DiskOpKind::Read, 6, 1, Cause::User)]);

    // Mirrors: RAID-1 reads the spare below the offset only when it is the first copy.
    let mut m = array(Level::Raid1, Layout::default(), 2, 4);
    m.fail(0).unwrap();
    m.start_recovery(&[0]).unwrap();
    m.set_recovered_rows(1);
    assert_eq!(ops(&m.plan_read(1, 1)), vec![(0, DiskOpKind::Read, 1, 1, Cause::User)]);
    assert_eq!(ops(&m.plan_read(5, 1)), vec![(1, DiskOpKind::Read, 5, 1, Cause::User)]);
    assert_eq!(ops(&m.plan_write(1, 1)).len(), 2);
    assert_eq!(
        ops(&m.plan_write(5, 1)),
        vec![(1, DiskOpKind::Write, 5, 1, Cause::User)]
    );
}

#[test]
fn recovery_refuses_what_cannot_be_rebuilt() {
    let mut a = array(Level::Raid0, Layout::default(), 3, 1);
    a.fail(0).unwrap();
    assert!(a.start_recovery(&[0]).is_err());
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 4, 1);
    assert!(a.start_recovery(&[]).is_err());
    assert!(a.start_recovery(&[2]).is_err(), "disk 2 is not failed");
    a.fail(0).unwrap();
    a.fail(1).unwrap();
    assert!(a
        .start_recovery(&[0, 1])
        .unwrap_err()
        .to_string()
        .contains("survives 1"));
}

#[test]
fn rebuild_plans_shape() {
    // RAID-5 of 3, 4-block chunks, disk 2 lost: read disks 0 and 1, XOR, write 2.
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 3, 4);
    a.fail(2).unwrap();
    a.start_recovery(&[2]).unwrap();
    let p = a.plan_rebuild_row(3);
    assert_eq!(
        ops(&p),
        vec![
            (0, DiskOpKind::Read, 12, 4, Cause::Rebuild),
            (1, DiskOpKind::Read, 12, 4, Cause::Rebuild),
            (2, DiskOpKind::Write, 12, 4, Cause::Rebuild),
        ]
    );
    assert_eq!(p.nodes[2].action, Action::Xor { units: 2 });
    assert_eq!(p.nodes[2].deps, vec![0, 1]);
    assert_eq!(p.nodes[3].deps, vec![2]);
    assert!(deps_are_backwards(&p));
    // RAID-6 of 6, one lost: k = 4 reads, not 5.
    let mut a = array(Level::Raid6, Layout::LeftSymmetric, 6, 1);
    a.fail(0).unwrap();
    a.start_recovery(&[0]).unwrap();
    for row in 0..12 {
        let p = a.plan_rebuild_row(row);
        let reads = ops(&p).iter().filter(|o| o.1 == DiskOpKind::Read).count();
        assert_eq!(reads, 4, "row {row}");
    }
    // Nothing recovering: nothing to do.
    let h = array(Level::Raid5, Layout::LeftSymmetric, 3, 4);
    assert!(h.plan_rebuild_row(0).nodes.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Rebuild every row of a parity array on real bytes with the rebuild
    /// plans: the plan reads only survivors, the units read are enough to
    /// solve the row (real XOR / P+Q), and the spare ends equal to the lost
    /// disk byte for byte.
    #[test]
    fn rebuild_restores_lost_disks_on_real_bytes((level, layout, n, _cb) in parity_config(), f in 0u32..9, g in 0u32..9, two in any::<bool>(), seed in any::<u64>()) {
        let mut seed = seed;
        let rows = 12u64;
        let mut a = array(level, layout, n, 1);
        let mut lost = vec![f % n];
        if two && level == Level::Raid6 && g % n != f % n { lost.push(g % n); }
        lost.sort_unstable();
        for &d in &lost { a.fail(d).unwrap(); }
        a.start_recovery(&lost).unwrap();
        // disk[d][row] = unit; the lost disks' contents kept aside, spares zeroed.
        let mut disk = vec![vec![vec![0u8; UNIT]; rows as usize]; n as usize];
        for row in 0..rows {
            let sm = a.stripe_map(row);
            let data: Vec<Vec<u8>> = (0..sm.k).map(|_| (0..UNIT).map(|_| next(&mut seed)).collect()).collect();
            for (i, &d) in sm.data_disks().iter().enumerate() { disk[d as usize][row as usize] = data[i].clone(); }
            for (p, v) in sm.parity().iter().zip(parity_of(&sm, &data)) { disk[*p as usize][row as usize] = v; }
        }
        let original = disk.clone();
        for &d in &lost { disk[d as usize].iter_mut().for_each(|u| u.fill(0)); }
        for row in 0..rows {
            let sm = a.stripe_map(row);
            let plan = a.plan_rebuild_row(row);
            prop_assert!(deps_are_backwards(&plan));
            let mut known: Vec<Option<Vec<u8>>> = vec![None; n as usize];
            for o in plan.disk_ops() {
                prop_assert_eq!(o.cause, Cause::Rebuild);
                if o.kind == DiskOpKind::Read {
                    prop_assert!(!lost.contains(&o.disk), "rebuild reads a lost disk");
                    known[o.disk as usize] = Some(disk[o.disk as usize][row as usize].clone());
                }
            }
            // Only what the plan read is known (RAID-6 reads k units: the
            // unread survivors count as erased); that must be enough.
            if sm.q.is_some() {
                prop_assert_eq!(known.iter().filter(|k| k.is_some()).count() as u32, sm.k, "RAID-6 rebuild reads k units");
            }
            let solved = solve(&sm, &known).expect("rebuild reads enough to solve the row");
            let writes: Vec<u32> = plan.disk_ops().filter(|o| o.kind == DiskOpKind::Write).map(|o| o.disk).collect();
            prop_assert_eq!(&writes, &lost);
            for &d in &writes { disk[d as usize][row as usize] = solved[d as usize].clone(); }
            a.set_recovered_rows(row + 1);
        }
        for &d in &lost {
            prop_assert_eq!(&disk[d as usize], &original[d as usize], "spare {} differs from the lost disk", d);
        }
    }
}

#[test]
fn raid1_and_raid10_rebuild_copy_the_lost_disk() {
    // RAID-1 of 3, disk 1 lost: read disk 0, write disk 1, chunk by chunk.
    let cb = 2u64;
    let rows = 5u64;
    for (level, n, lost) in [(Level::Raid1, 3u32, 1u32), (Level::Raid10, 4, 2), (Level::Raid10, 3, 0)] {
        let mut cfg = ArrayConfig::new(level, n);
        cfg.chunk_bytes = cb * cfg.block_size;
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        // Real bytes: each member place holds its logical block number's bytes.
        let cap = a.capacity_blocks().unwrap();
        let mut disk = vec![vec![u64::MAX; (rows * cb) as usize]; n as usize];
        for b in 0..cap {
            let pl = a.map(b);
            for (d, at) in pl.disks.iter().zip(&pl.disk_blocks) {
                disk[*d as usize][*at as usize] = b;
            }
        }
        let original = disk[lost as usize].clone();
        disk[lost as usize].fill(u64::MAX - 1);
        a.fail(lost).unwrap();
        a.start_recovery(&[lost]).unwrap();
        assert_eq!(a.member_rows(), Some(rows));
        for row in 0..rows {
            let plan = a.plan_rebuild_row(row);
            let o = ops(&plan);
            let reads: Vec<_> = o.iter().filter(|x| x.1 == DiskOpKind::Read).collect();
            let writes: Vec<_> = o.iter().filter(|x| x.1 == DiskOpKind::Write).collect();
            assert!(
                reads.len() <= 1 && writes.len() == reads.len(),
                "{level:?} row {row}: {o:?}"
            );
            if let (Some(r), Some(w)) = (reads.first(), writes.first()) {
                assert_ne!(r.0, lost);
                assert_eq!((w.0, w.2, w.3), (lost, row * cb, cb as u32));
                for i in 0..cb {
                    disk[lost as usize][(w.2 + i) as usize] = disk[r.0 as usize][(r.2 + i) as usize];
                }
            }
            a.set_recovered_rows(row + 1);
        }
        assert_eq!(disk[lost as usize], original, "{level:?} of {n}");
    }
}

/// A parity array of `rows` one-block chunk rows per member.
fn sized(level: Level, layout: Layout, n: u32, rows: u64) -> Array {
    let mut cfg = ArrayConfig::new(level, n);
    cfg.layout = layout;
    cfg.chunk_bytes = cfg.block_size;
    cfg.disk_bytes = rows * cfg.chunk_bytes;
    Array::new(cfg).unwrap()
}

/// Run rebuild order `order` over a parity array on real bytes: steps are
/// issued when the order has one and completed in a random order (several
/// in flight), each step's disk operations acting on the bytes when it
/// completes (reads read, writes write what the reads solve); between
/// steps, user writes to rows with no rebuild step in flight (MD holds such
/// rows locked) change the data with the array's write plans, and user
/// reads feed PRO's access monitor. Returns the lost disks' contents
/// against what they should hold.
fn rebuild_on_bytes(
    level: Level,
    layout: Layout,
    n: u32,
    lost: &[u32],
    order: &str,
    mut seed: u64,
) -> Vec<(Vec<Vec<u8>>, Vec<Vec<u8>>)> {
    let rows = 12u64;
    let mut a = sized(level, layout, n, rows);
    let k = a.data_disks_per_stripe() as u64;
    // truth[row][disk]: what every member should hold.
    let mut truth: Vec<Vec<Vec<u8>>> = (0..rows)
        .map(|row| {
            let sm = a.stripe_map(row);
            let data: Vec<Vec<u8>> = (0..sm.k)
                .map(|_| (0..UNIT).map(|_| next(&mut seed)).collect())
                .collect();
            let mut units = vec![vec![0u8; UNIT]; n as usize];
            for (i, &d) in sm.data_disks().iter().enumerate() {
                units[d as usize] = data[i].clone();
            }
            for (p, v) in sm.parity().iter().zip(parity_of(&sm, &data)) {
                units[*p as usize] = v;
            }
            units
        })
        .collect();
    let mut disk: Vec<Vec<Vec<u8>>> = (0..n as usize)
        .map(|d| (0..rows as usize).map(|r| truth[r][d].clone()).collect())
        .collect();
    for &d in lost {
        a.fail(d).unwrap();
        disk[d as usize].iter_mut().for_each(|u| u.fill(0));
    }
    let params = crate::rebuild::OrderParams {
        pro: crate::rebuild::ProParams {
            zone_bytes: 2 * a.config().chunk_bytes,
            threads: 2,
            slice_ns: 3,
            ..Default::default()
        },
        dor_lead: 3,
        ..Default::default()
    };
    let mut s = crate::rebuild::build_with(order, &a, &params).unwrap();
    a.start_recovery(lost).unwrap();
    s.start(&mut a, 0);
    // Steps in flight (tag, plan, row) and reads buffered per row (DOR).
    let mut pending: Vec<(u64, IoPlan, u64)> = Vec::new();
    let mut buffered: Vec<Vec<Option<Vec<u8>>>> = vec![vec![None; n as usize]; rows as usize];
    let row_of = |plan: &IoPlan| plan.disk_ops().next().map(|o| o.block);
    let mut now = 0u64;
    while !s.is_finished() {
        now += 1;
        let roll = next(&mut seed) % 8;
        if roll < 3 && s.has_step() {
            if let Some(st) = s.next_step(&a, now) {
                let row = row_of(&st.plan).unwrap_or(st.tag >> 9);
                pending.push((st.tag, st.plan, row));
                continue;
            }
        }
        if roll == 3 {
            // A user write of one data unit of a row nobody is rebuilding.
            let row = next(&mut seed) as u64 % rows;
            let busy = pending.iter().any(|p| p.2 == row) || buffered[row as usize].iter().any(|b| b.is_some());
            if !busy {
                let sm = a.stripe_map(row);
                let i = next(&mut seed) as u64 % k;
                let mut data: Vec<Vec<u8>> = sm
                    .data_disks()
                    .iter()
                    .map(|&d| truth[row as usize][d as usize].clone())
                    .collect();
                data[i as usize] = (0..UNIT).map(|_| next(&mut seed)).collect();
                for (j, &d) in sm.data_disks().iter().enumerate() {
                    truth[row as usize][d as usize] = data[j].clone();
                }
                for (p, v) in sm.parity().iter().zip(parity_of(&sm, &data)) {
                    truth[row as usize][*p as usize] = v;
                }
                let plan = a.plan_write(row * k + i, 1);
                for o in plan.disk_ops().filter(|o| o.kind == DiskOpKind::Write) {
                    disk[o.disk as usize][row as usize] = truth[row as usize][o.disk as usize].clone();
                }
                s.observe_user(&a, row * k + i..row * k + i + 1, &plan, now);
                // Every unit the array can read now holds the new row.
                for d in 0..n {
                    if !a.is_failed_at(d, row) {
                        assert_eq!(
                            disk[d as usize][row as usize], truth[row as usize][d as usize],
                            "row {row} disk {d}"
                        );
                    }
                }
            }
            continue;
        }
        if roll == 4 {
            let b = next(&mut seed) as u64 % (rows * k);
            s.observe_user(&a, b..b + 1, &a.plan_read(b, 1), now);
            continue;
        }
        if pending.is_empty() {
            continue;
        }
        let (tag, plan, row) = pending.remove(next(&mut seed) as usize % pending.len());
        let r = row as usize;
        for o in plan.disk_ops().filter(|o| o.kind == DiskOpKind::Read) {
            assert_eq!(o.cause, Cause::Rebuild);
            assert!(!lost.contains(&o.disk), "a rebuild reads a lost disk");
            buffered[r][o.disk as usize] = Some(disk[o.disk as usize][r].clone());
        }
        let writes: Vec<u32> = plan
            .disk_ops()
            .filter(|o| o.kind == DiskOpKind::Write)
            .map(|o| o.disk)
            .collect();
        if !writes.is_empty() {
            let sm = a.stripe_map(row);
            let solved = solve(&sm, &buffered[r]).expect("the rebuild read enough to solve the row");
            for &d in &writes {
                disk[d as usize][r] = solved[d as usize].clone();
            }
            buffered[r].iter_mut().for_each(|b| *b = None);
        }
        s.complete(tag, &mut a, now);
    }
    assert!(pending.is_empty() && (0..rows).all(|r| a.is_rebuilt(r)));
    lost.iter()
        .map(|&d| {
            let want: Vec<Vec<u8>> = (0..rows as usize).map(|r| truth[r][d as usize].clone()).collect();
            (disk[d as usize].clone(), want)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// Every rebuild order (md, pro, dor, pro-dor), steps completing in any
    /// order, user writes between them: the spares end equal to what the
    /// lost disks should hold, byte for byte.
    #[test]
    fn every_order_restores_lost_disks_on_real_bytes((level, layout, n, _cb) in parity_config(), f in 0u32..9, g in 0u32..9, two in any::<bool>(), order in 0usize..4, seed in any::<u64>()) {
        let mut lost = vec![f % n];
        if two && level == Level::Raid6 && g % n != f % n { lost.push(g % n); }
        lost.sort_unstable();
        let name = crate::rebuild::ORDERS[order];
        for (i, (got, want)) in rebuild_on_bytes(level, layout, n, &lost, name, seed).into_iter().enumerate() {
            prop_assert_eq!(got, want, "{} spare of disk {}", name, lost[i]);
        }
    }
}

#[test]
fn every_order_copies_the_lost_mirror() {
    // RAID-1 of 3 and RAID-10 near-2 of 4: every order rebuilds the lost
    // disk as a copy (bytes: each place holds its logical block number).
    for order in crate::rebuild::ORDERS {
        for (level, n, lost) in [(Level::Raid1, 3u32, 1u32), (Level::Raid10, 4, 2)] {
            let rows = 6u64;
            let mut cfg = ArrayConfig::new(level, n);
            cfg.chunk_bytes = 2 * cfg.block_size;
            cfg.disk_bytes = rows * cfg.chunk_bytes;
            let mut a = Array::new(cfg).unwrap();
            let cb = a.chunk_blocks();
            let mut disk = vec![vec![u64::MAX; (rows * cb) as usize]; n as usize];
            for b in 0..a.capacity_blocks().unwrap() {
                let pl = a.map(b);
                for (d, at) in pl.disks.iter().zip(&pl.disk_blocks) {
                    disk[*d as usize][*at as usize] = b;
                }
            }
            let original = disk[lost as usize].clone();
            disk[lost as usize].fill(u64::MAX - 1);
            a.fail(lost).unwrap();
            let mut s = crate::rebuild::build(order, &a).unwrap();
            let mut buf: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
            crate::rebuild::rebuild_all(&mut a, s.as_mut(), |plan| {
                for o in plan.disk_ops() {
                    let range = o.block as usize..(o.block + o.nblocks as u64) as usize;
                    match o.kind {
                        DiskOpKind::Read => {
                            buf.insert(o.block / cb, disk[o.disk as usize][range].to_vec());
                        }
                        DiskOpKind::Write => {
                            let src = buf.remove(&(o.block / cb)).expect("read before written");
                            disk[o.disk as usize][range].copy_from_slice(&src);
                        }
                    }
                }
            })
            .unwrap();
            assert_eq!(disk[lost as usize], original, "{order}: {level:?} of {n}");
        }
    }
}

#[test]
fn scrub_plans_read_every_copy_of_every_chunk_exactly_once() {
    // Over all member rows, a scrub reads each (disk, block) that holds data
    // exactly once, for parity arrays and every RAID-10 layout.
    let cb = 2u64;
    let rows = 6u64;
    for (level, n, layout) in [
        (Level::Raid5, 4u32, None),
        (Level::Raid6, 5, None),
        (Level::Raid1, 3, None),
        (Level::Raid10, 4, Some("n2")),
        (Level::Raid10, 5, Some("f2")),
        (Level::Raid10, 3, Some("o2")),
    ] {
        let mut cfg = ArrayConfig::new(level, n);
        cfg.chunk_bytes = cb * cfg.block_size;
        cfg.disk_bytes = rows * cfg.chunk_bytes;
        if let Some(l) = layout {
            cfg.set_layout(l).unwrap();
        }
        let a = Array::new(cfg).unwrap();
        let mut seen = std::collections::HashMap::new();
        for row in 0..rows {
            for o in a.plan_scrub_row(row).disk_ops() {
                assert_eq!(
                    (o.kind, o.cause, o.nblocks as u64),
                    (DiskOpKind::Read, Cause::Rebuild, cb)
                );
                *seen.entry((o.disk, o.block)).or_insert(0) += 1;
            }
        }
        let mut want = std::collections::HashMap::new();
        match level {
            Level::Raid10 => {
                for b in (0..a.capacity_blocks().unwrap()).step_by(cb as usize) {
                    for (d, at) in a.raid10_copies(b) {
                        want.insert((d, at), 1);
                    }
                }
            }
            _ => {
                for d in 0..n {
                    for row in 0..rows {
                        want.insert((d, row * cb), 1);
                    }
                }
            }
        }
        assert_eq!(seen, want, "{level:?} {layout:?}");
    }
    // Failed members are not read.
    let mut a = array(Level::Raid5, Layout::LeftSymmetric, 4, 2);
    a.fail(2).unwrap();
    assert!(a.plan_scrub_row(0).disk_ops().all(|o| o.disk != 2));
    assert_eq!(a.plan_scrub_row(0).disk_ops().count(), 3);
}

/// The one-block read fast paths of `plan_read` (in place, or the lost
/// block's row) make exactly the general planner's plan: every parity level
/// and layout, 3 to 7 disks, chunks of 1, 2 and 4 blocks, every set of up to
/// three failed disks (more than the level survives: unreadable blocks),
/// degraded and half-recovered.
#[test]
fn one_block_reads_equal_the_row_planner() {
    let (mut checked, mut lost, mut unreadable) = (0, 0, 0);
    for level in [Level::Raid4, Level::Raid5, Level::Raid6] {
        let layouts: &[Layout] = if level == Level::Raid4 {
            &[Layout::LeftSymmetric]
        } else {
            Layout::all()
        };
        for &layout in layouts {
            let min = if level == Level::Raid6 { 4 } else { 3 };
            for disks in min..=7u32 {
                for cb in [1u64, 2, 4] {
                    let mut sets: Vec<Vec<u32>> = vec![vec![]];
                    for a in 0..disks {
                        sets.push(vec![a]);
                        for b in a + 1..disks {
                            sets.push(vec![a, b]);
                            if b + 1 < disks {
                                sets.push(vec![a, b, b + 1]);
                            }
                        }
                    }
                    for failed in sets {
                        for recovering in [false, true] {
                            let mut cfg = ArrayConfig::new(level, disks);
                            cfg.layout = layout;
                            cfg.chunk_bytes = cb * cfg.block_size;
                            let Ok(mut arr) = Array::new(cfg) else {
                                continue; // a layout of another level
                            };
                            if !failed.iter().all(|&d| arr.fail(d).is_ok()) {
                                continue;
                            }
                            if recovering && (failed.is_empty() || arr.start_recovery(&failed).is_err()) {
                                continue;
                            }
                            if recovering {
                                arr.set_recovered_rows(2);
                            }
                            let stripe = cb * arr.data_disks_per_stripe() as u64;
                            for block in 0..4 * stripe {
                                let plan = arr.plan_read(block, 1);
                                let rebuilt = |a: &Action| matches!(a, Action::Xor { .. } | Action::PQ { .. });
                                lost += plan.nodes.iter().any(|n| rebuilt(&n.action)) as u32;
                                unreadable +=
                                    plan.nodes.iter().any(|n| matches!(n.action, Action::Unreadable { .. })) as u32;
                                assert_eq!(
                                    plan,
                                    arr.plan_read_by_rows(block, 1),
                                    "{level:?} {layout:?} {disks} disks chunk {cb} failed {failed:?} \
                                     recovering {recovering} block {block}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 10_000 && lost > 1_000 && unreadable > 1_000,
        "{checked} {lost} {unreadable}"
    );
}

//! Per-row decisions of the parity levels (RAID-4/5/6), healthy or degraded.
//!
//! A *row* is one block-sized unit on every disk of a stripe at the same disk
//! block (MD's stripe_head with STRIPE_SIZE = one block). Reads of a unit on
//! a failed disk read every surviving unit of the row and compute the lost one
//! (as MD's fetch_block does: it asks for all in-sync devices). Writes choose
//! read-modify-write or reconstruct-write with MD's counting from
//! `handle_stripe_dirtying`: each unit that must be read costs 1 on a
//! surviving disk and 2·n on a failed one, rmw wins only when strictly
//! cheaper (MD's default `rmw_level`, PARITY_ENABLE_RMW, resolves ties to rcw).
//!
//! Where we differ from MD, on purpose and as the project brief asks: a parity
//! unit on a failed disk is not maintained, so it costs nothing and is not
//! written (MD would still read for rcw and drop the parity write); with all
//! parity lost the write just writes the data.

use super::layout::StripeMap;
use super::plan::{Action, Cause};

/// How a row write updates parity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStrategy {
    /// Read old data being written and old parity, compute the delta.
    ReadModifyWrite,
    /// Read the data not being written, compute parity from scratch.
    ReconstructWrite,
    /// Neither works (RAID-6, two failures, one written and one not): read
    /// every surviving unit, recover the lost data, then reconstruct-write.
    ReadAllReconstruct,
    /// No parity of the row survives: write the data only.
    DataOnly,
    /// More failures than the level tolerates and neither rmw nor rcw can
    /// work: surviving data is written without parity; lost data is lost.
    Lost,
}

/// The disk I/O of one row: reads, then an optional compute, then writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIo {
    pub reads: Vec<(u32, Cause)>,
    pub compute: Option<Action>,
    pub writes: Vec<(u32, Cause)>,
    /// Data indices (0..k) of requested units that cannot be read or stored.
    pub unreadable: Vec<u32>,
}

/// MD's rmw and rcw read costs of a row write (`written[d]` for data unit d):
/// 1 per unit to read on a surviving disk, 2·n per unit on a failed disk.
/// Lost parity units are not counted (they are not maintained).
pub fn write_costs(sm: &StripeMap, failed: &dyn Fn(u32) -> bool, written: &[bool]) -> (u32, u32) {
    let inf = 2 * sm.n;
    let cost = |disk: u32| if failed(disk) { inf } else { 1 };
    let mut rmw = 0;
    let mut rcw = 0;
    for d in 0..sm.k {
        let disk = sm.data_disk(d);
        if written[d as usize] {
            rmw += cost(disk);
        } else {
            rcw += cost(disk);
        }
    }
    for p in sm.parity() {
        if !failed(p) {
            rmw += 1;
        }
    }
    (rmw, rcw)
}

fn compute_action(sm: &StripeMap, xor_units: u32, pq_units: u32) -> Action {
    if sm.q.is_some() {
        Action::PQ { units: pq_units }
    } else {
        Action::Xor { units: xor_units }
    }
}

/// Plan the write of the data units `written` (indexed by data index) of one row.
pub fn write_row(sm: &StripeMap, failed: &dyn Fn(u32) -> bool, written: &[bool]) -> (WriteStrategy, RowIo) {
    let k = sm.k;
    let n = sm.n;
    let m = n - k;
    let data: Vec<u32> = sm.data_disks();
    let parity_alive: Vec<u32> = sm.parity().into_iter().filter(|&p| !failed(p)).collect();
    let lost = (0..n).filter(|&d| failed(d)).count() as u32;
    let nwritten = written.iter().filter(|&&w| w).count() as u32;
    let mut io = RowIo {
        reads: vec![],
        compute: None,
        writes: vec![],
        unreadable: vec![],
    };

    // Data writes common to every strategy: surviving written units.
    let data_writes = |io: &mut RowIo| {
        for d in 0..k {
            if written[d as usize] {
                if failed(data[d as usize]) {
                    if lost > m || parity_alive.is_empty() {
                        io.unreadable.push(d);
                    }
                } else {
                    io.writes.push((data[d as usize], Cause::User));
                }
            }
        }
    };

    if parity_alive.is_empty() {
        data_writes(&mut io);
        return (WriteStrategy::DataOnly, io);
    }
    let (rmw, rcw) = write_costs(sm, failed, written);
    let inf = 2 * n;
    let strategy = if rmw < rcw && rmw < inf {
        WriteStrategy::ReadModifyWrite
    } else if rcw < inf {
        WriteStrategy::ReconstructWrite
    } else if lost <= m {
        WriteStrategy::ReadAllReconstruct
    } else {
        WriteStrategy::Lost
    };
    match strategy {
        WriteStrategy::ReadModifyWrite => {
            for d in 0..k {
                if written[d as usize] {
                    io.reads.push((data[d as usize], Cause::ParityUpdate));
                }
            }
            for &p in &parity_alive {
                io.reads.push((p, Cause::ParityUpdate));
            }
            let units = 2 * nwritten + 1;
            io.compute = Some(compute_action(sm, units, units + 1));
        }
        WriteStrategy::ReconstructWrite => {
            for d in 0..k {
                if !written[d as usize] {
                    io.reads.push((data[d as usize], Cause::ParityUpdate));
                }
            }
            io.compute = Some(compute_action(sm, k, k));
        }
        WriteStrategy::ReadAllReconstruct => {
            for disk in 0..n {
                if !failed(disk) {
                    io.reads.push((disk, Cause::ReconstructRead));
                }
            }
            io.compute = Some(Action::PQ {
                units: n - lost + nwritten,
            });
        }
        WriteStrategy::Lost | WriteStrategy::DataOnly => {}
    }
    data_writes(&mut io);
    if strategy != WriteStrategy::Lost {
        for &p in &parity_alive {
            io.writes.push((p, Cause::ParityUpdate));
        }
    }
    (strategy, io)
}

/// Plan the read of the data units `wanted` (indexed by data index) of one row.
pub fn read_row(sm: &StripeMap, failed: &dyn Fn(u32) -> bool, wanted: &[bool]) -> RowIo {
    let k = sm.k;
    let n = sm.n;
    let m = n - k;
    let data = sm.data_disks();
    let lost = (0..n).filter(|&d| failed(d)).count() as u32;
    let lost_wanted = (0..k).any(|d| wanted[d as usize] && failed(data[d as usize]));
    let mut io = RowIo {
        reads: vec![],
        compute: None,
        writes: vec![],
        unreadable: vec![],
    };
    if lost_wanted && lost <= m {
        // Reconstruct: read every surviving unit of the row.
        let mut is_wanted = vec![false; n as usize];
        for d in 0..k {
            is_wanted[data[d as usize] as usize] = wanted[d as usize];
        }
        for disk in 0..n {
            if !failed(disk) {
                let cause = if is_wanted[disk as usize] {
                    Cause::User
                } else {
                    Cause::ReconstructRead
                };
                io.reads.push((disk, cause));
            }
        }
        let lost_data = data.iter().filter(|&&d| failed(d)).count();
        io.compute = Some(if lost_data == 1 && !failed(sm.p) {
            Action::Xor { units: k }
        } else {
            Action::PQ { units: n - lost }
        });
        return io;
    }
    for d in 0..k {
        if wanted[d as usize] {
            if failed(data[d as usize]) {
                io.unreadable.push(d);
            } else {
                io.reads.push((data[d as usize], Cause::User));
            }
        }
    }
    io
}

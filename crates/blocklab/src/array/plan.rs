//! I/O plans: what the array asks the devices to do for one logical operation.
//!
//! A plan is a small DAG (as in RAIDframe): nodes are disk operations or
//! compute steps, each with the indices of the nodes it waits for. Plans say
//! nothing about time; an executor (count, timed, real) runs them.

use serde::Serialize;

/// Why a disk operation is issued; executors tally operations per cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// A user read or write of the addressed unit itself.
    User,
    /// Reading surviving units to rebuild a lost one on the fly.
    ReconstructRead,
    /// Reading old data/parity, or writing new parity, for a write.
    ParityUpdate,
    /// Background reconstruction onto a spare.
    Rebuild,
    /// Write-back of dirty cached data.
    Destage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DiskOpKind {
    Read,
    Write,
}

/// One operation on one disk: `nblocks` blocks from `block` (disk blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DiskOp {
    pub disk: u32,
    pub kind: DiskOpKind,
    pub block: u64,
    pub nblocks: u32,
    pub cause: Cause,
}

/// What a plan node does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Action {
    Disk(DiskOp),
    /// XOR of `units` equal-sized units (parity or reconstruction).
    Xor {
        units: u32,
    },
    /// RAID-6 P+Q computation or recovery over `units` units.
    PQ {
        units: u32,
    },
    /// The data cannot be produced: more failures than the level tolerates.
    Unreadable {
        block: u64,
    },
    /// A fixed time (ns) with no device involved: a host cache hit, a copy.
    /// Only the timed executor gives it meaning.
    Delay {
        ns: u64,
    },
    /// Completes when another plan (by the id its executor gave it) has
    /// completed: a cache hit on a block whose fetch is still in flight.
    /// Only the timed executor gives it meaning.
    Await {
        plan: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    pub action: Action,
    /// Indices of nodes that must complete first (always smaller than this node's).
    pub deps: Vec<u16>,
}

/// A DAG of nodes in topological order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IoPlan {
    pub nodes: Vec<Node>,
}

impl IoPlan {
    pub fn push(&mut self, action: Action, deps: &[u16]) -> u16 {
        self.nodes.push(Node {
            action,
            deps: deps.to_vec(),
        });
        (self.nodes.len() - 1) as u16
    }

    /// Append `other`'s nodes (their dependencies shifted), independent of
    /// the nodes already here: the plan completes when both parts have.
    pub fn append(&mut self, other: IoPlan) {
        let base = self.nodes.len() as u16;
        self.nodes.extend(other.nodes.into_iter().map(|mut n| {
            n.deps.iter_mut().for_each(|d| *d += base);
            n
        }));
    }

    /// Relabel the disk operations of cause `from` as `to` (a cache's
    /// destage is a user write to the array, counted as a destage).
    pub fn retag(&mut self, from: Cause, to: Cause) {
        for n in &mut self.nodes {
            if let Action::Disk(op) = &mut n.action {
                if op.cause == from {
                    op.cause = to;
                }
            }
        }
    }

    pub fn disk_ops(&self) -> impl Iterator<Item = &DiskOp> {
        self.nodes.iter().filter_map(|n| match &n.action {
            Action::Disk(op) => Some(op),
            _ => None,
        })
    }
}

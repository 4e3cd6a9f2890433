//! The rebuild strategy trait: what to rebuild next, and what the array
//! learns when it is done. Time and speed are not its business.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::Range;

use crate::array::{Array, IoPlan};

/// One unit of background rebuild work: a plan (all its disk operations
/// have cause `rebuild`) and the strategy's own name for it, handed back to
/// [`Strategy::complete`] when the plan has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildStep {
    /// Chosen by the strategy (a row, a (disk, row) read, ...); the driver
    /// only carries it.
    pub tag: u64,
    pub plan: IoPlan,
    /// Member chunk rows this step rebuilds when it completes (1 for a
    /// whole-row step, 0 for a step that only reads): what MD's speed rule
    /// counts as issued recovery I/O.
    pub rows: u64,
    /// KiB of member the step copies, when it is not whole rows (the
    /// `live` order copies only live blocks): what MD's speed rule counts
    /// for it, issued and, once it completes, rebuilt. None: `rows` rows.
    pub kib: Option<u64>,
}

impl RebuildStep {
    /// A step rebuilding one whole row.
    pub fn row(tag: u64, plan: IoPlan) -> Self {
        RebuildStep {
            tag,
            plan,
            rows: 1,
            kib: None,
        }
    }
}

/// A rebuild order: which units of the recovering disks to rebuild, in which
/// order, with which plans, and how completions update the array's view of
/// what is in sync.
///
/// A driver — [`Rebuilder`](crate::timed::rebuild::Rebuilder) in simulated
/// time, [`rebuild_all`](super::rebuild_all) without time — calls
/// `start_recovery` on the array and [`start`](Strategy::start), then repeatedly asks [`next_step`]
/// (only when [`has_step`] says one is ready), runs the plan and reports its
/// completion with [`complete`], possibly out of issue order and with other
/// steps still in flight, until [`is_finished`]; then it calls
/// `finish_recovery`. How many steps are in flight and when the next may
/// start (MD's speed rule) is the driver's pacing, not the strategy's.
///
/// `now` is the simulated time in ns (0 throughout a run without time).
///
/// [`next_step`]: Strategy::next_step
/// [`has_step`]: Strategy::has_step
/// [`complete`]: Strategy::complete
/// [`is_finished`]: Strategy::is_finished
pub trait Strategy: Send + Debug {
    /// The order's name (`md`, ...).
    fn name(&self) -> &'static str;

    /// The recovery has just started (the driver called
    /// `start_recovery`, after setting the map's unit): the order may mark
    /// units it has nothing to copy for (the `live` order's dead rows).
    /// Default: nothing.
    fn start(&mut self, _array: &mut Array, _now: u64) {}

    /// Whether a step can be issued now. False while the strategy waits for
    /// steps in flight (a disk stream's outstanding read, a row whose reads
    /// have not all arrived) or has issued everything.
    fn has_step(&self) -> bool;

    /// The next step to issue; called only when [`has_step`](Self::has_step)
    /// is true, at the moment the driver issues it (so a strategy that
    /// ranks its work sees the latest state).
    fn next_step(&mut self, array: &Array, now: u64) -> Option<RebuildStep>;

    /// Step `tag` completed. Update what the array serves from the spares
    /// (e.g. [`Array::set_recovered_rows`]) and return how many member
    /// chunk rows of the recovering disks this completion finished (the
    /// rebuilt amount the driver's speed rule measures; 0 for a step that
    /// only read).
    fn complete(&mut self, tag: u64, array: &mut Array, now: u64) -> u64;

    /// Every unit is rebuilt (the driver then calls `finish_recovery`).
    fn is_finished(&self) -> bool;

    /// Member chunk rows the array treats as rebuilt so far (the report's
    /// `rebuild_rows`).
    fn rebuilt_rows(&self) -> u64;

    /// A user request for array blocks `blocks` was planned as `plan` at
    /// `now` (from the failure on, before and during the rebuild): the hook
    /// of an access monitor such as PRO's popularity count. Default: ignore.
    fn observe_user(&mut self, _array: &Array, _blocks: Range<u64>, _plan: &IoPlan, _now: u64) {}

    /// The order bounds its own steps in flight (DOR: one read per disk and
    /// a bound on how far one disk runs ahead), so a driver's window of
    /// steps does not apply.
    fn self_limited(&self) -> bool {
        false
    }

    /// The order's own choice of priority: its I/O is served only when no
    /// user request waits at a disk (DOR), instead of the same priority
    /// (MD's recovery). A driver may be told otherwise.
    fn prefers_low_priority(&self) -> bool {
        false
    }

    /// Whether the order is meant to run under MD's speed rule (MD, PRO on
    /// MD) or to absorb whatever bandwidth the users leave (DOR). A driver
    /// may be told otherwise.
    fn prefers_speed_rule(&self) -> bool {
        true
    }

    /// Figures of the order's own (PRO's zones and slices, DOR's streams)
    /// for the report.
    fn stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
}

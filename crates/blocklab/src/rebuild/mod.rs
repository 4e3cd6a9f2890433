//! Rebuild strategies: the order in which the lost disks of an array are
//! rebuilt onto spares, independent of time.
//!
//! A strategy ([`Strategy`], one file per order) says which units to
//! rebuild next, with which plans ([`RebuildStep`]), and what the array
//! learns when a step completes. It knows nothing of time or speed: the
//! timed [`Rebuilder`](crate::timed::rebuild::Rebuilder) paces any strategy
//! with MD's speed rule in simulated time, and [`rebuild_all`] runs one to
//! completion without time (the counted view: what a whole rebuild costs).
//!
//! Orders: `md` ([`md::Md`], Linux MD's sequential rows behind a recovery
//! offset), `pro` ([`pro::Pro`], popularity first, on MD's whole-row
//! steps), `dor` ([`dor::Dor`], disk-oriented reconstruction: a read stream
//! per surviving disk) and `pro-dor` (DOR's streams in PRO's order). The
//! out-of-order ones mark completed rows in the array's map of rebuilt units.
//! `live` ([`live::Live`], D-GRAID's live-block recovery, mirrors only)
//! copies only the live blocks of the lost members.
//!
//! MD's speed rule ([`pacing`]) is here too, written once over a clock
//! ([`pacing::PaceClock`]): the timed executor runs it in simulated time,
//! the real executor (`exec/real/rebuild.rs`) on the wall clock.

pub mod dor;
pub mod live;
pub mod md;
pub mod pacing;
pub mod pro;
pub mod rows;
mod strategy;

pub use dor::Dor;
pub use live::{Live, LiveMap, LiveParams, LiveSource};
pub use md::Md;
pub use pro::{Pro, ProCount, ProOrder, ProParams};
pub use rows::{RowSource, Sequential};
pub use strategy::{RebuildStep, Strategy};

use crate::array::{Array, IoPlan};
use crate::error::{Error, Result};

/// The row orders (they rebuild every redundant level) by name.
pub const ORDERS: &[&str] = &["md", "pro", "dor", "pro-dor"];

/// Every order by name: the row orders and `live` (mirrors only).
pub const ALL_ORDERS: &[&str] = &["md", "pro", "dor", "pro-dor", "live"];

/// The orders' own parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderParams {
    pub pro: ProParams,
    /// DOR: rows buffered (active) at most: how far one disk may run ahead.
    pub dor_lead: usize,
    /// `live`: where the live blocks come from, the largest copy.
    pub live: LiveParams,
}

impl Default for OrderParams {
    fn default() -> Self {
        OrderParams {
            pro: ProParams::default(),
            dor_lead: dor::DEFAULT_LEAD,
            live: LiveParams::default(),
        }
    }
}

/// The strategy named `order` for rebuilding `array`'s members (whose size
/// must be known: [`Array::member_rows`]), with default parameters.
pub fn build(order: &str, array: &Array) -> Result<Box<dyn Strategy>> {
    build_with(order, array, &OrderParams::default())
}

/// The strategy named `order` with parameters `p`.
pub fn build_with(order: &str, array: &Array, p: &OrderParams) -> Result<Box<dyn Strategy>> {
    let rows = array
        .member_rows()
        .ok_or_else(|| Error::config("rebuild needs the member size"))?;
    let pro = || ProOrder::new(rows, array.chunk_blocks(), array.config().block_size, p.pro);
    Ok(match order.to_ascii_lowercase().as_str() {
        "md" => Box::new(Md::new(rows)),
        "pro" => Box::new(Pro::new(array, rows, p.pro)),
        "dor" => Box::new(Dor::new("dor", array, rows, Sequential::new(rows), p.dor_lead)),
        "pro-dor" => Box::new(Dor::new("pro-dor", array, rows, pro(), p.dor_lead)),
        "live" => Box::new(Live::new(array, rows, &p.live)?),
        _ => return Err(Error::unknown("rebuild order", order, ALL_ORDERS)),
    })
}

/// Rebuild every failed disk of `array` without time: start the recovery,
/// issue `strategy`'s steps in its order, each completing at once right
/// after `on_plan` has seen its plan, then finish the recovery (the disks
/// are members again). `strategy` must be made for this array (e.g. by
/// [`build`]). Returns the number of steps.
pub fn rebuild_all<S: Strategy + ?Sized>(
    array: &mut Array,
    strategy: &mut S,
    mut on_plan: impl FnMut(&IoPlan),
) -> Result<u64> {
    let disks = array.failed().to_vec();
    array.start_recovery(&disks)?;
    strategy.start(array, 0);
    let mut steps = 0;
    while !strategy.is_finished() {
        // Nothing is ever in flight here, so a strategy with nothing to
        // issue would wait forever.
        let step = if strategy.has_step() {
            strategy.next_step(array, 0)
        } else {
            None
        };
        let Some(step) = step else {
            return Err(Error::config(format!(
                "rebuild order `{}` stopped before every unit was rebuilt",
                strategy.name()
            )));
        };
        on_plan(&step.plan);
        strategy.complete(step.tag, array, 0);
        steps += 1;
    }
    array.finish_recovery();
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArrayConfig, Cause, DiskOpKind, Level};
    use crate::exec::count::CountExecutor;

    const ROWS: u64 = 8;

    fn array(level: Level, disks: u32, failed: &[u32]) -> Array {
        let mut cfg = ArrayConfig::new(level, disks);
        cfg.disk_bytes = ROWS * cfg.chunk_bytes;
        let mut a = Array::new(cfg).unwrap();
        for &d in failed {
            a.fail(d).unwrap();
        }
        a
    }

    /// Rebuild with `md` under the counted executor; check the rebuild
    /// blocks against rows × (reads + writes per row) × chunk and the plans
    /// against the array's row plans in ascending order.
    fn counted(mut a: Array, reads_per_row: u64, writes_per_row: u64) {
        let cb = a.chunk_blocks();
        let mut reference = a.clone();
        reference.start_recovery(a.failed()).unwrap();
        let mut ex = CountExecutor::new(a.ndisks());
        let mut plans = Vec::new();
        let mut md = build("md", &a).unwrap();
        let steps = rebuild_all(&mut a, md.as_mut(), |p| {
            ex.run(p);
            plans.push(p.clone());
        })
        .unwrap();
        assert_eq!(steps, ROWS);
        assert_eq!(ex.blocks(DiskOpKind::Read, Cause::Rebuild), ROWS * reads_per_row * cb);
        assert_eq!(ex.blocks(DiskOpKind::Write, Cause::Rebuild), ROWS * writes_per_row * cb);
        assert_eq!(
            ex.total_reads() + ex.total_writes(),
            ROWS * (reads_per_row + writes_per_row) * cb
        );
        let expected: Vec<IoPlan> = (0..ROWS).map(|r| reference.plan_rebuild_row(r)).collect();
        assert_eq!(plans, expected);
        assert!(
            a.failed().is_empty() && a.recovering().is_empty(),
            "the spares are members"
        );
    }

    #[test]
    fn counted_raid5_rebuild_reads_every_survivor_and_writes_the_spare() {
        counted(array(Level::Raid5, 4, &[2]), 3, 1);
    }

    #[test]
    fn counted_raid1_rebuild_copies_one_survivor_to_each_spare() {
        counted(array(Level::Raid1, 3, &[0]), 1, 1);
        counted(array(Level::Raid1, 3, &[0, 2]), 1, 2);
    }

    #[test]
    fn unknown_orders_and_unrebuildable_arrays_are_errors() {
        let a = array(Level::Raid5, 4, &[1]);
        let e = build("random", &a).unwrap_err().to_string();
        assert!(e.contains("random") && e.contains("md"), "{e}");
        assert!(build("md", &Array::new(ArrayConfig::new(Level::Raid5, 4)).unwrap()).is_err());
        // Nothing failed: nothing to rebuild.
        let mut healthy = array(Level::Raid5, 4, &[]);
        assert!(rebuild_all(&mut healthy, &mut Md::new(ROWS), |_| {}).is_err());
    }
}

//! What travels down a stack and the two small traits its parts implement.
//!
//! A user request becomes an [`Io`] (a range of stack blocks) at the top.
//! Each [`Layer`] (a host cache, an SSD tier) serves what it can and
//! passes the rest to the parts [`Below`] it; the bottom is a [`Target`]
//! (one device, or an array of devices) that turns an `Io` into an
//! [`IoPlan`]. Everything a request must wait for is gathered in one plan
//! (the [`Cx`]'s); work that the request does not wait for (a destage) is a
//! plan of its own, submitted as background work.
//!
//! The same code runs in both executors: [`Exec`] is what a layer may ask of
//! the one running it (the timed executor, or the counted one where every
//! plan completes at once).

use crate::array::plan::{Action, Cause, IoPlan};
use crate::array::shared::SharedArray;
use crate::cache::fault::FaultMap;
use crate::device::DeviceModel;
use crate::error::Result;
use crate::exec::count::CountExecutor;
use crate::timed::engine::{secs_to_ns, Ns};
use crate::timed::executor::{PlanId, Step, TimedExecutor};
use crate::timed::rebuild::RebuildReport;
use crate::trace::{FsTag, Op};
use std::sync::Arc;

use super::data::DataPath;

/// A range of stack blocks to read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    pub op: Op,
    /// First stack block.
    pub first: u64,
    /// Blocks (0 for a zero-length request: it touches no cached block).
    pub nblocks: u64,
    /// The exact byte range of a user request as issued (stack bytes), so
    /// that a single device can address its sectors exactly; `None` once a
    /// layer has turned the request into whole blocks.
    pub bytes: Option<(u64, u64)>,
    /// `User` for requests and what layers pass on of them; `Destage` for a
    /// cache's write-back of dirty blocks.
    pub cause: Cause,
    /// The request's file-system annotation (what a D-GRAID array places
    /// by); [`FsTag::NONE`] once a layer has turned it into whole blocks.
    pub fs: FsTag,
}

impl Io {
    /// Whole blocks `[first, first + n)` (what a layer sends below).
    pub fn blocks(op: Op, first: u64, nblocks: u64, cause: Cause) -> Io {
        Io {
            op,
            first,
            nblocks,
            bytes: None,
            cause,
            fs: FsTag::NONE,
        }
    }
}

/// What a layer may ask of the executor running the stack.
pub trait Exec {
    /// Whether plans take time (false: every plan completes when submitted).
    fn timed(&self) -> bool;
    fn now(&self) -> Ns;
    /// Requests waiting at or served by device `disk` (mirror read balancing).
    fn pending(&self, disk: usize) -> usize;
    /// An id for a plan about to be built.
    fn reserve(&mut self) -> PlanId;
    fn is_done(&self, id: PlanId) -> bool;
    /// Start a background plan (not a user request) under a reserved id;
    /// `tag` routes its completion back (see `stack::runtime`).
    fn submit_background(&mut self, plan: IoPlan, id: PlanId, tag: u64, class: Class) -> Result<()>;
    /// Wake the background work tagged `token` at `at` (a layer's timer, such
    /// as a write buffer's age limit); executors without time ignore it.
    fn bg_wake_at(&mut self, _at: Ns, _token: u64) {}
    /// A reserved id that will never be submitted (its plan came out empty).
    fn release(&mut self, _id: PlanId) {}
    /// The data path, when this executor moves real bytes (see
    /// `stack::data`); counted and timed runs have none.
    fn data(&mut self) -> Option<&mut dyn DataPath> {
        None
    }
}

/// How background work competes with user requests at the devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Queued like user requests (a destage the cache must make room with).
    Normal,
    /// Served only when no normal request waits at the device.
    Idle,
}

impl Exec for TimedExecutor {
    fn timed(&self) -> bool {
        true
    }
    fn now(&self) -> Ns {
        TimedExecutor::now(self)
    }
    fn pending(&self, disk: usize) -> usize {
        TimedExecutor::pending(self, disk)
    }
    fn reserve(&mut self) -> PlanId {
        self.reserve_id()
    }
    fn is_done(&self, id: PlanId) -> bool {
        TimedExecutor::is_done(self, id)
    }
    fn submit_background(&mut self, plan: IoPlan, id: PlanId, tag: u64, class: Class) -> Result<()> {
        match class {
            Class::Normal => self.submit_background_as(plan, tag, id),
            Class::Idle => self.submit_idle_as(plan, tag, id),
        }
    }
    fn bg_wake_at(&mut self, at: Ns, token: u64) {
        TimedExecutor::bg_wake_at(self, at, token)
    }
    fn release(&mut self, id: PlanId) {
        self.release_id(id)
    }
}

/// The counted executor's side of [`Exec`]: nothing waits, nothing is
/// pending (the plans themselves are tallied by the target that made them).
#[derive(Debug, Default)]
pub struct AtOnce {
    next: PlanId,
    /// Trace time of the first request and of the request being handled
    /// (seconds): `now()` is worked out only when a layer asks for it.
    pub t0: f64,
    pub time: f64,
}

impl Exec for AtOnce {
    fn timed(&self) -> bool {
        false
    }
    fn now(&self) -> Ns {
        secs_to_ns(self.time - self.t0)
    }
    fn pending(&self, _disk: usize) -> usize {
        0
    }
    fn reserve(&mut self) -> PlanId {
        self.next += 1;
        self.next - 1
    }
    fn is_done(&self, _id: PlanId) -> bool {
        true
    }
    fn submit_background(&mut self, _plan: IoPlan, _id: PlanId, _tag: u64, _class: Class) -> Result<()> {
        Ok(())
    }
}

/// The user request an [`Io`] comes from, as the trace wrote it (a cache
/// layer's miss trace names blocks of the tenant's volume).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Origin {
    pub time: f64,
    pub tenant: u32,
    /// Stack block `stack_first` is block `volume_first` of the tenant's volume.
    pub stack_first: u64,
    pub volume_first: u64,
}

/// The plan being built for one request (or one piece of background work).
pub struct Cx<'a> {
    pub exec: &'a mut dyn Exec,
    /// What the request waits for (only kept when plans take time).
    pub plan: IoPlan,
    /// The id the plan will be submitted under.
    pub id: PlanId,
    /// Whether plans take time (`exec.timed()`, asked once: layers ask it
    /// for every block).
    pub timed: bool,
    /// Whether the executor moves real bytes (`exec.data()`, asked once).
    pub moves_data: bool,
    /// The user request being served (None for background work).
    pub origin: Option<Origin>,
    /// Background work made while serving the request: submitted after the
    /// request's own plan, so that it queues behind it at the devices.
    pub deferred: Vec<Deferred>,
}

/// A background plan waiting to be submitted.
pub struct Deferred {
    pub plan: IoPlan,
    pub id: PlanId,
    pub tag: u64,
    pub class: Class,
}

impl<'a> Cx<'a> {
    pub fn new(exec: &'a mut dyn Exec) -> Self {
        let id = exec.reserve();
        let timed = exec.timed();
        let moves_data = exec.data().is_some();
        Cx {
            exec,
            plan: IoPlan::default(),
            id,
            timed,
            moves_data,
            origin: None,
            deferred: Vec::new(),
        }
    }

    /// Submit the background work made meanwhile and give back the id of a
    /// plan of its own that nothing was added to (background steps, flushes).
    pub fn finish_background(mut self) -> Result<()> {
        if self.plan.nodes.is_empty() {
            self.exec.release(self.id);
        }
        self.submit_deferred()
    }

    /// Submit the background work made meanwhile (after the request's plan).
    pub fn submit_deferred(&mut self) -> Result<()> {
        for d in std::mem::take(&mut self.deferred) {
            self.exec.submit_background(d.plan, d.id, d.tag, d.class)?;
        }
        Ok(())
    }

    /// The request also waits for `plan`.
    pub fn add(&mut self, plan: IoPlan) {
        if self.timed {
            self.plan.append(plan);
        }
    }

    /// The request takes at least `ns` (a cache hit).
    pub fn delay(&mut self, ns: Ns) {
        if self.timed && ns > 0 {
            self.plan.push(Action::Delay { ns }, &[]);
        }
    }

    /// The data path, when the executor moves real bytes.
    #[inline]
    pub fn data(&mut self) -> Option<&mut dyn DataPath> {
        if self.moves_data {
            self.exec.data()
        } else {
            None
        }
    }

    /// The request waits for another plan (a fetch in flight).
    pub fn await_plan(&mut self, id: PlanId) {
        if self.timed {
            self.plan.push(Action::Await { plan: id }, &[]);
        }
    }
}

/// A layer of the stack between the requests and the target.
pub trait Layer: Send {
    /// `io` reaches this layer now: serve what it can (adding what the
    /// request waits for to `cx`), pass the rest to `below`.
    fn handle(&mut self, io: &Io, cx: &mut Cx, below: &mut Below) -> Result<()>;
    /// The run is over: write back what only this layer holds.
    fn flush(&mut self, exec: &mut dyn Exec, below: &mut Below) -> Result<()>;
    /// A background plan this layer submitted completed (`tag` as given).
    fn background_done(&mut self, _tag: u64) {}
    /// Devices this layer owns (an SSD tier's SSD), fresh for a timed pass.
    /// `base` is the executor's index of the first: the layer's plans address
    /// them as disks `base + i`, in units of `sectors_per_block` 512-byte
    /// sectors (the executor's unit, the target's).
    fn devices(&mut self, _base: u32, _sectors_per_block: u64) -> Result<Vec<Box<dyn DeviceModel>>> {
        Ok(Vec::new())
    }
    /// A background step of this layer's (its wake-up, `wake`, or the
    /// completion of its work; `payload` as tagged) with the rest of the
    /// stack, to start more work (after `background_done` for completions).
    fn background_step(&mut self, _payload: u64, _wake: bool, _cx: &mut Cx, _below: &mut Below) -> Result<()> {
        Ok(())
    }
    /// Blocks `[first, first + n)` of the stack were read by the device
    /// opportunistically (timed runs): keep what the layer wants of them.
    fn accept_free(&mut self, _first: u64, _n: u64, _cx: &mut Cx, _below: &mut Below) -> Result<()> {
        Ok(())
    }
    /// Blocks the layer holds now (a host cache's policy), if it keeps blocks.
    fn resident(&self) -> Option<usize> {
        None
    }
    /// Blocks whose newest contents only this layer's persistent store
    /// holds (an SSD tier's dirty blocks): what the real executor journals.
    fn persistent_dirty(&self) -> Vec<u64> {
        Vec::new()
    }
    /// The warm-up is over: the layer's counters start afresh.
    fn reset_stats(&mut self) {}
    /// Add this layer's figures to the result.
    fn report(&self, out: &mut super::result::StackResult);
}

/// The bottom of a stack: one device, or an array of devices.
pub trait Target: Send {
    /// Fresh devices for a pass (the target forgets what it knew of the old ones).
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>>;
    /// 512-byte sectors per unit of the plans this target makes.
    fn sectors_per_block(&self) -> u64;
    /// The plan of `io` now (every plan is also tallied in [`ledger`](Self::ledger)).
    fn plan(&mut self, io: &Io, exec: &dyn Exec) -> Result<IoPlan>;
    /// Every disk operation planned so far, by disk and cause.
    fn ledger(&self) -> &CountExecutor;
    /// How many stack blocks the target holds (None: unbounded, a counted
    /// array without a member size).
    fn capacity_blocks(&self) -> Option<u64>;
    /// What fault-aware caches above need to know of the array (None: no array).
    fn faults(&self) -> Option<Arc<dyn FaultMap>> {
        None
    }
    /// The array the target plans on (None: no array), which the real
    /// executor keeps in step with the array of member files.
    fn shared_array(&self) -> Option<Arc<SharedArray>> {
        None
    }
    /// The configured disks fail now (`array.fail_at`); in time (`ex`), a
    /// configured rebuild is scheduled to start `at` after the failure.
    fn fail_now(&mut self, _ex: Option<&mut TimedExecutor>) -> Result<()> {
        Ok(())
    }
    /// Start background work (rebuild) on the fresh devices of a timed pass.
    fn start_background(&mut self, _ex: &mut TimedExecutor) -> Result<()> {
        Ok(())
    }
    /// A background step of the target's own (`Step::BgWake` / `Step::BgDone`).
    fn background(&mut self, _step: Step, _ex: &mut TimedExecutor) -> Result<()> {
        Ok(())
    }
    /// Counted executor: do the whole rebuild now (`at`: when, for the
    /// report), if one is configured and not done.
    fn rebuild_at_once(&mut self, _at: Ns) -> Result<()> {
        Ok(())
    }
    /// When the rebuild starts (ns after the start, or after the failure
    /// with `array.fail_at`), if one is configured.
    fn rebuild_start(&self) -> Option<Ns> {
        None
    }
    /// A user request completed (for statistics split by rebuild phase).
    fn user_done(&mut self, _time: Ns, _start: Ns, _unreadable: bool) {}
    /// The stack blocks wholly inside `sectors` sectors from `sector` of
    /// device `disk` (what a device read opportunistically), as
    /// `(first, count)`; `None`: none, or the target cannot tell.
    fn blocks_of(&self, _disk: usize, _sector: u64, _sectors: u64) -> Option<(u64, u64)> {
        None
    }
    /// The warm-up is over: the target's counters (its ledger) start afresh.
    fn reset_stats(&mut self) {}
    fn rebuild_report(&self) -> Option<RebuildReport> {
        None
    }
    /// Add the target's figures (array, devices) to the result.
    fn report(&self, out: &mut super::result::StackResult);
}

/// The rest of the stack under a layer.
pub struct Below<'a> {
    pub layers: &'a mut [Box<dyn Layer>],
    pub target: &'a mut dyn Target,
}

impl Below<'_> {
    /// Send `io` down: to the next layer, or to the target.
    pub fn handle(&mut self, io: &Io, cx: &mut Cx) -> Result<()> {
        match self.layers.split_first_mut() {
            Some((layer, rest)) => layer.handle(
                io,
                cx,
                &mut Below {
                    layers: rest,
                    target: &mut *self.target,
                },
            ),
            None => {
                let plan = self.target.plan(io, &*cx.exec)?;
                cx.add(plan);
                if let Some(d) = cx.data() {
                    d.target(io)?;
                }
                Ok(())
            }
        }
    }

    /// Send `ios` down as one piece of background work the request being
    /// served does not wait for; it is submitted after the request's own
    /// plan, and `tag` comes back to the caller when it completes.
    pub fn background(&mut self, ios: &[Io], cx: &mut Cx, tag: u64, class: Class) -> Result<()> {
        self.background_piece(ios, cx, tag, class, None)
    }

    /// [`background`](Self::background) for reads ahead of the request:
    /// the caller's layer keeps the blocks `keep` of what `ios` read (on
    /// real bytes, contents still on their way).
    pub fn read_ahead(&mut self, ios: &[Io], cx: &mut Cx, tag: u64, class: Class, keep: &[u64]) -> Result<()> {
        self.background_piece(ios, cx, tag, class, Some(keep))
    }

    fn background_piece(
        &mut self,
        ios: &[Io],
        cx: &mut Cx,
        tag: u64,
        class: Class,
        keep: Option<&[u64]>,
    ) -> Result<()> {
        let layer = super::data::layer_of(tag);
        let mut child = Cx::new(&mut *cx.exec);
        if let Some(d) = child.data() {
            match keep {
                Some(_) => d.begin_read_ahead(layer),
                None => d.begin_background(layer, ios),
            }
        }
        for io in ios {
            self.handle(io, &mut child)?;
        }
        if let Some(d) = child.data() {
            for &b in keep.unwrap_or(&[]) {
                d.keep(layer, b, None)?;
            }
            d.end_background();
        }
        let (plan, id) = (std::mem::take(&mut child.plan), child.id);
        let mut later = std::mem::take(&mut child.deferred);
        drop(child);
        cx.deferred.push(Deferred { plan, id, tag, class });
        cx.deferred.append(&mut later);
        Ok(())
    }
}

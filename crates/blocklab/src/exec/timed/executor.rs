//! The timed executor: runs I/O plans on devices in simulated time.
//!
//! A plan node starts when all its dependencies have completed: a disk
//! operation joins its device's queue; an XOR or P+Q step takes a fixed
//! compute time (default 0); an `Unreadable` node completes at once and
//! marks the plan as unable to produce its data. A plan completes when all
//! its nodes have. A single disk is the trivial one-node plan.
//!
//! A `Delay` node takes its fixed time; an `Await` node completes when the
//! plan it names (by the id [`TimedExecutor::reserve_id`] handed out) has
//! completed, at once if it already has. Plans can therefore wait for each
//! other: a cache hit on a block whose fetch is still in flight.
//!
//! The executor owns the engine. Its driver (the replayer) asks for the next
//! [`Step`]: either one of its own wake-ups (`Wake`, scheduled with
//! [`TimedExecutor::wake_at`]) or the completion of a submitted plan
//! (`Done`). Device completions and compute steps are handled inside.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use super::engine::{Engine, Ns};
use super::metrics::{Recorder, Report};
use super::queue::DevQueue;
use super::sched;
use crate::array::plan::{Action, IoPlan};
use crate::device::{DevRequest, DeviceModel};
use crate::error::{Error, Result};

/// How the executor runs plans.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub scheduler: String,
    /// SATF: the requests nearest the head whose access time is estimated
    /// per choice (`sched::DEFAULT_SATF_WINDOW`).
    pub satf_window: usize,
    /// Requests handed to a device at once (its command queue), in-service included.
    pub queue_depth: usize,
    /// Compute time of an XOR node.
    pub xor_ns: Ns,
    /// Compute time of a P+Q node.
    pub pq_ns: Ns,
    /// 512-byte sectors per plan block (1 for a single disk addressed in sectors).
    pub sectors_per_block: u64,
    /// Time-series interval (None: no series).
    pub interval_ns: Option<Ns>,
    /// Warm-up: requests of each stream's first `warmup_ns` of trace time are
    /// served but not measured (the replayer marks them; see `set_measuring`).
    pub warmup_ns: Ns,
    /// DiskSim's device driver (`iodriver_access_complete`): when a
    /// completion releases operations of the same plan, the device that
    /// completed chooses its next request only once they have joined the
    /// queues (an RMW's write after its read of the same sectors). Off: the
    /// device starts its next waiting request at once, as a block layer does.
    pub released_join_queue: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            scheduler: "fcfs".into(),
            satf_window: sched::DEFAULT_SATF_WINDOW,
            queue_depth: usize::MAX,
            xor_ns: 0,
            pq_ns: 0,
            sectors_per_block: 1,
            interval_ns: None,
            warmup_ns: 0,
            released_join_queue: false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Wake(u64),
    BgWake(u64),
    DevDone(u32),
    NodeDone(u32, u16),
    /// A device idle since a completion chooses its next request.
    DevKick(u32),
}

/// What the driver sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Wake {
        time: Ns,
        token: u64,
    },
    Done {
        time: Ns,
        tag: u64,
        start: Ns,
        unreadable: bool,
    },
    /// A background wake-up ([`TimedExecutor::bg_wake_at`]).
    BgWake {
        time: Ns,
        token: u64,
    },
    /// A background plan ([`TimedExecutor::submit_background`]) completed.
    BgDone {
        time: Ns,
        tag: u64,
    },
}

impl Step {
    /// Whether the step belongs to background work (rebuild), not to the user's requests.
    pub fn is_background(&self) -> bool {
        matches!(self, Step::BgWake { .. } | Step::BgDone { .. })
    }
}

/// A plan's identity for `Await` nodes: ids grow from 0, one per plan.
pub type PlanId = u64;

struct Live {
    id: PlanId,
    tag: u64,
    /// A user write (response times are also reported split by reads and writes).
    write: bool,
    start: Ns,
    plan: IoPlan,
    /// Unfinished dependencies per node, and who waits for whom.
    graph: Graph,
    left: usize,
    unreadable: bool,
    /// Background work: not a user request (no response time, not counted).
    bg: bool,
    /// Its disk operations are of the devices' idle class.
    idle: bool,
    /// A user request past the warm-up (its response time counts).
    measured: bool,
}

pub struct TimedExecutor {
    engine: Engine<Ev>,
    devs: Vec<DevQueue>,
    live: Vec<Option<Live>>,
    free: Vec<u32>,
    ready: VecDeque<Step>,
    cfg: ExecConfig,
    pub metrics: Recorder,
    in_flight: usize,
    bg_in_flight: usize,
    /// Issue time of the last user plan.
    last_user_issue: Option<Ns>,
    last_done: Ns,
    /// The next plan id to hand out.
    next_id: PlanId,
    /// Submitted plans not yet completed, by id (a reserved id not yet
    /// submitted is not here, and counts as not done).
    live_ids: FxHashMap<PlanId, u32>,
    /// Reserved ids not yet submitted.
    reserved: FxHashSet<PlanId>,
    /// `Await` nodes (slot, node) waiting for a plan, by its id.
    waiters: FxHashMap<PlanId, Vec<(u32, u16)>>,
    /// User requests submitted now are measured (false during a warm-up).
    measuring: bool,
    /// When measuring started (the end of the warm-up; 0 without one).
    measure_start: Option<Ns>,
}

impl TimedExecutor {
    pub fn new(models: Vec<Box<dyn DeviceModel>>, cfg: ExecConfig) -> Result<Self> {
        if models.is_empty() {
            return Err(Error::config("the timed executor needs at least one device"));
        }
        if cfg.sectors_per_block == 0 {
            return Err(Error::config("sectors per block must be at least 1"));
        }
        let devs = models
            .into_iter()
            .map(|m| {
                let make = || sched::build_windowed(&cfg.scheduler, cfg.satf_window);
                Ok(DevQueue::new(m, make()?, make()?, cfg.queue_depth))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(TimedExecutor {
            engine: Engine::new(),
            devs,
            live: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            metrics: Recorder::new(cfg.interval_ns),
            cfg,
            in_flight: 0,
            bg_in_flight: 0,
            last_user_issue: None,
            last_done: 0,
            next_id: 0,
            live_ids: FxHashMap::default(),
            reserved: FxHashSet::default(),
            waiters: FxHashMap::default(),
            measuring: true,
            measure_start: None,
        })
    }

    /// Whether user requests submitted from now on are measured (false
    /// during a warm-up). The first switch from a warm-up to measuring starts
    /// the devices' statistics, queue lengths and outstanding counts afresh.
    pub fn set_measuring(&mut self, on: bool) {
        if on && !self.measuring && self.measure_start.is_none() {
            let now = self.engine.now();
            self.measure_start = Some(now);
            for d in &mut self.devs {
                d.reset_stats(now);
            }
            self.metrics.restart(now);
        }
        self.measuring = on;
    }

    /// The configured warm-up (trace time).
    pub fn warmup_ns(&self) -> Ns {
        self.cfg.warmup_ns
    }

    pub fn measuring(&self) -> bool {
        self.measuring
    }

    /// Sectors the devices read opportunistically by now: (device, run).
    pub fn take_free(&mut self, out: &mut Vec<(usize, crate::device::FreeRun)>) {
        let now = self.engine.now();
        let mut runs = Vec::new();
        for (i, d) in self.devs.iter_mut().enumerate() {
            d.take_free(now, &mut runs);
            out.extend(runs.drain(..).map(|r| (i, r)));
        }
    }

    pub fn now(&self) -> Ns {
        self.engine.now()
    }

    /// User plans submitted and not yet completed (background plans excluded).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Background plans submitted and not yet completed.
    pub fn bg_in_flight(&self) -> usize {
        self.bg_in_flight
    }

    /// When the last user plan was submitted (None: none yet).
    pub fn last_user_issue(&self) -> Option<Ns> {
        self.last_user_issue
    }

    pub fn devices(&self) -> usize {
        self.devs.len()
    }

    /// Requests at device `i`: waiting in its queues or in service.
    pub fn pending(&self, i: usize) -> usize {
        self.devs[i].waiting() + self.devs[i].busy() as usize
    }

    /// Capacity of device `i` in sectors.
    pub fn capacity_sectors(&self, i: usize) -> u64 {
        self.devs[i].model.capacity_sectors()
    }

    /// Ask for a `Step::Wake { token }` at `time` (now if in the past).
    pub fn wake_at(&mut self, time: Ns, token: u64) {
        self.engine.schedule(time, Ev::Wake(token));
    }

    /// Ask for a `Step::BgWake { token }` at `time` (background work's own clock).
    pub fn bg_wake_at(&mut self, time: Ns, token: u64) {
        self.engine.schedule(time, Ev::BgWake(token));
    }

    /// An id for a plan about to be built, so that plans built meanwhile (or
    /// later) can `Await` it. Submit the plan with it.
    pub fn reserve_id(&mut self) -> PlanId {
        let id = self.next_id;
        self.next_id += 1;
        self.reserved.insert(id);
        id
    }

    /// Give back a reserved id whose plan will never be submitted.
    pub fn release_id(&mut self, id: PlanId) {
        self.reserved.remove(&id);
    }

    /// Whether the plan with this id has completed.
    pub fn is_done(&self, id: PlanId) -> bool {
        id < self.next_id && !self.live_ids.contains_key(&id) && !self.reserved.contains(&id)
    }

    /// Start a user plan now (a read). Its completion comes back as `Step::Done { tag }`.
    pub fn submit(&mut self, plan: IoPlan, tag: u64) -> Result<()> {
        let id = self.reserve_id();
        self.submit_user(plan, tag, id, false)
    }

    /// Start a user plan now under a reserved id; `write` says whether the
    /// request is a write (for the response-time split).
    pub fn submit_user(&mut self, plan: IoPlan, tag: u64, id: PlanId, write: bool) -> Result<()> {
        self.submit_as(plan, tag, id, write, false)
    }

    /// Start a background plan now (rebuild): its disk operations compete
    /// with the user's in the device queues, but it is not a user request
    /// (no response time, not in `requests`). Its completion comes back as
    /// `Step::BgDone { tag }`.
    pub fn submit_background(&mut self, plan: IoPlan, tag: u64) -> Result<()> {
        let id = self.reserve_id();
        self.submit_as(plan, tag, id, false, true)
    }

    /// As [`submit_background`](Self::submit_background), under a reserved id.
    pub fn submit_background_as(&mut self, plan: IoPlan, tag: u64, id: PlanId) -> Result<()> {
        self.submit_as(plan, tag, id, false, true)
    }

    /// A background plan whose disk operations are of the devices' idle
    /// class: they reach a device only when no normal request waits there.
    pub fn submit_idle_as(&mut self, plan: IoPlan, tag: u64, id: PlanId) -> Result<()> {
        self.submit_class(plan, tag, id, false, true, true)
    }

    fn submit_as(&mut self, plan: IoPlan, tag: u64, id: PlanId, write: bool, bg: bool) -> Result<()> {
        self.submit_class(plan, tag, id, write, bg, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_class(&mut self, plan: IoPlan, tag: u64, id: PlanId, write: bool, bg: bool, idle: bool) -> Result<()> {
        if !self.reserved.remove(&id) {
            return Err(Error::config(format!(
                "internal: plan id {id} was not reserved, or submitted twice"
            )));
        }
        let n = plan.nodes.len();
        if n > u16::MAX as usize {
            return Err(Error::config(format!("an I/O plan of {n} nodes is too large")));
        }
        let spb = self.cfg.sectors_per_block;
        for (i, node) in plan.nodes.iter().enumerate() {
            if let Some(d) = node.deps.iter().find(|&&d| d as usize >= i) {
                return Err(Error::config(format!("I/O plan node {i} depends on later node {d}")));
            }
            if let Action::Disk(op) = &node.action {
                let dev = self
                    .devs
                    .get(op.disk as usize)
                    .ok_or_else(|| Error::config(format!("I/O plan uses disk {} of {}", op.disk, self.devs.len())))?;
                let cap = dev.model.capacity_sectors();
                let end = (op.block + op.nblocks as u64) * spb;
                if end > cap {
                    return Err(Error::config(format!(
                        "operation on disk {} at sector {} ({} sectors) is beyond its capacity of {} sectors",
                        op.disk,
                        op.block * spb,
                        op.nblocks as u64 * spb,
                        cap
                    )));
                }
                if op.nblocks as u64 * spb > u32::MAX as u64 {
                    return Err(Error::config("disk operation too large"));
                }
            }
        }
        let now = self.engine.now();
        let measured = !bg && self.measuring;
        if bg {
            self.bg_in_flight += 1;
        } else {
            self.metrics.issue(now);
            self.in_flight += 1;
            self.last_user_issue = Some(now);
        }
        if n == 0 {
            self.finish_plan(now, id, tag, now, false, write, bg, measured);
            return Ok(());
        }
        let graph = Graph::new(&plan);
        let live = Live {
            id,
            tag,
            write,
            start: now,
            plan,
            graph,
            left: n,
            unreadable: false,
            bg,
            idle,
            measured,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.live[s as usize] = Some(live);
                s
            }
            None => {
                self.live.push(Some(live));
                (self.live.len() - 1) as u32
            }
        };
        self.live_ids.insert(id, slot);
        // Starting a node never completes one at once (completions are
        // events), so the roots can be read while they are started.
        for i in 0..n as u16 {
            if self.live[slot as usize].as_ref().unwrap().graph.waiting(i) == 0 {
                self.start_node(slot, i);
            }
        }
        Ok(())
    }

    fn start_node(&mut self, slot: u32, i: u16) {
        let spb = self.cfg.sectors_per_block;
        let live = self.live[slot as usize].as_mut().unwrap();
        match &live.plan.nodes[i as usize].action {
            Action::Disk(op) => {
                let req = DevRequest {
                    kind: op.kind,
                    lbn: op.block * spb,
                    sectors: (op.nblocks as u64 * spb) as u32,
                };
                let d = op.disk;
                let tag = ((slot as u64) << 16) | i as u64;
                let now = self.engine.now();
                let (idle, demand) = (live.idle, !live.bg);
                if let Some((t, dur)) = self.devs[d as usize].arrive_with(now, tag, req, idle, demand) {
                    self.started(d, t, dur);
                }
            }
            Action::Xor { .. } => self.engine.after(self.cfg.xor_ns, Ev::NodeDone(slot, i)),
            Action::PQ { .. } => self.engine.after(self.cfg.pq_ns, Ev::NodeDone(slot, i)),
            Action::Unreadable { .. } => {
                live.unreadable = true;
                self.engine.after(0, Ev::NodeDone(slot, i));
            }
            Action::Delay { ns } => self.engine.after(*ns, Ev::NodeDone(slot, i)),
            Action::Await { plan } => {
                let plan = *plan;
                if self.is_done(plan) {
                    self.engine.after(0, Ev::NodeDone(slot, i));
                } else {
                    self.waiters.entry(plan).or_default().push((slot, i));
                }
            }
        }
    }

    fn started(&mut self, dev: u32, _tag: u64, dur: Ns) {
        let now = self.engine.now();
        self.metrics.busy(now, dur);
        self.engine.after(dur, Ev::DevDone(dev));
    }

    fn node_done(&mut self, slot: u32, i: u16) {
        let live = self.live[slot as usize].as_mut().unwrap();
        live.left -= 1;
        let mut ready = Vec::new();
        live.graph.done(i, &mut ready);
        if live.left == 0 {
            let live = self.live[slot as usize].take().unwrap();
            self.free.push(slot);
            let now = self.engine.now();
            self.live_ids.remove(&live.id);
            self.finish_plan(
                now,
                live.id,
                live.tag,
                live.start,
                live.unreadable,
                live.write,
                live.bg,
                live.measured,
            );
            return;
        }
        for c in ready {
            self.start_node(slot, c);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_plan(
        &mut self,
        now: Ns,
        id: PlanId,
        tag: u64,
        start: Ns,
        unreadable: bool,
        write: bool,
        bg: bool,
        measured: bool,
    ) {
        self.last_done = self.last_done.max(now);
        if let Some(ws) = self.waiters.remove(&id) {
            for (slot, node) in ws {
                self.engine.after(0, Ev::NodeDone(slot, node));
            }
        }
        if bg {
            self.bg_in_flight -= 1;
            self.ready.push_back(Step::BgDone { time: now, tag });
            return;
        }
        self.in_flight -= 1;
        if measured {
            self.metrics.complete(now, start, unreadable, write);
        } else {
            self.metrics.complete_unmeasured(now);
        }
        self.ready.push_back(Step::Done {
            time: now,
            tag,
            start,
            unreadable,
        });
    }

    /// The next thing the driver must react to; `None` when nothing is left.
    pub fn next_step(&mut self) -> Option<Step> {
        loop {
            if let Some(s) = self.ready.pop_front() {
                return Some(s);
            }
            let (t, ev) = self.engine.pop()?;
            match ev {
                Ev::Wake(token) => return Some(Step::Wake { time: t, token }),
                Ev::BgWake(token) => return Some(Step::BgWake { time: t, token }),
                Ev::DevDone(d) if self.cfg.released_join_queue => {
                    let tag = self.devs[d as usize].finish_op(t);
                    self.node_done((tag >> 16) as u32, (tag & 0xffff) as u16);
                    // After the zero-time steps (XOR) just scheduled.
                    self.engine.after(0, Ev::DevKick(d));
                }
                Ev::DevDone(d) => {
                    let (tag, next) = self.devs[d as usize].complete(t);
                    if let Some((nt, dur)) = next {
                        self.started(d, nt, dur);
                    }
                    self.node_done((tag >> 16) as u32, (tag & 0xffff) as u16);
                }
                Ev::DevKick(d) => {
                    if let Some((nt, dur)) = self.devs[d as usize].kick(t) {
                        self.started(d, nt, dur);
                    }
                }
                Ev::NodeDone(slot, i) => self.node_done(slot, i),
            }
        }
    }

    /// Events handled by the engine so far.
    pub fn events(&self) -> u64 {
        self.engine.processed()
    }

    /// Close the run and summarize it (call once `next_step` returned `None`).
    pub fn report(&mut self) -> Report {
        let end = self.last_done;
        for d in &mut self.devs {
            d.finish(end);
        }
        let stats: Vec<_> = self.devs.iter().map(|d| d.stats.clone()).collect();
        let mut r = self.metrics.report(end, &stats, self.engine.processed());
        r.scheduler = self.cfg.scheduler.to_ascii_lowercase();
        r
    }
}

/// A plan's dependencies in one allocation: a deep queue holds many plans,
/// and every separate allocation is one more cache miss when a node of the
/// plan completes. `v` is `[waiting; n] [start; n + 1] [children]`: node
/// i's unfinished dependencies at `v[i]`, the nodes that wait for it
/// (ascending, as often as they list it) at `children[start[i]..start[i + 1]]`.
struct Graph {
    n: usize,
    v: Vec<u32>,
}

impl Graph {
    /// The graph of `plan`, whose dependencies all point to earlier nodes.
    fn new(plan: &IoPlan) -> Graph {
        let n = plan.nodes.len();
        let edges: usize = plan.nodes.iter().map(|node| node.deps.len()).sum();
        let mut v = vec![0u32; 2 * n + 1 + edges];
        let (waiting, rest) = v.split_at_mut(n);
        let (start, children) = rest.split_at_mut(n + 1);
        for (i, node) in plan.nodes.iter().enumerate() {
            waiting[i] = node.deps.len() as u32;
            for &d in &node.deps {
                start[d as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        if edges > 0 {
            let mut next = start[..n].to_vec();
            for (i, node) in plan.nodes.iter().enumerate() {
                for &d in &node.deps {
                    children[next[d as usize] as usize] = i as u32;
                    next[d as usize] += 1;
                }
            }
        }
        Graph { n, v }
    }

    fn waiting(&self, i: u16) -> u32 {
        self.v[i as usize]
    }

    /// Node `i` completed: the nodes that no longer wait for anything go to `ready`.
    fn done(&mut self, i: u16, ready: &mut Vec<u16>) {
        let n = self.n;
        let (waiting, rest) = self.v.split_at_mut(n);
        let (start, children) = rest.split_at(n + 1);
        for &c in &children[start[i as usize] as usize..start[i as usize + 1] as usize] {
            waiting[c as usize] -= 1;
            if waiting[c as usize] == 0 {
                ready.push(c as u16);
            }
        }
    }
}

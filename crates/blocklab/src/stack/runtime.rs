//! A composed stack at run time: its layers over its target, the address
//! map, the failure trigger, and the two ways of driving it — in time (it is
//! the `timed::replay::Stack` the replayer issues requests to) and counted
//! (requests handed over one by one; every plan completes at once).

use std::sync::Arc;

use super::address::AddressMap;
use super::failure::FailAt;
use super::layer::{AtOnce, Below, Cx, Deferred, Exec, Layer, Origin, Target};
use super::result::StackResult;
use crate::cache::fault::FaultMap;
use crate::device::{DeviceModel, Opportunism};
use crate::error::Result;
use crate::timed::engine::{secs_to_ns, Ns};
use crate::timed::executor::{Step, TimedExecutor};
use crate::timed::rebuild::RebuildReport;
use crate::timed::replay::Stack;
use crate::trace::{Op, Request};

/// Background work of layer `index` is tagged with bit 63 set and the
/// layer's index in bits 48..63; the target's own (the rebuild) has bit 63 clear.
pub const LAYER_BIT: u64 = 1 << 63;

/// The payload of the completion of what a layer's background step waited for.
pub const STEP_PAYLOAD: u64 = (1 << 48) - 1;

pub fn layer_tag(index: usize, payload: u64) -> u64 {
    LAYER_BIT | ((index as u64 & 0x7fff) << 48) | (payload & ((1 << 48) - 1))
}

/// Makes the layers afresh for each pass, given the array's fault map.
pub type LayerFactory = Box<dyn Fn(Option<Arc<dyn FaultMap>>) -> Result<Vec<Box<dyn Layer>>> + Send>;

pub struct Composed {
    layers: Vec<Box<dyn Layer>>,
    target: Box<dyn Target>,
    make_layers: LayerFactory,
    addr: AddressMap,
    fail_at: Option<FailAt>,
    failed: bool,
    /// Requests handed to the stack in this pass (measured ones: after a warm-up).
    requests: u64,
    /// Every request of the pass (the failure trigger counts them).
    issued: u64,
    block_accesses: u64,
    flushed: bool,
    /// Counted runs: the executor, and the trace time of the first request.
    at_once: AtOnce,
    t0: Option<f64>,
    /// Trace time of the request before which the disks failed.
    failed_at: Option<f64>,
    rebuilt: bool,
    /// The target has a rebuild configured (asked once, not per request).
    rebuilds: bool,
    pub seed: u64,
    /// What the devices read opportunistically for the layers (timed runs).
    pub opportunism: Option<Opportunism>,
    /// Counted runs: requests of the first `warmup_ns` of trace time are not
    /// measured (timed runs: the executor says, `TimedExecutor::measuring`).
    pub warmup_ns: Ns,
    /// Requests of the pass before the measured ones (`replay.warmup =
    /// "Nreq"`), in counted and timed runs alike.
    pub warmup_requests: u64,
    /// The counters were started afresh after a warm-up.
    warmed: bool,
}

impl Composed {
    /// `fail_at`: when the target's failing-later disks fail (None: never;
    /// disks failed from the start are failed by the target itself).
    pub fn new(
        target: Box<dyn Target>,
        make_layers: LayerFactory,
        addr: AddressMap,
        fail_at: Option<FailAt>,
    ) -> Result<Self> {
        let layers = make_layers(target.faults())?;
        let rebuilds = target.rebuild_start().is_some();
        Ok(Composed {
            layers,
            target,
            make_layers,
            addr,
            fail_at,
            failed: false,
            requests: 0,
            issued: 0,
            block_accesses: 0,
            flushed: false,
            at_once: AtOnce::default(),
            t0: None,
            failed_at: None,
            rebuilt: false,
            rebuilds,
            seed: 0,
            opportunism: None,
            warmup_ns: 0,
            warmup_requests: 0,
            warmed: false,
        })
    }

    /// Start a pass: fresh devices, empty caches, the array as configured.
    fn reset(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        let mut devices = self.target.devices()?;
        if let Some(o) = self.opportunism {
            for d in &mut devices {
                if !d.set_opportunism(o) && o != Opportunism::default() {
                    return Err(crate::error::Error::config(
                        "the device model cannot read opportunistically (preemptible_readahead, \
                         read_any_free_blocks, jit_seek need a disk or toy model)",
                    ));
                }
            }
        }
        self.warmed = false;
        self.layers = (self.make_layers)(self.target.faults())?;
        // Devices of layers (an SSD tier) come after the target's.
        let spb = self.target.sectors_per_block();
        for l in &mut self.layers {
            let base = devices.len() as u32;
            devices.extend(l.devices(base, spb)?);
        }
        self.failed = false;
        self.requests = 0;
        self.issued = 0;
        self.block_accesses = 0;
        self.flushed = false;
        self.at_once = AtOnce::default();
        self.t0 = None;
        self.failed_at = None;
        self.rebuilt = false;
        Ok(devices)
    }

    /// Before each request: the configured failure, when due (`ex`: in time).
    fn before(&mut self, req: &Request, ex: Option<&mut TimedExecutor>) -> Result<()> {
        if !self.failed {
            if let Some(f) = self.fail_at {
                if f.due(self.issued, req.time) {
                    self.failed_at = Some(req.time);
                    self.target.fail_now(ex)?;
                    self.failed = true;
                }
            }
        }
        self.requests += 1;
        self.issued += 1;
        Ok(())
    }

    /// The warm-up is over: every counter starts afresh.
    fn end_warmup(&mut self) {
        if !self.warmed {
            self.warmed = true;
            self.requests = 0;
            self.block_accesses = 0;
            for l in &mut self.layers {
                l.reset_stats();
            }
            self.target.reset_stats();
        }
    }

    /// Timed runs: hand what the devices read opportunistically by now to
    /// the layers (top first), before anything else happens now.
    fn take_free(&mut self, ex: &mut TimedExecutor) -> Result<()> {
        if self.opportunism.is_none() {
            return Ok(());
        }
        let mut runs = Vec::new();
        ex.take_free(&mut runs);
        if runs.is_empty() {
            return Ok(());
        }
        let mut cx = Cx::new(ex);
        for (disk, run) in runs {
            let Some((first, n)) = self.target.blocks_of(disk, run.lbn, run.sectors) else {
                continue;
            };
            for i in 0..self.layers.len() {
                let (upper, rest) = self.layers.split_at_mut(i + 1);
                upper[i].accept_free(
                    first,
                    n,
                    &mut cx,
                    &mut Below {
                        layers: rest,
                        target: &mut *self.target,
                    },
                )?;
            }
        }
        cx.finish_background()
    }

    /// Counted runs: when the rebuild is due, in ns of trace time since the
    /// first request (after the failure when disks fail mid-run).
    fn rebuild_due(&self) -> Option<Ns> {
        let at = self.target.rebuild_start()?;
        match self.fail_at {
            None => Some(at),
            Some(_) => {
                let t0 = self.t0?;
                self.failed_at.map(|f| secs_to_ns(f - t0) + at)
            }
        }
    }

    /// Send one request down the stack; returns its plan and id, and the
    /// background work to submit after it.
    fn serve(&mut self, req: &Request, exec: &mut dyn Exec) -> Result<(crate::array::IoPlan, u64, Vec<Deferred>)> {
        let mut cx = Cx::new(exec);
        self.route(req, &mut cx)?;
        Ok((std::mem::take(&mut cx.plan), cx.id, std::mem::take(&mut cx.deferred)))
    }

    /// Send one request down the stack, building its plan in `cx`.
    fn route(&mut self, req: &Request, cx: &mut Cx) -> Result<()> {
        let (io, volume_first) = self.addr.locate(req)?;
        self.block_accesses += io.nblocks;
        cx.origin = Some(Origin {
            time: req.time,
            tenant: req.tenant,
            stack_first: io.first,
            volume_first,
        });
        Below {
            layers: &mut self.layers,
            target: &mut *self.target,
        }
        .handle(&io, cx)
    }

    /// Every layer writes back what only it holds, top first (a layer's
    /// destages may land in the layer below, which flushes after it).
    fn flush(&mut self, exec: &mut dyn Exec) -> Result<()> {
        for i in 0..self.layers.len() {
            let (upper, rest) = self.layers.split_at_mut(i + 1);
            upper[i].flush(
                exec,
                &mut Below {
                    layers: rest,
                    target: &mut *self.target,
                },
            )?;
        }
        self.flushed = true;
        Ok(())
    }

    /// Counted executor: one request, every plan done at once.
    pub fn count_request(&mut self, req: &Request) -> Result<()> {
        let t0 = *self.t0.get_or_insert(req.time);
        // The time since the first request is worked out only when something
        // here waits for a moment of it (most counted runs: nothing does).
        let now = || secs_to_ns(req.time - t0);
        // Checked until the warm-up ends, not after.
        let warm = !self.warmed
            && ((self.warmup_ns > 0 && now() >= self.warmup_ns)
                || (self.warmup_requests > 0 && self.issued >= self.warmup_requests));
        if warm {
            self.end_warmup();
        }
        self.before(req, None)?;
        if let Some(at) = (self.rebuilds && !self.rebuilt).then(|| self.rebuild_due()).flatten() {
            if now() >= at {
                self.target.rebuild_at_once(at)?;
                self.rebuilt = true;
            }
        }
        let mut exec = std::mem::take(&mut self.at_once);
        (exec.t0, exec.time) = (t0, req.time);
        // Counted: the plans were tallied as they were made; nothing is kept.
        let r = self.route(req, &mut Cx::new(&mut exec));
        self.at_once = exec;
        r
    }

    /// Counted executor: the trace is over (a rebuild not yet started runs now).
    pub fn count_finish(&mut self) -> Result<()> {
        // A warm-up longer than the trace leaves nothing measured.
        if self.warmup_ns > 0 || self.warmup_requests > 0 {
            self.end_warmup();
        }
        // A rebuild not yet due runs at the end (if its disks ever failed).
        let due = self.target.rebuild_start().is_some() && (self.fail_at.is_none() || self.failed);
        if due && !self.rebuilt {
            self.target.rebuild_at_once(self.rebuild_due().unwrap_or(0))?;
            self.rebuilt = true;
        }
        let mut exec = std::mem::take(&mut self.at_once);
        let r = self.flush(&mut exec);
        self.at_once = exec;
        r
    }

    /// What fault-aware caches see of the array (None: no array).
    pub fn faults(&self) -> Option<Arc<dyn FaultMap>> {
        self.target.faults()
    }

    /// The array the target plans on (None: no array).
    pub fn shared_array(&self) -> Option<Arc<crate::array::shared::SharedArray>> {
        self.target.shared_array()
    }

    /// The dirty blocks of layer `layer`'s persistent store (`Layer::persistent_dirty`).
    pub fn persistent_dirty(&self, layer: usize) -> Vec<u64> {
        self.layers.get(layer).map(|l| l.persistent_dirty()).unwrap_or_default()
    }

    /// Blocks each layer holds now (None for layers that keep none).
    pub fn resident(&self) -> Vec<Option<usize>> {
        self.layers.iter().map(|l| l.resident()).collect()
    }

    /// The real executor: one request with the counted semantics, `exec`
    /// being an `AtOnce` that also moves the bytes (its data path).
    pub fn real_request(&mut self, req: &Request, exec: &mut dyn Exec) -> Result<()> {
        self.before(req, None)?;
        self.route(req, &mut Cx::new(exec))
    }

    /// The real executor: every layer writes back what only it holds (a
    /// FLUSH, and the end of a replay); the blocks stay cached, clean.
    pub fn real_flush(&mut self, exec: &mut dyn Exec) -> Result<()> {
        self.flush(exec)
    }

    /// The figures of the pass (layers, array, devices).
    pub fn result(&self, executor: &str) -> StackResult {
        let mut out = StackResult {
            executor: executor.to_string(),
            seed: self.seed,
            requests: self.requests,
            block_accesses: self.block_accesses,
            ..Default::default()
        };
        // The target first: layers owning devices add theirs after its.
        self.target.report(&mut out);
        for l in &self.layers {
            l.report(&mut out);
        }
        if executor == "count" {
            out.rebuild = self.target.rebuild_report();
        }
        out
    }
}

impl Stack for Composed {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        self.reset()
    }

    fn sectors_per_block(&self) -> u64 {
        self.target.sectors_per_block()
    }

    fn issue(&mut self, req: &Request, tag: u64, ex: &mut TimedExecutor) -> Result<()> {
        self.take_free(ex)?;
        if self.warmup_requests > 0 {
            // A warm-up in requests: the stack counts them (the replayer
            // marks a warm-up in trace time).
            ex.set_measuring(self.issued >= self.warmup_requests);
        }
        if (ex.warmup_ns() > 0 || self.warmup_requests > 0) && ex.measuring() {
            self.end_warmup();
        }
        self.before(req, Some(&mut *ex))?;
        let (plan, id, deferred) = self.serve(req, ex)?;
        ex.submit_user(plan, tag, id, req.op == Op::Write)?;
        for d in deferred {
            Exec::submit_background(ex, d.plan, d.id, d.tag, d.class)?;
        }
        Ok(())
    }

    fn start_background(&mut self, ex: &mut TimedExecutor) -> Result<()> {
        self.target.start_background(ex)
    }

    fn background(&mut self, step: Step, ex: &mut TimedExecutor) -> Result<()> {
        let tag = match step {
            Step::BgDone { tag, .. } => tag,
            Step::BgWake { token, .. } => token,
            _ => return Ok(()),
        };
        self.take_free(ex)?;
        if tag & LAYER_BIT == 0 {
            return self.target.background(step, ex);
        }
        let i = ((tag >> 48) & 0x7fff) as usize;
        let payload = tag & ((1 << 48) - 1);
        if i >= self.layers.len() {
            return Ok(());
        }
        let wake = matches!(step, Step::BgWake { .. });
        if !wake {
            self.layers[i].background_done(payload);
        }
        // The layer may start more work (a write buffer's next destages).
        let mut cx = Cx::new(ex);
        let (upper, rest) = self.layers.split_at_mut(i + 1);
        upper[i].background_step(
            payload,
            wake,
            &mut cx,
            &mut Below {
                layers: rest,
                target: &mut *self.target,
            },
        )?;
        let plan = std::mem::take(&mut cx.plan);
        let id = cx.id;
        let deferred = std::mem::take(&mut cx.deferred);
        drop(cx);
        // What the step itself waits for (layers put nothing there yet) runs
        // as a background plan whose completion comes back with payload
        // `STEP_PAYLOAD`.
        if plan.nodes.is_empty() {
            ex.release_id(id);
        } else {
            ex.submit_background_as(plan, layer_tag(i, STEP_PAYLOAD), id)?;
        }
        for d in deferred {
            Exec::submit_background(ex, d.plan, d.id, d.tag, d.class)?;
        }
        Ok(())
    }

    fn drain(&mut self, ex: &mut TimedExecutor) -> Result<bool> {
        if self.flushed {
            return Ok(false);
        }
        // A warm-up longer than the trace leaves nothing measured.
        if ex.warmup_ns() > 0 || self.warmup_requests > 0 {
            ex.set_measuring(true);
            self.end_warmup();
        }
        self.flush(ex)?;
        Ok(ex.bg_in_flight() > 0)
    }

    fn user_done(&mut self, time: Ns, start: Ns, unreadable: bool) {
        self.target.user_done(time, start, unreadable);
    }

    fn rebuild_report(&self) -> Option<RebuildReport> {
        self.target.rebuild_report()
    }
}

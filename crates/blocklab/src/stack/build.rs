//! From a stack file to a running stack: the only place where targets and
//! layers are assembled. Errors name the stack file's key they come from.

use super::address::{stack_span, AddressMap, Survey};
use super::cache_layer::{CacheConfig, CacheLayer, PrefetchConfig};
use super::device_set::DeviceSet;
use super::dgraid_target::DgraidArray;
use super::failure::FailAt;
use super::layer::Class;
use super::layer::{Layer, Target};
use super::miss_trace::MissTrace;
use super::prefetch::{Csp, Prefetcher};
use super::runtime::{layer_tag, Composed, LayerFactory};
use super::spec::{
    is_dgraid, ArraySpec, BufferHolds, CacheSpec, Fit, NumOrStr, PrefetchKind, QueueClass, RebuildSpec, StackSpec,
    TenantMap,
};
use super::target::{ArrayStack, SingleDisk};
use super::tier::partitioner::{Global, Partitioner, PartitionerKind, Static};
use super::tier::reuse_sized::ReuseSized;
use super::tier::{TierConfig, TierLayer};
use super::write_buffer::{WriteBuffer, WriteBufferConfig};
use crate::analysis::sizing::{Scheme, Sizing};
use crate::array::{parse_bytes, Array, ArrayConfig};
use crate::cache::fault::{build_fault_aware, FaultMap, NoFaults};
use crate::cache::sizes;
use crate::device::disksim_system::is_system;
use crate::device::Opportunism;
use crate::device::{load_model, DeviceModel};
use crate::dgraid::{DgraidConfig, Diffusion, Grouping, LiveLayout, ReplicaPlacement};
use crate::error::{Error, Result};
use crate::fsmodel::geometry::{Geometry, MkfsParams};
use crate::rebuild::{LiveMap, LiveParams, LiveSource, OrderParams, ProCount, ProParams};
use crate::timed::engine::{ms_to_ns, secs_to_ns};
use crate::timed::rebuild::{IdleRule, RebuildConfig};
use std::path::Path;
use std::sync::Arc;

/// Which executor a stack is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// No time: every plan completes at once.
    Count,
    /// Simulated time (discrete events).
    Timed,
}

impl Executor {
    pub fn parse(s: &str) -> Result<Executor> {
        match s {
            "count" | "counted" => Ok(Executor::Count),
            "timed" | "time" => Ok(Executor::Timed),
            other => Err(Error::unknown("executor", other, &["count", "timed"])),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Executor::Count => "count",
            Executor::Timed => "timed",
        }
    }
}

/// A device model maker for `[device].model` (checked once here).
fn model_maker(spec: &StackSpec) -> Result<impl Fn() -> Result<Box<dyn DeviceModel>> + Send + Clone> {
    let model = spec.origin.model(&spec.device.model);
    load_model(&model).map_err(|e| spec.origin.err("device.model", e))?;
    Ok(move || load_model(&model))
}

/// Check that the stack's device models load (`device.model`,
/// `replay.reference`), without building anything: what a sweep checks of
/// every cell before the first runs.
pub fn check_models(spec: &StackSpec) -> Result<()> {
    let model = spec.origin.model(&spec.device.model);
    // A DiskSim system (several disks, an iomap) is loaded by its own target.
    if !is_system(&model).map_err(|e| spec.origin.err("device.model", e))? {
        model_maker(spec).map(drop)?;
    }
    if let Some(reference) = &spec.replay.reference {
        load_model(&spec.origin.model(reference)).map_err(|e| spec.origin.err("replay.reference", e))?;
    }
    Ok(())
}

/// The bottom of the stack.
fn target(spec: &StackSpec, exec: Executor, survey: Option<&Survey>) -> Result<Box<dyn Target>> {
    let o = &spec.origin;
    let model = o.model(&spec.device.model);
    if is_system(&model).map_err(|e| o.err("device.model", e))? {
        return device_set(spec, model);
    }
    let make = model_maker(spec)?;
    let bs = spec.block_size();
    let Some(a) = &spec.array else {
        return Ok(Box::new(
            SingleDisk::with_block_size(make, spec.device.wrap, bs)
                .map_err(|e| o.err("device.model", e))?
                .short_stroked(spec.device.short_stroke)
                .spread_by(spec.device.scale_addresses),
        ));
    };
    if is_dgraid(&a.raid.text()) {
        return dgraid_target(spec, a, make);
    }
    let level = ArrayConfig::parse_level(&a.raid.text()).map_err(|e| o.err("array.raid", e))?;
    let mut cfg = ArrayConfig::new(level, a.disks);
    cfg.chunk_bytes = parse_bytes(&a.chunk.text()).map_err(|e| o.err("array.chunk", e))?;
    cfg.block_size = bs;
    if let Some(l) = &a.layout {
        cfg.set_layout(l).map_err(|e| o.err("array.layout", e))?;
    }
    let model_bytes = make()?.capacity_sectors() * 512;
    let stroke = spec.device.short_stroke;
    cfg.disk_bytes = match &a.disk_size {
        Some(s) => parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))?,
        // Short-stroking: the members' outer share holds the data.
        None if stroke < 1.0 => ((model_bytes as f64 * stroke) as u64 / bs) * bs,
        // Members are the model disks: far RAID-10 places its copies by their size.
        None if exec == Executor::Timed || cfg.raid10_layout().is_far() => model_bytes,
        None => 0,
    };
    if cfg.disk_bytes > model_bytes {
        return Err(o.err(
            "array.disk_size",
            format!("{} B is larger than the device ({model_bytes} B)", cfg.disk_bytes),
        ));
    }
    let mut array = Array::new(cfg).map_err(|e| o.err("array", e))?;
    let fail_at = fail_at(spec)?;
    if fail_at.is_none() {
        for &d in &a.failed {
            array.fail(d).map_err(|e| o.err("array.failed", e))?;
        }
    }
    let wrap = spec.fit() == Fit::Wrap;
    let mut t = match exec {
        Executor::Timed => ArrayStack::new(array, make, wrap),
        // A scaled array needs its capacity, as a folded one does.
        Executor::Count if spec.fit() == Fit::Scale => ArrayStack::new(array, make, false),
        Executor::Count => ArrayStack::counted(array, make, wrap),
    }
    .map_err(|e| o.err("array", e))?;
    if fail_at.is_some() {
        t = t.failing_later(a.failed.clone());
    }
    if a.stripe_cache > 0 {
        t = t.with_stripe_cache(a.stripe_cache as usize);
    }
    if spec.fit() == Fit::Scale {
        let span = survey
            .map(|s| stack_span(spec.tenant_map, bs, s))
            .transpose()?
            .ok_or_else(|| o.err("array.fit", "internal: `scale` needs a pass over the trace"))?;
        t = t.scaled(span);
    }
    if let Some(r) = &a.rebuild {
        let mut rc = rebuild_config(r, cfg.chunk_bytes).map_err(|e| o.err("array.rebuild", e))?;
        rc.params.live = live_params(spec, r)?;
        t = t.with_rebuild(rc).map_err(|e| o.err("array.rebuild", e))?;
    }
    Ok(Box::new(t))
}

/// The disks of a DiskSim system, each trace device routed to its disk.
fn device_set(spec: &StackSpec, model: String) -> Result<Box<dyn Target>> {
    let o = &spec.origin;
    if spec.array.is_some() {
        return Err(o.err(
            "array",
            format!(
                "{model} describes several disks of its own (a DiskSim system); array members need a one-drive model"
            ),
        ));
    }
    if spec.tenant_map != TenantMap::Key {
        return Err(o.err(
            "tenant_map",
            format!("{model} routes each trace device to its disk, which needs `tenant_map = \"key\"`"),
        ));
    }
    if spec.device.short_stroke < 1.0 {
        return Err(o.err(
            "device.short_stroke",
            "not available for a DiskSim system of several disks",
        ));
    }
    if spec.device.scale_addresses != 1.0 {
        return Err(o.err(
            "device.scale_addresses",
            "not available for a DiskSim system of several disks",
        ));
    }
    let t = DeviceSet::load(model.into(), spec.device.wrap, spec.block_size()).map_err(|e| o.err("device.model", e))?;
    Ok(Box::new(t))
}

/// A D-GRAID array (`raid = "dgraid0" | "dgraid1"`; keys checked by the spec).
fn dgraid_target(
    spec: &StackSpec,
    a: &ArraySpec,
    make: impl Fn() -> Result<Box<dyn DeviceModel>> + Send + 'static,
) -> Result<Box<dyn Target>> {
    let o = &spec.origin;
    let bs = spec.block_size();
    let d = a.dgraid.clone().unwrap_or_default();
    let fs_bytes = match &d.fs_size {
        Some(f) => parse_bytes(&f.text()).map_err(|e| o.err("array.dgraid.fs_size", e))?,
        None => return Err(o.err("array.dgraid.fs_size", "a D-GRAID array needs the file system's size")),
    };
    if d.infer == Some(true) {
        return Err(o.err(
            "array.dgraid.infer",
            "the simulators place blocks by the trace's annotation; inference runs on real bytes (`blocklab real`)",
        ));
    }
    if d.deferred_max.is_some() {
        return Err(o.err(
            "array.dgraid.deferred_max",
            "bounds inference's deferred writes, which run on real bytes (`blocklab real`)",
        ));
    }
    if d.tags.is_some() {
        return Err(o.err(
            "array.dgraid.tags",
            "a tags file is for the real executor; the simulators read the trace's annotation",
        ));
    }
    let geo = Geometry::mke2fs(&MkfsParams::new(fs_bytes, bs)).map_err(|e| o.err("array.dgraid.fs_size", e))?;
    let level = DgraidConfig::parse_level(&a.raid.text().to_ascii_lowercase()).map_err(|e| o.err("array.raid", e))?;
    let mut cfg = DgraidConfig::new(level, a.disks, d.meta_copies);
    cfg.grouping = Grouping::parse(&d.grouping).map_err(|e| o.err("array.dgraid.grouping", e))?;
    cfg.placement = ReplicaPlacement::parse(&d.placement).map_err(|e| o.err("array.dgraid.placement", e))?;
    cfg.seed = d.seed;
    if let Some(s) = &a.disk_size {
        cfg.disk_blocks = parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))? / bs;
    }
    if let Some(seg) = &d.diffuse_segment {
        cfg.diffusion = Some(Diffusion {
            segment_blocks: parse_bytes(&seg.text()).map_err(|e| o.err("array.dgraid.diffuse_segment", e))? / bs,
            threshold: d.diffuse_threshold,
            chunk_blocks: parse_bytes(&a.chunk.text()).map_err(|e| o.err("array.chunk", e))? / bs,
        });
    }
    let later = fail_at(spec)?.is_some();
    let failed: &[u32] = if later { &[] } else { &a.failed };
    let mut t = DgraidArray::new(cfg, geo, bs, make, failed).map_err(|e| o.err("array", e))?;
    if later {
        t = t.failing_later(&a.failed);
    }
    Ok(Box::new(t))
}

fn rebuild_config(r: &RebuildSpec, chunk_bytes: u64) -> Result<RebuildConfig> {
    let map_unit_rows = match &r.map_unit {
        Some(u) => parse_bytes(&u.text())? / chunk_bytes,
        None => 1,
    };
    Ok(RebuildConfig {
        start: ms_to_ns(r.at),
        window: r.window,
        min_kbps: r.min,
        max_kbps: r.max,
        order: r.order.to_ascii_lowercase(),
        params: OrderParams {
            pro: ProParams {
                zone_bytes: parse_bytes(&r.pro.zone.text())?,
                threads: r.pro.threads,
                slice_ns: ms_to_ns(r.pro.slice_ms),
                half_life_ns: ms_to_ns(r.pro.half_life_s * 1e3),
                count: ProCount::parse(&r.pro.count)?,
            },
            dor_lead: r.dor.lead,
            live: LiveParams::default(),
        },
        idle: IdleRule::parse(&r.idle)?,
        throttle: r.throttle,
        low_priority: r.priority.as_deref().map(|p| p == "low"),
        map_unit_rows,
        interval: ms_to_ns(r.interval),
    })
}

/// The `live` order's source of live blocks (a share, or a live map read
/// from its file) and largest copy (checked by the spec).
fn live_params(spec: &StackSpec, r: &RebuildSpec) -> Result<LiveParams> {
    let o = &spec.origin;
    let source = match (&r.live_map, r.live_frac) {
        (Some(path), _) => LiveSource::Map(Arc::new(
            LiveMap::read(Path::new(&o.path(path))).map_err(|e| o.err("array.rebuild.live_map", e))?,
        )),
        (None, frac) => LiveSource::Share {
            frac: frac.unwrap_or(1.0),
            layout: LiveLayout::parse(&r.live_layout).map_err(|e| o.err("array.rebuild.live_layout", e))?,
            unit: match &r.live_unit {
                Some(u) => parse_bytes(&u.text()).map_err(|e| o.err("array.rebuild.live_unit", e))? / spec.block_size(),
                None => 1,
            },
        },
    };
    let max_io = match &r.live_max_io {
        Some(m) => parse_bytes(&m.text()).map_err(|e| o.err("array.rebuild.live_max_io", e))? / spec.block_size(),
        None => 0,
    };
    Ok(LiveParams { source, max_io })
}

/// When disks fail during the run (None: from the start, or never).
fn fail_at(spec: &StackSpec) -> Result<Option<FailAt>> {
    let Some(a) = &spec.array else { return Ok(None) };
    match &a.fail_at {
        None => Ok(None),
        Some(f) => match FailAt::parse(&f.text()).map_err(|e| spec.origin.err("array.fail_at", e))? {
            FailAt::Start => Ok(None),
            later => Ok(Some(later)),
        },
    }
}

/// The cache layers' capacities in blocks, checked against the storage below.
fn capacities(spec: &StackSpec, survey: Option<&Survey>, below_blocks: Option<u64>) -> Result<Vec<usize>> {
    let bs = spec.block_size();
    spec.cache
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let key = format!("cache.{i}.size");
            let text = c.size.text();
            let blocks = match super::spec::used_share(&text) {
                Some(p) => {
                    let p = p.map_err(|e| spec.origin.err(&key, e))?;
                    let used = survey.map(|s| storage_used(spec, s)).ok_or_else(|| {
                        spec.origin
                            .err(&key, "a share of the storage used needs a pass over the trace")
                    })?;
                    ((used as f64 * p / 100.0).round() as u64).max(1)
                }
                None => {
                    let size = sizes::parse_size(&text).map_err(|e| spec.origin.err(&key, e))?;
                    sizes::resolve(&size, &text, bs, survey.and_then(|s| s.unique))
                        .map_err(|e| spec.origin.err(&key, e))?
                }
            };
            if let Some(cap) = below_blocks {
                if blocks > cap {
                    return Err(spec.origin.err(
                        &key,
                        format!("{blocks} blocks is more than the {cap} blocks of the storage below it"),
                    ));
                }
            }
            if blocks >> 40 != 0 {
                return Err(spec
                    .origin
                    .err(&key, format!("{blocks} blocks is not a sensible cache size")));
            }
            usize::try_from(blocks).map_err(|_| spec.origin.err(&key, "too large"))
        })
        .collect()
}

/// The storage used by the trace, in stack blocks: its volumes laid end to
/// end (`concat`: as they are placed, on 1 MiB boundaries), or the largest
/// volume when they share one address space (`ignore`).
pub fn storage_used(spec: &StackSpec, s: &Survey) -> u64 {
    let align = (super::address::CONCAT_ALIGN_BYTES / spec.block_size()).max(1);
    match spec.tenant_map {
        TenantMap::Concat => s.extents.values().map(|&e| e.div_ceil(align) * align).sum(),
        TenantMap::Key => s.extents.values().sum(),
        TenantMap::Ignore => s.extents.values().copied().max().unwrap_or(0),
    }
}

/// Bytes of an optional size key, in blocks (0 when absent).
fn key_blocks(spec: &StackSpec, i: usize, key: &str, v: &Option<NumOrStr>) -> Result<u64> {
    match v {
        None => Ok(0),
        Some(v) => Ok(
            parse_bytes(&v.text()).map_err(|e| spec.origin.err(&format!("cache.{i}.{key}"), e))? / spec.block_size(),
        ),
    }
}

/// A cache layer's prefetch, when any is configured.
fn prefetch_config(spec: &StackSpec, i: usize, c: &CacheSpec, limit: Option<u64>) -> Result<Option<PrefetchConfig>> {
    let bs = spec.block_size();
    let fetch_unit = key_blocks(spec, i, "fetch_unit", &c.fetch_unit)?.max(1);
    let buffer_blocks = key_blocks(spec, i, "prefetch_buffer", &c.prefetch_buffer)?;
    let blocks = |key: &str, v: &NumOrStr| -> Result<u64> {
        Ok(parse_bytes(&v.text()).map_err(|e| spec.origin.err(&format!("cache.{i}.{key}"), e))? / bs)
    };
    let prefetcher = match c.prefetch {
        PrefetchKind::None => Prefetcher::None,
        PrefetchKind::Readahead => Prefetcher::Readahead(blocks("readahead", &c.readahead)?),
        PrefetchKind::Csp => Prefetcher::Csp(Csp::new(
            blocks("csp_segment", &c.csp_segment)?,
            c.csp_trigger,
            c.csp_factor,
            blocks("csp_max", &c.csp_max)?,
            c.csp_directory,
        )),
    };
    let opportunistic = c.opportunistic();
    if fetch_unit == 1 && matches!(prefetcher, Prefetcher::None) && buffer_blocks == 0 && !opportunistic {
        return Ok(None);
    }
    let buffer = match buffer_blocks {
        0 => None,
        n => Some(
            crate::cache::build("lru", n as usize)
                .map_err(|e| spec.origin.err(&format!("cache.{i}.prefetch_buffer"), e))?,
        ),
    };
    Ok(Some(PrefetchConfig {
        fetch_unit,
        prefetcher,
        buffer,
        buffer_holds_all: c.prefetch_buffer_holds == BufferHolds::All,
        opportunistic,
        class: match c.prefetch_class {
            QueueClass::Normal => Class::Normal,
            QueueClass::Idle => Class::Idle,
        },
        limit,
    }))
}

/// What the devices read opportunistically for the layer that asks for it.
/// A stack that reads ahead (read-ahead, CSP) without it still asks the
/// devices for an empty `Opportunism`: a drive then streams the read-ahead
/// I/O queued behind its demand read on without losing a revolution (see
/// `device::hdd::opportune`); models that cannot are left as they are.
pub(crate) fn opportunism(spec: &StackSpec) -> Result<Option<Opportunism>> {
    let Some((i, c)) = spec.cache.iter().enumerate().find(|(_, c)| c.opportunistic()) else {
        let reads_ahead = spec.cache.iter().any(|c| c.prefetch != PrefetchKind::None);
        return Ok(reads_ahead.then(Opportunism::default));
    };
    let sectors = match &c.preemptible_readahead {
        Some(v) => {
            parse_bytes(&v.text()).map_err(|e| spec.origin.err(&format!("cache.{i}.preemptible_readahead"), e))? / 512
        }
        None => 0,
    };
    Ok(Some(Opportunism {
        readahead_sectors: sectors,
        read_any_free: c.read_any_free_blocks,
        jit_seek: c.jit_seek,
    }))
}

/// The SSD tier of `spec`, if any: a maker of fresh tiers (one per pass),
/// given the tag of its background work.
fn tier_maker(spec: &StackSpec, survey: Option<&Survey>) -> Result<Option<impl Fn(u64) -> Result<TierLayer> + Send>> {
    let Some(t) = spec.tier.clone() else { return Ok(None) };
    let o = spec.origin.clone();
    let bs = spec.block_size();
    let size = t
        .blocks(bs, survey.and_then(|s| s.unique))
        .map_err(|e| o.err("tier.size", e))?;
    let kind = t.partitioner_kind().map_err(|e| o.err("tier.partitioner", e))?;
    let tenants: Vec<u32> = match (kind, survey) {
        (PartitionerKind::Static, Some(s)) => s.extents.keys().copied().collect(),
        (PartitionerKind::Static, None) => {
            return Err(o.err(
                "tier.partitioner",
                "internal: `static` needs the trace's tenants (a pass over it)",
            ))
        }
        _ => Vec::new(),
    };
    let solver = t.solver().map_err(|e| o.err("tier.solver", e))?;
    let sizing = |scheme| -> Result<Sizing> {
        Ok(Sizing {
            scheme,
            estimator: t.estimator().map_err(|e| o.err("tier.estimator", e))?,
            value: t.value().map_err(|e| o.err("tier.objective", e))?,
            min_blocks: t.min_blocks,
            initial_blocks: t.initial_blocks,
            sequential_bp: t.sequential_share.map(|x| (x * 10_000.0).round() as u32),
        })
    };
    let (centaur, eci) = (sizing(Scheme::Centaur)?, sizing(Scheme::Eci)?);
    let history = t.history().map_err(|e| o.err("tier.history", e))?;
    let default_rule = t.default_rule().map_err(|e| o.err("tier.write_policy", e))?;
    let tenant_rules = t.tenant_rules().map_err(|e| o.err("tier.tenant_write_policy", e))?;
    let cutoff = t.cutoff_bytes().map_err(|e| o.err("tier.sequential_cutoff", e))?;
    let addr = AddressMap::new(spec.tenant_map, bs, survey)?;
    let model = t.model.as_ref().map(|m| o.model(m));
    Ok(Some(move |tag: u64| -> Result<TierLayer> {
        let partitioner: Box<dyn Partitioner> = match kind {
            PartitionerKind::Global => Box::new(Global),
            PartitionerKind::Static => Box::new(Static::new(size, &tenants)),
            PartitionerKind::Centaur => Box::new(ReuseSized::new(centaur, solver, size)),
            PartitionerKind::Eci => Box::new(ReuseSized::new(eci, solver, size)),
        };
        TierLayer::new(TierConfig {
            origin: o.clone(),
            block_size: bs,
            size,
            partitioner,
            window_s: t.window_s,
            solver_name: solver.name().to_string(),
            history,
            default_rule,
            tenant_rules: tenant_rules.clone(),
            theta: t.theta,
            promote_after: t.promote_after,
            promote_trigger: t.promote_trigger,
            sequential_cutoff: cutoff,
            clean: t.clean_high.zip(t.clean_low),
            flush: t.flush,
            model: model.clone(),
            ssd_ms: t.ssd_ms,
            hdd_ms: t.hdd_ms,
            ssd_cost_per_gb: t.ssd_cost_per_gb,
            base_cost: t.base_cost,
            addr: addr.clone(),
            tag,
        })
    }))
}

/// The layers of `spec`, made afresh for each pass.
pub(crate) fn layer_factory(
    spec: &StackSpec,
    survey: Option<&Survey>,
    below_blocks: Option<u64>,
) -> Result<LayerFactory> {
    let caps = capacities(spec, survey, below_blocks)?;
    let tier = tier_maker(spec, survey)?;
    let next_use = survey.and_then(|s| s.next_use.clone()).map(Arc::new);
    // Prefetch stops at the end of the storage below, unless addresses fold onto it.
    let folds = spec.device.wrap || spec.array.as_ref().is_some_and(|a| a.wrap);
    let limit = if folds { None } else { below_blocks };
    // Check the prefetch keys once (each pass makes its own prefetchers).
    for (i, c) in spec.cache.iter().enumerate() {
        prefetch_config(spec, i, c, limit)?;
        key_blocks(spec, i, "write_buffer", &c.write_buffer)?;
    }
    let spec = spec.clone();
    let make = move |faults: Option<Arc<dyn FaultMap>>| -> Result<Vec<Box<dyn Layer>>> {
        let faults = faults.unwrap_or_else(|| Arc::new(NoFaults));
        let bs = spec.block_size();
        let mut layers: Vec<Box<dyn Layer>> = Vec::new();
        for (i, c) in spec.cache.iter().enumerate() {
            let name = c.name.clone().unwrap_or_else(|| format!("cache{i}"));
            // A write buffer is a layer of its own over the cache, which then
            // sees the buffer's destages as writes (reads_only: it drops
            // stale copies).
            let wb = key_blocks(&spec, i, "write_buffer", &c.write_buffer)?;
            if wb > 0 {
                let depth = spec.device.queue_depth;
                layers.push(Box::new(WriteBuffer::new(WriteBufferConfig {
                    name: name.clone(),
                    blocks: wb,
                    high_mark: c.high_mark,
                    low_mark: c.low_mark,
                    max_age_ns: secs_to_ns(c.max_age_s),
                    hit_ns: ms_to_ns(c.hit_ms),
                    max_outstanding: if depth > 0 { depth } else { spec.replay.window.max(1) },
                    tag: layer_tag(layers.len(), 0),
                })));
            }
            let policy_name = c.policy.to_ascii_lowercase();
            let policy = build_fault_aware(&policy_name, caps[i], faults.clone())
                .map_err(|e| spec.origin.err(&format!("cache.{i}.policy"), e))?;
            let miss_trace = match &c.miss_trace {
                Some(p) => Some(
                    MissTrace::create(Path::new(&spec.origin.path(p)), bs)
                        .map_err(|e| spec.origin.err(&format!("cache.{i}.miss_trace"), e))?,
                ),
                None => None,
            };
            let tag = layer_tag(layers.len(), 0);
            layers.push(Box::new(CacheLayer::new(CacheConfig {
                name,
                policy_name: policy_name.clone(),
                policy,
                write: c.write,
                reads_only: c.reads_only || wb > 0,
                hit_ns: ms_to_ns(c.hit_ms),
                merge_misses: c.merge_misses,
                tag,
                next_use: if policy_name == "opt" { next_use.clone() } else { None },
                miss_trace,
                prefetch: prefetch_config(&spec, i, c, limit)?,
            })));
        }
        if let Some(make) = &tier {
            let tag = layer_tag(layers.len(), 0);
            layers.push(Box::new(make(tag)?));
        }
        Ok(layers)
    };
    Ok(Box::new(make))
}

/// What a stack needs measured in the trace before it can run.
pub fn survey_needs(spec: &StackSpec) -> super::address::SurveyNeeds {
    super::address::SurveyNeeds {
        unique: spec.cache.iter().any(|c| c.size.text().trim().ends_with('%'))
            || spec.tier.as_ref().is_some_and(|t| t.size_is_share()),
        tenants: spec
            .tier
            .as_ref()
            .is_some_and(|t| t.partitioner.eq_ignore_ascii_case("static")),
        extents: spec.cache.iter().any(|c| c.size.text().trim().ends_with("%used")),
        next_use: spec
            .cache
            .first()
            .filter(|c| c.policy.eq_ignore_ascii_case("opt"))
            .map(|c| c.reads_only),
        span: spec.fit() == Fit::Scale,
    }
}

/// Build the stack of `spec` for `exec`; `survey` is the pass over the
/// trace the stack needs (see [`survey_needs`]; `concat` needs one too).
pub fn build(spec: &StackSpec, exec: Executor, survey: Option<&Survey>) -> Result<Composed> {
    let target = target(spec, exec, survey)?;
    let below_blocks = target.capacity_blocks();
    let layers = layer_factory(spec, survey, below_blocks)?;
    let addr = AddressMap::new(spec.tenant_map, spec.block_size(), survey)?;
    let mut c = Composed::new(target, layers, addr, fail_at(spec)?)?;
    c.seed = spec.seed;
    c.warmup_ns = secs_to_ns(spec.replay.warmup_secs());
    c.warmup_requests = spec.replay.warmup_requests();
    if exec == Executor::Timed {
        c.opportunism = opportunism(spec)?;
    }
    Ok(c)
}

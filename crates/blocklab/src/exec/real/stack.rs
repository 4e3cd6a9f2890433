//! A stack on real bytes: the stack file's host cache layers in front of
//! the array of member files, served as one NBD export or driven by
//! `real replay`.
//!
//! "A layer decides, an executor only moves bytes": the stack is the one
//! the counted executor runs (`stack::build`, `Composed`), under the counted
//! `Exec` semantics, so its layers decide exactly as in a counted run; the
//! data path (`blocks.rs`) moves the contents those decisions name, and the
//! array model the target plans on (and fault-aware policies read) is kept
//! in step with the real array's (failed members, spares, rebuilt rows).
//!
//! Decisions are made one at a time under one mutex, in arrival order; the
//! member I/O they name (reads and writes below, destages, the tier's
//! frames) runs after it, outside the mutex, ordered block by block by the
//! table of I/O in flight (`inflight.rs`), so requests overlap on the
//! members. A FLUSH waits for everything decided before it, destages every
//! dirty block of every layer (the blocks stay cached, clean), then flushes
//! the array; a FUA write does a whole FLUSH after its write.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::blocks::Frame;
use super::blocks::{Block, Blocks, RealExec};
use super::inflight::{run_all, Content, Job};
use super::{RealArray, ReqError, Status};
use crate::array::shared::SharedArray;
use crate::array::{parse_bytes, ArrayConfig};
use crate::error::{Error, Result};
use crate::nbd::{Export, ExportError};
use crate::stack::address::{AddressMap, Survey};
use crate::stack::build::{build, Executor};
use crate::stack::layer::AtOnce;
use crate::stack::result::StackResult;
use crate::stack::runtime::Composed;
use crate::stack::spec::{is_dgraid, Fit, PrefetchKind, QueueClass, StackSpec, TenantMap};
use crate::trace::{Op, Request};

/// The stack file kept in an array directory made with `real create --stack`.
pub const STACK_FILE: &str = "stack.toml";

/// The stack file of the array directory `dir`, if it has one.
pub fn stack_file(dir: &Path) -> Option<PathBuf> {
    let p = dir.join(STACK_FILE);
    p.exists().then_some(p)
}

/// Keys of a stack file that mean nothing on real hardware (device timing
/// models, a cache's hit time): ignored, with these notes.
pub fn ignored_keys(spec: &StackSpec) -> Vec<String> {
    let mut notes = vec![format!(
        "{}: device.model: ignored (the members are files; timing is the real one)",
        spec.origin.file
    )];
    for (i, c) in spec.cache.iter().enumerate() {
        if c.hit_ms != 0.0 {
            notes.push(format!(
                "{}: cache.{i}.hit_ms: ignored (a hit takes what it takes)",
                spec.origin.file
            ));
        }
        if c.prefetch != PrefetchKind::None && c.prefetch_class == QueueClass::Idle {
            notes.push(format!(
                "{}: cache.{i}.prefetch_class: ignored (a read ahead runs after its request's own I/O; \
                 member files have no idle class)",
                spec.origin.file
            ));
        }
    }
    if spec.tier.as_ref().is_some_and(|t| t.model.is_some()) {
        notes.push(format!(
            "{}: tier.model: ignored (the cache device is {}; timing is the real one)",
            spec.origin.file,
            super::tier_store::TIER_FILE
        ));
    }
    if spec.array.as_ref().is_some_and(|a| a.xor_ms != 0.0) {
        notes.push(format!("{}: array.xor_ms: ignored (real XOR)", spec.origin.file));
    }
    notes
}

/// The real executor starts an array healthy and fails, replaces and
/// rebuilds members when told (`real fail` / `replace` / `rebuild`): a
/// stack's failures and rebuild on a schedule are refused, naming the key.
pub fn refuse_schedules(spec: &StackSpec) -> Result<()> {
    let Some(a) = &spec.array else { return Ok(()) };
    let o = &spec.origin;
    let refuse = |key: &str, why: &str| Err(o.err(key, format!("the real executor {why}")));
    if !a.failed.is_empty() {
        return refuse(
            "array.failed",
            "starts the array healthy: fail members with `blocklab real fail`",
        );
    }
    if a.fail_at.is_some() {
        return refuse(
            "array.fail_at",
            "fails members when told (`blocklab real fail`), not on a schedule",
        );
    }
    if a.rebuild.is_some() {
        return refuse(
            "array.rebuild",
            "rebuilds when told (`blocklab real rebuild`), not on a schedule",
        );
    }
    Ok(())
}

/// Refuse what the real executor cannot honour, where ignoring it would
/// change results: one error naming the file and the key.
pub fn check_real(spec: &StackSpec) -> Result<()> {
    let o = &spec.origin;
    let refuse = |key: &str, why: &str| Err(o.err(key, format!("the real executor {why}")));
    super::tier_store::check_tier(spec)?;
    let Some(a) = &spec.array else {
        return refuse(
            "array",
            "runs over an array of member files: the stack needs an [array]",
        );
    };
    if is_dgraid(&a.raid.text()) {
        // `real create --stack` lays out a D-GRAID array of its own
        // (`exec/real/dgraid`); it runs without layers in front.
        return refuse(
            "array.raid",
            "runs D-GRAID as an array of its own, without a stack in front",
        );
    }
    refuse_schedules(spec)?;
    if a.wrap || spec.device.wrap {
        return refuse(
            "array.wrap",
            "does not fold addresses (`real replay --wrap` folds a trace's offsets)",
        );
    }
    if spec.fit() == Fit::Scale {
        return refuse("array.fit", "does not scale addresses");
    }
    if spec.tenant_map == TenantMap::Key {
        return refuse(
            "tenant_map",
            "lays tenants out as the counted stack's `concat` does, with volumes declared by [[tenant]]; \"key\" would put them out of the array",
        );
    }
    if a.stripe_cache > 0 {
        // The counted ledger would count reads the stripe cache saves while
        // the member files are read as the array plans them.
        return refuse(
            "array.stripe_cache",
            "reads member files as the array plans them (MD's stripe cache is modelled in simulation only)",
        );
    }
    if spec.replay.warmup_requests() > 0 || spec.replay.warmup_secs() > 0.0 {
        return refuse(
            "replay.warmup",
            "counts every request (a warm-up would make its figures differ from a counted run's)",
        );
    }
    if spec.device.short_stroke < 1.0 {
        return refuse("device.short_stroke", "uses the whole member file");
    }
    for (i, c) in spec.cache.iter().enumerate() {
        let key = |k: &str| format!("cache.{i}.{k}");
        let policy = c.policy.to_ascii_lowercase();
        if policy == "opt" {
            return refuse(
                &key("policy"),
                "cannot see the future (`opt` needs a pass over a trace)",
            );
        }
        if c.size.text().trim().ends_with('%') || c.size.text().trim().ends_with("%used") {
            return refuse(
                &key("size"),
                "needs a size in blocks or bytes (a share needs a pass over a trace)",
            );
        }
        if c.miss_trace.is_some() {
            return refuse(&key("miss_trace"), "does not write miss traces yet");
        }
        if c.write_buffer.is_some() {
            return refuse(&key("write_buffer"), "does not run write buffers on real bytes yet");
        }
        if c.fetch_unit.is_some() {
            return refuse(&key("fetch_unit"), "does not prefetch on real bytes yet");
        }
        if c.prefetch_buffer.is_some() {
            return refuse(&key("prefetch_buffer"), "does not prefetch on real bytes yet");
        }
        if c.opportunistic() {
            return refuse(
                &key("preemptible_readahead"),
                "has no device reading opportunistically (preemptible_readahead, read_any_free_blocks, jit_seek)",
            );
        }
    }
    Ok(())
}

/// The array of a stack file, with members of `disk_bytes` (0: the stack's
/// `array.disk_size`, which must then be given).
pub fn array_config(spec: &StackSpec, disk_bytes: u64) -> Result<ArrayConfig> {
    let o = &spec.origin;
    let a = spec.array.as_ref().ok_or_else(|| {
        o.err(
            "array",
            "the real executor runs over an array: the stack needs an [array]",
        )
    })?;
    let level = ArrayConfig::parse_level(&a.raid.text()).map_err(|e| o.err("array.raid", e))?;
    let mut cfg = ArrayConfig::new(level, a.disks);
    cfg.chunk_bytes = parse_bytes(&a.chunk.text()).map_err(|e| o.err("array.chunk", e))?;
    cfg.block_size = spec.block_size();
    if let Some(l) = &a.layout {
        cfg.set_layout(l).map_err(|e| o.err("array.layout", e))?;
    }
    cfg.disk_bytes = match (disk_bytes, &a.disk_size) {
        (n, _) if n > 0 => n,
        (_, Some(s)) => parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))?,
        (_, None) => {
            return Err(o.err(
                "array.disk_size",
                "the member size is needed: give --disk-size, or array.disk_size in the stack file",
            ))
        }
    };
    Ok(cfg)
}

/// The stack file as the counted stack the real executor runs over an
/// array of `real`: sized by it, a device model that only sizes the
/// members (never timed); without `[[tenant]]` one volume (every tenant
/// addresses it, as with `ignore`), with it the declared volumes laid out
/// by `concat`.
fn real_spec(spec: &StackSpec, real: &ArrayConfig) -> StackSpec {
    let mut s = spec.clone();
    if let Some(a) = &mut s.array {
        a.disk_size = Some(crate::stack::spec::NumOrStr::Int(real.disk_bytes));
    }
    if s.tenant.is_empty() {
        s.tenant_map = TenantMap::Ignore;
    }
    s.device.model = format!("toy:base=0,cap={}", real.disk_bytes.div_ceil(512).max(1));
    s
}

/// A volume the stack serves: a tenant's (`[[tenant]]`), or the whole
/// array's for a stack without tenants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// The tenant's name (its export); empty for the whole array.
    pub name: String,
    /// Its first stack block (`concat`'s place for it).
    pub first: u64,
    pub blocks: u64,
}

/// The volumes of `spec` over an array of `capacity` blocks, and the
/// survey the counted stack is built with: the declared volumes laid out
/// by `concat` (`AddressMap` itself places them), else one volume, the
/// array. Declared volumes past the array are refused.
fn volumes(spec: &StackSpec, capacity: u64) -> Result<(Vec<Volume>, Survey)> {
    let Some(v) = spec.tenant_volumes()? else {
        let one = Volume {
            name: String::new(),
            first: 0,
            blocks: capacity,
        };
        return Ok((vec![one], Survey::declared(&[capacity])));
    };
    let survey = Survey::declared(&v);
    let map = AddressMap::new(TenantMap::Concat, spec.block_size(), Some(&survey))?;
    let mut out = Vec::new();
    for (i, (&blocks, t)) in v.iter().zip(&spec.tenant).enumerate() {
        let first = map.first_block(i as u32).expect("a declared tenant has a volume");
        if first + blocks > capacity {
            return Err(spec.origin.err(
                &format!("tenant.{i}.size"),
                format!(
                    "the volumes laid end to end (on 1 MiB boundaries) need {} blocks; the array has {capacity}",
                    first + blocks
                ),
            ));
        }
        out.push(Volume {
            name: t.name.clone(),
            first,
            blocks,
        });
    }
    Ok((out, survey))
}

/// The stack of `spec` as the real executor runs it over `array` (its
/// own array model starts healthy: the real one's state is copied in before
/// each request), and the volumes it serves.
fn composed(spec: &StackSpec, array: &RealArray) -> Result<(Composed, Vec<Volume>)> {
    check_real(spec)?;
    let cfg = array_config(spec, array.config().disk_bytes)?;
    let real = array.config();
    if cfg != *real {
        return Err(spec.origin.err(
            "array",
            format!(
                "does not match the array in {} ({} of {} disks, chunk {} B, block {} B)",
                array.dir().display(),
                real.level.name(),
                real.disks,
                real.chunk_bytes,
                real.block_size
            ),
        ));
    }
    let (vols, survey) = volumes(spec, array.size_bytes() / real.block_size)?;
    Ok((build(&real_spec(spec, real), Executor::Count, Some(&survey))?, vols))
}

/// The stack file's text with `tenants` (`real create --tenants`: name,
/// size) appended as `[[tenant]]` tables; a file that declares tenants
/// itself takes none.
fn with_tenants(file: &Path, text: &str, tenants: &[(String, String)]) -> Result<String> {
    if tenants.is_empty() {
        return Ok(text.to_string());
    }
    let shown = file.display().to_string();
    let declared = toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("tenant"));
    if declared {
        return Err(Error::config(format!(
            "--tenants: {shown} declares [[tenant]] itself; give one or the other"
        )));
    }
    let mut out = text.to_string();
    out.push_str("\n# The tenants of `real create --tenants` (one NBD export each).\n");
    for (name, size) in tenants {
        let q = |v: &str| toml::Value::String(v.to_string()).to_string();
        out.push_str(&format!("[[tenant]]\nname = {}\nsize = {}\n", q(name), q(size)));
    }
    Ok(out)
}

/// `real create DIR --stack FILE`: lay out the array of the stack's
/// `[array]` (members of `disk_bytes`, else `array.disk_size`) and keep the
/// stack file in `dir` (with `tenants` appended as `[[tenant]]`). Returns
/// the array's status and the notes on keys ignored.
pub fn create_stack(
    dir: &Path,
    file: &Path,
    disk_bytes: Option<u64>,
    checksums: bool,
    tenants: &[(String, String)],
) -> Result<(Status, Vec<String>)> {
    let shown_file = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|e| Error::io(&shown_file, e))?;
    let text = with_tenants(file, &text, tenants)?;
    let origin = crate::stack::spec::Origin {
        file: shown_file,
        dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    create_from_text(dir, text, origin, disk_bytes, checksums, tenants)
}

/// The array of `real create DIR --raid ... --tenants NAME=SIZE,...`: a
/// plain array (no cache layer) whose tenants are volumes, one NBD export
/// each. It is kept as the stack file of that array and its `[[tenant]]`
/// (so `serve`, `replay`, `status` treat it as any stack with tenants);
/// errors name `real create --tenants` and the key.
#[allow(clippy::too_many_arguments)]
pub fn create_plain_with_tenants(
    dir: &Path,
    raid: &str,
    disks: u32,
    chunk_bytes: u64,
    disk_bytes: u64,
    layout: Option<&str>,
    block_size: u64,
    checksums: bool,
    tenants: &[(String, String)],
) -> Result<(Status, Vec<String>)> {
    let q = |v: &str| toml::Value::String(v.to_string()).to_string();
    let mut text = format!(
        "# `real create --tenants` over a plain array: no cache layer, one NBD export per tenant.\n\
         tenant_map = \"concat\"\n[array]\nraid = {}\ndisks = {disks}\nchunk = {chunk_bytes}\n\
         block_size = {block_size}\ndisk_size = {disk_bytes}\n",
        q(raid)
    );
    if let Some(l) = layout {
        text.push_str(&format!("layout = {}\n", q(l)));
    }
    // A stack names a device model; the real executor never times it.
    text.push_str("[device]\nmodel = \"const:1\"\n");
    let origin = crate::stack::spec::Origin {
        file: "real create --tenants".to_string(),
        dir: PathBuf::new(),
    };
    let text = with_tenants(Path::new(&origin.file), &text, tenants)?;
    create_from_text(dir, text, origin, None, checksums, tenants)
}

fn create_from_text(
    dir: &Path,
    text: String,
    origin: crate::stack::spec::Origin,
    disk_bytes: Option<u64>,
    checksums: bool,
    tenants: &[(String, String)],
) -> Result<(Status, Vec<String>)> {
    let file = PathBuf::from(&origin.file);
    let file = file.as_path();
    let spec = StackSpec::from_str_with(&text, &[], origin)?;
    if spec.array.as_ref().is_some_and(|a| is_dgraid(&a.raid.text())) {
        if checksums {
            return Err(Error::config(
                "--checksums: a D-GRAID array keeps whole copies, not checksums (not offered)",
            ));
        }
        if !tenants.is_empty() {
            return Err(Error::config(
                "--tenant: the real executor serves a D-GRAID array as one file system (one export), not tenants",
            ));
        }
        return super::dgraid::ops::create(dir, file, disk_bytes);
    }
    check_real(&spec)?;
    let cfg = array_config(&spec, disk_bytes.unwrap_or(0))?;
    cfg.validate().map_err(|e| spec.origin.err("array", e))?;
    // The stack must build over an array of this size (cache sizes...)
    // before any file is made.
    let probe = crate::array::Array::new(cfg).map_err(|e| spec.origin.err("array", e))?;
    let capacity = probe.capacity_blocks().unwrap_or(0);
    if capacity > 0 {
        let (_, survey) = volumes(&spec, capacity)?;
        build(&real_spec(&spec, &cfg), Executor::Count, Some(&survey))?;
    }
    let shown = dir.display().to_string();
    if dir.join(STACK_FILE).exists() {
        return Err(Error::config(format!("{shown}: already holds a stack ({STACK_FILE})")));
    }
    let st = RealArray::create(dir, cfg, checksums)?;
    if let Some(frames) = super::tier_store::frames(&spec)? {
        let state = super::state::State::load(dir)?;
        let uuid = super::identity::parse_uuid(&state.uuid).expect("a state just saved names its UUID");
        super::tier_store::create(dir, frames, cfg.block_size as u64, uuid)?;
    }
    std::fs::write(dir.join(STACK_FILE), text).map_err(|e| Error::io(&shown, e))?;
    Ok((st, ignored_keys(&spec)))
}

/// The stack of `dir` and its figures (live from the server when it is
/// served; else the layers as configured, counters at zero), None without one.
pub fn stack_status(dir: &Path) -> Result<Option<serde_json::Value>> {
    if stack_file(dir).is_none() {
        return Ok(None);
    }
    if let Some(info) = super::control::server_of(dir)? {
        return super::control::request(&info, serde_json::json!({"op": "stack"})).map(Some);
    }
    let array = Arc::new(RealArray::open(dir, super::OpenConfig::default())?);
    let r = RealStack::load(dir, &array)?.map(|s| s.result());
    let array = Arc::try_unwrap(array).map_err(|_| Error::config("array still in use"))?;
    array.close()?;
    Ok(r.map(|r| serde_json::to_value(&r).expect("a stack result serializes")))
}

struct Inner {
    composed: Composed,
    exec: RealExec,
    shared: Option<Arc<SharedArray>>,
    /// The real array's model version copied into `shared` last.
    seen: Option<u64>,
    started: Instant,
    flushes: u64,
}

/// A stack on real bytes (see the module comment).
pub struct RealStack {
    array: Arc<RealArray>,
    inner: Mutex<Inner>,
    /// What it serves: the tenants' volumes, or the whole array.
    volumes: Vec<Volume>,
    bs: u64,
    file: String,
    /// Dirty blocks of the SSD tier a crash left, written back at open.
    pub tier_recovered: u64,
}

fn req_err(e: Error) -> ReqError {
    ReqError::Io(e.to_string())
}

impl RealStack {
    /// The stack of `spec` in front of `array`.
    pub fn new(spec: &StackSpec, array: Arc<RealArray>) -> Result<RealStack> {
        let (composed, volumes) = composed(spec, &array)?;
        let shared = composed.shared_array();
        let mut blocks = Blocks::new(array.clone());
        let tier_recovered;
        if let Some(frames) = super::tier_store::frames(spec)? {
            // The tier is the last layer; its map starts empty.
            let layer = composed.resident().len() - 1;
            let bs = array.block_size();
            let mut store = super::tier_store::TierStore::open(array.dir(), frames, bs, array.is_direct())?;
            // Dirty blocks a crash left in the tier go back to the array first.
            let (journal, recovered) =
                super::tier_journal::TierJournal::open_and_recover(array.dir(), bs, frames, &array)?;
            store.set_journal(journal);
            blocks.set_tier(layer, store);
            tier_recovered = recovered;
        } else {
            tier_recovered = super::tier_journal::recover_orphan(array.dir(), &array)?;
        }
        Ok(RealStack {
            volumes,
            bs: array.block_size() as u64,
            file: spec.origin.file.clone(),
            tier_recovered,
            inner: Mutex::new(Inner {
                composed,
                exec: RealExec {
                    at: AtOnce::default(),
                    blocks,
                },
                shared,
                seen: None,
                started: Instant::now(),
                flushes: 0,
            }),
            array,
        })
    }

    /// The stack kept in `dir` (`real create --stack`) in front of `array`,
    /// if the directory has one.
    pub fn load(dir: &Path, array: &Arc<RealArray>) -> Result<Option<RealStack>> {
        match stack_file(dir) {
            None => {
                // A tier's journal left without its stack file: written back.
                super::tier_journal::recover_orphan(dir, array)?;
                Ok(None)
            }
            Some(p) => {
                let spec = StackSpec::load(&p, &[])?;
                Ok(Some(RealStack::new(&spec, array.clone())?))
            }
        }
    }

    pub fn array(&self) -> &Arc<RealArray> {
        &self.array
    }

    /// Jobs decided and not done (tests: a request's I/O is in flight).
    #[cfg(test)]
    pub(crate) fn io_in_flight(&self) -> usize {
        self.lock().exec.blocks.inflight.running()
    }

    /// The tier's cache device file (tests: its fault hook).
    #[cfg(test)]
    pub(crate) fn tier_file(&self) -> Option<Arc<super::tier_store::TierFile>> {
        self.lock().exec.blocks.tier_file()
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copy the real array's model into the stack's when it changed.
    fn sync(&self, inner: &mut Inner) {
        let Some(shared) = &inner.shared else { return };
        if inner.seen == Some(self.array.array_version()) {
            return;
        }
        let (v, a) = self.array.array_model();
        *shared.get_mut() = a;
        inner.seen = Some(v);
    }

    /// The volumes served: the tenants' (`[[tenant]]`), else one, the array.
    pub fn volumes(&self) -> &[Volume] {
        &self.volumes
    }

    /// Bytes of `tenant`'s volume.
    pub fn volume_size(&self, tenant: u32) -> u64 {
        self.volumes.get(tenant as usize).map_or(0, |v| v.blocks * self.bs)
    }

    /// `tenant`'s volume, with `offset + len` inside it.
    fn check_range(&self, tenant: u32, offset: u64, len: u64) -> std::result::Result<&Volume, ReqError> {
        let v = self
            .volumes
            .get(tenant as usize)
            .ok_or_else(|| ReqError::OutOfRange(format!("tenant {tenant}: the stack serves {}", self.volumes.len())))?;
        let size = v.blocks * self.bs;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(v),
            _ => Err(ReqError::OutOfRange(format!(
                "bytes {offset}+{len} are past the end of the volume ({size} bytes)"
            ))),
        }
    }

    /// Serve one request of `tenant` through the stack, at `clock` seconds
    /// of the stack's clock (None: the wall clock since the stack opened;
    /// `real replay` gives the trace's time, as a counted run reads it). A
    /// write's `data` (None: zeroes) enters the request's frame first, a
    /// partial block merged with its newest contents; a read's bytes come
    /// from the frame into `out`.
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        tenant: u32,
        clock: Option<f64>,
        op: Op,
        offset: u64,
        len: u64,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> std::result::Result<(), ReqError> {
        if len == 0 {
            return self.check_range(tenant, offset, len).map(|_| ());
        }
        self.decide(tenant, clock, op, offset, len, data)?.complete(out)
    }

    /// The decision of a request (under the mutex): the I/O it names is
    /// not done yet (`Decided::complete` does it, outside the mutex).
    pub(crate) fn decide(
        &self,
        tenant: u32,
        clock: Option<f64>,
        op: Op,
        offset: u64,
        len: u64,
        data: Option<&[u8]>,
    ) -> std::result::Result<Decided, ReqError> {
        let vol = self.check_range(tenant, offset, len)?;
        let bs = self.bs;
        // The volume's bytes in the stack's address space (`concat`'s place).
        let volume_offset = offset;
        let offset = vol.first * bs + offset;
        let (first, end) = (offset / bs, (offset + len).div_ceil(bs));
        // The decision, under the mutex; it names the I/O, it does none.
        let (frame, jobs, decided) = {
            let mut guard = self.lock();
            let inner = &mut *guard;
            self.sync(inner);
            let blocks = &mut inner.exec.blocks;
            blocks.begin_request();
            let mut put = Ok(());
            if op == Op::Write {
                for b in first..end {
                    let (lo, hi) = ((b * bs).max(offset), ((b + 1) * bs).min(offset + len));
                    let from = (lo - offset) as usize..(hi - offset) as usize;
                    let patch = data.map(|d| &d[from]);
                    if hi - lo == bs {
                        // A whole block: straight from the request (one copy).
                        let c: Block = match patch {
                            Some(p) => Block::from(p),
                            None => Block::from(vec![0u8; bs as usize]),
                        };
                        blocks.put(b, Content::Ready(c));
                    } else if let Err(e) = blocks.put_part(b, (lo - b * bs) as usize, (hi - lo) as usize, patch) {
                        put = Err(e);
                        break;
                    }
                }
            }
            let decided = put.and_then(|()| {
                let req = Request {
                    time: clock.unwrap_or_else(|| inner.started.elapsed().as_secs_f64()),
                    op,
                    offset: volume_offset,
                    len,
                    tenant,
                    fs: Default::default(),
                };
                (inner.exec.at.t0, inner.exec.at.time) = (0.0, req.time);
                inner.composed.real_request(&req, &mut inner.exec)
            });
            let (frame, jobs) = inner.exec.blocks.end_request();
            (frame, jobs, decided)
        };
        Ok(Decided {
            frame,
            jobs,
            decided: decided.map_err(req_err),
            bs,
            offset,
            len,
        })
    }

    /// Read at `offset` of the first volume (the whole array without tenants).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ReqError> {
        self.read_at(0, None, offset, buf)
    }

    /// Write `data` at `offset` of the first volume; with `fua`, a whole FLUSH follows.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ReqError> {
        self.write_at(0, None, offset, data, fua)
    }

    /// Read at `offset` of `tenant`'s volume, at `clock` (see `request`).
    pub fn read_at(
        &self,
        tenant: u32,
        clock: Option<f64>,
        offset: u64,
        buf: &mut [u8],
    ) -> std::result::Result<(), ReqError> {
        let len = buf.len() as u64;
        self.request(tenant, clock, Op::Read, offset, len, None, Some(buf))
    }

    /// Write `data` at `offset` of `tenant`'s volume, at `clock`; with
    /// `fua`, a whole FLUSH follows.
    pub fn write_at(
        &self,
        tenant: u32,
        clock: Option<f64>,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        self.request(tenant, clock, Op::Write, offset, data.len() as u64, Some(data), None)?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Zeroes through the stack (NBD WRITE_ZEROES and TRIM), in pieces of
    /// at most 1 MiB (one request each).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        self.write_zeroes_at(0, offset, len, fua)
    }

    /// Zeroes into `tenant`'s volume.
    pub fn write_zeroes_at(&self, tenant: u32, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        self.check_range(tenant, offset, len)?;
        let piece = 1u64 << 20;
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(piece - at % piece);
            self.request(tenant, None, Op::Write, at, n, None, None)?;
            at += n;
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Destage every dirty block of every layer (they stay cached, clean),
    /// then make the array durable.
    /// Everything decided before it is done first (the mutex is held
    /// throughout: nothing is decided meanwhile).
    pub fn flush(&self) -> std::result::Result<(), ReqError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        self.sync(inner);
        let _ = run_all(inner.exec.blocks.leftover());
        inner.exec.blocks.inflight.drain();
        inner.exec.blocks.begin_request();
        let decided = inner.composed.real_flush(&mut inner.exec);
        let (_, jobs) = inner.exec.blocks.end_request();
        let ran = run_all(jobs);
        // A write this FLUSH covers that failed (a destage of an evicted
        // block, a write-through) fails the FLUSH: its bytes are not durable.
        let failed = inner.exec.blocks.inflight.take_failed_write();
        decided.map_err(req_err)?;
        ran?;
        if let Some(e) = failed {
            return Err(ReqError::Io(format!("a write before this FLUSH failed: {e}")));
        }
        inner.flushes += 1;
        self.array.flush()?;
        // The tier's dirty blocks, committed once the array is durable.
        if let Some(l) = inner.exec.blocks.tier_layer() {
            let dirty = inner.composed.persistent_dirty(l);
            inner.exec.blocks.commit_tier(&dirty).map_err(req_err)?;
        }
        Ok(())
    }

    /// The stack's figures now, in `blocklab run`'s schema (executor `real`).
    pub fn result(&self) -> StackResult {
        let inner = self.lock();
        let mut out = inner.composed.result("real");
        out.tenant_map = if self.has_tenants() { "concat" } else { "ignore" }.into();
        out.fit = "none".into();
        out.real = Some(crate::stack::result::RealFigures {
            partial_block_reads: inner.exec.blocks.partial_block_reads,
            flushes: inner.flushes,
            exports: match self.has_tenants() {
                true => (self.volumes.iter().enumerate())
                    .map(|(i, v)| crate::stack::result::RealExport {
                        tenant: i as u32,
                        name: v.name.clone(),
                        offset_bytes: v.first * self.bs,
                        size_bytes: v.blocks * self.bs,
                    })
                    .collect(),
                false => Vec::new(),
            },
            ..Default::default()
        });
        out.finish();
        out
    }

    /// Whether the stack declares tenants (`[[tenant]]`): one export each.
    pub fn has_tenants(&self) -> bool {
        !self.volumes[0].name.is_empty()
    }

    /// What `real serve` offers: one export per tenant, by its name (no
    /// default export), or the whole stack as one export named `name`.
    pub fn exports(self: &Arc<Self>, name: &str) -> Vec<(String, Arc<dyn Export>)> {
        if !self.has_tenants() {
            return vec![(name.to_string(), self.clone() as Arc<dyn Export>)];
        }
        (0..self.volumes.len())
            .map(|i| {
                let e = TenantExport {
                    stack: self.clone(),
                    tenant: i as u32,
                };
                (self.volumes[i].name.clone(), Arc::new(e) as Arc<dyn Export>)
            })
            .collect()
    }

    /// Blocks each layer's policy holds and each layer's store holds (tests:
    /// they are equal).
    pub fn residency(&self) -> Vec<(usize, usize)> {
        let inner = self.lock();
        inner
            .composed
            .resident()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|n| (n, inner.exec.blocks.store_len(i))))
            .collect()
    }
}

/// A request decided and not done: the I/O its decision named (see
/// `inflight.rs`), and its contents.
pub(crate) struct Decided {
    frame: Frame,
    jobs: Vec<Job>,
    decided: std::result::Result<(), ReqError>,
    bs: u64,
    /// The request's bytes in the stack's address space.
    offset: u64,
    len: u64,
}

impl Decided {
    /// Do the I/O (every job, even after an error), then a read's bytes
    /// into `out` (waiting for those still on the way).
    pub(crate) fn complete(self, out: Option<&mut [u8]>) -> std::result::Result<(), ReqError> {
        let ran = run_all(self.jobs);
        self.decided?;
        ran?;
        let (bs, offset, len) = (self.bs, self.offset, self.len);
        if let Some(out) = out {
            for b in offset / bs..(offset + len).div_ceil(bs) {
                let (lo, hi) = ((b * bs).max(offset), ((b + 1) * bs).min(offset + len));
                let c = (self.frame.get(&b))
                    .ok_or_else(|| ReqError::Io(format!("internal: block {b} was read from nowhere")))?
                    .wait()?;
                out[(lo - offset) as usize..(hi - offset) as usize]
                    .copy_from_slice(&c[(lo - b * bs) as usize..(hi - b * bs) as usize]);
            }
        }
        Ok(())
    }
}

/// One tenant's volume of a stack as an NBD export.
pub struct TenantExport {
    stack: Arc<RealStack>,
    tenant: u32,
}

impl Export for TenantExport {
    fn size(&self) -> u64 {
        self.stack.volume_size(self.tenant)
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ExportError> {
        self.stack
            .read_at(self.tenant, None, offset, buf)
            .map_err(super::control::to_export)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ExportError> {
        self.stack
            .write_at(self.tenant, None, offset, data, fua)
            .map_err(super::control::to_export)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ExportError> {
        self.stack
            .write_zeroes_at(self.tenant, offset, len, fua)
            .map_err(super::control::to_export)
    }
    fn flush(&self) -> std::result::Result<(), ExportError> {
        self.stack.flush().map_err(super::control::to_export)
    }
    fn extents(&self, offset: u64, len: u64) -> std::result::Result<Vec<(u64, u32)>, ExportError> {
        let first = self.stack.volumes[self.tenant as usize].first * self.stack.bs;
        self.stack.stack_extents(first + offset, len)
    }
    fn description(&self) -> String {
        let c = self.stack.array.config();
        let v = &self.stack.volumes[self.tenant as usize];
        let human = super::control::human_bytes;
        format!(
            "blocklab tenant {} ({} of {}, {} at {}) of {} of {}, chunk {} ({})",
            v.name,
            self.tenant + 1,
            self.stack.volumes.len(),
            human(v.blocks * self.stack.bs),
            human(v.first * self.stack.bs),
            c.level.name(),
            c.disks,
            human(c.chunk_bytes),
            self.stack.array.dir().display()
        )
    }
}

impl Export for RealStack {
    fn size(&self) -> u64 {
        self.volume_size(0)
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ExportError> {
        RealStack::read(self, offset, buf).map_err(super::control::to_export)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ExportError> {
        RealStack::write(self, offset, data, fua).map_err(super::control::to_export)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ExportError> {
        RealStack::write_zeroes(self, offset, len, fua).map_err(super::control::to_export)
    }
    fn flush(&self) -> std::result::Result<(), ExportError> {
        RealStack::flush(self).map_err(super::control::to_export)
    }
    fn extents(&self, offset: u64, len: u64) -> std::result::Result<Vec<(u64, u32)>, ExportError> {
        self.stack_extents(offset, len)
    }
    fn description(&self) -> String {
        let c = self.array.config();
        format!(
            "blocklab stack {} over {} of {} ({})",
            self.file,
            c.level.name(),
            c.disks,
            self.array.dir().display()
        )
    }
}

impl RealStack {
    /// The array's allocation of stack bytes `offset..+len`, where every
    /// block a cache holds is data (it may be dirty, whatever the array says).
    fn stack_extents(&self, offset: u64, len: u64) -> std::result::Result<Vec<(u64, u32)>, ExportError> {
        let hz = crate::nbd::STATE_HOLE | crate::nbd::STATE_ZERO;
        let runs = self.array.allocation(offset, len);
        let bs = self.bs;
        let held = {
            let inner = self.lock();
            inner.exec.blocks.held_in(offset / bs, (offset + len).div_ceil(bs))
        };
        let mut out: Vec<(u64, u32)> = Vec::new();
        let mut push = |n: u64, flags: u32| {
            if n == 0 {
                return;
            }
            match out.last_mut() {
                Some((m, f)) if *f == flags => *m += n,
                _ => out.push((n, flags)),
            }
        };
        let mut at = offset;
        for (n, hole) in runs {
            let end = at + n;
            if !hole {
                push(n, 0);
            } else {
                // Carve the held blocks out of the hole.
                let mut p = at;
                for &b in held.iter().filter(|&&b| b * bs < end && (b + 1) * bs > at) {
                    let (lo, hi) = ((b * bs).max(at), ((b + 1) * bs).min(end));
                    if lo > p {
                        push(lo - p, hz);
                    }
                    push(hi - lo.max(p), 0);
                    p = hi.max(p);
                }
                if end > p {
                    push(end - p, hz);
                }
            }
            at = end;
        }
        Ok(out)
    }
}

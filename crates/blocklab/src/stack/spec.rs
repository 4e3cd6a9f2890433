//! The stack file: what a stack is made of, as TOML (see docs/stack.md).
//!
//! Parsing is strict: an unknown key, a wrong type or an impossible value is
//! an error naming the file and the key by its dotted path, the same path
//! `--set` takes (`cache.0.size`, `array.failed`). The file is read into a
//! TOML tree, `--set` overrides are applied to the tree, and only then is it
//! deserialized, so an override is checked exactly like the file.
//! `--unset KEY` removes a key or a whole section from the tree (an
//! override written `-KEY`): what `--set` cannot express, e.g. a stack file's
//! `[array.rebuild]` dropped to run the array degraded without a rebuild.
//!
//! Keys that mirror an option of `disk run` take that flag's name, dashes as
//! underscores and without its section's prefix (`--think-ms` is
//! `replay.think_ms`, `--rebuild-at` is `array.rebuild.at`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Value;

use crate::error::{Error, Result};

/// A number or a string: sizes (`65536` or `"64KiB"`), levels (`5` or `"raid5"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum NumOrStr {
    Int(u64),
    Float(f64),
    Str(String),
}

impl NumOrStr {
    pub fn text(&self) -> String {
        match self {
            NumOrStr::Int(n) => n.to_string(),
            NumOrStr::Float(x) => x.to_string(),
            NumOrStr::Str(s) => s.clone(),
        }
    }
}

/// How the trace's tenants (volumes) share the stack's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantMap {
    /// Volumes laid out one after another, each as large as the highest
    /// block the trace touches in it, aligned to 1 MiB (needs a pass over
    /// the trace first).
    #[default]
    Concat,
    /// Block `b` of tenant `t` is stack block `t << 40 | b` (each volume its
    /// own 2^40-block region; `rgr`'s default).
    Key,
    /// Every tenant addresses the same volume (`disk run`'s behaviour).
    Ignore,
}

impl TenantMap {
    /// The name the stack file uses.
    pub fn name(self) -> &'static str {
        match self {
            TenantMap::Concat => "concat",
            TenantMap::Key => "key",
            TenantMap::Ignore => "ignore",
        }
    }

    pub fn parse(s: &str) -> Result<TenantMap> {
        match s {
            "concat" => Ok(TenantMap::Concat),
            "key" | "offset" => Ok(TenantMap::Key),
            "ignore" => Ok(TenantMap::Ignore),
            other => Err(Error::unknown("tenant mapping", other, &["concat", "key", "ignore"])),
        }
    }
}

/// `[replay]`: when requests are issued (timed executor).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplaySpec {
    /// `open`, `closed` or `feedback`.
    pub mode: String,
    /// Open: trace times divided by this. Feedback: processor speed-up n.
    pub speedup: f64,
    /// Closed: requests kept in flight per stream.
    pub outstanding: usize,
    /// Closed: think time between a completion and the next issue (ms).
    pub think_ms: f64,
    /// Feedback: issue window per stream.
    pub window: usize,
    /// Feedback: replace each think time x by x[1 - f(x)].
    pub infinitely_fast: bool,
    /// Feedback: model of the traced system giving the original completion times.
    pub reference: Option<String>,
    /// Time-series interval in ms (0: none).
    pub interval: f64,
    /// Drop writes from the trace (the VDF paper's setting).
    pub reads_only: bool,
    /// Warm-up: the first `warmup` seconds of each trace (its own clock),
    /// or with `"Nreq"` the run's first N requests, are replayed but not
    /// measured (response times, layer, array and device counters start
    /// afresh after it). See [`Warmup`].
    pub warmup: NumOrStr,
    /// Times that go back are put in order within `sort_window` seconds
    /// (absent: they are an error naming the line); see trace::order.
    pub sort: bool,
    /// The reorder window (seconds of trace time).
    pub sort_window: f64,
}

impl Default for ReplaySpec {
    fn default() -> Self {
        ReplaySpec {
            mode: "open".into(),
            speedup: 1.0,
            outstanding: 1,
            think_ms: 0.0,
            window: crate::timed::replay::ISSUE_WINDOW,
            infinitely_fast: false,
            reference: None,
            interval: 0.0,
            reads_only: false,
            warmup: NumOrStr::Int(0),
            sort: false,
            sort_window: 1.0,
        }
    }
}

/// When the warm-up of `replay.warmup` ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Warmup {
    /// After this many seconds of each trace's own clock (0: no warm-up).
    Secs(f64),
    /// After the run's first N requests (after `replay.reads_only`), in the
    /// order they are issued: the VDF paper warmed its cache with a number
    /// of blocks.
    Requests(u64),
}

impl Warmup {
    /// `1.5`, `1.5s` (seconds) or `1000req` (requests).
    pub fn parse(v: &NumOrStr) -> std::result::Result<Warmup, &'static str> {
        use crate::stack::failure::FailAt;
        match FailAt::parse(&v.text()) {
            Ok(FailAt::Time(x)) => Ok(Warmup::Secs(x)),
            Ok(FailAt::Request(n)) => Ok(Warmup::Requests(n)),
            _ => Err("must be non-negative seconds (`1.5`, `1.5s`) or a number of requests (`1000req`)"),
        }
    }
}

impl ReplaySpec {
    /// The warm-up (checked when the spec was read; unreadable: none).
    pub fn warmup(&self) -> Warmup {
        Warmup::parse(&self.warmup).unwrap_or(Warmup::Secs(0.0))
    }

    /// Seconds of trace time replayed as warm-up (0 for a warm-up in requests).
    pub fn warmup_secs(&self) -> f64 {
        match self.warmup() {
            Warmup::Secs(x) => x,
            Warmup::Requests(_) => 0.0,
        }
    }

    /// Requests replayed as warm-up (0 for a warm-up in seconds).
    pub fn warmup_requests(&self) -> u64 {
        match self.warmup() {
            Warmup::Requests(n) => n,
            Warmup::Secs(_) => 0,
        }
    }

    /// What the trace readers of a run in time do with times that go back.
    pub fn time_order(&self) -> crate::trace::order::TimeOrder {
        use crate::trace::order::TimeOrder;
        if self.sort {
            TimeOrder::Sort {
                window_s: self.sort_window,
            }
        } else {
            TimeOrder::Strict
        }
    }
}

/// What a cache layer does with writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WritePolicy {
    /// Writes stay in the cache (dirty) until the block is evicted or the run ends.
    #[default]
    Back,
    /// Writes are cached and written below before they complete.
    Through,
    /// Writes go below; a cached copy is updated, a missing block is not allocated.
    Around,
}

impl WritePolicy {
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::Back => "back",
            WritePolicy::Through => "through",
            WritePolicy::Around => "around",
        }
    }
}

/// `[[cache]]`: one host cache layer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// A label for reports (default `cache0`, `cache1`, ...).
    #[serde(default)]
    pub name: Option<String>,
    pub policy: String,
    /// Blocks (`1000`), bytes (`"64MiB"`) or a share of the trace's footprint (`"5%"`).
    pub size: NumOrStr,
    #[serde(default)]
    pub write: WritePolicy,
    /// Cache reads only: writes pass below and invalidate a cached copy.
    #[serde(default)]
    pub reads_only: bool,
    /// Time of a hit in the timed executor (ms).
    #[serde(default)]
    pub hit_ms: f64,
    /// Contiguous missed blocks of one request go below as one operation;
    /// `false`: one operation per block (the cache simulators' model of RGR).
    #[serde(default = "yes")]
    pub merge_misses: bool,
    /// Write this layer's misses as a native CSV trace (path relative to the stack file).
    #[serde(default)]
    pub miss_trace: Option<String>,
    /// Hsu–Smith's read caching, prefetch and write buffering (`stack::prefetch`,
    /// `stack::write_buffer`); all off by default.
    /// Large fetch unit: a read miss fetches the aligned units of this many
    /// bytes covering the request (default: one block).
    #[serde(default)]
    pub fetch_unit: Option<NumOrStr>,
    /// Non-opportunistic sequential prefetch on a read miss.
    #[serde(default)]
    pub prefetch: PrefetchKind,
    /// `prefetch = "readahead"`: bytes read after the request.
    #[serde(default = "default_readahead")]
    pub readahead: NumOrStr,
    /// `prefetch = "csp"`: segment size, trigger (run length), factor, cap and
    /// directory entries of conditional sequential prefetch.
    #[serde(default = "default_csp_segment")]
    pub csp_segment: NumOrStr,
    #[serde(default = "one")]
    pub csp_trigger: u64,
    #[serde(default = "two")]
    pub csp_factor: u64,
    #[serde(default = "default_csp_max")]
    pub csp_max: NumOrStr,
    #[serde(default = "default_csp_directory")]
    pub csp_directory: usize,
    /// The device queue class of read-ahead and CSP I/O: `normal` (the paper's
    /// "two start I/Os": it may hold up later demand reads) or `idle`
    /// (served only when no demand request waits).
    #[serde(default)]
    pub prefetch_class: QueueClass,
    /// A separate LRU buffer (bytes) for prefetched blocks; 0: none.
    #[serde(default)]
    pub prefetch_buffer: Option<NumOrStr>,
    /// What goes to the prefetch buffer: `opportunistic` (the device's free
    /// reads, the paper's resource-rich setting) or `all` prefetched blocks.
    #[serde(default)]
    pub prefetch_buffer_holds: BufferHolds,
    /// Preemptible read-ahead by the device (bytes past the demand read, in
    /// all; 0: off).
    #[serde(default)]
    pub preemptible_readahead: Option<NumOrStr>,
    /// The device keeps the sectors that pass under the head while it waits.
    #[serde(default)]
    pub read_any_free_blocks: bool,
    /// Just-in-time seek when a read preempts read-ahead.
    #[serde(default)]
    pub jit_seek: bool,
    /// A write buffer (bytes) over this cache: writes complete once buffered
    /// and are destaged in the background; 0: none.
    #[serde(default)]
    pub write_buffer: Option<NumOrStr>,
    /// Destaging starts when the dirty share of the buffer exceeds
    /// `high_mark` and stops when it drops below `low_mark`.
    #[serde(default = "default_high_mark")]
    pub high_mark: f64,
    #[serde(default = "default_low_mark")]
    pub low_mark: f64,
    /// Dirty blocks older than this (seconds since they became dirty) are
    /// destaged too; 0: no age limit.
    #[serde(default = "default_max_age")]
    pub max_age_s: f64,
}

/// Non-opportunistic prefetch (`prefetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrefetchKind {
    #[default]
    None,
    /// Read ahead a fixed amount after every read miss.
    Readahead,
    /// Conditional sequential prefetch (run lengths per segment).
    Csp,
}

/// A device queue class, as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueClass {
    #[default]
    Normal,
    Idle,
}

/// What the prefetch buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferHolds {
    #[default]
    Opportunistic,
    All,
}

impl CacheSpec {
    /// A layer of `policy` and `size` with every other key at its default
    /// (as a file giving only those two keys).
    pub fn new(policy: &str, size: NumOrStr) -> CacheSpec {
        let mut t = toml::Table::new();
        t.insert("policy".into(), Value::String(policy.to_string()));
        t.insert("size".into(), Value::String(size.text()));
        Value::Table(t)
            .try_into()
            .expect("a policy and a size make a cache layer")
    }

    /// Whether the layer asks the device for opportunistic reading.
    pub fn opportunistic(&self) -> bool {
        self.preemptible_readahead.as_ref().is_some_and(|v| v.text() != "0")
            || self.read_any_free_blocks
            || self.jit_seek
    }
}

fn yes() -> bool {
    true
}
fn one() -> u64 {
    1
}
fn two() -> u64 {
    2
}
fn default_readahead() -> NumOrStr {
    NumOrStr::Str("32KiB".into())
}
fn default_csp_segment() -> NumOrStr {
    NumOrStr::Str("16KiB".into())
}
fn default_csp_max() -> NumOrStr {
    NumOrStr::Str("256KiB".into())
}
fn default_csp_directory() -> usize {
    64
}
fn default_high_mark() -> f64 {
    0.5
}
fn default_low_mark() -> f64 {
    0.25
}
fn default_max_age() -> f64 {
    30.0
}

/// `[array.rebuild]`: rebuild the failed disks onto spares (timed: in the
/// background with MD's speed rule; counted: all at once).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RebuildSpec {
    /// When the spares arrive (ms of simulated time; counted: of trace time).
    pub at: f64,
    /// Rebuild steps (chunk rows) in flight at most.
    pub window: usize,
    /// MD's sync_speed_min / sync_speed_max (KB/s).
    pub min: u64,
    pub max: u64,
    /// The rebuild order: `md`, `pro`, `dor`, `pro-dor`.
    pub order: String,
    /// MD's idle test and speed rule: `simple`, `md2611`, `md6`.
    pub idle: String,
    /// Whether MD's speed rule paces the rebuild (absent: the order's own
    /// preference: md and pro yes, dor and pro-dor no).
    pub throttle: Option<bool>,
    /// `same` (the users' priority, MD) or `low` (the devices' idle class,
    /// DOR); absent: the order's own preference.
    pub priority: Option<String>,
    /// Member bytes per bit of the map of rebuilt units (a multiple of the
    /// chunk; absent: one chunk row).
    pub map_unit: Option<NumOrStr>,
    /// Interval of the rebuild's time series (ms; 0: none).
    pub interval: f64,
    pub pro: ProSpec,
    pub dor: DorSpec,
    /// `live` order: this share of each lost member is live (0..1), laid
    /// out `live_layout` (`disk run --live-frac`).
    pub live_frac: Option<f64>,
    /// `compact` (the member's first blocks) or `spread` (evenly
    /// interleaved) (`disk run --live-layout`).
    pub live_layout: String,
    /// `live` order: live member blocks from a file (the JSON of `blocklab
    /// dgraid live --json`), relative to the stack file.
    pub live_map: Option<String>,
    /// `live` order: the largest copy (bytes, a multiple of the block
    /// size; absent: one chunk).
    pub live_max_io: Option<NumOrStr>,
    /// `live` order, `spread`: the live share comes in runs of this many
    /// bytes (a multiple of the block size; absent: one block).
    pub live_unit: Option<NumOrStr>,
}

impl Default for RebuildSpec {
    fn default() -> Self {
        RebuildSpec {
            at: 0.0,
            window: crate::timed::rebuild::DEFAULT_WINDOW,
            min: crate::timed::rebuild::MD_SPEED_MIN,
            max: crate::timed::rebuild::MD_SPEED_MAX,
            order: "md".into(),
            idle: "simple".into(),
            throttle: None,
            priority: None,
            map_unit: None,
            interval: crate::timed::rebuild::DEFAULT_INTERVAL_MS,
            pro: ProSpec::default(),
            dor: DorSpec::default(),
            live_frac: None,
            live_layout: "compact".into(),
            live_map: None,
            live_max_io: None,
            live_unit: None,
        }
    }
}

/// `[array.rebuild.pro]`: PRO's own parameters (not given by any source we
/// have; see docs/repro-pro.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProSpec {
    /// Hot-zone length (member bytes, whole chunk rows).
    pub zone: NumOrStr,
    /// Reconstruction threads (zones ranked at once); 0: unlimited.
    pub threads: usize,
    /// Time slice of a thread (ms).
    pub slice_ms: f64,
    /// Popularity half-life (s); 0: no aging.
    pub half_life_s: f64,
    /// What counts as an access: `all` requests, or only those touching a `lost` unit.
    pub count: String,
}

impl Default for ProSpec {
    fn default() -> Self {
        ProSpec {
            zone: NumOrStr::Str("16MiB".into()),
            threads: crate::rebuild::pro::DEFAULT_THREADS,
            slice_ms: crate::rebuild::pro::DEFAULT_SLICE_NS as f64 / 1e6,
            half_life_s: 0.0,
            count: "all".into(),
        }
    }
}

/// `[array.rebuild.dor]`: disk-oriented reconstruction.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DorSpec {
    /// Rows buffered at most: how far one disk's stream may run ahead.
    pub lead: usize,
}

impl Default for DorSpec {
    fn default() -> Self {
        DorSpec {
            lead: crate::rebuild::dor::DEFAULT_LEAD,
        }
    }
}

/// How trace addresses beyond the array are fitted onto it (`array.fit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Addresses beyond the array are an error (timed).
    None,
    /// Block `b` lands at `b mod capacity` (`array.wrap`).
    Wrap,
    /// The trace's address span is mapped linearly onto the whole array
    /// (block `b` lands at `⌊b · capacity / span⌋`: compressed, or
    /// stretched), so that the order of addresses and the places of the hot
    /// regions relative to the whole are kept.
    Scale,
}

impl Fit {
    /// The name `array.fit` uses.
    pub fn name(self) -> &'static str {
        match self {
            Fit::None => "none",
            Fit::Wrap => "wrap",
            Fit::Scale => "scale",
        }
    }

    pub fn parse(s: &str) -> Result<Fit> {
        match s {
            "none" => Ok(Fit::None),
            "wrap" => Ok(Fit::Wrap),
            "scale" => Ok(Fit::Scale),
            other => Err(Error::unknown("address fit", other, &["none", "wrap", "scale"])),
        }
    }
}

/// `[array]`: a RAID array of `disks` devices of `[device]`'s model.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArraySpec {
    /// `5`, `"raid5"`, `"RAID-10"`, ...
    pub raid: NumOrStr,
    pub disks: u32,
    #[serde(default = "default_chunk")]
    pub chunk: NumOrStr,
    /// MD layout name (`left-symmetric`, RAID-10 `n2` / `f2` / `o2`, ...).
    #[serde(default)]
    pub layout: Option<String>,
    /// Failed disks (degraded mode).
    #[serde(default)]
    pub failed: Vec<u32>,
    /// When the failed disks fail: seconds of the trace's own clock (`30`,
    /// `"2.5s"`) or a request index (`"1000req"`); default: from the start.
    #[serde(default)]
    pub fail_at: Option<NumOrStr>,
    /// Allow more failed disks than the level tolerates (lost blocks are unreadable).
    #[serde(default)]
    pub allow_loss: bool,
    /// Bytes of each member the array uses (default: the whole device).
    #[serde(default)]
    pub disk_size: Option<NumOrStr>,
    /// The array's block size in bytes (also the cache layers' block).
    #[serde(default)]
    pub block_size: Option<u64>,
    /// Fold addresses beyond the array's capacity back onto it.
    #[serde(default)]
    pub wrap: bool,
    /// How trace addresses are fitted onto the array: `none`, `wrap` (as
    /// `wrap = true`) or `scale` (the trace's span mapped onto all of it);
    /// absent: `wrap` when `wrap = true`, else `none`.
    #[serde(default)]
    pub fit: Option<String>,
    /// Compute time of an XOR / P+Q step (ms).
    #[serde(default)]
    pub xor_ms: f64,
    /// MD's stripe cache for reads of a degraded RAID-4/5/6, in stripe heads
    /// (one 4 KiB page per member; MD's `stripe_cache_size`, 256 by
    /// default there); 0 (default): none. See `array::stripe_cache`.
    #[serde(default)]
    pub stripe_cache: u64,
    #[serde(default)]
    pub rebuild: Option<RebuildSpec>,
    /// `[array.dgraid]`: the D-GRAID array's own keys (`raid = "dgraid0" | "dgraid1"`).
    #[serde(default)]
    pub dgraid: Option<DgraidSpec>,
}

/// `[array.dgraid]`: a D-GRAID array (see `stack::dgraid_target`). Its
/// blocks are those of the ext2 file system the trace addresses; writes
/// need the trace's file-system annotation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DgraidSpec {
    /// Size of that file system in bytes (required): mke2fs's geometry
    /// says which blocks are static metadata.
    pub fs_size: Option<NumOrStr>,
    /// Copies of naming and system metadata (1..=disks).
    pub meta_copies: u32,
    /// Unit of fault isolation: `file` or `dir`.
    pub grouping: String,
    /// Where metadata replicas go: `rotate` or `random`.
    pub placement: String,
    pub seed: u64,
    /// Access-driven diffusion: segment length (bytes); absent: none.
    /// Diffused copies are striped in `array.chunk` chunks.
    pub diffuse_segment: Option<NumOrStr>,
    /// Whole-segment reads before a segment is diffused.
    pub diffuse_threshold: u64,
    /// Learn each block's owner from the file system's own writes (the
    /// paper's semantically-smart disk): the real executor's default; the
    /// simulators place by the trace's annotation and refuse `true`.
    pub infer: Option<bool>,
    /// With `infer = false` on the real executor: a `block,owner,kind[,parent]`
    /// file (relative to the stack file) that tells the array each block's
    /// owner.
    pub tags: Option<String>,
    /// Inference on the real executor: blocks written before their owner
    /// is known held at most (then the oldest is placed by default and
    /// retagged later); default 1024.
    pub deferred_max: Option<u64>,
}

impl Default for DgraidSpec {
    fn default() -> Self {
        DgraidSpec {
            fs_size: None,
            meta_copies: 1,
            grouping: "file".into(),
            placement: "rotate".into(),
            seed: 1,
            diffuse_segment: None,
            diffuse_threshold: 2,
            infer: None,
            tags: None,
            deferred_max: None,
        }
    }
}

/// Whether `raid` names a D-GRAID level (`dgraid0`, `dgraid1`).
pub fn is_dgraid(raid: &str) -> bool {
    raid.trim().to_ascii_lowercase().starts_with("dgraid")
}

fn default_chunk() -> NumOrStr {
    NumOrStr::Str("64KiB".into())
}

/// `[device]`: the device model (every member of the array is one).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// A `.parv` / `.diskspecs` / `.toml` file (relative to the stack file),
    /// or `const:MS` / `toy:...`.
    pub model: String,
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// SATF: how many waiting requests, the nearest the head, it estimates
    /// per choice (`timed::sched::DEFAULT_SATF_WINDOW`).
    #[serde(default = "default_satf_window")]
    pub satf_window: usize,
    /// Requests handed to the device at once (0: unlimited).
    #[serde(default)]
    pub queue_depth: usize,
    /// Fold addresses beyond the device's capacity back onto it (a stack
    /// without an array; with one, `array.wrap`).
    #[serde(default)]
    pub wrap: bool,
    /// Short-stroking: the share of each device that holds data, from its
    /// first LBN (the outer edge of a disk); 1: all of it.
    #[serde(default = "full")]
    pub short_stroke: f64,
    /// Constant occupancy (Hsu and Smith §5): the stack's addresses spread
    /// by this factor (≥ 1) over the device, in 1 MiB units (unit `u` at
    /// device unit ⌊u·factor⌋), so the data keeps its share of a disk
    /// `factor` times larger; 1: as they are. One device only.
    #[serde(default = "full")]
    pub scale_addresses: f64,
}

fn full() -> f64 {
    1.0
}

impl DeviceSpec {
    /// A device of `model` with every other key at its default.
    pub fn new(model: &str) -> DeviceSpec {
        let mut t = toml::Table::new();
        t.insert("model".into(), Value::String(model.to_string()));
        Value::Table(t).try_into().expect("a model makes a device")
    }
}

fn default_scheduler() -> String {
    "fcfs".into()
}

fn default_satf_window() -> usize {
    crate::timed::sched::DEFAULT_SATF_WINDOW
}

/// A whole stack file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    /// Seed of everything random in the stack (nothing is, yet: the field
    /// is recorded so that results name it).
    #[serde(default)]
    pub seed: u64,
    /// Block size of the cache layers and the array (`array.block_size` says
    /// the same; default 4096).
    #[serde(default)]
    pub block_size: Option<u64>,
    #[serde(default)]
    pub tenant_map: TenantMap,
    #[serde(default)]
    pub replay: ReplaySpec,
    #[serde(default)]
    pub cache: Vec<CacheSpec>,
    #[serde(default)]
    pub array: Option<ArraySpec>,
    /// The SSD tier between the cache layers and the array.
    #[serde(default)]
    pub tier: Option<super::tier::spec::TierSpec>,
    /// `[[tenant]]`: the tenants' volumes, declared (tenant i of the trace
    /// is the i-th); `concat` then lays these out instead of the volumes a
    /// pass over the trace measures. The real executor serves each as an
    /// NBD export of its name.
    #[serde(default)]
    pub tenant: Vec<TenantSpec>,
    pub device: DeviceSpec,
    /// Where the spec came from (for messages) and the folder relative
    /// paths are resolved against; not a key of the file.
    #[serde(skip)]
    pub origin: Origin,
}

/// `[[tenant]]`: one tenant's volume.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Its name (the real executor's NBD export name).
    pub name: String,
    /// Bytes of its volume (`64MiB`, or a number of bytes), a multiple of
    /// the block size.
    pub size: NumOrStr,
}

/// The file a spec was read from, for error messages and relative paths.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Origin {
    pub file: String,
    pub dir: PathBuf,
}

impl Origin {
    pub fn err(&self, key: &str, message: impl std::fmt::Display) -> Error {
        Error::key(&self.file, key, message)
    }

    /// A path as written in the file: relative to the file's folder.
    pub fn path(&self, p: &str) -> String {
        let path = Path::new(p);
        if path.is_absolute() || self.dir.as_os_str().is_empty() {
            p.to_string()
        } else {
            self.dir.join(path).to_string_lossy().into_owned()
        }
    }

    /// A device model as written: `const:` / `toy:` specs stay, files are
    /// resolved against the file's folder.
    pub fn model(&self, m: &str) -> String {
        if m.starts_with("const:") || m.starts_with("toy:") || m == "toy" {
            m.to_string()
        } else {
            self.path(m)
        }
    }
}

impl StackSpec {
    /// Read a stack file and apply its overrides: `KEY=VALUE` (`--set`) or
    /// `-KEY` (`--unset`), in order.
    pub fn load(path: &Path, sets: &[String]) -> Result<StackSpec> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&file, e))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_str_with(&text, sets, Origin { file, dir })
    }

    /// Parse stack text (`origin` names it in errors and anchors relative paths).
    pub fn from_str_with(text: &str, sets: &[String], origin: Origin) -> Result<StackSpec> {
        let mut tree: Value = match toml::from_str::<toml::Table>(text) {
            Ok(t) => Value::Table(t),
            Err(e) => {
                let line = e
                    .span()
                    .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                    .unwrap_or(0);
                let what = e.message().to_string();
                return Err(Error::config(format!("{}: line {line}: {what}", origin.file)));
            }
        };
        for s in sets {
            apply_override(&mut tree, s).map_err(|e| {
                let shown = match s.strip_prefix('-') {
                    Some(key) => format!("--unset {key}"),
                    None => format!("--set {s}"),
                };
                Error::config(format!("{}: {shown}: {}", origin.file, e.message()))
            })?;
        }
        Self::from_tree(tree, origin)
    }

    /// Deserialize a TOML tree (file plus overrides), strictly.
    pub fn from_tree(tree: Value, origin: Origin) -> Result<StackSpec> {
        // Every key of [array.rebuild] has a default, so an empty table would
        // start an MD rebuild although nothing asked for one (what
        // `--set 'array.rebuild={}'` looks like it undoes): say which is meant.
        if let Some(Value::Table(r)) = tree.get("array").and_then(|a| a.get("rebuild")) {
            if r.is_empty() {
                return Err(origin.err(
                    "array.rebuild",
                    "empty table: give at least one key (e.g. `at = 0`) to rebuild with MD's \
                     defaults, or drop the section (`--unset array.rebuild`) for no rebuild",
                ));
            }
        }
        let mut spec: StackSpec = match serde_path_to_error::deserialize(tree) {
            Ok(s) => s,
            Err(e) => {
                let key = dotted(e.path());
                let msg = e.into_inner().to_string();
                let msg = msg.trim().trim_end_matches('\n').replace('\n', " ");
                return Err(if key.is_empty() || key == "." {
                    Error::config(format!("{}: {msg}", origin.file))
                } else {
                    origin.err(&key, msg)
                });
            }
        };
        spec.origin = origin;
        spec.check()?;
        Ok(spec)
    }

    /// Check a spec built in code (front ends) as a file would be.
    pub fn validated(self) -> Result<StackSpec> {
        self.check()?;
        Ok(self)
    }

    /// The stack's block size (the cache layers' and the array's).
    pub fn block_size(&self) -> u64 {
        self.array
            .as_ref()
            .and_then(|a| a.block_size)
            .or(self.block_size)
            .unwrap_or(4096)
    }

    /// The declared tenants' volumes in blocks (`[[tenant]]`, tenant i the
    /// i-th), None when the stack declares none.
    pub fn tenant_volumes(&self) -> Result<Option<Vec<u64>>> {
        if self.tenant.is_empty() {
            return Ok(None);
        }
        let bs = self.block_size();
        let o = &self.origin;
        let mut out = Vec::with_capacity(self.tenant.len());
        for (i, t) in self.tenant.iter().enumerate() {
            let key = format!("tenant.{i}.size");
            let bytes = crate::array::parse_bytes(&t.size.text()).map_err(|e| o.err(&key, e))?;
            if bytes == 0 || !bytes.is_multiple_of(bs) {
                return Err(o.err(
                    &key,
                    format!("{bytes} B is not a positive multiple of the block size ({bs} B)"),
                ));
            }
            out.push(bytes / bs);
        }
        Ok(Some(out))
    }

    /// Checks of `[[tenant]]`: names that can be NBD export names, once
    /// each; sizes; laid out by `concat`.
    fn check_tenants(&self) -> Result<()> {
        let o = &self.origin;
        for (i, t) in self.tenant.iter().enumerate() {
            let key = format!("tenant.{i}.name");
            if t.name.is_empty() || t.name.len() > 4096 || t.name.chars().any(|c| c.is_control()) {
                return Err(o.err(&key, "an export name: 1 to 4096 bytes, no control characters"));
            }
            if self.tenant[..i].iter().any(|u| u.name == t.name) {
                return Err(o.err(&key, format!("{:?} is given twice", t.name)));
            }
        }
        self.tenant_volumes()?;
        if !self.tenant.is_empty() && self.tenant_map != TenantMap::Concat {
            return Err(o.err(
                "tenant_map",
                format!(
                    "[[tenant]] declares volumes laid end to end: use \"concat\" (not \"{}\")",
                    self.tenant_map.name()
                ),
            ));
        }
        Ok(())
    }

    /// Checks that need no trace and no device: names, ranges, consistency.
    fn check(&self) -> Result<()> {
        let o = &self.origin;
        self.check_tenants()?;
        if let (Some(a), Some(b)) = (self.block_size, self.array.as_ref().and_then(|a| a.block_size)) {
            if a != b {
                return Err(o.err(
                    "array.block_size",
                    format!("{b} differs from the stack's block_size {a}: give one of them"),
                ));
            }
        }
        let bs = self.block_size();
        if bs == 0 || bs % 512 != 0 {
            let key = if self.array.as_ref().is_some_and(|a| a.block_size.is_some()) {
                "array.block_size"
            } else {
                "block_size"
            };
            return Err(o.err(key, format!("must be a positive multiple of 512 bytes, got {bs}")));
        }
        self.check_replay()?;
        let valid = crate::cache::fault::all_policies();
        for (i, c) in self.cache.iter().enumerate() {
            let name = c.policy.to_ascii_lowercase();
            if !valid.contains(&name.as_str()) {
                return Err(o.err(
                    &format!("cache.{i}.policy"),
                    Error::unknown("policy", &c.policy, &valid),
                ));
            }
            if name == "opt" && (i != 0 || c.write == WritePolicy::Around) {
                return Err(o.err(
                    &format!("cache.{i}.policy"),
                    "opt needs the future of its access stream: only the top layer (cache.0), with write \
                     `back` or `through`, can have it",
                ));
            }
            match used_share(&c.size.text()) {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(o.err(&format!("cache.{i}.size"), e)),
                None => {
                    crate::cache::sizes::parse_size(&c.size.text())
                        .map_err(|e| o.err(&format!("cache.{i}.size"), e))?;
                }
            }
            if let NumOrStr::Int(0) = c.size {
                return Err(o.err(&format!("cache.{i}.size"), "a cache needs at least one block"));
            }
            if !(c.hit_ms.is_finite() && c.hit_ms >= 0.0) {
                return Err(o.err(&format!("cache.{i}.hit_ms"), "must be a non-negative number of ms"));
            }
            if c.reads_only && c.write != WritePolicy::Back {
                return Err(o.err(
                    &format!("cache.{i}.write"),
                    "a reads_only layer caches no writes: leave `write` out",
                ));
            }
        }
        if let Some(t) = &self.tier {
            t.check(o, self)?;
        }
        for (i, c) in self.cache.iter().enumerate() {
            self.check_hsu_smith(i, c)?;
        }
        if let Some(a) = &self.array {
            self.check_array(a)?;
            if self.device.wrap {
                return Err(o.err("device.wrap", "with an [array], folding is `array.wrap`"));
            }
            if self.device.scale_addresses != 1.0 {
                return Err(o.err(
                    "device.scale_addresses",
                    "one device only: with an [array], spread addresses with `array.fit = \"scale\"`",
                ));
            }
        }
        let f = self.device.scale_addresses;
        if !(f.is_finite() && f >= 1.0) {
            return Err(o.err(
                "device.scale_addresses",
                "must be a factor of at least 1 (the device's addresses spread over a bigger disk)",
            ));
        }
        crate::timed::sched::build(&self.device.scheduler).map_err(|e| o.err("device.scheduler", e))?;
        if self.device.satf_window == 0 {
            return Err(o.err("device.satf_window", "must be at least 1 (requests SATF compares)"));
        }
        let ss = self.device.short_stroke;
        if !(ss.is_finite() && ss > 0.0 && ss <= 1.0) {
            return Err(o.err("device.short_stroke", "must be a share of the device in (0, 1]"));
        }
        Ok(())
    }

    /// Bytes of a size key of a cache layer, a whole number of blocks.
    fn layer_bytes(&self, i: usize, key: &str, v: &NumOrStr, min_blocks: u64) -> Result<u64> {
        let key = format!("cache.{i}.{key}");
        let b = crate::array::parse_bytes(&v.text()).map_err(|e| self.origin.err(&key, e))?;
        let bs = self.block_size();
        if b % bs != 0 || b / bs < min_blocks {
            let least = if min_blocks > 0 {
                format!(", at least {min_blocks}")
            } else {
                String::new()
            };
            return Err(self
                .origin
                .err(&key, format!("{b} B is not a whole number of {bs}-byte blocks{least}")));
        }
        Ok(b)
    }

    /// The keys of read caching, prefetch, opportunistic prefetch and the
    /// write buffer (see docs/stack.md).
    fn check_hsu_smith(&self, i: usize, c: &CacheSpec) -> Result<()> {
        let o = &self.origin;
        let k = |key: &str| format!("cache.{i}.{key}");
        let opt = c.policy.eq_ignore_ascii_case("opt");
        if let Some(f) = &c.fetch_unit {
            self.layer_bytes(i, "fetch_unit", f, 1)?;
        }
        if c.prefetch == PrefetchKind::Readahead {
            self.layer_bytes(i, "readahead", &c.readahead, 1)?;
        }
        if c.prefetch == PrefetchKind::Csp {
            self.layer_bytes(i, "csp_segment", &c.csp_segment, 1)?;
            self.layer_bytes(i, "csp_max", &c.csp_max, 1)?;
            if c.csp_trigger == 0 {
                return Err(o.err(&k("csp_trigger"), "must be at least 1 (a run of one segment)"));
            }
            if c.csp_factor == 0 {
                return Err(o.err(&k("csp_factor"), "must be at least 1"));
            }
            if c.csp_directory == 0 {
                return Err(o.err(&k("csp_directory"), "must hold at least one segment"));
            }
        }
        let pbuf = match &c.prefetch_buffer {
            Some(v) => self.layer_bytes(i, "prefetch_buffer", v, 0)?,
            None => 0,
        };
        if let Some(v) = &c.preemptible_readahead {
            let b = crate::array::parse_bytes(&v.text()).map_err(|e| o.err(&k("preemptible_readahead"), e))?;
            if b % 512 != 0 {
                return Err(o.err(
                    &k("preemptible_readahead"),
                    "must be a whole number of 512-byte sectors",
                ));
            }
        }
        let prefetching = c.fetch_unit.is_some() || c.prefetch != PrefetchKind::None || pbuf > 0 || c.opportunistic();
        if prefetching && opt {
            return Err(o.err(
                &k("policy"),
                "opt knows the future of demand accesses only: no prefetch with it",
            ));
        }
        if prefetching && !c.merge_misses {
            return Err(o.err(
                &k("merge_misses"),
                "prefetch reads ranges of blocks: leave merge_misses on",
            ));
        }
        if c.opportunistic() {
            if self.array.is_some() {
                return Err(o.err(
                    &k(if c.jit_seek {
                        "jit_seek"
                    } else if c.read_any_free_blocks {
                        "read_any_free_blocks"
                    } else {
                        "preemptible_readahead"
                    }),
                    "opportunistic prefetch needs a stack on one device (no [array])",
                ));
            }
            if self.cache[..i].iter().any(|d| d.opportunistic()) {
                return Err(o.err(
                    &k("preemptible_readahead"),
                    "only one cache layer can take what the device reads opportunistically",
                ));
            }
        }
        if let Some(v) = &c.write_buffer {
            if v.text().trim() != "0" {
                self.layer_bytes(i, "write_buffer", v, 1)?;
                if c.write != WritePolicy::Back || c.reads_only {
                    return Err(o.err(
                        &k("write_buffer"),
                        "the write buffer takes the layer's writes: leave `write` and `reads_only` out",
                    ));
                }
            }
        }
        let (hi, lo) = (c.high_mark, c.low_mark);
        if !(hi.is_finite() && (0.0..=1.0).contains(&hi)) {
            return Err(o.err(&k("high_mark"), "must be a share of the buffer in [0, 1]"));
        }
        if !(lo.is_finite() && (0.0..=1.0).contains(&lo) && lo <= hi) {
            return Err(o.err(&k("low_mark"), "must be a share of the buffer in [0, high_mark]"));
        }
        if !(c.max_age_s.is_finite() && c.max_age_s >= 0.0) {
            return Err(o.err(&k("max_age_s"), "must be a non-negative number of seconds"));
        }
        Ok(())
    }

    fn check_replay(&self) -> Result<()> {
        let o = &self.origin;
        let r = &self.replay;
        if !crate::timed::replay::REPLAYS.contains(&r.mode.to_ascii_lowercase().as_str()) {
            return Err(o.err(
                "replay.mode",
                Error::unknown("replay discipline", &r.mode, crate::timed::replay::REPLAYS),
            ));
        }
        if !(r.speedup.is_finite() && r.speedup > 0.0) {
            return Err(o.err("replay.speedup", "must be a positive number"));
        }
        if r.outstanding == 0 {
            return Err(o.err("replay.outstanding", "must be at least 1"));
        }
        if !(r.think_ms.is_finite() && r.think_ms >= 0.0) {
            return Err(o.err("replay.think_ms", "must be a non-negative number of ms"));
        }
        if r.window == 0 {
            return Err(o.err("replay.window", "must be at least 1"));
        }
        if !(r.interval.is_finite() && r.interval >= 0.0) {
            return Err(o.err("replay.interval", "must be a non-negative number of ms"));
        }
        if let Err(e) = Warmup::parse(&r.warmup) {
            return Err(o.err("replay.warmup", e));
        }
        if !(r.sort_window.is_finite() && r.sort_window >= 0.0) {
            return Err(o.err("replay.sort_window", "must be a non-negative number of seconds"));
        }
        Ok(())
    }

    fn check_array(&self, a: &ArraySpec) -> Result<()> {
        let o = &self.origin;
        if a.stripe_cache > 0 {
            let parity = crate::array::Level::parse(&a.raid.text()).is_ok_and(|l| {
                use crate::array::Level::*;
                matches!(l, Raid4 | Raid5 | Raid6)
            });
            if !parity {
                return Err(o.err(
                    "array.stripe_cache",
                    "only RAID-4/5/6 arrays (MD's raid5 personality) have one",
                ));
            }
        }
        if is_dgraid(&a.raid.text()) {
            return self.check_dgraid(a);
        }
        if a.dgraid.is_some() {
            return Err(o.err(
                "array.dgraid",
                "only a D-GRAID array (raid = \"dgraid0\" or \"dgraid1\") takes these keys",
            ));
        }
        let level = crate::array::Level::parse(&a.raid.text()).map_err(|e| o.err("array.raid", e))?;
        if a.disks == 0 {
            return Err(o.err("array.disks", "an array needs disks"));
        }
        let chunk = crate::array::parse_bytes(&a.chunk.text()).map_err(|e| o.err("array.chunk", e))?;
        let disk_bytes = match &a.disk_size {
            Some(s) => crate::array::parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))?,
            None => 0,
        };
        let mut cfg = crate::array::ArrayConfig::new(level, a.disks);
        cfg.chunk_bytes = chunk;
        cfg.block_size = self.block_size();
        cfg.disk_bytes = disk_bytes;
        if let Some(l) = &a.layout {
            cfg.set_layout(l).map_err(|e| o.err("array.layout", e))?;
        }
        // A far RAID-10 without a size takes the device's: checked when built.
        let far_without_size = level == crate::array::Level::Raid10 && disk_bytes == 0;
        if let Err(e) = cfg.validate() {
            if !(far_without_size && e.to_string().contains("far layout")) {
                let key = if e.to_string().contains("disks") {
                    "array.disks"
                } else {
                    "array"
                };
                return Err(o.err(key, e));
            }
        }
        for &d in &a.failed {
            if d >= a.disks {
                return Err(o.err(
                    "array.failed",
                    format!("disk {d} does not exist: the array has disks 0..{}", a.disks - 1),
                ));
            }
        }
        let mut uniq = a.failed.clone();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.len() != a.failed.len() {
            return Err(o.err("array.failed", "a disk is listed twice"));
        }
        let tolerated = match level {
            crate::array::Level::Raid0 => 0,
            crate::array::Level::Raid1 => a.disks - 1,
            crate::array::Level::Raid10 => cfg.effective_copies() - 1,
            l => l.parity_units(),
        };
        if let Some(r) = &a.rebuild {
            if a.failed.is_empty() {
                return Err(o.err("array.rebuild", "a rebuild needs failed disks (array.failed)"));
            }
            if tolerated == 0 {
                return Err(o.err(
                    "array.rebuild",
                    format!("{} has no redundancy: a lost disk cannot be rebuilt", level.name()),
                ));
            }
            if a.failed.len() as u32 > tolerated {
                return Err(o.err(
                    "array.rebuild",
                    format!(
                        "{} of {} disks survives {tolerated} failure(s), {} failed: the data is lost, nothing to rebuild from",
                        level.name(),
                        a.disks,
                        a.failed.len()
                    ),
                ));
            }
            if !(r.at.is_finite() && r.at >= 0.0) {
                return Err(o.err("array.rebuild.at", "must be a non-negative number of ms"));
            }
            if r.window == 0 {
                return Err(o.err("array.rebuild.window", "must be at least 1 row"));
            }
            if r.max == 0 {
                return Err(o.err("array.rebuild.max", "must be at least 1 KB/s"));
            }
            self.check_rebuild(r, chunk)?;
        }
        if a.failed.len() as u32 > tolerated && !a.allow_loss {
            return Err(o.err(
                "array.failed",
                format!(
                    "{} of {} disks survives {tolerated} failure(s), {} failed: data would be lost \
                     (set array.allow_loss = true to run it anyway)",
                    level.name(),
                    a.disks,
                    a.failed.len()
                ),
            ));
        }
        if let Some(f) = &a.fail_at {
            if a.failed.is_empty() {
                return Err(o.err("array.fail_at", "no disk fails: give array.failed"));
            }
            crate::stack::failure::FailAt::parse(&f.text()).map_err(|e| o.err("array.fail_at", e))?;
        }
        if !(a.xor_ms.is_finite() && a.xor_ms >= 0.0) {
            return Err(o.err("array.xor_ms", "must be a non-negative number of ms"));
        }
        if let Some(f) = &a.fit {
            let fit = Fit::parse(f).map_err(|e| o.err("array.fit", e))?;
            if a.wrap && fit != Fit::Wrap {
                return Err(o.err(
                    "array.fit",
                    format!("`{f}` contradicts `array.wrap = true`: give one of them"),
                ));
            }
        }
        Ok(())
    }

    /// The rebuild's own keys (order, idle rule, PRO's and DOR's parameters).
    fn check_rebuild(&self, r: &RebuildSpec, chunk: u64) -> Result<()> {
        let o = &self.origin;
        if !crate::rebuild::ALL_ORDERS.contains(&r.order.to_ascii_lowercase().as_str()) {
            return Err(o.err(
                "array.rebuild.order",
                Error::unknown("rebuild order", &r.order, crate::rebuild::ALL_ORDERS),
            ));
        }
        self.check_live(r)?;
        crate::timed::rebuild::IdleRule::parse(&r.idle).map_err(|e| o.err("array.rebuild.idle", e))?;
        if let Some(p) = &r.priority {
            if p != "same" && p != "low" {
                return Err(o.err(
                    "array.rebuild.priority",
                    Error::unknown("rebuild priority", p, &["same", "low"]),
                ));
            }
        }
        if let Some(u) = &r.map_unit {
            let bytes = crate::array::parse_bytes(&u.text()).map_err(|e| o.err("array.rebuild.map_unit", e))?;
            if bytes == 0 || bytes % chunk != 0 {
                return Err(o.err(
                    "array.rebuild.map_unit",
                    format!("{bytes} B is not a positive multiple of the chunk ({chunk} B)"),
                ));
            }
        }
        if !(r.interval.is_finite() && r.interval >= 0.0) {
            return Err(o.err("array.rebuild.interval", "must be a non-negative number of ms"));
        }
        let zone = crate::array::parse_bytes(&r.pro.zone.text()).map_err(|e| o.err("array.rebuild.pro.zone", e))?;
        if zone < chunk {
            return Err(o.err(
                "array.rebuild.pro.zone",
                format!("{zone} B is less than one chunk row ({chunk} B)"),
            ));
        }
        if !(r.pro.slice_ms.is_finite() && r.pro.slice_ms > 0.0) {
            return Err(o.err("array.rebuild.pro.slice_ms", "must be a positive number of ms"));
        }
        if !(r.pro.half_life_s.is_finite() && r.pro.half_life_s >= 0.0) {
            return Err(o.err(
                "array.rebuild.pro.half_life_s",
                "must be a non-negative number of seconds",
            ));
        }
        crate::rebuild::ProCount::parse(&r.pro.count).map_err(|e| o.err("array.rebuild.pro.count", e))?;
        if r.dor.lead == 0 {
            return Err(o.err("array.rebuild.dor.lead", "must be at least 1 row"));
        }
        Ok(())
    }

    /// A D-GRAID array: its own keys, and the array keys it has no use for.
    fn check_dgraid(&self, a: &ArraySpec) -> Result<()> {
        let o = &self.origin;
        let level = crate::dgraid::DgraidConfig::parse_level(&a.raid.text().to_ascii_lowercase())
            .map_err(|e| o.err("array.raid", e))?;
        if a.disks < 2 || a.disks > 64 {
            return Err(o.err("array.disks", format!("D-GRAID needs 2..=64 disks, got {}", a.disks)));
        }
        if level == crate::dgraid::DgraidLevel::L1 && a.disks % 2 != 0 {
            return Err(o.err(
                "array.disks",
                format!(
                    "dgraid1 mirrors on pairs of disks: the number must be even, got {}",
                    a.disks
                ),
            ));
        }
        let bs = self.block_size();
        let chunk = crate::array::parse_bytes(&a.chunk.text()).map_err(|e| o.err("array.chunk", e))?;
        if chunk == 0 || chunk % bs != 0 {
            return Err(o.err(
                "array.chunk",
                format!("{chunk} B is not a positive multiple of the block size ({bs} B)"),
            ));
        }
        let d = a.dgraid.clone().unwrap_or_default();
        let fs = d.fs_size.as_ref().ok_or_else(|| {
            o.err(
                "array.dgraid.fs_size",
                "a D-GRAID array needs the size of the file system the trace addresses",
            )
        })?;
        let fs_bytes = crate::array::parse_bytes(&fs.text()).map_err(|e| o.err("array.dgraid.fs_size", e))?;
        crate::fsmodel::Geometry::mke2fs(&crate::fsmodel::geometry::MkfsParams::new(fs_bytes, bs))
            .map_err(|e| o.err("array.dgraid.fs_size", e))?;
        if d.meta_copies == 0 || d.meta_copies > a.disks {
            return Err(o.err(
                "array.dgraid.meta_copies",
                format!("must be 1..={} (the disks), got {}", a.disks, d.meta_copies),
            ));
        }
        crate::dgraid::Grouping::parse(&d.grouping).map_err(|e| o.err("array.dgraid.grouping", e))?;
        crate::dgraid::ReplicaPlacement::parse(&d.placement).map_err(|e| o.err("array.dgraid.placement", e))?;
        if let Some(seg) = &d.diffuse_segment {
            let bytes = crate::array::parse_bytes(&seg.text()).map_err(|e| o.err("array.dgraid.diffuse_segment", e))?;
            if bytes == 0 || bytes % bs != 0 {
                return Err(o.err(
                    "array.dgraid.diffuse_segment",
                    format!("{bytes} B is not a positive multiple of the block size ({bs} B)"),
                ));
            }
        }
        if d.diffuse_threshold == 0 {
            return Err(o.err("array.dgraid.diffuse_threshold", "must be at least 1"));
        }
        if let Some(s) = &a.disk_size {
            let bytes = crate::array::parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))?;
            if bytes < bs {
                return Err(o.err("array.disk_size", "a member must hold at least one block"));
            }
        }
        let mut seen = 0u64;
        for &f in &a.failed {
            if f >= a.disks {
                return Err(o.err(
                    "array.failed",
                    format!("disk {f} does not exist: the array has disks 0..{}", a.disks - 1),
                ));
            }
            if seen >> f & 1 == 1 {
                return Err(o.err("array.failed", "a disk is listed twice"));
            }
            seen |= 1 << f;
        }
        if let Some(f) = &a.fail_at {
            if a.failed.is_empty() {
                return Err(o.err("array.fail_at", "no disk fails: give array.failed"));
            }
            crate::stack::failure::FailAt::parse(&f.text()).map_err(|e| o.err("array.fail_at", e))?;
        }
        let unused = [
            ("array.layout", a.layout.is_some()),
            ("array.wrap", a.wrap),
            ("array.fit", a.fit.is_some()),
            ("array.rebuild", a.rebuild.is_some()),
        ];
        if let Some((key, _)) = unused.iter().find(|u| u.1) {
            let why = if *key == "array.rebuild" {
                "a D-GRAID array is not rebuilt here (the `live` order rebuilds a raid1/raid10 array from a \
                 live map, `dgraid live --json`)"
            } else {
                "not used by a D-GRAID array (its blocks are the file system's)"
            };
            return Err(o.err(key, why));
        }
        if !self.cache.is_empty() {
            return Err(o.err(
                "cache",
                "no cache layers above a D-GRAID array: its writes need the trace's file-system annotation",
            ));
        }
        if self.tier.is_some() {
            return Err(o.err(
                "tier",
                "no SSD tier above a D-GRAID array: its writes need the trace's file-system annotation",
            ));
        }
        Ok(())
    }

    /// The `live` order's keys: a source of live blocks for `live` and
    /// only for it, a mirrored level, sensible values.
    fn check_live(&self, r: &RebuildSpec) -> Result<()> {
        let o = &self.origin;
        let live = r.order.eq_ignore_ascii_case("live");
        if let Some(f) = r.live_frac {
            if !(0.0..=1.0).contains(&f) {
                return Err(o.err("array.rebuild.live_frac", format!("must be in [0, 1], got {f}")));
            }
        }
        crate::dgraid::LiveLayout::parse(&r.live_layout).map_err(|e| o.err("array.rebuild.live_layout", e))?;
        let bs = self.block_size();
        for (key, v) in [
            ("array.rebuild.live_max_io", &r.live_max_io),
            ("array.rebuild.live_unit", &r.live_unit),
        ] {
            if let Some(m) = v {
                let bytes = crate::array::parse_bytes(&m.text()).map_err(|e| o.err(key, e))?;
                if bytes == 0 || bytes % bs != 0 || bytes / bs > u32::MAX as u64 {
                    return Err(o.err(
                        key,
                        format!("{bytes} B is not a positive multiple of the block size ({bs} B)"),
                    ));
                }
            }
        }
        let given = [
            ("array.rebuild.live_frac", r.live_frac.is_some()),
            ("array.rebuild.live_map", r.live_map.is_some()),
            ("array.rebuild.live_max_io", r.live_max_io.is_some()),
            ("array.rebuild.live_unit", r.live_unit.is_some()),
        ];
        if !live {
            if let Some((key, _)) = given.iter().find(|g| g.1) {
                return Err(o.err(
                    key,
                    format!(
                        "only the `live` order copies live blocks (array.rebuild.order is `{}`)",
                        r.order
                    ),
                ));
            }
            return Ok(());
        }
        match (r.live_frac.is_some(), r.live_map.is_some()) {
            (false, true) if r.live_unit.is_some() => {
                return Err(o.err(
                    "array.rebuild.live_unit",
                    "a live map gives its own runs: live_unit is for live_frac",
                ))
            }
            (true, true) => {
                return Err(o.err(
                    "array.rebuild.live_map",
                    "give array.rebuild.live_frac or array.rebuild.live_map, not both",
                ))
            }
            (false, false) => return Err(o.err(
                "array.rebuild.order",
                "`live` needs its live blocks: array.rebuild.live_frac (a share) or array.rebuild.live_map (a file)",
            )),
            _ => {}
        }
        if let Some(a) = &self.array {
            let level = crate::array::ArrayConfig::parse_level(&a.raid.text()).map_err(|e| o.err("array.raid", e))?;
            if !matches!(level, crate::array::Level::Raid1 | crate::array::Level::Raid10) {
                return Err(o.err(
                    "array.rebuild.order",
                    format!(
                        "`live` copies live blocks from a mirror: raid1 or raid10, not {}",
                        level.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// How trace addresses are fitted onto the array.
    pub fn fit(&self) -> Fit {
        match &self.array {
            Some(a) => match a.fit.as_deref().map(Fit::parse) {
                Some(Ok(f)) => f,
                _ if a.wrap => Fit::Wrap,
                _ => Fit::None,
            },
            None => Fit::None,
        }
    }

    /// The fit a run used, with or without an array (a single device folds
    /// addresses with `device.wrap`): what results report.
    pub fn fit_used(&self) -> Fit {
        match &self.array {
            Some(_) => self.fit(),
            None if self.device.wrap => Fit::Wrap,
            None => Fit::None,
        }
    }
}

/// A cache size written as a share of the storage used (`"1%used"`: the
/// stack's address space, the volumes laid end to end); `None`: another form.
pub fn used_share(text: &str) -> Option<Result<f64>> {
    let t = text.trim();
    let num = t.strip_suffix("%used")?;
    Some(match num.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(Error::config(format!(
            "bad cache size `{t}`: a share of the storage used is a number in (0, 100] before `%used`"
        ))),
    })
}

/// A serde path as `--set` writes it: `cache.0.size`.
fn dotted(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut parts = Vec::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => parts.push(index.to_string()),
            Segment::Map { key } => parts.push(key.clone()),
            Segment::Enum { variant } => parts.push(variant.clone()),
            Segment::Unknown => {}
        }
    }
    parts.join(".")
}

/// A `--set` value: TOML when it parses as a TOML value (`5`, `[0, 1]`,
/// `true`, `"x"`), else the text itself as a string (`10%`, `lru`, `64MiB`).
fn set_value(text: &str) -> Value {
    let t = text.trim();
    match toml::from_str::<toml::Table>(&format!("v = {t}")) {
        Ok(mut tbl) => tbl.remove("v").unwrap_or_else(|| Value::String(t.to_string())),
        Err(_) => Value::String(t.to_string()),
    }
}

/// Apply one override to the tree: `KEY=VALUE` sets (`apply_set`), `-KEY`
/// removes (`apply_unset`).
pub fn apply_override(tree: &mut Value, text: &str) -> Result<()> {
    match text.strip_prefix('-') {
        Some(key) => apply_unset(tree, key),
        None => apply_set(tree, text),
    }
}

/// Remove a key, a section or a list entry (`cache.1`: later entries move
/// up) from the tree. A key that is not there is an error (a typo would
/// otherwise remove nothing without a word).
pub fn apply_unset(tree: &mut Value, key: &str) -> Result<()> {
    let key = key.trim();
    let parts: Vec<&str> = key.split('.').collect();
    if key.contains('=') || parts.iter().any(|p| p.is_empty()) {
        return Err(Error::config(format!(
            "bad key `{key}` (expected a dotted key, e.g. array.rebuild)"
        )));
    }
    let missing = || Error::config(format!("`{key}` is not in the stack: nothing to remove"));
    let (last, path) = parts.split_last().expect("split gives one part at least");
    let mut node = tree;
    for part in path {
        node = match node {
            Value::Table(t) => t.get_mut(*part).ok_or_else(missing)?,
            Value::Array(a) => part
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get_mut(i))
                .ok_or_else(missing)?,
            _ => return Err(missing()),
        };
    }
    match node {
        Value::Table(t) => t.remove(*last).map(|_| ()).ok_or_else(missing),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a.remove(i);
                Ok(())
            }
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// Apply one `KEY=VALUE` override to the tree. Numeric path parts index
/// arrays of tables (`cache.0.size`); index = length appends a new table
/// (`cache.1.policy=lru` adds a second layer).
pub fn apply_set(tree: &mut Value, assignment: &str) -> Result<()> {
    let (key, value) = assignment
        .split_once('=')
        .ok_or_else(|| Error::config("expected KEY=VALUE (e.g. cache.0.size=10%)"))?;
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(Error::config(format!("bad key `{}`", key.trim())));
    }
    let mut node = tree;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let next_is_index = !last && parts[i + 1].parse::<usize>().is_ok();
        node = match node {
            Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), set_value(value));
                    return Ok(());
                }
                t.entry(part.to_string()).or_insert_with(|| {
                    if next_is_index {
                        Value::Array(Vec::new())
                    } else {
                        Value::Table(toml::Table::new())
                    }
                })
            }
            Value::Array(a) => {
                let idx: usize = part
                    .parse()
                    .map_err(|_| Error::config(format!("`{part}` in `{}` is not an index", key.trim())))?;
                if idx > a.len() {
                    return Err(Error::config(format!(
                        "index {idx} in `{}`: the list has {} entries (use {} to add one)",
                        key.trim(),
                        a.len(),
                        a.len()
                    )));
                }
                if idx == a.len() {
                    a.push(Value::Table(toml::Table::new()));
                }
                if last {
                    a[idx] = set_value(value);
                    return Ok(());
                }
                &mut a[idx]
            }
            _ => {
                return Err(Error::config(format!(
                    "`{}` is not a table: cannot set `{}` in it",
                    parts[..i].join("."),
                    key.trim()
                )))
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, sets: &[&str]) -> Result<StackSpec> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        StackSpec::from_str_with(
            text,
            &sets,
            Origin {
                file: "s.toml".into(),
                dir: PathBuf::new(),
            },
        )
    }

    const BASE: &str = "[[cache]]\npolicy = \"lru\"\nsize = \"5%\"\n\n[array]\nraid = 5\ndisks = 5\nfailed = [0]\n\n[device]\nmodel = \"const:1\"\n";

    #[test]
    fn a_whole_file_with_defaults() {
        let s = parse(BASE, &[]).unwrap();
        assert_eq!(s.cache[0].write, WritePolicy::Back);
        assert!(s.cache[0].merge_misses);
        assert_eq!(s.replay.mode, "open");
        assert_eq!(s.block_size(), 4096);
        assert_eq!(s.tenant_map, TenantMap::Concat);
        let a = s.array.unwrap();
        assert_eq!(a.chunk, NumOrStr::Str("64KiB".into()));
        assert_eq!(a.failed, vec![0]);
        assert!(a.rebuild.is_none());
    }

    #[test]
    fn overrides_reach_lists_and_nested_tables() {
        let s = parse(
            BASE,
            &[
                "cache.0.size=10%",
                "array.failed=[1]",
                "cache.1.policy=lfu",
                "cache.1.size=100",
                "array.rebuild.at=5",
                "replay.mode=closed",
            ],
        )
        .unwrap();
        assert_eq!(s.cache[0].size, NumOrStr::Str("10%".into()));
        assert_eq!(s.cache[1].policy, "lfu");
        assert_eq!(s.cache[1].size, NumOrStr::Int(100));
        assert_eq!(s.array.as_ref().unwrap().failed, vec![1]);
        assert_eq!(s.array.as_ref().unwrap().rebuild.as_ref().unwrap().at, 5.0);
        assert_eq!(s.replay.mode, "closed");
    }

    fn err(text: &str, sets: &[&str]) -> String {
        parse(text, sets).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let e = err(BASE, &["cache.0.polcy=lru"]);
        assert!(e.starts_with("s.toml: key `cache.0.polcy`: unknown field"), "{e}");
        let e = err(BASE, &["array.disks=\"five\""]);
        assert!(e.starts_with("s.toml: key `array.disks`: invalid type"), "{e}");
        let e = err(BASE, &["array.failed=[7]"]);
        assert_eq!(
            e,
            "s.toml: key `array.failed`: disk 7 does not exist: the array has disks 0..4"
        );
        let e = err(BASE, &["array.failed=[0, 1]"]);
        assert!(
            e.starts_with("s.toml: key `array.failed`: raid5 of 5 disks survives 1 failure(s), 2 failed"),
            "{e}"
        );
        let e = err(BASE, &["array.disks=0"]);
        assert!(e.starts_with("s.toml: key `array.disks`:"), "{e}");
        let e = err(BASE, &["cache.0.policy=lru3"]);
        assert!(
            e.starts_with("s.toml: key `cache.0.policy`: unknown policy `lru3`; valid: lru"),
            "{e}"
        );
        let e = err(BASE, &["cache.0.size=0"]);
        assert!(e.starts_with("s.toml: key `cache.0.size`"), "{e}");
        let e = err(BASE, &["cache.0.size=150%"]);
        assert!(e.starts_with("s.toml: key `cache.0.size`"), "{e}");
        let e = err(BASE, &["cache.0.write=sideways"]);
        assert!(
            e.starts_with("s.toml: key `cache.0.write`: unknown variant `sideways`"),
            "{e}"
        );
        let e = err(BASE, &["replay.mode=warp"]);
        assert!(
            e.starts_with("s.toml: key `replay.mode`: unknown replay discipline"),
            "{e}"
        );
        let e = err(BASE, &["device.scheduler=elevator"]);
        assert!(e.starts_with("s.toml: key `device.scheduler`"), "{e}");
        let e = err(BASE, &["device.satf_window=0"]);
        assert!(
            e.starts_with("s.toml: key `device.satf_window`: must be at least 1"),
            "{e}"
        );
        let e = err(BASE, &["array.raid=0", "array.rebuild.at=0"]);
        assert!(e.contains("array.failed") || e.contains("array.rebuild"), "{e}");
        let e = err("[array]\nraid = 5\ndisks = 4\n", &[]);
        assert!(e.contains("device"), "{e}");
        let e = err(BASE, &["cache.3.policy=lru"]);
        assert!(
            e.contains("--set cache.3.policy=lru") && e.contains("the list has 1 entries"),
            "{e}"
        );
        let e = err("[device\nmodel=1", &[]);
        assert!(e.starts_with("s.toml: line 1:"), "{e}");
    }

    const REBUILDING: &str =
        "[array]\nraid = 5\ndisks = 5\nfailed = [0]\n\n[array.rebuild]\nat = 0\n\n[device]\nmodel = \"const:1\"\n";

    #[test]
    fn unset_drops_a_section_a_key_or_a_list_entry() {
        assert!(parse(REBUILDING, &[]).unwrap().array.unwrap().rebuild.is_some());
        let s = parse(REBUILDING, &["-array.rebuild"]).unwrap();
        let a = s.array.unwrap();
        assert!(a.rebuild.is_none(), "--unset array.rebuild leaves the array degraded");
        assert_eq!(a.failed, vec![0]);
        // A key back to its default; an entry of a list.
        let s = parse(BASE, &["-array.failed"]).unwrap();
        assert!(s.array.unwrap().failed.is_empty());
        let s = parse(BASE, &["cache.1.policy=lfu", "cache.1.size=100", "-cache.0"]).unwrap();
        assert_eq!(s.cache.len(), 1);
        assert_eq!(s.cache[0].policy, "lfu");
        // Overrides apply in order: set after unset brings a section back.
        let s = parse(REBUILDING, &["-array.rebuild", "array.rebuild.at=7"]).unwrap();
        assert_eq!(s.array.unwrap().rebuild.unwrap().at, 7.0);
    }

    #[test]
    fn unset_of_what_is_not_there_is_an_error() {
        let e = err(REBUILDING, &["-array.rebuidl"]);
        assert_eq!(
            e,
            "s.toml: --unset array.rebuidl: `array.rebuidl` is not in the stack: nothing to remove"
        );
        let e = err(BASE, &["-cache.4"]);
        assert!(e.contains("--unset cache.4") && e.contains("nothing to remove"), "{e}");
        let e = err(BASE, &["-array..x"]);
        assert!(e.contains("bad key"), "{e}");
    }

    #[test]
    fn an_empty_rebuild_table_is_refused_not_a_silent_rebuild() {
        // `--set 'array.rebuild={}'` used to start an MD rebuild with every default.
        let e = err(BASE, &["array.rebuild={}"]);
        assert!(
            e.starts_with("s.toml: key `array.rebuild`: empty table") && e.contains("--unset array.rebuild"),
            "{e}"
        );
        let e = err(&BASE.replace("[device]", "[array.rebuild]\n\n[device]"), &[]);
        assert!(e.contains("key `array.rebuild`: empty table"), "{e}");
        // Any key says a rebuild is meant.
        assert!(parse(BASE, &["array.rebuild.at=0"])
            .unwrap()
            .array
            .unwrap()
            .rebuild
            .is_some());
    }

    #[test]
    fn set_values_are_toml_or_text() {
        assert_eq!(set_value("5"), Value::Integer(5));
        assert_eq!(set_value("lru"), Value::String("lru".into()));
        assert_eq!(set_value("10%"), Value::String("10%".into()));
        assert_eq!(
            set_value("[0, 2]"),
            Value::Array(vec![Value::Integer(0), Value::Integer(2)])
        );
        assert_eq!(set_value("\"a b\""), Value::String("a b".into()));
        assert_eq!(set_value("true"), Value::Boolean(true));
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Mangled stack files and overrides give an error or a spec, never a panic.
        #[test]
        fn mangled_files_never_panic(
            cut in 0usize..BASE.len(),
            junk in "[ -~\n]{0,40}",
            key in prop::sample::select(vec!["cache.0.size", "array.disks", "array.failed", "replay.mode",
                "cache.0.policy", "array.rebuild.at", "device.model", "cache.9.x", "block_size", "x.y.z"]),
            value in "[ -~]{0,12}",
        ) {
            let text = format!("{}{}{}", &BASE[..cut], junk, &BASE[cut..]);
            let _ = parse(&text, &[]);
            let set = format!("{key}={value}");
            let _ = parse(BASE, &[set.as_str()]);
        }
    }

    #[test]
    fn relative_paths_follow_the_file() {
        let o = Origin {
            file: "x/s.toml".into(),
            dir: PathBuf::from("x"),
        };
        assert_eq!(o.model("const:3"), "const:3");
        assert_eq!(o.model("d.toml"), "x/d.toml");
        assert_eq!(o.path("/abs/t"), "/abs/t");
    }
}

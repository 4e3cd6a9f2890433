//! Device models for the timed executor: mechanical disks (from DiskSim
//! parameter files or native TOML specs) and SSDs.
//!
//! A model answers one question: how long does this operation take when it
//! starts now, given everything the device did before? The queue and its
//! scheduler sit in front (see `timed`), and ask `positioning_estimate` to
//! order requests (SSTF, SATF).

use crate::array::plan::DiskOpKind;

/// One request at the device: `sectors` 512-byte sectors from `lbn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevRequest {
    pub kind: DiskOpKind,
    pub lbn: u64,
    pub sectors: u32,
}

/// A device's timing model. Times are in milliseconds.
pub trait DeviceModel: Send {
    /// Serve `req` starting at `now_ms`; returns the service time in ms and
    /// advances the device state (head position, on-disk cache).
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64;
    /// Estimated positioning time (seek + rotation) if `req` started at
    /// `now_ms`, without changing state; used by SATF/SPTF schedulers.
    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64;
    /// Cylinder of a logical block (SSTF / C-LOOK order); 0 for SSDs.
    fn cylinder(&self, lbn: u64) -> u64;
    /// Capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;
    /// Whether the last `service` was answered from the on-disk cache
    /// (without waiting for the media). Devices without a cache say no.
    fn last_hit(&self) -> bool {
        false
    }
    /// Serve `req` as the device queue hands it over (`d`: its class and
    /// arrival). Models that read opportunistically need both; the others
    /// serve it as [`service`](Self::service) does.
    fn serve(&mut self, now_ms: f64, req: &DevRequest, _d: &Dispatch) -> f64 {
        self.service(now_ms, req)
    }
    /// Where the time of the last service went (the rest of it is overhead);
    /// `None`: the model does not say (all of it counts as overhead).
    fn last_split(&self) -> Option<TimeSplit> {
        None
    }
    /// Read opportunistically from now on (see [`Opportunism`]); false: the
    /// model cannot.
    fn set_opportunism(&mut self, _o: Opportunism) -> bool {
        false
    }
    /// The device idles until `until_ms`: bring opportunistic reading up to
    /// then (it goes on afterwards unless a request arrives).
    fn advance_idle(&mut self, _until_ms: f64) {}
    /// Hand over the sectors read opportunistically so far (each run with
    /// the time it was all read, which may lie after the current time for
    /// a service in progress).
    fn take_free(&mut self, _out: &mut Vec<FreeRun>) {}
}

/// How a request reaches the device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dispatch {
    /// A user request's own operation, not background work (a destage, a
    /// prefetch, the rebuild) whatever its queue class.
    pub demand: bool,
    /// When the request arrived at the device (at or before its service starts).
    pub arrived_ms: f64,
}

/// Opportunistic reading (Hsu & Smith §4 "Opportunistic prefetch"): what a
/// drive reads with time it would otherwise spend idle or waiting for the
/// platter to turn. The sectors read are handed to the host
/// ([`DeviceModel::take_free`]); the policy (what to keep, where) is the
/// host cache's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Opportunism {
    /// Preemptible read-ahead: after a read, keep reading sequentially while
    /// no request arrives, until this many sectors past the end of the last
    /// demand read have been read (counting the host's own read-ahead of
    /// that read); 0: off.
    pub readahead_sectors: u64,
    /// Read-any-free-blocks: sectors of the target track that pass under the
    /// head while it waits for the first requested sector are read too.
    pub read_any_free: bool,
    /// Just-in-time seek: a read that preempts read-ahead lets the drive go
    /// on reading until the latest departure that still reaches the target
    /// when it comes round (the read starts its transfer exactly when it
    /// would have without the delay).
    pub jit_seek: bool,
}

/// `sectors` sectors from `lbn`, read opportunistically, all read by `at_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreeRun {
    pub lbn: u64,
    pub sectors: u64,
    pub at_ms: f64,
}

/// Where the time of one service went (ms). The overhead (command
/// processing, bus, waiting for the mechanism) is the rest of the service time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeSplit {
    /// Moving the arm (seeks, head switches, write settling).
    pub seek_ms: f64,
    /// Waiting for the first sector of a track access to come round.
    pub rotation_ms: f64,
    /// Media transfer.
    pub transfer_ms: f64,
}

pub mod disksim_cachedev;
pub mod disksim_cachemem;
pub mod disksim_load;
pub mod disksim_logorg;
pub mod disksim_params;
pub mod disksim_simpledisk;
pub mod disksim_system;
pub mod hdd;
pub mod scale;
pub mod spec;
pub mod ssd;
pub mod toy;
pub mod validate;

use std::path::Path;

use crate::error::{Error, Result};

/// A device model from a spec as users write it: `const:MS` or `toy:...`
/// (see [`toy`]), or a drive file (`.parv`, `.diskspecs`, `.toml`).
pub fn load_model(spec: &str) -> Result<Box<dyn DeviceModel>> {
    if let Some(t) = toy::ToyDisk::parse(spec) {
        return Ok(Box::new(t?));
    }
    if !Path::new(spec).exists() {
        return Err(Error::io(spec, "no such file"));
    }
    load(Path::new(spec))
}

/// Load a device model, chosen by extension: `.parv` / `.diskspecs`
/// (DiskSim parameters, the first disk defined) or `.toml` (native spec).
pub fn load(path: &Path) -> Result<Box<dyn DeviceModel>> {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "parv" | "diskspecs" => Ok(Box::new(disksim_load::load_parv(path)?)),
        "toml" => spec::load_spec(path),
        other => Err(Error::unknown(
            "disk model file extension",
            other,
            &["parv", "diskspecs", "toml"],
        )),
    }
}

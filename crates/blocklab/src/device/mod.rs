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
}

pub mod disksim_load;
pub mod disksim_params;
pub mod hdd;
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

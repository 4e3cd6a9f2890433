//! A DiskSim parameter file as a *system*: the disks it instantiates, in
//! DiskSim's device order, and how the trace's devices reach them.
//!
//! DiskSim numbers devices in the order they are instantiated. A trace
//! request names a device (`devno`); the `disksim_iosim` block's
//! `I/O Mappings` (`disksim_iomap` entries) rewrite some of them: `tracedev`
//! → the disk `simdev`, its block number scaled by `locScale` (512 leaves it
//! unchanged, larger multiplies it by `locScale / 512`, smaller divides it by
//! `512 / locScale`, which must divide it), its size multiplied by
//! `sizeScale`, then `offset` sectors added (DiskSim's `io_map_trace_request`).
//! A device the iomap does not name goes to the disk of that number, as in
//! DiskSim, where the devno is kept.
//!
//! Only what this laboratory models is accepted: disks (`disksim_disk`,
//! `disksim_simpledisk`), pass-through controllers (type 1), buses (their
//! transfer times), synchronised spindles, and logical organisations that
//! leave requests where they are (Parts, Asis, Noredun) or are arrays MD
//! lays out the same way (`disksim_logorg`). Anything else is an error naming the block and its key, so a
//! file is never run as something other than what it describes. A
//! `disksim_synthio` workload is not run: with a trace, DiskSim ignores it
//! too (`synthgen` 0).

use std::collections::HashMap;
use std::path::Path;

use super::disksim_cachedev::{CacheDev, CacheDevParams};
use super::disksim_cachemem::{CacheMem, CacheMemParams};
use super::disksim_load::{build_disk, bus_times};
use super::disksim_logorg::{logorgs, Logorg};
use super::disksim_params::{parse_file, Block, Param, ParamFile, Value};
use super::disksim_simpledisk::SimpleDisk;
use super::hdd::Hdd;
use super::DeviceModel;
use crate::error::{Error, Location, Result};

/// One `disksim_iomap` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoMap {
    pub tracedev: u32,
    /// Index of the disk (DiskSim's device number).
    pub disk: usize,
    /// `locScale`: bytes per trace location unit (512: sectors).
    pub loc_scale: u64,
    /// `sizeScale`: multiplies the request's sector count.
    pub size_scale: u64,
    /// `offset`: sectors added to the (scaled) location.
    pub offset: u64,
}

/// How trace devices reach the disks of a system (cheap to clone).
#[derive(Debug, Clone, PartialEq)]
pub struct Router {
    file: String,
    maps: HashMap<u32, IoMap>,
    disks: usize,
}

/// A trace request routed to a disk: `sectors` sectors from `lbn` of `disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    pub disk: usize,
    pub lbn: u64,
    pub sectors: u64,
}

impl Router {
    /// Where `bcount` sectors from `blkno` of trace device `devno` go.
    pub fn route(&self, devno: u32, blkno: u64, bcount: u64) -> Result<Routed> {
        let Some(m) = self.maps.get(&devno) else {
            if (devno as usize) < self.disks {
                return Ok(Routed {
                    disk: devno as usize,
                    lbn: blkno,
                    sectors: bcount,
                });
            }
            return Err(Error::config(format!(
                "trace device {devno}: {} has no iomap entry for it and no disk {devno} (it defines {} disk{})",
                self.file,
                self.disks,
                if self.disks == 1 { "" } else { "s" }
            )));
        };
        let lbn = if m.loc_scale >= 512 {
            blkno.checked_mul(m.loc_scale / 512)
        } else {
            let div = 512 / m.loc_scale;
            if !blkno.is_multiple_of(div) {
                return Err(Error::config(format!(
                    "trace device {devno}: block {blkno} is not a multiple of {div} ({}: iomap locScale {})",
                    self.file, m.loc_scale
                )));
            }
            Some(blkno / div)
        };
        let too_far = || Error::config(format!("trace device {devno}: block {blkno} overflows when mapped"));
        let lbn = lbn.and_then(|l| l.checked_add(m.offset)).ok_or_else(too_far)?;
        let sectors = bcount.checked_mul(m.size_scale).ok_or_else(too_far)?;
        Ok(Routed {
            disk: m.disk,
            lbn,
            sectors,
        })
    }

    pub fn disks(&self) -> usize {
        self.disks
    }

    /// Whether the iomap names trace device `devno`.
    pub fn maps_device(&self, devno: u32) -> bool {
        self.maps.contains_key(&devno)
    }

    /// Whether the file has an iomap.
    pub fn has_maps(&self) -> bool {
        !self.maps.is_empty()
    }
}

/// One device of a system: a mechanical disk or DiskSim's simple disk.
pub enum Drive {
    Hdd(Box<Hdd>),
    Simple(SimpleDisk),
    /// A disk behind a smart controller's memory cache.
    Cached(CacheMem),
    /// A disk cached on another disk by a smart controller.
    CachedOn(CacheDev),
    /// The cache device of a `CachedOn` disk: it takes no requests of its own.
    CacheDevice,
}

impl Drive {
    pub fn capacity_sectors(&self) -> u64 {
        match self {
            Drive::Hdd(d) => d.capacity_sectors(),
            Drive::Simple(d) => d.capacity_sectors(),
            Drive::Cached(d) => d.capacity_sectors(),
            Drive::CachedOn(d) => d.capacity_sectors(),
            Drive::CacheDevice => 0,
        }
    }

    pub fn into_model(self) -> Box<dyn DeviceModel> {
        match self {
            Drive::Hdd(d) => d,
            Drive::Simple(d) => Box::new(d),
            Drive::Cached(d) => Box::new(d),
            Drive::CachedOn(d) => Box::new(d),
            Drive::CacheDevice => Box::new(SimpleDisk {
                blocks: 0,
                access_ms: 0.0,
                overhead_ms: 0.0,
                bus_latency_ms: 0.0,
                sector_read_ms: 0.0,
                sector_write_ms: 0.0,
                never_disconnect: false,
            }),
        }
    }
}

/// The disks of a parameter file (in device order) and its iomap.
pub struct DiskSystem {
    /// Each disk's instance name (`disk0`, `quantum`, `sd0`, ...) and model.
    pub disks: Vec<(String, Drive)>,
    pub router: Router,
    /// The file's logorgs in order (DiskSim's `sysorgs`); `Some`: an
    /// Array-addressed one, the logical device of that number.
    pub orgs: Vec<Option<Logorg>>,
    /// The device driver's `Scheduling policy` and where it was written.
    driver_policy: Option<(u32, String, u64)>,
}

/// DiskSim's scheduling policies (`disksim_ioqueue.h`) this laboratory
/// has: FCFS; CYCLE_LBN / CYCLE_CYL (C-LOOK); SSTF_LBN / SSTF_CYL (SSTF,
/// by cylinder here). The disks of these files take one request at a time
/// (`Max queue length = 1`), so the driver's queue is where requests wait
/// and its policy orders them.
fn scheduler_of(policy: u32) -> Option<&'static str> {
    match policy {
        1 => Some("fcfs"),
        3 | 6 => Some("clook"),
        4 | 7 => Some("sstf"),
        _ => None,
    }
}

impl DiskSystem {
    /// Load `path` (a `.parv`, or a `.diskspecs` defining a disk type).
    pub fn load(path: &Path) -> Result<DiskSystem> {
        let pf = parse_file(path)?;
        let shown = path.display().to_string();
        check_modelled(&pf)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut names: Vec<(String, &Block)> = Vec::new();
        for inst in &pf.instances {
            let Some(b) = pf.block(&inst.type_name) else { continue };
            match b.type_name.as_str() {
                "disksim_disk" | "disksim_simpledisk" => names.extend(inst.names.iter().map(|n| (n.clone(), b))),
                "disksim_ssd" | "disksim_mems" => {
                    return Err(Error::parse(
                        &b.file,
                        Location::Line(b.line),
                        &b.type_name,
                        format!(
                            "`{}` ({}) is not modelled: only `disksim_disk` and `disksim_simpledisk` drives are",
                            b.name.as_deref().unwrap_or(""),
                            inst.names.join(", ")
                        ),
                    ))
                }
                _ => {}
            }
        }
        // A file of disk types alone (`.diskspecs`): its first disk.
        if names.is_empty() {
            let b = pf
                .blocks_of("disksim_disk")
                .next()
                .ok_or_else(|| Error::parse(&shown, Location::Whole, "disksim_disk", "no disk defined"))?;
            names.push((b.name.clone().unwrap_or_default(), b));
        }
        let mut disks = Vec::with_capacity(names.len());
        for (name, b) in &names {
            let drive = if b.type_name == "disksim_simpledisk" {
                let (br, bw) = bus_times(&pf, b)?;
                Drive::Simple(SimpleDisk::from_block(b, br, bw)?)
            } else {
                Drive::Hdd(Box::new(build_disk(&pf, b, dir)?))
            };
            disks.push((name.clone(), drive));
        }
        match controller_cache(&pf)? {
            Some(ControllerCache::Mem(cache)) => {
                disks = disks
                    .into_iter()
                    .map(|(n, d)| (n, Drive::Cached(CacheMem::new(d.into_model(), cache))))
                    .collect();
            }
            Some(ControllerCache::Dev(p, b)) => {
                let find = |key: &str, name: &str| {
                    disks.iter().position(|(n, _)| n == name).ok_or_else(|| {
                        let p = b.get(key).expect("read by CacheDevParams");
                        p.err(format!("`{name}` is not an instantiated disk"))
                    })
                };
                let (real, cache) = (
                    find("Cached device", &p.cached_device)?,
                    find("Cache device", &p.cache_device)?,
                );
                if real == cache {
                    return Err(b
                        .get("Cache device")
                        .expect("read")
                        .err("the cache device is the cached device"));
                }
                let take = |d: &mut Drive| std::mem::replace(d, Drive::CacheDevice).into_model();
                let c = take(&mut disks[cache].1);
                let r = take(&mut disks[real].1);
                disks[real].1 = Drive::CachedOn(CacheDev::new(r, c, &p));
            }
            None => {}
        }
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, (n, _))| (n.as_str(), i)).collect();
        let maps = iomaps(&pf, &index)?;
        let sectors: Vec<u64> = disks.iter().map(|(_, d)| d.capacity_sectors()).collect();
        let orgs = logorgs(&pf, &index, &sectors)?;
        let driver_policy = driver_policy(&pf)?;
        Ok(DiskSystem {
            driver_policy,
            orgs,
            router: Router {
                file: shown,
                maps,
                disks: disks.len(),
            },
            disks,
        })
    }

    /// The scheduler of the file's device driver (None: the file has none).
    pub fn scheduler(&self) -> Result<Option<&'static str>> {
        let Some((policy, file, line)) = &self.driver_policy else {
            return Ok(None);
        };
        match scheduler_of(*policy) {
            Some(s) => Ok(Some(s)),
            None => Err(Error::parse(
                file,
                Location::Line(*line),
                "Scheduling policy",
                format!(
                    "the device driver's policy {policy} is not modelled (1 FCFS, 3 / 6 C-LOOK, 4 / 7 SSTF); \
                     choose one with --scheduler"
                ),
            )),
        }
    }

    /// One mechanical disk, no iomap and no array: a drive model rather than a system.
    pub fn is_single(&self) -> bool {
        self.disks.len() == 1
            && self.router.maps.is_empty()
            && matches!(self.disks[0].1, Drive::Hdd(_))
            && self.orgs.iter().all(Option::is_none)
    }

    /// Whether any logorg is an array (a logical device over several disks).
    pub fn has_arrays(&self) -> bool {
        self.orgs.iter().any(Option::is_some)
    }
}

/// Whether `spec` (a model as users write it) is a DiskSim file that
/// describes more than one drive (several disks, or an iomap).
pub fn is_system(spec: &str) -> Result<bool> {
    let p = Path::new(spec);
    if p.extension().and_then(|e| e.to_str()) != Some("parv") || !p.exists() {
        return Ok(false);
    }
    Ok(!DiskSystem::load(p)?.is_single())
}

/// Blocks and keys whose behaviour is not modelled: an error each.
fn check_modelled(pf: &ParamFile) -> Result<()> {
    let used = |b: &Block| {
        let name = b.name.as_deref().unwrap_or("");
        pf.instances.iter().any(|i| i.type_name == name)
    };
    let unmodelled = |b: &Block, key: &str, what: String| -> Error { b.key_error(key, what) };
    // The most telling first: how requests are laid out, then the controllers.
    let order = ["disksim_ctlr", "disksim_iodriver", "disksim_iosim", "disksim_syncset"];
    for b in order.iter().flat_map(|t| pf.blocks_of(t)) {
        match b.type_name.as_str() {
            "disksim_ctlr" if used(b) => {
                let t = b.num_or("type", 1.0)?;
                if t == 3.0 {
                    smart_controller(pf, b)?;
                } else if t != 1.0 {
                    return Err(unmodelled(
                        b,
                        "type",
                        format!(
                            "controller type {t} is not modelled; only 1 (pass-through) and 3 (smart, with a \
                             `disksim_cachemem` or `disksim_cachedev` cache)"
                        ),
                    ));
                } else if b.get("Cache").is_some() {
                    return Err(unmodelled(
                        b,
                        "Cache",
                        "only a smart controller (type 3) has a cache".into(),
                    ));
                }
            }
            "disksim_iodriver" if used(b) => {
                let t = b.num_or("type", 1.0)?;
                if t != 1.0 {
                    return Err(unmodelled(
                        b,
                        "type",
                        format!("device driver type {t} is not modelled; only 1"),
                    ));
                }
                if b.num_or("Constant access time", 0.0)? != 0.0 {
                    return Err(unmodelled(
                        b,
                        "Constant access time",
                        "a driver-level constant access time is not modelled; only 0".into(),
                    ));
                }
            }
            // Synchronised spindles: every disk here turns in phase with
            // the clock (its angle is time / period), so disks of one speed
            // already are; logorgs are read by `disksim_logorg`.
            "disksim_syncset" => {}
            "disksim_iosim" => {
                let s = b.num_or("I/O Trace Time Scale", 1.0)?;
                if s != 1.0 {
                    return Err(unmodelled(
                        b,
                        "I/O Trace Time Scale",
                        format!("{s}: scaled trace times are not modelled here; use --speedup"),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The controllers the file instantiates: (block, instance names).
fn controllers(pf: &ParamFile) -> Vec<(&Block, &[String])> {
    pf.instances
        .iter()
        .filter_map(|i| {
            let b = pf.block(&i.type_name)?;
            (b.type_name == "disksim_ctlr").then_some((b, i.names.as_slice()))
        })
        .collect()
}

/// A smart controller (type 3) is modelled as a memory cache in front of
/// its disks that takes one request at a time: the file's only controller
/// (its disks are all the file's), `Maximum queue length = 0`, and a
/// `disksim_cachemem` or `disksim_cachedev` cache. Its parameters, or an
/// error naming the key.
fn smart_controller<'a>(pf: &ParamFile, b: &'a Block) -> Result<ControllerCache<'a>> {
    let err = |key: &str, what: &str| b.key_error(key, what);
    let n: usize = controllers(pf).iter().map(|(_, names)| names.len()).sum();
    if n != 1 {
        return Err(err(
            "type",
            "a smart controller is modelled only as the file's one controller (the topology is not read)",
        ));
    }
    if b.num_or("Maximum queue length", 0.0)? != 0.0 {
        return Err(err(
            "Maximum queue length",
            "only 0 is modelled (the driver hands the controller one request at a time)",
        ));
    }
    if let Some(p) = super::disksim_cachemem::of_controller(b)? {
        return Ok(ControllerCache::Mem(p));
    }
    match super::disksim_cachedev::of_controller(b)? {
        Some((p, block)) => Ok(ControllerCache::Dev(p, block)),
        None => Err(err(
            "Cache",
            "a smart controller needs a `disksim_cachemem` or `disksim_cachedev` cache here",
        )),
    }
}

/// A smart controller's cache: memory, or a cache device (with its block).
enum ControllerCache<'a> {
    Mem(CacheMemParams),
    Dev(CacheDevParams, &'a Block),
}

/// The cache of the file's smart controller, if it has one.
fn controller_cache(pf: &ParamFile) -> Result<Option<ControllerCache<'_>>> {
    for (b, _) in controllers(pf) {
        if b.num_or("type", 1.0)? == 3.0 {
            return smart_controller(pf, b).map(Some);
        }
    }
    Ok(None)
}

/// The instantiated device driver's `Scheduler` `Scheduling policy`.
fn driver_policy(pf: &ParamFile) -> Result<Option<(u32, String, u64)>> {
    for inst in &pf.instances {
        let Some(d) = pf.block(&inst.type_name) else { continue };
        if d.type_name != "disksim_iodriver" {
            continue;
        }
        let Some(sched) = d.get("Scheduler") else {
            return Ok(None);
        };
        let Value::Block(q) = &sched.value else {
            return Err(sched.err("expected a `disksim_ioqueue { ... }` block"));
        };
        let Some(p) = q.get("Scheduling policy") else {
            return Ok(None);
        };
        let n = p.num()?;
        return Ok(Some((n as u32, p.file.clone(), p.line)));
    }
    Ok(None)
}

fn word(p: &Param) -> Result<String> {
    match &p.value {
        Value::Str(s) => Ok(s.clone()),
        Value::Num(n) => Ok(n.to_string()),
        _ => Err(p.err("expected a word")),
    }
}

/// An integer parameter; DiskSim reads them with C's base prefixes (`0x0e`).
fn int(b: &Block, key: &str, default: Option<u64>) -> Result<u64> {
    let Some(p) = b.get(key) else {
        return default.ok_or_else(|| {
            Error::parse(
                &b.file,
                Location::Line(b.line),
                key,
                format!("missing in `{}` block", b.type_name),
            )
        });
    };
    match &p.value {
        Value::Num(n) if *n >= 0.0 && n.fract() == 0.0 => Ok(*n as u64),
        Value::Str(s) => s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| p.err(format!("`{s}` is not a non-negative integer"))),
        _ => Err(p.err("expected a non-negative integer")),
    }
}

/// The `I/O Mappings` of the file's `disksim_iosim` block(s).
fn iomaps(pf: &ParamFile, disks: &HashMap<&str, usize>) -> Result<HashMap<u32, IoMap>> {
    let mut maps = HashMap::new();
    for iosim in pf.blocks_of("disksim_iosim") {
        let Some(list) = iosim.get("I/O Mappings") else {
            continue;
        };
        let Value::List(entries) = &list.value else {
            return Err(list.err("expected a `[ ... ]` list of `disksim_iomap { ... }`"));
        };
        for e in entries {
            let Value::Block(m) = e else {
                return Err(list.err("expected `disksim_iomap { ... }` entries"));
            };
            let tracedev = int(m, "tracedev", None)?;
            let tracedev = u32::try_from(tracedev).map_err(|_| {
                m.get("tracedev")
                    .expect("read above")
                    .err("larger than a device number")
            })?;
            let simdev = m.get("simdev").ok_or_else(|| {
                Error::parse(
                    &m.file,
                    Location::Line(m.line),
                    "simdev",
                    "missing in `disksim_iomap` block",
                )
            })?;
            let name = word(simdev)?;
            let disk = *disks
                .get(name.as_str())
                .ok_or_else(|| simdev.err(format!("`{name}` is not an instantiated disk")))?;
            let loc_scale = int(m, "locScale", None)?;
            if loc_scale == 0 || (512 % loc_scale != 0 && loc_scale % 512 != 0) {
                return Err(m
                    .get("locScale")
                    .expect("read above")
                    .err(format!("{loc_scale}: must divide 512 or be a multiple of it")));
            }
            let size_scale = int(m, "sizeScale", None)?;
            if size_scale == 0 {
                return Err(m.get("sizeScale").expect("read above").err("must be positive"));
            }
            let offset = int(m, "offset", Some(0))?;
            let entry = IoMap {
                tracedev,
                disk,
                loc_scale,
                size_scale,
                offset,
            };
            if maps.insert(tracedev, entry).is_some() {
                return Err(m
                    .get("tracedev")
                    .expect("read above")
                    .err(format!("trace device {tracedev} is mapped twice")));
            }
        }
    }
    Ok(maps)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A directory holding a tiny drive (1 surface, 10 cylinders of 10
    /// sectors, 6000 rpm: 1 ms a sector, no cache, no overheads) and the
    /// system file `parv` around it; returns the `.parv` path.
    pub(crate) fn tiny_system(tag: &str, parv: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("blocklab-dssys-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.seek"), "Seek distances measured: 2\n1, 3.0\n9, 7.0\n").unwrap();
        std::fs::write(
            dir.join("x.model"),
            "dm_disk M {\n Number of data surfaces = 1,\n Number of cylinders = 10,\n Block count = 100,\n\
             Layout Model = dm_layout_g1 { Sparing scheme used = 0, Zones = [ z { First cylinder number = 0,\n\
             Last cylinder number = 9, Blocks per track = 10 } ] },\n\
             Mechanical Model = dm_mech_g1 {\n Seek type = extracted,\n Full seek curve = x.seek,\n\
             Rotation speed (in rpms) = 6000 }\n}\n",
        )
        .unwrap();
        let p = dir.join("sys.parv");
        std::fs::write(&p, parv).unwrap();
        p
    }

    pub(crate) const TWO_DISKS: &str = "disksim_disk D {\n Model = source x.model\n}\n\
        instantiate [ d0 .. d1 ] as D\n\
        disksim_iosim IS {\n I/O Mappings = [\n\
          disksim_iomap { tracedev = 0x0e, simdev = d1, locScale = 1024, sizeScale = 2, offset = 5 },\n\
          disksim_iomap { tracedev = 3, simdev = d0, locScale = 256, sizeScale = 1 },\n\
          disksim_iomap { tracedev = 5000, simdev = d1, locScale = 512, sizeScale = 1 }\n ]\n}\n";

    #[test]
    fn iomap_routes_scales_and_offsets_as_disksim_does() {
        let p = tiny_system("route", TWO_DISKS);
        let sys = DiskSystem::load(&p).unwrap();
        assert_eq!(sys.disks.len(), 2);
        assert_eq!(sys.disks[1].0, "d1");
        assert!(!sys.is_single());
        let r = &sys.router;
        // 0x0e → d1: 1024-byte units are 2 sectors; sizes doubled; +5.
        assert_eq!(
            r.route(14, 10, 3).unwrap(),
            Routed {
                disk: 1,
                lbn: 25,
                sectors: 6
            }
        );
        // 3 → d0: 256-byte units, halved (they must be even).
        assert_eq!(
            r.route(3, 8, 4).unwrap(),
            Routed {
                disk: 0,
                lbn: 4,
                sectors: 4
            }
        );
        assert!(r
            .route(3, 7, 1)
            .unwrap_err()
            .to_string()
            .contains("not a multiple of 2"));
        // Not in the iomap: the disk of that number, unchanged.
        assert_eq!(
            r.route(1, 9, 1).unwrap(),
            Routed {
                disk: 1,
                lbn: 9,
                sectors: 1
            }
        );
        let e = r.route(2, 0, 1).unwrap_err().to_string();
        assert!(e.contains("trace device 2") && e.contains("2 disks"), "{e}");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn driver_policy_is_the_scheduler_and_an_unknown_one_is_named() {
        let driver = |policy: u32| {
            format!(
                "disksim_disk D {{\n Model = source x.model\n}}\ninstantiate [ d0 ] as D\n\
                 disksim_iodriver DRV {{\n type = 1,\n Scheduler = disksim_ioqueue {{\n Scheduling policy = {policy}\n }}\n}}\n\
                 instantiate [ driver0 ] as DRV\n"
            )
        };
        let p = tiny_system("sched", &driver(4));
        assert_eq!(DiskSystem::load(&p).unwrap().scheduler().unwrap(), Some("sstf"));
        std::fs::write(&p, driver(2)).unwrap();
        match DiskSystem::load(&p).unwrap().scheduler() {
            Err(Error::Parse { location, field, .. }) => {
                assert_eq!(location, Location::Line(8));
                assert_eq!(field, "Scheduling policy");
            }
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn a_system_is_not_one_drive() {
        let p = tiny_system("single", TWO_DISKS);
        let e = crate::device::disksim_load::load_parv(&p)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("system of 2 disks (d0, d1) and an iomap"), "{e}");
        let one = tiny_system(
            "one",
            "disksim_disk D {\n Model = source x.model\n}\ninstantiate [ d0 ] as D\n",
        );
        assert!(DiskSystem::load(&one).unwrap().is_single());
        assert!(!is_system(one.to_str().unwrap()).unwrap());
        assert!(is_system(p.to_str().unwrap()).unwrap());
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
        let _ = std::fs::remove_dir_all(one.parent().unwrap());
    }

    /// `(src, line, field fragment)`: the error names the block's line and key.
    fn refused(tag: &str, extra: &str, line: u64, field: &str) {
        let p = tiny_system(
            tag,
            &format!("disksim_disk D {{\n Model = source x.model\n}}\ninstantiate [ d0 ] as D\n{extra}"),
        );
        match DiskSystem::load(&p) {
            Err(Error::Parse { location, field: f, .. }) => {
                assert_eq!(location, Location::Line(line), "{extra}");
                assert!(f.contains(field), "{f} vs {field}");
            }
            Err(e) => panic!("{extra}: {e}"),
            Ok(_) => panic!("accepted {extra}"),
        }
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn unmodelled_blocks_name_block_and_key() {
        refused(
            "ctlr",
            "disksim_ctlr C {\n type = 2,\n Scale for delays = 0\n}\ninstantiate [ c0 ] as C\n",
            6,
            "disksim_ctlr C: type",
        );
        refused(
            "smart",
            "disksim_ctlr C {\n type = 3,\n Scale for delays = 0\n}\ninstantiate [ c0 ] as C\n",
            5,
            "disksim_ctlr C: Cache",
        );
        refused(
            "smartq",
            "disksim_ctlr C {\n type = 3,\n Maximum queue length = 4\n}\ninstantiate [ c0 ] as C\n",
            7,
            "disksim_ctlr C: Maximum queue length",
        );
        refused(
            "smart2",
            "disksim_ctlr C {\n type = 3\n}\ninstantiate [ c0 .. c1 ] as C\n",
            6,
            "disksim_ctlr C: type",
        );
        refused(
            "cmem",
            "disksim_ctlr C {\n type = 3,\n Cache = disksim_cachemem {\n Cache size = 64,\n Line size = 8,\n Write scheme = 1\n }\n}\n\
             instantiate [ c0 ] as C\n",
            10,
            "disksim_cachemem: Write scheme",
        );
        refused(
            "raid",
            "disksim_logorg org0 {\n Addressing mode = Parts,\n Distribution scheme = Striped,\n Redundancy scheme = Noredun\n}\n",
            7,
            "disksim_logorg org0: Distribution scheme",
        );
        refused(
            "redun",
            "disksim_logorg org0 {\n Addressing mode = Parts,\n Distribution scheme = Asis,\n Redundancy scheme = Shadowed\n}\n",
            8,
            "Redundancy scheme",
        );
        refused(
            "ssd",
            "disksim_ssd S {\n Block count = 100\n}\ninstantiate [ s0 ] as S\n",
            5,
            "disksim_ssd",
        );
        refused("map", "disksim_iosim IS {\n I/O Mappings = [ disksim_iomap { tracedev = 1, simdev = d7, locScale = 512, sizeScale = 1 } ]\n}\n", 6, "simdev");
        refused("scale", "disksim_iosim IS {\n I/O Mappings = [ disksim_iomap { tracedev = 1, simdev = d0, locScale = 300, sizeScale = 1 } ]\n}\n", 6, "locScale");
    }

    #[test]
    fn validation_systems_load_with_their_disks() {
        let Some(dir) = crate::device::validate::validation_dir() else {
            eprintln!("skipped: ../shared/disk-models is absent");
            return;
        };
        let ascii = DiskSystem::load(&dir.join("ascii.parv")).unwrap();
        assert_eq!(ascii.disks.len(), 18);
        // 0x0e → disk0, 0x1e (30) → disk7, 0x67 → disk15.
        assert_eq!(
            ascii.router.route(14, 7, 2).unwrap(),
            Routed {
                disk: 0,
                lbn: 7,
                sectors: 2
            }
        );
        assert_eq!(ascii.router.route(30, 7, 2).unwrap().disk, 7);
        assert_eq!(ascii.router.route(0x67, 7, 2).unwrap().disk, 15);
        let three = DiskSystem::load(&dir.join("3disks.parv")).unwrap();
        let names: Vec<&str> = three.disks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["quantum", "ibm", "seagate"]);
        let hplajw = DiskSystem::load(&dir.join("hplajw.parv")).unwrap();
        assert_eq!(hplajw.disks.len(), 2);
        // The drivers' policies: SSTF_LBN (4), CYCLE_LBN (3), FCFS (1).
        assert_eq!(hplajw.scheduler().unwrap(), Some("sstf"));
        assert_eq!(ascii.scheduler().unwrap(), Some("clook"));
        assert_eq!(
            DiskSystem::load(&dir.join("hp_c2247a.parv"))
                .unwrap()
                .scheduler()
                .unwrap(),
            Some("fcfs")
        );
        // synthsimpledisk: one simple disk, 0.5 + 9.5 ms an access.
        let sd = DiskSystem::load(&dir.join("synthsimpledisk.parv")).unwrap();
        assert!(!sd.is_single(), "a simple disk is no drive model of its own");
        match &sd.disks[..] {
            [(name, Drive::Simple(d))] => {
                assert_eq!(name, "sd0");
                assert_eq!((d.blocks, d.access_ms, d.overhead_ms), (100_000, 9.5, 0.5));
            }
            _ => panic!("synthsimpledisk: one simple disk"),
        }
        // synthcachemem: one disk behind a controller cache of 128 lines of 64 sectors.
        let cm = DiskSystem::load(&dir.join("synthcachemem.parv")).unwrap();
        assert!(matches!(&cm.disks[..], [(_, Drive::Cached(_))]));
        // synthcachedev: `disk` cached on `cache_disk`.
        let cd = DiskSystem::load(&dir.join("synthcachedev.parv")).unwrap();
        assert!(matches!(
            &cd.disks[..],
            [(_, Drive::CachedOn(_)), (_, Drive::CacheDevice)]
        ));
    }
}

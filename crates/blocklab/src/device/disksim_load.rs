//! Build an [`Hdd`] from a DiskSim `.parv` (or `.diskspecs`) parameter tree.
//!
//! Units, as DiskSim documents them: times in ms, skews and block offsets
//! in sectors, "Empty space at zone front" in sectors, "Number of spares"
//! in sectors (tracks under track sparing), slips as zone-relative slots.

use std::path::Path;

use crate::device::disksim_params::{Block, ParamFile, Value};
use crate::device::disksim_system::DiskSystem;
use crate::device::hdd::{
    parse_seek_file, CacheParams, Hdd, HddParams, Layout, Overheads, SeekCurve, SpareUnit, ZoneSpec,
};
use crate::error::{Error, Location, Result};

/// Load the drive of a DiskSim parameter file that describes one drive
/// (one disk instantiated, no iomap; or a `.diskspecs` file: its first
/// disk). A file of several drives is a system
/// ([`DiskSystem`](super::disksim_system::DiskSystem)): the stack routes the
/// trace's devices to them, so it is no single model.
pub fn load_parv(path: &Path) -> Result<Hdd> {
    let sys = DiskSystem::load(path)?;
    if !sys.is_single() {
        let names: Vec<&str> = sys.disks.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Error::parse(
            path.display().to_string(),
            Location::Whole,
            "instantiate",
            format!(
                "describes a system of {} disk{} ({}){}, not one drive: run it with `disk run` (or as \
                 `[device] model` with `tenant_map = \"key\"`), which routes each trace device to its disk",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", "),
                if sys.router.has_maps() { " and an iomap" } else { "" }
            ),
        ));
    }
    match sys.disks.into_iter().next().expect("one disk").1 {
        super::disksim_system::Drive::Hdd(d) => Ok(*d),
        _ => unreachable!("is_single: a mechanical disk"),
    }
}

/// The drive of `disk` (a `disksim_disk` block of `pf`), with the bus time
/// per sector of the system it sits in.
pub(crate) fn build_disk(pf: &ParamFile, disk: &Block, dir: &Path) -> Result<Hdd> {
    let (br, bw) = bus_times(pf, disk)?;
    build(disk, dir, br, bw)
}

/// Per-sector bus time of reads and of writes for `disk`: DiskSim takes
/// the largest of the disk's, the controllers' and the buses' times.
pub(crate) fn bus_times(pf: &ParamFile, disk: &Block) -> Result<(f64, f64)> {
    let bus = |field: &str| -> Result<f64> {
        let mut m: f64 = 0.0;
        for b in pf.blocks_of("disksim_bus") {
            m = m.max(b.num_or(field, 0.0)?);
        }
        Ok(m)
    };
    let bulk = disk.num_or("Bulk sector transfer time", 0.0)?;
    let mut ctlr: f64 = 0.0;
    for c in pf.blocks_of("disksim_ctlr") {
        ctlr = ctlr.max(c.num_or("Bulk sector transfer time", 0.0)?);
    }
    let base = bulk.max(ctlr);
    Ok((
        base.max(bus("Read block transfer time")?),
        base.max(bus("Write block transfer time")?),
    ))
}

fn build(disk: &Block, dir: &Path, bus_read: f64, bus_write: f64) -> Result<Hdd> {
    let model = disk.block("Model")?;
    let scale = disk.num_or("Time scale for overheads", 1.0)?;
    let per_req = disk.num_or("Per-request overhead time", 0.0)?;
    let surfaces = model.num("Number of data surfaces")? as u32;
    let cylinders = model.num("Number of cylinders")? as u32;
    let blocks = model.num("Block count")? as u64;
    let lay = model.block("Layout Model")?;
    let mech = model.block("Mechanical Model")?;

    let scheme = lay.num_or("Sparing scheme used", 0.0)? as u32;
    let range = lay.num_or("Rangesize for sparing", 1.0)? as u32;
    let (unit, front) = match scheme {
        0 | 7 => (SpareUnit::None, false),
        1 => (SpareUnit::TracksPerZone, false),
        2 | 4 => (SpareUnit::SectorsPerCylinder, false),
        5 | 6 => (SpareUnit::SectorsPerCylinder, true),
        3 => (SpareUnit::SectorsPerTrack, false),
        8 => (SpareUnit::SectorsPerRange(range), false),
        9 | 10 => (SpareUnit::SectorsPerZone, false),
        _ => {
            let p = lay.get("Sparing scheme used").expect("read above");
            return Err(p.err(format!("unknown sparing scheme {scheme} (valid 0..=10)")));
        }
    };
    let serp = lay.num_or("LBN-to-PBN mapping scheme", 0.0)? as u8;
    let mut zones = Vec::new();
    let zparam = lay
        .get("Zones")
        .ok_or_else(|| Error::parse(&lay.file, Location::Line(lay.line), "Zones", "missing"))?;
    let Value::List(zl) = &zparam.value else {
        return Err(zparam.err("expected a list of zones"));
    };
    for z in zl {
        let Value::Block(z) = z else {
            return Err(zparam.err("expected zone blocks"));
        };
        let slips = match z.get("slips") {
            Some(p) => p.nums()?.into_iter().map(|x| x as u64).collect(),
            None => vec![],
        };
        zones.push(ZoneSpec {
            first_cyl: z.num("First cylinder number")? as u32,
            last_cyl: z.num("Last cylinder number")? as u32,
            sectors_per_track: z.num("Blocks per track")? as u32,
            track_skew: z.num_or("Skew for track switch", 0.0)?,
            cyl_skew: z.num_or("Skew for cylinder switch", 0.0)?,
            first_offset: z.num_or("Offset of first block", 0.0)?,
            front_space: z.num_or("Empty space at zone front", 0.0)? as u64,
            spares: z.num_or("Number of spares", 0.0)? as u64,
            slips,
        });
    }
    let layout = Layout::new(surfaces, cylinders, blocks, zones, unit, front, serp)
        .map_err(|e| Error::parse(&lay.file, Location::Line(lay.line), "Zones", e.to_string()))?;

    let single = mech.num_or("Single cylinder seek time", 0.0)?;
    let seek_type = mech.word("Seek type")?;
    let hpl = |first: Vec<f64>| -> Result<SeekCurve> {
        let p = mech.get("HPL seek equation values").ok_or_else(|| {
            Error::parse(
                &mech.file,
                Location::Line(mech.line),
                "HPL seek equation values",
                "missing",
            )
        })?;
        let v = p.nums()?;
        if v.len() < 5 {
            return Err(p.err("expected [x0, a, b, c, e, single]"));
        }
        let mut first = first;
        if first.is_empty() && v.len() > 5 && v[5] >= 0.0 {
            first = vec![v[5]];
        }
        Ok(SeekCurve::Hpl {
            x0: v[0],
            a: v[1],
            b: v[2],
            c: v[3],
            e: v[4],
            first,
        })
    };
    let curve = match seek_type.as_str() {
        "extracted" => {
            let f = mech.word("Full seek curve")?;
            SeekCurve::Table(parse_seek_file(&dir.join(f))?)
        }
        "hpl" => hpl(vec![])?,
        "hplplus10" => {
            let p = mech.get("First ten seek times").ok_or_else(|| {
                Error::parse(&mech.file, Location::Line(mech.line), "First ten seek times", "missing")
            })?;
            hpl(p.nums()?)?
        }
        "linear" | "3pt" | "curve" => SeekCurve::three_point(
            single,
            mech.num("Average seek time")?,
            mech.num("Full strobe seek time")?,
            cylinders as u64,
        ),
        other => {
            let p = mech.get("Seek type").expect("read above");
            return Err(p.err(format!(
                "unknown seek type `{other}` (extracted, hpl, hplplus10, linear)"
            )));
        }
    };
    // "Single cylinder seek time" is an input of the curves that need it
    // (three-point, HPL). An extracted curve already holds its measured
    // d = 1 time and is looked up at every distance (DiskSim ignores the
    // field for it): the HP and DEC files carry a 0.2 ms placeholder there
    // against 1.0–1.3 ms in their tables.
    let single_cyl_ms = match (&curve, single > 0.0) {
        (SeekCurve::Hpl { first, .. }, _) if !first.is_empty() => None,
        (SeekCurve::Table(_), _) => None,
        (_, true) => Some(single),
        _ => None,
    };
    let o = |name: &str| -> Result<f64> { Ok(disk.num_or(name, 0.0)? * scale + per_req) };
    let overheads = Overheads {
        read_hit: [o("Read hit over. after read")?, o("Read hit over. after write")?],
        read_miss: [o("Read miss over. after read")?, o("Read miss over. after write")?],
        write_hit: [o("Write hit over. after read")?, o("Write hit over. after write")?],
        write_miss: [o("Write miss over. after read")?, o("Write miss over. after write")?],
        read_complete: disk.num_or("Read completion overhead", 0.0)? * scale,
        write_complete: disk.num_or("Write completion overhead", 0.0)? * scale,
    };
    let segments = disk.num_or("Number of buffer segments", 0.0)? as u32;
    let cache = CacheParams {
        enabled: disk.num_or("Enable caching in buffer", 0.0)? != 0.0 && segments > 0,
        segments,
        segment_sectors: disk.num_or("Segment size (in blks)", 0.0)? as u64,
        max_readahead: disk.num_or("Maximum read-ahead (blks)", 0.0)? as u64,
        readahead_over_requested: disk.num_or("Read-ahead over requested", 0.0)? != 0.0,
        write_back: disk.num_or("Fast write level", 0.0)? != 0.0,
        read_hits_on_write_data: disk.num_or("Allow read hits on write data", 0.0)? != 0.0,
        separate_write_segment: disk.num_or("Use separate write segment", 0.0)? != 0.0,
        // Caching the sectors that pass during rotational latency needs
        // read-on-arrival hardware: honour "Read any free blocks" only with
        // "Immediate buffer read" (matches the Atlas 10K and 18ES traces).
        read_any_free: disk.num_or("Read any free blocks", 0.0)? != 0.0
            && disk.num_or("Immediate buffer read", 0.0)? != 0.0,
        // Segments are circular queues: data sent to the host may be pushed
        // out by read-ahead (DiskSim's documentation; the traces show such
        // re-reads miss), unless "Read-ahead over requested" is 0: then the
        // requested data stay in the segment (the 18ES, Atlas 10K and
        // Atlas III traces show re-reads of them hit).
        consume_on_hit: disk.num_or("Read-ahead over requested", 0.0)? != 0.0,
        prefetch_mode: disk.num_or("Buffer continuous read", 0.0)? as u8,
        read_water: if disk.num_or("Set watermark by reqsize", 1.0)? != 0.0 {
            disk.num_or("High (read) water mark", 0.0)?
        } else {
            0.0
        },
        reselect_ms: disk.num_or("First reselect overhead", 0.0)? * scale,
        write_back_sequential_only: disk.num_or("Fast write level", 0.0)? == 1.0,
        almost_read_hits: disk.num_or("Allow almost read hits", 0.0)? != 0.0,
        readahead_on_idle_hit: disk.num_or("Read-ahead on idle hit", 0.0)? != 0.0,
        // "Low (write) water mark" is where a write reconnects once a full
        // segment drains (DiskSim's manual); these request sizes never fill
        // one, so it is not read.
        hold_bus_write: disk.num_or("Hold bus entire write xfer", 0.0)? != 0.0,
        write_data_prep_ms: disk.num_or("Data preparation overhead", 0.0)? * scale,
    };
    Hdd::new(HddParams {
        name: disk.name.clone().unwrap_or_default(),
        layout,
        rpm: mech.num("Rotation speed (in rpms)")?,
        read_seek: curve,
        write_seek: None,
        single_cyl_ms,
        head_switch_ms: mech.num_or("Head switch time", 0.0)?,
        write_settle_ms: mech.num_or("Add. write settling delay", 0.0)?,
        track_switch_per_access: mech.get("Access time type").is_some()
            && mech.word("Access time type")? == "trackSwitchPlusRotation",
        overheads,
        bus_read_ms: bus_read,
        bus_write_ms: bus_write,
        cache,
        // "Immediate buffer read" (zero-latency reads) is set on the Atlas
        // 10K and the RZ26; honouring it leaves the Atlas 10K's responses
        // unchanged and raises the RZ26's demerit from 0.319 to 0.376 ms
        // (over DiskSim's 0.340): it stays off. "Immediate buffer write"
        // (set on the Atlas 10K only) is honoured: 41 of its 3,492 destages
        // on the validation trace end earlier, none delays a request, and
        // the demerit stays 0.151 ms.
        zero_latency: false,
        zero_latency_writes: disk.num_or("Immediate buffer write", 0.0)? != 0.0,
        track_buffer_tracks: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceModel;

    #[test]
    fn every_validated_drive_loads_with_its_block_count() {
        let Some(dir) = crate::device::validate::validation_dir() else {
            return;
        };
        for (name, blocks) in [
            ("atlas_III", 17783250u64),
            ("barracuda", 4110000),
            ("cheetah4LP", 8887200),
            ("cheetah9LP", 17783240),
            ("ibm18es", 17916240),
            ("atlas10k", 17938986),
            ("hp_c2247a", 2054864),
            ("hp_c3323a", 2056008),
            ("hp_c2490a", 4165272),
            ("dec_rz26", 2050860),
        ] {
            let d = load_parv(&dir.join(format!("{name}.parv"))).unwrap();
            assert_eq!(d.capacity_sectors(), blocks, "{name}");
            // "Immediate buffer write" is set on the Atlas 10K alone; no
            // drive reads on arrival (see `load_parv`).
            assert_eq!(d.params().zero_latency_writes, name == "atlas10k", "{name}");
            assert!(!d.params().zero_latency, "{name}");
        }
    }

    #[test]
    fn extracted_curve_keeps_its_own_single_cylinder_time() {
        // 1 surface, 10 cylinders of 10 sectors, 6000 rpm: 10 ms per
        // revolution, 1 ms per sector, no cache, no overheads.
        let dir = std::env::temp_dir().join(format!("blocklab-disksim-1cyl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.seek"), "Seek distances measured: 2\n1, 3.0\n9, 7.0\n").unwrap();
        std::fs::write(
            dir.join("x.model"),
            "dm_disk M {\n Number of data surfaces = 1,\n Number of cylinders = 10,\n Block count = 100,\n\
             Layout Model = dm_layout_g1 { Sparing scheme used = 0, Zones = [ z { First cylinder number = 0,\n\
             Last cylinder number = 9, Blocks per track = 10 } ] },\n\
             Mechanical Model = dm_mech_g1 {\n Seek type = extracted,\n Full seek curve = x.seek,\n\
             Single cylinder seek time = 0.5,\n Rotation speed (in rpms) = 6000 }\n}\n",
        )
        .unwrap();
        std::fs::write(dir.join("x.parv"), "disksim_disk D {\n Model = source x.model\n}\n").unwrap();
        let mut d = load_parv(&dir.join("x.parv")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // LBN 12 is sector 2 of cylinder 1. The table's 3 ms seek lands at
        // t = 3 (platter at sector 3), so sector 2 comes round at 12 and is
        // read by 13. The 0.5 ms field would have caught it at 2 (done at 3).
        let req = crate::device::DevRequest {
            kind: crate::array::plan::DiskOpKind::Read,
            lbn: 12,
            sectors: 1,
        };
        assert!((d.service(0.0, &req) - 13.0).abs() < 1e-9);
    }

    #[test]
    fn hits_keep_the_data_unless_read_ahead_may_overwrite_it() {
        let Some(dir) = crate::device::validate::validation_dir() else {
            return;
        };
        // "Read-ahead over requested" = 0 (18ES) keeps data returned on a
        // hit; = 1 (Barracuda) lets read-ahead push it out.
        for (name, consume) in [("ibm18es", false), ("barracuda", true)] {
            let d = load_parv(&dir.join(format!("{name}.parv"))).unwrap();
            assert_eq!(d.params().cache.consume_on_hit, consume, "{name}");
        }
    }

    #[test]
    fn unknown_seek_type_names_file_line_and_field() {
        let dir = std::env::temp_dir().join(format!("blocklab-disksim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("x.model"),
            "dm_disk M {\n Number of data surfaces = 1,\n Number of cylinders = 10,\n Block count = 100,\n\
             Layout Model = dm_layout_g1 { Sparing scheme used = 0, Zones = [ z { First cylinder number = 0,\n\
             Last cylinder number = 9, Blocks per track = 10 } ] },\n\
             Mechanical Model = dm_mech_g1 {\n Seek type = warp,\n Rotation speed (in rpms) = 7200 }\n}\n",
        )
        .unwrap();
        std::fs::write(dir.join("x.parv"), "disksim_disk D {\n Model = source x.model\n}\n").unwrap();
        match load_parv(&dir.join("x.parv")) {
            Err(Error::Parse {
                file, location, field, ..
            }) => {
                assert!(file.ends_with("x.model"), "{file}");
                assert_eq!(location, Location::Line(8));
                assert_eq!(field, "Seek type");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted an unknown seek type"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

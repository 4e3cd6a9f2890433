//! What `blocklab real` does with a D-GRAID array: create it from a stack
//! file, its status, fail and replace a member, and the control requests a
//! running server answers for them.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde_json::{json, Value};

use super::map::MapLog;
use super::state::DgState;
use super::{default_geometry, RealDgraid};
use crate::dgraid::{Dgraid, DgraidConfig, DgraidLevel, Grouping, ReplicaPlacement};
use crate::error::{Error, Result};
use crate::exec::real::identity::{self, Identity};
use crate::exec::real::members::{member_path, Member};
use crate::exec::real::rebuild::{RebuildOptions, RebuildReport};
use crate::exec::real::Status;
use crate::stack::spec::{is_dgraid, StackSpec};

/// `real create DIR --stack FILE` for a stack whose `[array]` is D-GRAID:
/// lay out the members (of `disk_bytes`, else `array.disk_size`, else the
/// layer's default for `fs_size`) and the state. Returns the status and
/// notes.
pub fn create(dir: &Path, file: &Path, disk_bytes: Option<u64>) -> Result<(Status, Vec<String>)> {
    let spec = StackSpec::load(file, &[])?;
    let o = &spec.origin;
    let a = spec
        .array
        .as_ref()
        .filter(|a| is_dgraid(&a.raid.text()))
        .ok_or_else(|| o.err("array.raid", "not a D-GRAID array"))?;
    let refuse = |key: &str, why: &str| Err(o.err(key, format!("the real executor {why}")));
    if !spec.cache.is_empty() {
        return refuse(
            "cache",
            "runs D-GRAID without cache layers in front (serve the array alone)",
        );
    }
    if spec.tier.is_some() {
        return refuse("tier", "runs D-GRAID without an SSD tier in front");
    }
    if !spec.tenant.is_empty() {
        return refuse(
            "tenant",
            "serves a D-GRAID array as one file system (one export), not tenants",
        );
    }
    crate::exec::real::stack::refuse_schedules(&spec)?;
    let d = a.dgraid.clone().unwrap_or_default();
    if d.diffuse_segment.is_some() {
        return refuse(
            "array.dgraid.diffuse_segment",
            "does not diffuse segments on real bytes (the copies are performance replicas the model times)",
        );
    }
    let notes = Vec::new();
    let classifier = match (d.infer, &d.tags) {
        (Some(false), Some(_)) => "tags",
        (Some(false), None) => {
            return refuse(
                "array.dgraid.infer",
                "has no trace annotation to place by: `infer = false` needs `tags` (a block,owner,kind file)",
            )
        }
        (_, Some(_)) => return Err(o.err("array.dgraid.tags", "is read only with `infer = false`")),
        (_, None) => "infer",
    };
    let deferred_max = d.deferred_max.unwrap_or(1024);
    if deferred_max == 0 || deferred_max > 1 << 24 {
        return Err(o.err(
            "array.dgraid.deferred_max",
            format!("must be 1..=2^24 blocks, got {deferred_max}"),
        ));
    }
    let bs = spec.block_size();
    let fs = d.fs_size.as_ref().ok_or_else(|| {
        o.err(
            "array.dgraid.fs_size",
            "the export's size is needed (the file system's size)",
        )
    })?;
    let fs_bytes = crate::array::parse_bytes(&fs.text()).map_err(|e| o.err("array.dgraid.fs_size", e))?;
    let fs_blocks = fs_bytes / bs;
    let level = DgraidConfig::parse_level(&a.raid.text().to_ascii_lowercase()).map_err(|e| o.err("array.raid", e))?;
    let mut st = DgState {
        format: 1,
        uuid: identity::uuid_text(identity::new_uuid()),
        level: match level {
            DgraidLevel::L0 => "dgraid0",
            DgraidLevel::L1 => "dgraid1",
        }
        .into(),
        disks: a.disks,
        meta_copies: d.meta_copies,
        grouping: match Grouping::parse(&d.grouping).map_err(|e| o.err("array.dgraid.grouping", e))? {
            Grouping::File => "file",
            Grouping::Dir => "dir",
        }
        .into(),
        placement: match ReplicaPlacement::parse(&d.placement).map_err(|e| o.err("array.dgraid.placement", e))? {
            ReplicaPlacement::Rotate => "rotate",
            ReplicaPlacement::Random => "random",
        }
        .into(),
        seed: d.seed,
        block_size: bs,
        fs_blocks,
        disk_blocks: 0,
        classifier: classifier.into(),
        deferred_max,
        failed: Vec::new(),
        recovering: Vec::new(),
        generation: 1,
        clean: true,
    };
    let geo = default_geometry(&st).map_err(|e| o.err("array.dgraid.fs_size", e))?;
    let cfg = st.config().map_err(|e| o.err("array", e))?;
    st.disk_blocks = match (disk_bytes, &a.disk_size) {
        (Some(n), _) => n / bs,
        (None, Some(s)) => crate::array::parse_bytes(&s.text()).map_err(|e| o.err("array.disk_size", e))? / bs,
        // The layer's size for a volume whose every block is stored, plus
        // a quarter: on real bytes whole images are written (free space
        // too), and the layer keeps the last blocks of each member for
        // metadata replicas.
        (None, None) => Dgraid::member_blocks_for(&cfg, &geo, 0) * 5 / 4,
    };
    st.validate(&o.file).map_err(|e| o.err("array", e))?;
    // The layer must place a full file system on members of this size.
    Dgraid::new(st.config()?, &geo).map_err(|e| o.err("array.disk_size", e))?;
    let min = Dgraid::member_blocks_for(&cfg, &geo, 0);
    if st.disk_blocks < min * 7 / 8 {
        return Err(o.err(
            "array.disk_size",
            format!(
                "members of {} blocks cannot hold the copies of a full {fs_blocks}-block file system ({min} blocks each)",
                st.disk_blocks
            ),
        ));
    }
    let shown = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|e| Error::io(&shown, e))?;
    for f in [super::state::STATE_FILE, crate::exec::real::state::STATE_FILE] {
        if dir.join(f).exists() {
            return Err(Error::config(format!("{shown}: already holds an array ({f})")));
        }
    }
    if let Some(t) = &d.tags {
        let src = std::path::PathBuf::from(o.path(t));
        super::tags::Tags::load(&src, geo.clone()).map_err(|e| o.err("array.dgraid.tags", e))?;
        std::fs::copy(&src, dir.join(super::tags::TAGS_FILE)).map_err(|e| Error::io(&shown, e))?;
    }
    let uuid = identity::parse_uuid(&st.uuid).expect("made here");
    for role in 0..st.disks {
        let id = Identity {
            uuid,
            role,
            events: st.generation,
        };
        Member::create(dir, st.disk_blocks * bs, false, bs, &id)
            .map_err(|e| Error::io(member_path(dir, role).display().to_string(), e))?;
    }
    MapLog::write_new(dir, uuid, 0, &[])?;
    st.save(dir).map_err(|e| Error::io(&shown, e))?;
    let arr = RealDgraid::open(dir)?;
    let status = arr.status();
    arr.close()?;
    Ok((status, notes))
}

impl RealDgraid {
    /// What the array placed each mapped block as: `block,owner,kind,parent`
    /// lines under a header, blocks ascending (the `tags` file's format, and
    /// the truth CSV's of `dgraid infer`).
    pub fn tags_csv(&self) -> String {
        let g = self.lock();
        let mut blocks: Vec<(&u64, &crate::fsmodel::kind::Tag)> = g.tags.iter().collect();
        blocks.sort_unstable_by_key(|x| *x.0);
        let mut out = String::from("block,owner,kind,parent\n");
        for (b, t) in blocks {
            out.push_str(&format!("{b},{},{},{}\n", t.owner, t.kind.name(), t.parent));
        }
        out
    }

    pub fn status(&self) -> Status {
        let g = self.lock();
        let st = &g.st;
        let tolerated = match st.level.as_str() {
            "dgraid1" => 1,
            _ => 0,
        };
        let health = if !st.recovering.is_empty() {
            "recovering"
        } else if st.failed.is_empty() {
            "healthy"
        } else if st.failed.len() as u32 <= tolerated {
            "degraded"
        } else {
            // D-GRAID's graceful degradation: the files on the failed
            // members are lost, the rest reads.
            "partial"
        };
        let mut blocks: Vec<u64> = g.tags.keys().copied().collect();
        blocks.sort_unstable();
        let unreadable = blocks.iter().filter(|&&b| g.readable_copy(b).is_err()).count() as u64;
        let used = g.layer.as_ref().map(|l| l.used().to_vec()).unwrap_or_default();
        Status {
            level: st.level.clone(),
            disks: st.disks,
            layout: format!(
                "{} metadata copies, grouping {}, placement {}, classifier {}",
                st.meta_copies, st.grouping, st.placement, st.classifier
            ),
            chunk_bytes: st.block_size,
            block_size: st.block_size,
            disk_bytes: st.disk_blocks * st.block_size,
            size_bytes: self.size_bytes(),
            checksums: false,
            failed: st.failed.clone(),
            recovering: st.recovering.clone(),
            recovered_rows: 0,
            rebuilt_rows: 0,
            member_rows: st.disk_blocks,
            tolerated_failures: tolerated,
            health: health.into(),
            dirty_regions: g.pending_records() as u64,
            bad_blocks: unreadable,
            unreadable_rows: Vec::new(),
            direct: false,
            dgraid: Some(json!({
                "classifier": st.classifier,
                "meta_copies": st.meta_copies,
                "fs_blocks": st.fs_blocks,
                "layout_known": g.geometry.is_some(),
                "mapped_blocks": blocks.len(),
                "unreadable_blocks": unreadable,
                "lost_blocks": g.lost.len(),
                "used_per_disk": used,
                "generation": st.generation,
                "refused": g.classifier.refused().map(|e| e.to_string()),
                "counts": g.counts,
            })),
        }
    }

    /// Mark member `disk` failed: reads go to other copies; blocks with no
    /// other copy fail (EIO); writes skip it.
    pub fn fail(&self, disk: u32) -> Result<Status> {
        self.change(disk, |g| {
            if g.st.failed.contains(&disk) {
                return Err(Error::config(format!("disk {disk} has failed already")));
            }
            g.commit().map_err(|e| Error::io("commit", e))?;
            g.st.failed.push(disk);
            g.st.failed.sort_unstable();
            g.st.recovering.retain(|&r| r != disk);
            g.members[disk as usize] = None;
            Ok(())
        })
    }

    /// Put an empty spare in place of failed member `disk` (`real rebuild`
    /// then copies its live blocks onto it).
    pub fn replace(&self, disk: u32) -> Result<Status> {
        let dir = self.dir().to_path_buf();
        let uuid = self.uuid();
        self.change(disk, |g| {
            if !g.st.failed.contains(&disk) {
                return Err(Error::config(format!("disk {disk} has not failed: fail it first")));
            }
            let bs = g.st.block_size;
            let id = Identity {
                uuid,
                role: disk,
                events: g.st.generation,
            };
            let p = member_path(&dir, disk);
            Member::create(&dir, g.st.disk_blocks * bs, false, bs, &id)
                .map_err(|e| Error::io(p.display().to_string(), e))?;
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .map_err(|e| Error::io(p.display().to_string(), e))?;
            g.members[disk as usize] = Some(f);
            g.st.failed.retain(|&d| d != disk);
            g.st.recovering.push(disk);
            g.st.recovering.sort_unstable();
            Ok(())
        })
    }

    fn change(&self, disk: u32, f: impl FnOnce(&mut super::Inner) -> Result<()>) -> Result<Status> {
        {
            let mut g = self.lock();
            if disk >= g.st.disks {
                return Err(Error::config(format!(
                    "disk {disk} is not a member (the array has disks 0..{})",
                    g.st.disks - 1
                )));
            }
            f(&mut g)?;
            g.bump(self.dir())
                .map_err(|e| Error::io(self.dir().display().to_string(), e))?;
        }
        Ok(self.status())
    }

    /// A control request of a running server.
    pub fn run_op(&self, req: &Value, stop: &AtomicBool) -> Result<Value> {
        let disk = || -> Result<u32> {
            let d = req["disk"]
                .as_u64()
                .ok_or_else(|| Error::config("control request: field `disk` missing or not a number"))?;
            u32::try_from(d).map_err(|_| Error::config(format!("control request: field `disk`: {d} is not a member")))
        };
        match req["op"].as_str().unwrap_or("") {
            "status" => Ok(to(&self.status())),
            "tags" => Ok(to(&self.tags_csv())),
            "fail" => Ok(to(&self.fail(disk()?)?)),
            "replace" => Ok(to(&self.replace(disk()?)?)),
            "flush" => {
                self.flush()
                    .map_err(|e| Error::io(self.dir().display().to_string(), e))?;
                Ok(json!({}))
            }
            "rebuild" => {
                let opts: RebuildOptions = serde_json::from_value(req["opts"].clone())
                    .map_err(|e| Error::config(format!("control request: field `opts`: {e}")))?;
                Ok(to(&self.rebuild(&opts, stop)?))
            }
            "check" => Err(Error::config(
                "a D-GRAID array has no parity to check (its copies are resynced after a crash)",
            )),
            other => Err(Error::config(format!("unknown control operation `{other}`"))),
        }
    }
}

fn to<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("reports serialize")
}

/// Run a request on the served array through its server, or open it here.
fn dispatch<T: serde::de::DeserializeOwned>(
    dir: &Path,
    req: Value,
    local: impl FnOnce(&RealDgraid) -> Result<T>,
) -> Result<T> {
    if let Some(r) = crate::exec::real::control::served_answer(dir, req)? {
        return Ok(r);
    }
    let a = RealDgraid::open(dir)?;
    let r = local(&a)?;
    a.close()?;
    Ok(r)
}

pub fn status(dir: &Path) -> Result<Status> {
    dispatch(dir, json!({"op": "status"}), |a| Ok(a.status()))
}

/// The map's tags as `block,owner,kind,parent` lines (`real tags`).
pub fn tags(dir: &Path) -> Result<String> {
    dispatch(dir, json!({"op": "tags"}), |a| Ok(a.tags_csv()))
}

pub fn fail(dir: &Path, disk: u32) -> Result<Status> {
    dispatch(dir, json!({"op": "fail", "disk": disk}), |a| a.fail(disk))
}

pub fn replace(dir: &Path, disk: u32) -> Result<Status> {
    dispatch(dir, json!({"op": "replace", "disk": disk}), |a| a.replace(disk))
}

pub fn rebuild(dir: &Path, opts: &RebuildOptions, stop: &AtomicBool) -> Result<RebuildReport> {
    dispatch(dir, json!({"op": "rebuild", "opts": opts}), |a| a.rebuild(opts, stop))
}

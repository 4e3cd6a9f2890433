//! DiskSim's logical organisations (`disksim_logorg`) as blocklab arrays.
//!
//! A logorg with `Addressing mode = Array` is one logical device: requests
//! to device number *k* go to the *k*-th logorg of the file (DiskSim's
//! `arraydisk`, its slot in `sysorgs`), and a synthetic generator may name
//! it (`devices = [ org0 ]`). DiskSim lays the array out as follows
//! (`disksim_logorg.c`, `disksim_redun.c`), which coincides with Linux MD
//! for the organisations accepted here, so blocklab's [`Array`] plans them:
//!
//! * Striped, Noredun, stripe unit SU > 0: unit *u* = block / SU lives on
//!   member *u* mod n at stripe *u* / n: MD's RAID-0 with SU-sector chunks
//!   (a stripe unit of a whole member is a concatenation, which the same
//!   rule gives).
//! * Striped, Parity_disk: parity on the last member: MD's RAID-4.
//! * Striped, Parity_rotated, rotation type 1 (left-symmetric) with the
//!   parity stripe unit equal to the stripe unit: parity starts on the last
//!   member and moves one member left each stripe, data starting on the
//!   member after it: MD's left-symmetric RAID-5. Writes of fewer units of
//!   a row than `RMW vs. reconstruct` × n read the old data and parity,
//!   larger ones read the rest of the row: with RMW 0.5 this is MD's choice
//!   of the fewer reads.
//!
//! `Parts` / `Asis` / `Noredun` leaves requests on their disks. Anything
//! else (shadowing, Random / Ideal distribution, other rotation types,
//! which DiskSim itself aborts on, a parity unit other than the stripe
//! unit, RMW points other than MD's) is an error naming block and key.

use super::disksim_params::{Block, Param, ParamFile, Value};
use crate::array::{Array, ArrayConfig, IoPlan, Layout, Level};
use crate::error::Result;
use std::collections::HashMap;

/// One Array-addressed logorg: its members (system disk indices) and layout.
///
/// A member's sectors past its last whole stripe unit form one more, shorter
/// stripe (DiskSim's `numfull`): its units are the remainder, its parity
/// where the next stripe's would be. It is planned as a second array of
/// that unit, its members rotated to match and offset past the full stripes.
#[derive(Debug, Clone)]
pub struct Logorg {
    pub name: String,
    /// The full stripes.
    body: Part,
    /// The short last stripe, if the members do not end on a unit.
    tail: Option<Part>,
    /// Sectors addressable (data members × member sectors).
    pub capacity: u64,
    /// `Synch writes for safety`: every write of a request waits for all
    /// its reads (as MD's plans have it). 0: a data write waits only for
    /// the read of the same disk, the parity write for all of them.
    pub sync_writes: bool,
}

/// DiskSim's unsynchronised writes (`logorg_parity_table_dodeps_nosync`):
/// a data write waits only for the reads of its own disk (its old data);
/// the parity writes keep waiting for all the reads of their rows.
fn unsync_writes(p: &mut IoPlan) {
    use crate::array::{Action, Cause, DiskOpKind};
    for i in 0..p.nodes.len() {
        let Action::Disk(op) = &p.nodes[i].action else { continue };
        if op.kind != DiskOpKind::Write || op.cause != Cause::User {
            continue;
        }
        let disk = op.disk;
        let mut deps = Vec::new();
        for &c in &p.nodes[i].deps {
            for &r in &p.nodes[c as usize].deps {
                if matches!(&p.nodes[r as usize].action, Action::Disk(o) if o.disk == disk) {
                    deps.push(r);
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        p.nodes[i].deps = deps;
    }
}

/// An array over some of the system's disks, from `start` of the logical
/// device and `offset` sectors into each member.
#[derive(Debug, Clone)]
struct Part {
    array: Array,
    /// System disk of each of the array's members.
    disks: Vec<usize>,
    start: u64,
    offset: u64,
}

impl Part {
    fn plan(&self, write: bool, sector: u64, sectors: u64) -> IoPlan {
        let at = sector - self.start;
        let mut p = if write {
            self.array.plan_write(at, sectors)
        } else {
            self.array.plan_read(at, sectors)
        };
        for n in &mut p.nodes {
            if let crate::array::Action::Disk(op) = &mut n.action {
                op.disk = self.disks[op.disk as usize] as u32;
                op.block += self.offset;
            }
        }
        p
    }
}

impl Logorg {
    /// The plan of `sectors` sectors from `sector` of the logical device,
    /// its disk operations naming system disks.
    pub fn plan(&self, write: bool, sector: u64, sectors: u64) -> IoPlan {
        let mut p = self.plan_parts(write, sector, sectors);
        if write && !self.sync_writes {
            unsync_writes(&mut p);
        }
        p
    }

    fn plan_parts(&self, write: bool, sector: u64, sectors: u64) -> IoPlan {
        let Some(tail) = &self.tail else {
            return self.body.plan(write, sector, sectors);
        };
        let end = sector + sectors;
        if sector >= tail.start {
            return tail.plan(write, sector, sectors);
        }
        if end <= tail.start {
            return self.body.plan(write, sector, sectors);
        }
        let mut p = self.body.plan(write, sector, tail.start - sector);
        p.append(tail.plan(write, tail.start, end - tail.start));
        p
    }
}

fn word(p: &Param) -> Result<String> {
    match &p.value {
        Value::Str(s) => Ok(s.clone()),
        Value::Num(n) => Ok(n.to_string()),
        _ => Err(p.err("expected a word")),
    }
}

/// The word of `key` (None: absent).
fn word_of(b: &Block, key: &str) -> Result<Option<String>> {
    b.get(key).map(word).transpose()
}

/// The member names of a logorg's `devices` list (`disk0 .. disk3` expanded).
fn members(b: &Block, disks: &HashMap<&str, usize>) -> Result<Vec<usize>> {
    let p = b
        .get("devices")
        .ok_or_else(|| b.key_error("devices", "missing: the logorg's member disks"))?;
    let Value::List(items) = &p.value else {
        return Err(p.err("expected a `[ ... ]` list of disks"));
    };
    let names: Vec<String> = items
        .iter()
        .map(|v| match v {
            Value::Str(s) => Ok(s.clone()),
            _ => Err(p.err("expected disk names")),
        })
        .collect::<Result<_>>()?;
    let names = super::disksim_params::expand_names(&names).map_err(|m| p.err(m))?;
    names
        .iter()
        .map(|n| {
            disks
                .get(n.as_str())
                .copied()
                .ok_or_else(|| p.err(format!("`{n}` is not an instantiated disk")))
        })
        .collect()
}

/// The file's logorgs in file order (DiskSim's `sysorgs`): `Some` for an
/// Array-addressed one, `None` for a Parts / Asis / Noredun one (requests
/// stay on their disks). `disks`: instance name → system disk index;
/// `sectors[i]`: disk *i*'s capacity.
pub fn logorgs(pf: &ParamFile, disks: &HashMap<&str, usize>, sectors: &[u64]) -> Result<Vec<Option<Logorg>>> {
    pf.blocks_of("disksim_logorg")
        .map(|b| logorg(b, disks, sectors))
        .collect()
}

fn logorg(b: &Block, disks: &HashMap<&str, usize>, sectors: &[u64]) -> Result<Option<Logorg>> {
    let is =
        |key: &str, want: &str| -> Result<bool> { Ok(word_of(b, key)?.is_none_or(|v| v.eq_ignore_ascii_case(want))) };
    let addressing = word_of(b, "Addressing mode")?.unwrap_or_else(|| "Parts".into());
    let distribution = word_of(b, "Distribution scheme")?.unwrap_or_else(|| "Asis".into());
    let redundancy = word_of(b, "Redundancy scheme")?.unwrap_or_else(|| "Noredun".into());
    if addressing.eq_ignore_ascii_case("Parts") {
        let key = if !is("Redundancy scheme", "Noredun")? {
            "Redundancy scheme"
        } else if !is("Distribution scheme", "Asis")? {
            "Distribution scheme"
        } else {
            return Ok(None);
        };
        return Err(b.key_error(
            key,
            "with Parts addressing only Asis distribution and Noredun redundancy (requests left on \
             their disks) are modelled; Array addressing has striping and parity",
        ));
    }
    if !addressing.eq_ignore_ascii_case("Array") {
        return Err(b.key_error(
            "Addressing mode",
            format!("`{addressing}`: DiskSim's modes are Array and Parts"),
        ));
    }
    if !distribution.eq_ignore_ascii_case("Striped") {
        return Err(b.key_error(
            "Distribution scheme",
            format!("`{distribution}` is not modelled with Array addressing: only Striped"),
        ));
    }
    let members = members(b, disks)?;
    let su = b.num("Stripe unit")?;
    if !(su >= 1.0 && su.fract() == 0.0) {
        return Err(b.key_error(
            "Stripe unit",
            format!("{su}: only a positive whole number of sectors is modelled (0, byte interleaving, is not)"),
        ));
    }
    let member_sectors = members.iter().map(|&d| sectors[d]).min().unwrap_or(0);
    let level = match redundancy.to_ascii_lowercase().as_str() {
        "noredun" => Level::Raid0,
        "parity_disk" => Level::Raid4,
        "parity_rotated" => {
            let rot = b.num_or("Parity rotation type", 1.0)?;
            if rot != 1.0 {
                return Err(b.key_error(
                    "Parity rotation type",
                    format!("{rot}: only 1 (left-symmetric) is modelled, as DiskSim's parity tables have it"),
                ));
            }
            let psu = b.num_or("Parity stripe unit", su)?;
            if psu != su {
                return Err(b.key_error(
                    "Parity stripe unit",
                    format!("{psu}: only a parity stripe unit equal to the stripe unit ({su}) is modelled"),
                ));
            }
            Level::Raid5
        }
        other => {
            return Err(b.key_error(
                "Redundancy scheme",
                format!("`{other}` is not modelled: Noredun, Parity_disk and Parity_rotated are"),
            ))
        }
    };
    let n = members.len();
    if level.has_parity() {
        // DiskSim reads the old data below (int)(RMW × n) units written, else the
        // rest of the row; MD takes the fewer reads: w + 1 against n − 1 − w.
        let rmw = b.num_or("RMW vs. reconstruct", 0.5)?;
        let point = (rmw * n as f64) as i64;
        let md = (n as i64) / 2;
        if point != md {
            return Err(b.key_error(
                "RMW vs. reconstruct",
                format!(
                    "{rmw}: with {n} disks DiskSim would switch at {point} units; only MD's point {md} is modelled"
                ),
            ));
        }
    }
    let su = su as u64;
    let array = |unit: u64| {
        let mut cfg = ArrayConfig::new(level, n as u32);
        cfg.chunk_bytes = unit * 512;
        cfg.block_size = 512;
        cfg.layout = Layout::LeftSymmetric;
        Array::new(cfg).map_err(|e| b.key_error("devices", e.to_string()))
    };
    let data = (n as u64).saturating_sub(level.parity_units() as u64);
    let full = member_sectors / su;
    let rest = member_sectors % su;
    let tail = if rest > 0 {
        // Left-symmetric stripe k has its parity on member n − 1 − (k mod n):
        // the tail array's stripe 0 is the logorg's stripe `full`.
        let s = if level == Level::Raid5 {
            (full % n as u64) as usize
        } else {
            0
        };
        Some(Part {
            array: array(rest)?,
            disks: (0..n).map(|j| members[(j + n - s) % n]).collect(),
            start: data * full * su,
            offset: full * su,
        })
    } else {
        None
    };
    Ok(Some(Logorg {
        name: b.name.clone().unwrap_or_default(),
        body: Part {
            array: array(su)?,
            disks: members,
            start: 0,
            offset: 0,
        },
        tail,
        capacity: data * member_sectors,
        sync_writes: b.num_or("Synch writes for safety", 0.0)? != 0.0,
    }))
}

#[cfg(test)]
mod tests {
    use crate::array::{Action, Cause, DiskOpKind};
    use crate::device::disksim_system::tests::tiny_system;
    use crate::device::disksim_system::DiskSystem;
    use crate::error::Error;

    /// Three tiny disks of 100 sectors under one Array logorg.
    fn raid(tag: &str, keys: &str) -> crate::Result<DiskSystem> {
        let p = tiny_system(
            tag,
            &format!(
                "disksim_disk D {{\n Model = source x.model\n}}\ninstantiate [ d0 .. d2 ] as D\n\
                 disksim_logorg org0 {{\n Addressing mode = Array,\n Distribution scheme = Striped,\n\
                 devices = [ d0 .. d2 ],\n Stripe unit = 8,\n{keys}\n}}\n"
            ),
        );
        let s = DiskSystem::load(&p);
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
        s
    }

    /// The disk operations of a plan: (disk, kind, sector, sectors, deps on disks).
    fn ops(p: &crate::array::IoPlan) -> Vec<(u32, DiskOpKind, u64, u32, Vec<u32>)> {
        let disk_of = |i: u16| match &p.nodes[i as usize].action {
            Action::Disk(o) => Some(o.disk),
            _ => None,
        };
        p.nodes
            .iter()
            .filter_map(|n| match &n.action {
                Action::Disk(o) => {
                    // Through a compute step: the reads it waits for.
                    let mut deps: Vec<u32> = n
                        .deps
                        .iter()
                        .flat_map(|&d| match disk_of(d) {
                            Some(x) => vec![x],
                            None => p.nodes[d as usize].deps.iter().filter_map(|&r| disk_of(r)).collect(),
                        })
                        .collect();
                    deps.sort_unstable();
                    Some((o.disk, o.kind, o.block, o.nblocks, deps))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn parity_rotated_type_1_is_disksims_left_symmetric_table() {
        use DiskOpKind::{Read as R, Write as W};
        let s = raid(
            "ls",
            "Redundancy scheme = Parity_rotated,\n Parity stripe unit = 8,\n Parity rotation type = 1",
        )
        .unwrap();
        let org = s.orgs[0].as_ref().expect("an array");
        // 2 data disks × 100 sectors.
        assert_eq!(org.capacity, 200);
        // Stripe 0: data on d0, d1, parity on d2. Stripe 1 (DiskSim's table:
        // parity one disk left, data from the disk after it): d2, d0; parity d1.
        assert_eq!(ops(&org.plan(false, 0, 8)), [(0, R, 0, 8, vec![])]);
        let mut two = ops(&org.plan(false, 16, 16));
        two.sort_by_key(|o| o.0);
        assert_eq!(two, [(0, R, 8, 8, vec![]), (2, R, 8, 8, vec![])]);
        // One sector written: with three disks DiskSim's RMW point is
        // (int)(0.5 × 3) = 1 unit, so it reads the same sector of the other data unit
        // (reconstruct), as MD does (1 read against 2). Unsynchronised, the
        // data write (d2) waits for nothing, the parity write (d1) for the read.
        let mut w = ops(&org.plan(true, 17, 1));
        w.sort_by_key(|o| (o.0, o.1 == W));
        assert_eq!(w, [(0, R, 9, 1, vec![]), (1, W, 9, 1, vec![0]), (2, W, 9, 1, vec![])]);
        // Members end 4 sectors past their 12 whole units: a short stripe
        // 12 (parity where stripe 12 ≡ 0 of the table has it: d2) from 192.
        let mut tail = ops(&org.plan(false, 192, 8));
        tail.sort_by_key(|o| o.0);
        assert_eq!(tail, [(0, R, 96, 4, vec![]), (1, R, 96, 4, vec![])]);
        // Striped Noredun: plain striping; Parity_disk: parity on the last disk.
        let s = raid("r0", "Redundancy scheme = Noredun").unwrap();
        let org = s.orgs[0].as_ref().unwrap();
        assert_eq!(org.capacity, 300);
        assert_eq!(ops(&org.plan(false, 40, 8)), [(2, R, 8, 8, vec![])]);
        let s = raid("r4", "Redundancy scheme = Parity_disk,\n Synch writes for safety = 1").unwrap();
        let org = s.orgs[0].as_ref().unwrap();
        let w = ops(&org.plan(true, 24, 1));
        // Unit 3: stripe 1 on d1, parity on d2; the other unit (d0) is read;
        // synchronised, the data write waits for it as the parity write does.
        assert!(
            w.contains(&(0, R, 8, 1, vec![]))
                && w.contains(&(1, W, 8, 1, vec![0]))
                && w.contains(&(2, W, 8, 1, vec![0])),
            "{w:?}"
        );
        assert!(org.plan(true, 24, 1).disk_ops().all(|o| o.cause != Cause::Rebuild));
    }

    #[test]
    fn layouts_disksim_does_not_share_with_md_name_their_key() {
        for (keys, field) in [
            (
                "Redundancy scheme = Parity_rotated,\n Parity rotation type = 2",
                "Parity rotation type",
            ),
            (
                "Redundancy scheme = Parity_rotated,\n Parity stripe unit = 16",
                "Parity stripe unit",
            ),
            ("Redundancy scheme = Shadowed", "Redundancy scheme"),
            (
                "Redundancy scheme = Parity_disk,\n RMW vs. reconstruct = 0.9",
                "RMW vs. reconstruct",
            ),
        ] {
            match raid("bad", keys) {
                Err(Error::Parse { field: f, .. }) => assert!(f.contains(field), "{f} vs {field}"),
                Err(e) => panic!("{keys}: {e}"),
                Ok(_) => panic!("accepted {keys}"),
            }
        }
    }
}

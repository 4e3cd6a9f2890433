//! The bottom of a stack as DiskSim's multi-disk systems have it: several
//! independent disks, each trace device (`devno`, the request's tenant)
//! routed to one of them by the parameter file's iomap
//! ([`Router`](crate::device::disksim_system::Router)).
//!
//! A device number that is an Array-addressed logorg's (its place among the
//! file's logorgs) goes to that array instead, planned as MD lays it out
//! ([`Logorg`]).
//!
//! The tenant comes from the stack address: the stack keeps tenants apart
//! with `tenant_map = "key"` (tenant << 40 | block), which is what the
//! builder requires of a device set.

use super::layer::{Exec, Io, Target};
use super::result::{DeviceFigures, StackResult};
use super::target::{fold, sector_plan, sector_range};
use crate::array::plan::IoPlan;
use crate::device::disksim_logorg::Logorg;
use crate::device::disksim_system::{DiskSystem, Router};
use crate::device::DeviceModel;
use crate::error::{Error, Result};
use crate::exec::count::CountExecutor;
use crate::trace::blocks::BLOCK_BITS;
use std::path::PathBuf;

/// Disks of one DiskSim system, addressed per trace device in sectors.
pub struct DeviceSet {
    path: PathBuf,
    router: Router,
    /// Array-addressed logorgs by device number (DiskSim's `arraydisk`).
    orgs: Vec<Option<Logorg>>,
    /// Each disk's capacity in sectors.
    capacity: Vec<u64>,
    /// Fold addresses beyond a disk's capacity back onto it.
    wrap: bool,
    /// Stack block size in bytes (the tenant is in the block number).
    block_size: u64,
    ledger: CountExecutor,
}

impl DeviceSet {
    /// The system of the DiskSim file `path`, under a stack of `block_size`-byte blocks.
    pub fn load(path: PathBuf, wrap: bool, block_size: u64) -> Result<Self> {
        let sys = DiskSystem::load(&path)?;
        let capacity = sys.disks.iter().map(|(_, d)| d.capacity_sectors()).collect();
        let n = sys.disks.len() as u32;
        Ok(DeviceSet {
            path,
            router: sys.router,
            orgs: sys.orgs,
            capacity,
            wrap,
            block_size,
            ledger: CountExecutor::new(n),
        })
    }

    fn ndisks(&self) -> u32 {
        self.capacity.len() as u32
    }

    /// The trace device and its sectors `(devno, first, count)` of a stack I/O.
    fn locate(&self, io: &Io) -> (u32, u64, u64) {
        let mask = (1u64 << BLOCK_BITS) - 1;
        let spb = (self.block_size / 512).max(1);
        if let Some((offset, len)) = io.bytes {
            let tenant = (offset / self.block_size) >> BLOCK_BITS;
            let local = offset - ((tenant << BLOCK_BITS) * self.block_size);
            let (first, count) = sector_range(local, len);
            return (tenant as u32, first, count);
        }
        let tenant = io.first >> BLOCK_BITS;
        ((tenant as u32), (io.first & mask) * spb, io.nblocks.max(1) * spb)
    }
}

impl Target for DeviceSet {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        self.ledger = CountExecutor::new(self.ndisks());
        let sys = DiskSystem::load(&self.path)?;
        Ok(sys.disks.into_iter().map(|(_, d)| d.into_model()).collect())
    }

    fn sectors_per_block(&self) -> u64 {
        1
    }

    fn plan(&mut self, io: &Io, _exec: &dyn Exec) -> Result<IoPlan> {
        let (devno, first, count) = self.locate(io);
        if let Some(Some(org)) = self
            .orgs
            .get(devno as usize)
            .filter(|_| !self.router.maps_device(devno))
        {
            if first + count > org.capacity {
                return Err(Error::config(format!(
                    "device {devno}: sector {first} ({count} sectors) is beyond the {} sectors of its array {}",
                    org.capacity, org.name
                )));
            }
            let mut p = org.plan(io.op == crate::trace::Op::Write, first, count);
            if io.cause != crate::array::plan::Cause::User {
                p.retag(crate::array::plan::Cause::User, io.cause);
            }
            self.ledger.run(&p);
            return Ok(p);
        }
        let r = self.router.route(devno, first, count)?;
        let cap = self.capacity[r.disk];
        if r.sectors > cap || r.sectors > u32::MAX as u64 {
            return Err(Error::config(format!(
                "trace device {devno}: request of {} sectors is larger than its disk {}",
                r.sectors, r.disk
            )));
        }
        let pieces = if r.lbn + r.sectors > cap {
            if !self.wrap {
                return Err(Error::config(format!(
                    "trace device {devno}: sector {} ({} sectors) is beyond the {cap} sectors of its disk {} \
                     (use --wrap, or `wrap = true` in a stack file, to fold addresses)",
                    r.lbn, r.sectors, r.disk
                )));
            }
            fold(r.lbn, r.sectors, cap)
        } else {
            [(r.lbn, r.sectors), (0, 0)]
        };
        let p = sector_plan(r.disk as u32, io.op, pieces, io.cause);
        self.ledger.run(&p);
        Ok(p)
    }

    fn ledger(&self) -> &CountExecutor {
        &self.ledger
    }

    fn capacity_blocks(&self) -> Option<u64> {
        let spb = (self.block_size / 512).max(1);
        Some(self.capacity.iter().map(|c| c / spb).sum())
    }

    fn reset_stats(&mut self) {
        self.ledger = CountExecutor::new(self.ndisks());
    }

    fn report(&self, out: &mut StackResult) {
        out.devices = DeviceFigures::from_ledger(&self.ledger, self.ndisks());
    }
}

#[cfg(test)]
mod tests {
    use crate::device::disksim_system::tests::{tiny_system, TWO_DISKS};
    use crate::timed::disk_run::{run, RunOptions};

    fn run_on(tag: &str, trace: &str) -> crate::Result<crate::timed::metrics::Report> {
        let parv = tiny_system(tag, TWO_DISKS);
        let t = parv.with_file_name("t.trace");
        std::fs::write(&t, trace).unwrap();
        let r = run(&RunOptions {
            model: parv.display().to_string(),
            traces: vec![t.display().to_string()],
            format: "disksim".into(),
            ..Default::default()
        })
        .map(|r| {
            assert_eq!(r.tenant_map, "key");
            r.report
        });
        let _ = std::fs::remove_dir_all(parv.parent().unwrap());
        r
    }

    #[test]
    fn each_trace_device_reaches_its_own_disk() {
        // Device 3 → d0 (256-byte units: block 0 stays 0), device 1 → d1
        // (not in the iomap: the disk of that number). Both read sector 0 at
        // t = 0 with the platter at sector 0: 1 ms each, in parallel. On one
        // disk the second would wait a revolution: (1 + 11) / 2 = 6 ms.
        let r = run_on("par", "0.0 3 0 1 1\n0.0 1 0 1 1\n").unwrap();
        assert_eq!(r.requests, 2);
        assert!((r.avg_response_ms - 1.0).abs() < 1e-6, "{}", r.avg_response_ms);
        assert_eq!(r.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), [1, 1]);
        // Device 0x0e → d1 at 2 × 4 + 5 = 13 (cylinder 1, sector 3), two
        // sectors: seek 3 ms lands at sector 3, read 3..5 by t = 5.
        let r = run_on("map", "0.0 14 4 1 1\n").unwrap();
        assert_eq!(r.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), [0, 1]);
        assert!((r.avg_response_ms - 5.0).abs() < 1e-6, "{}", r.avg_response_ms);
        // A large device number keeps its exact sector: 5000 → d1, sector 3
        // comes round at 3 ms, read by 4 (not a whole 4 KiB block from 0).
        let r = run_on("big", "0.0 5000 3 1 1\n").unwrap();
        assert_eq!(r.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), [0, 1]);
        assert!((r.avg_response_ms - 4.0).abs() < 1e-6, "{}", r.avg_response_ms);
    }

    #[test]
    fn a_stack_file_needs_the_key_tenant_map_and_no_array() {
        use crate::stack::build::{build, Executor};
        use crate::stack::spec::{Origin, StackSpec};
        let parv = tiny_system("spec", TWO_DISKS);
        let spec = |extra: &str| {
            StackSpec::from_str_with(
                &format!(
                    "tenant_map = \"key\"\n[device]\nmodel = \"{}\"\n{extra}",
                    parv.display()
                ),
                &[],
                Origin {
                    file: "s.toml".into(),
                    dir: Default::default(),
                },
            )
            .unwrap()
        };
        let key_of = |s: &StackSpec| match build(s, Executor::Count, None) {
            Err(crate::Error::Key { key, .. }) => key,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("built"),
        };
        assert!(build(&spec(""), Executor::Count, None).is_ok());
        let mut ignore = spec("");
        ignore.tenant_map = crate::stack::spec::TenantMap::Ignore;
        assert_eq!(key_of(&ignore), "tenant_map");
        assert_eq!(key_of(&spec("[array]\nraid = 5\ndisks = 3\n")), "array");
        let _ = std::fs::remove_dir_all(parv.parent().unwrap());
    }

    #[test]
    fn an_array_logorg_takes_its_device_number() {
        // Three tiny disks as one left-symmetric RAID-5 of 8-sector units,
        // device 0. Sector 16 is unit 2: stripe 1, on d2 (parity on d1).
        let parv = tiny_system(
            "org",
            "disksim_disk D {\n Model = source x.model\n}\ninstantiate [ d0 .. d2 ] as D\n\
             disksim_logorg org0 {\n Addressing mode = Array,\n Distribution scheme = Striped,\n\
             Redundancy scheme = Parity_rotated,\n devices = [ d0 .. d2 ],\n Stripe unit = 8,\n\
             Parity stripe unit = 8\n}\n",
        );
        let t = parv.with_file_name("t.trace");
        let go = |trace: &str| {
            std::fs::write(&t, trace).unwrap();
            run(&RunOptions {
                model: parv.display().to_string(),
                traces: vec![t.display().to_string()],
                format: "disksim".into(),
                ..Default::default()
            })
        };
        let r = go("0.0 0 16 1 1\n").unwrap();
        assert_eq!(r.report.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), [0, 0, 1]);
        // A one-sector write there: the other unit's sector read (d0), then
        // data (d2) and parity (d1) written: three operations, so the
        // IOdriver figure (their mean) is not the request's own time.
        let r = go("0.0 0 16 1 0\n").unwrap();
        assert_eq!(r.report.devices.iter().map(|d| d.ops).collect::<Vec<_>>(), [1, 1, 1]);
        assert!(
            r.overall_response_ms > r.report.avg_response_ms,
            "{} {}",
            r.overall_response_ms,
            r.report.avg_response_ms
        );
        // Past the array's 200 data sectors: an error naming it.
        let e = go("0.0 0 199 2 1\n").err().expect("refused").to_string();
        assert!(e.contains("beyond the 200 sectors of its array org0"), "{e}");
        let _ = std::fs::remove_dir_all(parv.parent().unwrap());
    }

    #[test]
    fn an_unrouted_device_or_a_request_past_its_disk_is_an_error() {
        let e = run_on("bad", "0.0 2 0 1 1\n").unwrap_err().to_string();
        assert!(e.contains("trace device 2") && e.contains("no disk 2"), "{e}");
        let e = run_on("far", "0.0 1 99 4 1\n").unwrap_err().to_string();
        assert!(e.contains("beyond the 100 sectors of its disk 1"), "{e}");
    }
}

//! Managing an open array: status, failing and replacing members, check
//! and repair, clean close.

use std::sync::atomic::Ordering;

use super::members::Member;
use super::runner::plan_rows;
use super::scrub::{scrub_row, Mode, ScrubReport};
use super::{RealArray, Status};
use crate::array::Array;
use crate::error::{Error, Result};

impl RealArray {
    /// Close cleanly: everything durable, bitmap clean, journal empty.
    pub fn close(self) -> Result<()> {
        let shown = self.dir.display().to_string();
        self.flush().map_err(|e| Error::io(&shown, e))?;
        Ok(())
    }

    pub fn status(&self) -> Status {
        let live = self.live.read().unwrap();
        let a = &live.array;
        let bm = self.bitmap.lock().unwrap();
        let failed = a.failed().to_vec();
        let recovering = a.recovering();
        let beyond = failed.len() as u32 > a.tolerated_failures();
        let health = if beyond {
            "failed"
        } else if !recovering.is_empty() {
            "recovering"
        } else if !failed.is_empty() {
            "degraded"
        } else {
            "healthy"
        };
        // Taken once: a guard in the literal below would live to its end.
        let (bad_blocks, unreadable_rows) = {
            let bad = self.bad.lock().unwrap();
            let cb = a.chunk_blocks();
            (
                bad.iter().map(|r| r.blocks).sum(),
                super::row_runs(
                    bad.iter()
                        .flat_map(|r| (r.block / cb)..(r.block + r.blocks).div_ceil(cb)),
                ),
            )
        };
        Status {
            level: self.cfg.level.name().to_string(),
            disks: self.cfg.disks,
            layout: self.cfg.layout_name(),
            chunk_bytes: self.cfg.chunk_bytes,
            block_size: self.cfg.block_size,
            disk_bytes: self.cfg.disk_bytes,
            size_bytes: self.size_bytes(),
            checksums: self.checksums,
            failed,
            recovering,
            recovered_rows: a.recovered_rows(),
            rebuilt_rows: if a.recovering().is_empty() {
                0
            } else {
                rebuilt_count(a, self.member_rows)
            },
            member_rows: self.member_rows,
            tolerated_failures: a.tolerated_failures(),
            health: health.into(),
            dirty_regions: bm.dirty().len() as u64,
            bad_blocks,
            unreadable_rows,
            direct: self.direct,
            dgraid: None,
        }
    }

    /// Mark member `disk` failed (MD's `--fail`); the array keeps serving
    /// in degraded mode (or returns errors past its redundancy).
    pub fn fail(&self, disk: u32) -> Result<Status> {
        let shown = self.dir.display().to_string();
        {
            let mut live = self.live.write().unwrap();
            if disk >= self.cfg.disks {
                return Err(Error::config(format!(
                    "cannot fail disk {disk}: the array has disks 0..{}",
                    self.cfg.disks - 1
                )));
            }
            // Members are in sync before the failed set changes (no write
            // can be in flight: we hold the state exclusively).
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
            self.checkpoint_journal(&live).map_err(|e| Error::io(&shown, e))?;
            let was_recovering = live.recovering[disk as usize];
            live.array.fail(disk)?;
            self.membership.fetch_add(1, Ordering::SeqCst);
            if was_recovering {
                // A failing spare stops being recovered; the others go on
                // from where they are (every step rebuilds all spares).
                let others: Vec<u32> = live.array.recovering().into_iter().filter(|&d| d != disk).collect();
                let map = live.array.rebuilt_map();
                let (prefix, runs) = (map.prefix(), map.runs());
                let mut a = Array::new(self.cfg)?;
                for &d in live.array.failed() {
                    a.fail(d)?;
                }
                if !others.is_empty() {
                    a.start_recovery(&others)?;
                    a.restore_rebuilt(prefix, &runs);
                }
                live.array = a;
                live.recovering[disk as usize] = false;
                if others.is_empty() {
                    self.monitor.on.store(false, Ordering::SeqCst);
                    self.monitor.events.lock().unwrap().clear();
                }
            }
            live.members[disk as usize] = None;
            self.array_changed();
            let bm = self.bitmap.lock().unwrap();
            self.persist(&live, &bm).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(self.status())
    }

    /// Put a fresh, empty spare in place of failed member `disk` and start
    /// recovering it (MD's `--add` of a spare); `rebuild` fills it.
    pub fn replace(&self, disk: u32) -> Result<Status> {
        let shown = self.dir.display().to_string();
        {
            let mut live = self.live.write().unwrap();
            if disk >= self.cfg.disks {
                return Err(Error::config(format!(
                    "cannot replace disk {disk}: the array has disks 0..{}",
                    self.cfg.disks - 1
                )));
            }
            if !live.array.is_failed(disk) {
                return Err(Error::config(format!(
                    "disk {disk} is not failed: fail it first (`blocklab real fail`)"
                )));
            }
            let mut targets = live.array.recovering();
            if !targets.contains(&disk) {
                targets.push(disk);
            }
            // Check first that the data can be rebuilt at all.
            let mut probe = live.array.clone();
            probe.start_recovery(&targets)?;
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
            self.checkpoint_journal(&live).map_err(|e| Error::io(&shown, e))?;
            live.members[disk as usize] = None;
            let id = self.identity_of(disk, self.generation.load(Ordering::SeqCst));
            Member::create(&self.dir, self.cfg.disk_bytes, self.checksums, self.cfg.block_size, &id)
                .map_err(|e| Error::io(&shown, e))?;
            let m = Member::open(&self.dir, disk, self.checksums, self.direct).map_err(|e| Error::io(&shown, e))?;
            live.members[disk as usize] = Some(m);
            live.array = probe;
            self.membership.fetch_add(1, Ordering::SeqCst);
            self.array_changed();
            self.durable.lock().unwrap().clear();
            self.monitor.on.store(true, Ordering::SeqCst);
            for &d in &targets {
                live.recovering[d as usize] = true;
            }
            self.bad.lock().unwrap().retain(|r| r.disk != disk);
            let bm = self.bitmap.lock().unwrap();
            self.persist(&live, &bm).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(self.status())
    }

    /// MD's check (`repair` false) or repair of every stripe.
    pub fn check(&self, repair: bool) -> Result<ScrubReport> {
        let shown = self.dir.display().to_string();
        let mode = if repair { Mode::Repair } else { Mode::Check };
        let mut total = ScrubReport::default();
        {
            let live = self.live.read().unwrap();
            self.absorb_truncation(&live).map_err(|e| Error::io(&shown, e))?;
        }
        for row in 0..self.member_rows {
            let live = self.live.read().unwrap();
            let rows = plan_rows(&live.array.plan_scrub_row(row), live.array.chunk_blocks());
            let _g = self.rows.lock(&rows, repair);
            let (rep, fixes) = {
                let bad = self.bad.lock().unwrap().clone();
                scrub_row(&self.env(&live, &bad), row, mode)
            };
            total.add(&rep);
            if repair {
                self.apply_fixes(&live, &fixes).map_err(|e| Error::io(&shown, e))?;
            }
        }
        if repair {
            let live = self.live.read().unwrap();
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(total)
    }
}

/// Rows of a recovering array rebuilt on its spares: below the offset and
/// in the map beyond it.
pub(super) fn rebuilt_count(a: &Array, member_rows: u64) -> u64 {
    let m = a.rebuilt_map();
    let beyond: u64 = m.runs().iter().map(|&(s, e)| e - s).sum();
    (m.prefix() + beyond).min(member_rows)
}

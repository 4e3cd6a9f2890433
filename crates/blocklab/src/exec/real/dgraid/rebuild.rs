//! Live-block recovery (the paper's §6, Fig 9), on real bytes: a replaced
//! member gets only the copies of live blocks it held
//! (`Dgraid::rebuild_sources`), each read from a surviving copy, instead of
//! every block of the member. Beside it the report gives the time of a
//! whole-member copy on the same files (every block of a surviving member
//! read and written to a scratch file, in the same pieces, page cache
//! dropped before each pass), what a rebuild that knows nothing of liveness
//! costs here.
//!
//! The rebuild holds the array for its whole run (requests wait): a
//! request could otherwise move a block between the plan and its copy.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::map::Record;
use super::RealDgraid;
use crate::dgraid::layer::Copy;
use crate::error::{Error, Result};
use crate::exec::real::rebuild::{RebuildOptions, RebuildReport};

/// Blocks copied by one read and one write at most.
const RUN: u64 = 256;

/// Drop `f`'s cached pages, so a pass reads from the device.
fn drop_cache(f: &File) {
    // SAFETY: a valid descriptor; advice only.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Runs of a copy plan: consecutive member blocks whose sources are
/// consecutive blocks of one member.
fn runs(plan: &[(u64, Copy)]) -> Vec<(u64, Copy, u64)> {
    let mut out: Vec<(u64, Copy, u64)> = Vec::new();
    for &(dst, src) in plan {
        if let Some((d0, s0, n)) = out.last_mut() {
            if *n < RUN && *d0 + *n == dst && s0.disk == src.disk && s0.block + *n == src.block {
                *n += 1;
                continue;
            }
        }
        out.push((dst, src, 1));
    }
    out
}

impl RealDgraid {
    /// Rebuild every recovering member from the surviving copies of its
    /// live blocks. Blocks with no surviving copy are recorded lost (reads
    /// of them fail, never return the spare's zeroes).
    pub fn rebuild(&self, opts: &RebuildOptions, stop: &AtomicBool) -> Result<RebuildReport> {
        if !["md", "live"].contains(&opts.order.as_str()) {
            return Err(Error::config(format!(
                "--rebuild-order {}: a D-GRAID array rebuilds its live blocks (order `live`)",
                opts.order
            )));
        }
        let shown = self.dir().display().to_string();
        let io = |e: std::io::Error| Error::io(&shown, e);
        let mut g = self.lock();
        let disks = g.st.recovering.clone();
        if disks.is_empty() {
            return Err(Error::config(
                "no member is recovering: `real replace` a failed one first",
            ));
        }
        g.flush().map_err(io)?;
        let bs = g.st.block_size;
        let disk_blocks = g.st.disk_blocks;
        let mut rep = RebuildReport {
            order: "live".into(),
            disks: disks.clone(),
            rows_total: disk_blocks,
            row_kib: (bs / 1024).max(1),
            min_kbps: opts.min_kbps,
            max_kbps: opts.max_kbps,
            idle: "none".into(),
            priority: "same".into(),
            window: 1,
            ..RebuildReport::default()
        };
        let mut stats = BTreeMap::new();
        let (mut live_s, mut whole_s, mut lost, mut live) = (0.0, 0.0, 0u64, 0u64);
        let mut stopped = false;
        for &k in &disks {
            let unreadable = g.st.unreadable_mask();
            let layer = g.layer.as_ref();
            let plan = layer.map(|l| l.rebuild_sources(k, unreadable)).unwrap_or_default();
            live += plan.len() as u64;
            // Whole-member copy from a surviving member (the mirror partner
            // of dgraid1), for comparison.
            let partner = (0..g.st.disks)
                .map(|d| if g.st.level == "dgraid1" { k ^ 1 } else { d })
                .find(|&d| d != k && unreadable >> d & 1 == 0 && g.members[d as usize].is_some());
            if let Some(p) = partner {
                let src = g.members[p as usize].as_ref().expect("live");
                let scratch_path = self.dir().join("whole-copy.tmp");
                let scratch = File::create(&scratch_path).map_err(io)?;
                src.sync_data().map_err(io)?;
                drop_cache(src);
                let t = Instant::now();
                let mut buf = vec![0u8; (RUN * bs) as usize];
                let mut at = 0;
                while at < disk_blocks {
                    let n = RUN.min(disk_blocks - at);
                    let b = &mut buf[..(n * bs) as usize];
                    src.read_exact_at(b, at * bs).map_err(io)?;
                    scratch.write_all_at(b, at * bs).map_err(io)?;
                    at += n;
                }
                scratch.sync_data().map_err(io)?;
                whole_s += t.elapsed().as_secs_f64();
                drop(scratch);
                let _ = std::fs::remove_file(&scratch_path);
            }
            // The live copy.
            let have: Vec<(u64, Copy)> = plan.iter().filter_map(|&(d, s)| s.map(|s| (d, s))).collect();
            for f in g.members.iter().flatten() {
                f.sync_data().map_err(io)?;
                drop_cache(f);
            }
            let t = Instant::now();
            let mut buf = vec![0u8; (RUN * bs) as usize];
            for (dst, src, n) in runs(&have) {
                if stop.load(Ordering::SeqCst) {
                    stopped = true;
                    break;
                }
                let b = &mut buf[..(n * bs) as usize];
                g.members[src.disk as usize]
                    .as_ref()
                    .expect("a readable source")
                    .read_exact_at(b, src.block * bs)
                    .map_err(io)?;
                g.members[k as usize]
                    .as_ref()
                    .expect("the spare")
                    .write_all_at(b, dst * bs)
                    .map_err(io)?;
                rep.steps += 1;
                rep.rows_done += n;
            }
            g.members[k as usize]
                .as_ref()
                .expect("the spare")
                .sync_data()
                .map_err(io)?;
            live_s += t.elapsed().as_secs_f64();
            if stopped {
                break;
            }
            // Live blocks whose every other copy is gone: lost, not zeroes.
            let gone: Vec<u64> = plan.iter().filter(|x| x.1.is_none()).map(|x| x.0).collect();
            if !gone.is_empty() {
                let layer = g.layer.as_ref().expect("a plan came from it");
                let mut blocks: Vec<u64> = g
                    .tags
                    .keys()
                    .copied()
                    .filter(|&b| {
                        layer
                            .copies(b)
                            .iter()
                            .any(|c| c.disk == k && gone.binary_search(&c.block).is_ok())
                    })
                    .collect();
                blocks.sort_unstable();
                for b in blocks {
                    if g.lost.insert(b) {
                        lost += 1;
                        g.pending.push(Record::Lost { block: b });
                    }
                }
                g.commit().map_err(io)?;
            }
            g.st.recovering.retain(|&d| d != k);
        }
        g.bump(self.dir()).map_err(io)?;
        rep.finished = !stopped;
        rep.seconds = live_s;
        rep.avg_kbps = if live_s > 0.0 {
            (rep.rows_done * bs) as f64 / 1024.0 / live_s
        } else {
            0.0
        };
        rep.unrecoverable_blocks = lost;
        stats.insert("live_blocks".into(), live);
        stats.insert("member_blocks".into(), disk_blocks * disks.len() as u64);
        stats.insert("live_copy_us".into(), (live_s * 1e6) as u64);
        stats.insert("whole_member_copy_us".into(), (whole_s * 1e6) as u64);
        rep.order_stats = stats;
        Ok(rep)
    }
}

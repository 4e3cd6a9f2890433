//! The `live` order in time: on an idle array of constant-service disks a
//! live-block rebuild takes (extents + 1) × the service time, so its time
//! follows the live share; a full share takes md's time; under MD's speed
//! cap the time is the live bytes ÷ the cap, compact or spread.

use super::*;
use crate::array::{ArrayConfig, Level};
use crate::device::toy::ToyDisk;
use crate::device::DeviceModel;
use crate::dgraid::LiveLayout;
use crate::rebuild::{LiveParams, LiveSource};
use crate::stack::target::ArrayStack;
use crate::timed::replay::{run, vec_source, Discipline, ReplayConfig};
use crate::timed::ExecConfig;

type Maker = fn() -> crate::error::Result<Box<dyn DeviceModel>>;

fn const10() -> crate::error::Result<Box<dyn DeviceModel>> {
    Ok(Box::new(ToyDisk::constant(10.0)))
}

fn fast() -> crate::error::Result<Box<dyn DeviceModel>> {
    Ok(Box::new(ToyDisk::constant(0.01)))
}

/// A seeking disk: 1 ms + 0.01 ms per cylinder of 64 sectors + 0.002 ms per sector.
fn seeker() -> crate::error::Result<Box<dyn DeviceModel>> {
    Ok(Box::new(ToyDisk {
        per_sector_ms: 0.002,
        ..ToyDisk::linear(1.0, 0.01, 64)
    }))
}

/// `level` of `n` disks of `rows` 64 KiB rows (16 blocks), disk 0 lost and
/// rebuilt with `rc` on an idle array.
fn idle(level: Level, n: u32, rows: u64, make: Maker, rc: RebuildConfig) -> RebuildReport {
    let mut cfg = ArrayConfig::new(level, n);
    cfg.disk_bytes = rows * cfg.chunk_bytes;
    let mut a = Array::new(cfg).unwrap();
    a.fail(0).unwrap();
    let mut st = ArrayStack::new(a, make, false).unwrap().with_rebuild(rc).unwrap();
    let c = ReplayConfig {
        discipline: Discipline::Open { speedup: 1.0 },
        exec: ExecConfig {
            sectors_per_block: st.sectors_per_block(),
            ..Default::default()
        },
    };
    run(&mut st, &mut [vec_source(vec![])], &c).unwrap().rebuild.unwrap()
}

fn live(frac: f64, layout: LiveLayout, max_io: u64) -> RebuildConfig {
    RebuildConfig {
        order: "live".into(),
        params: crate::rebuild::OrderParams {
            live: LiveParams {
                source: LiveSource::Share { frac, layout, unit: 1 },
                max_io,
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn on_an_idle_array_the_time_is_extents_plus_one_service_times() {
    // RAID-1 of 2 constant 10 ms disks, 8 rows of 16 blocks (128 blocks).
    // Four steps in flight: the survivor reads extent k in 10k..10(k+1),
    // the spare writes it in 10(k+1)..10(k+2): K extents take 10(K+1) ms.
    let md = idle(Level::Raid1, 2, 8, const10, RebuildConfig::default());
    assert_eq!(md.rebuild_ms, 90.0);
    for (frac, layout, max_io, extents) in [
        (1.0, LiveLayout::Compact, 0, 8u64),
        (0.5, LiveLayout::Compact, 0, 4),
        (0.25, LiveLayout::Compact, 0, 2),
        (0.25, LiveLayout::Compact, 4, 8),
        (0.25, LiveLayout::Spread, 0, 32),
        (0.5, LiveLayout::Spread, 0, 64),
        (1.0, LiveLayout::Spread, 0, 8),
    ] {
        let b = idle(Level::Raid1, 2, 8, const10, live(frac, layout, max_io));
        let what = format!("{frac} {layout:?} max_io {max_io}");
        assert!(b.finished, "{what}");
        assert_eq!(b.order, "live");
        assert_eq!(b.rebuild_ms, 10.0 * (extents + 1) as f64, "{what}");
        let live_blocks = (frac * 128.0) as u64;
        assert_eq!(
            (
                b.rebuild_reads,
                b.rebuild_writes,
                b.rebuild_read_blocks,
                b.rebuild_write_blocks
            ),
            (extents, extents, live_blocks, live_blocks),
            "{what}"
        );
        assert_eq!(b.order_stats["extents"], extents);
        assert_eq!(b.rebuild_rows, 8, "every row is in sync at the end");
    }
    // A full share is md's rebuild exactly (same plans, same time), also on RAID-10.
    let full = idle(Level::Raid1, 2, 8, const10, live(1.0, LiveLayout::Compact, 0));
    assert_eq!(
        (full.rebuild_ms, full.rebuild_reads, full.rebuild_write_blocks),
        (md.rebuild_ms, md.rebuild_reads, md.rebuild_write_blocks)
    );
    let md10 = idle(Level::Raid10, 4, 16, seeker, RebuildConfig::default());
    let full10 = idle(Level::Raid10, 4, 16, seeker, live(1.0, LiveLayout::Compact, 0));
    assert_eq!(
        (md10.rebuild_ms, md10.rebuild_read_blocks),
        (full10.rebuild_ms, full10.rebuild_read_blocks)
    );
}

#[test]
fn nothing_live_finishes_at_once() {
    let b = idle(Level::Raid1, 2, 8, const10, live(0.0, LiveLayout::Compact, 0));
    assert!(b.finished);
    assert_eq!((b.rebuild_ms, b.rebuild_reads, b.rebuild_rows), (0.0, 0, 8));
}

#[test]
fn under_the_speed_cap_the_time_is_the_live_bytes_over_the_cap() {
    // RAID-1 of 2 fast disks (10 µs), 64 rows (4 MiB of member), capped at
    // 1,000 KB/s: the live KiB take KiB ÷ 1,000 s, compact or spread alike
    // (the cap counts the bytes copied), less the last window of 4 steps,
    // which the simple rule's exact waits let run ahead (4 chunks of 64 KiB
    // for md and compact, 4 single blocks of 4 KiB for spread).
    let capped = |rc: RebuildConfig| RebuildConfig { max_kbps: 1000, ..rc };
    let close = |got: f64, want: f64| (got - want).abs() < 0.01 * want + 1.0;
    let full = idle(Level::Raid1, 2, 64, fast, capped(RebuildConfig::default()));
    assert!(close(full.rebuild_ms, 4096.0 - 256.0), "{}", full.rebuild_ms);
    for frac in [0.25, 0.5] {
        for (layout, window_kib) in [(LiveLayout::Compact, 256.0), (LiveLayout::Spread, 16.0)] {
            let b = idle(Level::Raid1, 2, 64, fast, capped(live(frac, layout, 0)));
            let want = frac * 4096.0 - window_kib;
            assert!(
                close(b.rebuild_ms, want),
                "{frac} {layout:?}: {} ms, want {want}",
                b.rebuild_ms
            );
            assert!(b.pauses > 0, "the cap binds");
        }
    }
}

#[test]
fn on_a_seeking_disk_spread_costs_more_than_compact() {
    // Same share, more (and smaller) extents spread over the member: more
    // positioning per byte. Both beat md's full rebuild at half full.
    let md = idle(Level::Raid1, 2, 64, seeker, RebuildConfig::default());
    let c = idle(Level::Raid1, 2, 64, seeker, live(0.5, LiveLayout::Compact, 0));
    let s = idle(Level::Raid1, 2, 64, seeker, live(0.5, LiveLayout::Spread, 128));
    assert!(c.rebuild_ms < s.rebuild_ms, "{} {}", c.rebuild_ms, s.rebuild_ms);
    assert!(c.rebuild_ms < 0.6 * md.rebuild_ms, "{} {}", c.rebuild_ms, md.rebuild_ms);
    // Deterministic.
    let again = idle(Level::Raid1, 2, 64, seeker, live(0.5, LiveLayout::Spread, 128));
    assert_eq!(s, again);
}

//! The D-GRAID array in the stack: placement as the model run places,
//! copies coalesced into operations, failed disks, counted against timed,
//! diffusion in time, its keys.

use std::path::PathBuf;

use super::build::{build, Executor};
use super::result::StackResult;
use super::run::{run, TraceInput};
use super::spec::StackSpec;
use super::test_util::{self, parse_spec};
use crate::dgraid::run::{place_trace, write_trace, PlaceParams, TraceParams, TreeSpec};
use crate::dgraid::{Dgraid, DgraidConfig, DgraidLevel};
use crate::fsmodel::geometry::{Geometry, MkfsParams};
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::namespace::GenParams;
use crate::timed::replay::Discipline;
use crate::trace::{FsTag, Op, Request};

const FS: u64 = 64 << 20;

/// D-GRAID-`level` of `disks` toy disks of 1 GiB (1 ms + 0.01 ms per sector) over a
/// 64 MiB ext2 of 4 KiB blocks.
fn stack(level: &str, disks: u32, extra: &str) -> String {
    format!(
        "tenant_map = \"ignore\"\n[array]\nraid = \"{level}\"\ndisks = {disks}\n{extra}\n\
         [array.dgraid]\nfs_size = \"64MiB\"\nmeta_copies = {disks}\n\
         [device]\nmodel = \"toy:base=1,cyl=0,sector=0.01,cap=2097152\"\n"
    )
}

fn parse(text: &str, sets: &[&str]) -> crate::error::Result<StackSpec> {
    parse_spec(text, sets, "d.toml", PathBuf::new())
}

fn req(time: f64, op: Op, block: u64, n: u64, owner: u64, kind: BlockKind) -> Request {
    Request {
        time,
        op,
        offset: block * 4096,
        len: n * 4096,
        tenant: 0,
        fs: FsTag::new(&Tag::of(owner, kind, 2)).unwrap(),
    }
}

fn counted(s: &StackSpec, reqs: &[Request]) -> StackResult {
    test_util::counted(s, reqs, None)
}

/// One request at a time, no think time.
fn timed(s: &StackSpec, reqs: &[Request]) -> StackResult {
    let closed = Discipline::Closed {
        outstanding: 1,
        think_ms: 0.0,
    };
    test_util::timed(s, reqs, None, closed)
}

#[test]
fn a_file_system_trace_places_as_the_model_run_in_both_executors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.csv");
    let tree = TreeSpec {
        generate: Some(GenParams {
            dirs: 12,
            files: 90,
            max_file: 1 << 20,
            ..GenParams::default()
        }),
        ..TreeSpec::default()
    };
    write_trace(
        &TraceParams {
            tree,
            size: FS,
            ..TraceParams::default()
        },
        &path,
    )
    .unwrap();
    for (level, copies) in [("dgraid0", 1u32), ("dgraid1", 4)] {
        let reference = place_trace(&PlaceParams {
            trace: path.display().to_string(),
            fs_size: FS,
            level: level.into(),
            meta_copies: copies,
            ..PlaceParams::default()
        })
        .unwrap();
        let s = parse(&stack(level, 4, ""), &[&format!("array.dgraid.meta_copies={copies}")]).unwrap();
        let input = [TraceInput::new(path.display().to_string(), "csv")];
        let c = run(&s, &input, Executor::Count).unwrap();
        let t = run(&s, &input, Executor::Timed).unwrap();
        let (cd, td) = (c.dgraid.clone().unwrap(), t.dgraid.clone().unwrap());
        assert_eq!(cd, td, "{level}: counted and timed place alike");
        assert_eq!(cd.counts, reference.counts, "{level}");
        assert_eq!(cd.used, reference.used, "{level}");
        // Every physical write is a block of some disk operation.
        let a = c.array.clone().unwrap();
        assert_eq!(a.ops_by_cause["user"].write_blocks, cd.counts.physical_writes);
        assert_eq!(a.ops_by_cause, t.array.unwrap().ops_by_cause);
        assert_eq!((a.level.as_str(), a.unreadable_blocks), (level, 0));
        assert!(t.timing.unwrap().sim_time_ms > 0.0);
    }
}

#[test]
fn consecutive_copies_make_one_operation_and_mirrors_two() {
    // One 8-block write of a file's data, then its read: D-GRAID-0 writes
    // its home site once; D-GRAID-1 both disks of the pair; a read, one copy.
    let reqs = [
        req(0.0, Op::Write, 3000, 8, 40, BlockKind::Data),
        req(0.1, Op::Read, 3000, 8, 40, BlockKind::Data),
    ];
    for (level, writes) in [("dgraid0", 1u64), ("dgraid1", 2)] {
        let c = counted(&parse(&stack(level, 4, ""), &[]).unwrap(), &reqs);
        let u = c.array.unwrap().ops_by_cause["user"];
        assert_eq!(
            (u.writes, u.write_blocks, u.reads, u.read_blocks),
            (writes, 8 * writes, 1, 8),
            "{level}"
        );
        let busy: Vec<u64> = c.devices.iter().filter(|d| d.ops > 0).map(|d| d.disk as u64).collect();
        assert_eq!(busy.len() as u64, writes, "{level}: one home site (a pair for level 1)");
    }
}

#[test]
fn failed_disks_lose_the_files_homed_on_them() {
    // Eight files on D-GRAID-0 of 4 (4 metadata copies), disk 1 failed
    // from the start: reads of files homed there are unreadable, the others
    // are served; the reference layer says which are which.
    let geo = Geometry::mke2fs(&MkfsParams::new(FS, 4096)).unwrap();
    let mut layer = Dgraid::new(DgraidConfig::new(DgraidLevel::L0, 4, 4), &geo).unwrap();
    let mut reqs = Vec::new();
    let mut lost = 0;
    for f in 0..8u64 {
        let b = 3000 + f * 16;
        reqs.push(req(f as f64, Op::Write, b, 4, 40 + f, BlockKind::Data));
        for x in b..b + 4 {
            let copies = layer.write(x, &Tag::of(40 + f, BlockKind::Data, 2)).unwrap();
            lost += copies.iter().all(|c| c.disk == 1) as u64;
        }
    }
    for f in 0..8u64 {
        reqs.push(req(
            10.0 + f as f64,
            Op::Read,
            3000 + f * 16,
            4,
            40 + f,
            BlockKind::Data,
        ));
    }
    assert!(lost > 0 && lost < 32, "some files are homed on disk 1: {lost}");
    let s = parse(&stack("dgraid0", 4, "failed = [1]"), &[]).unwrap();
    let c = counted(&s, &reqs);
    let t = timed(&s, &reqs);
    let a = c.array.unwrap();
    // Writes to a failed home site store nothing, reads of them fail: both unreadable.
    assert_eq!(a.unreadable_blocks, 2 * lost);
    assert_eq!(a.failed, vec![1]);
    assert_eq!(t.array.unwrap().unreadable_blocks, 2 * lost);
    assert_eq!(t.timing.unwrap().unreadable, 2 * lost / 4, "whole files");
    // The disks fail only at request 8 (`fail_at`): the writes all succeed.
    let s = parse(&stack("dgraid0", 4, "failed = [1]\nfail_at = \"8req\""), &[]).unwrap();
    assert_eq!(counted(&s, &reqs).array.unwrap().unreadable_blocks, lost);
    // D-GRAID-1 survives the loss of one disk of a pair.
    let s = parse(&stack("dgraid1", 4, "failed = [1]"), &[]).unwrap();
    assert_eq!(counted(&s, &reqs).array.unwrap().unreadable_blocks, 0);
}

#[test]
fn diffusion_spreads_a_hot_file_over_the_disks_in_time() {
    // A 1 MiB file read whole three times (256 blocks, one request each):
    // with diffusion (1 MiB segments, threshold 2) the third read goes to
    // the striped copy: four 64-block operations in parallel instead of
    // one of 256 blocks on the home site.
    let mut reqs = vec![req(0.0, Op::Write, 4096, 256, 50, BlockKind::Data)];
    for i in 0..3 {
        reqs.push(req(1.0 + i as f64, Op::Read, 4096, 256, 50, BlockKind::Data));
    }
    let last_read = |extra: &str| {
        let s = parse(&stack("dgraid0", 4, ""), &[]).unwrap();
        let s = if extra.is_empty() {
            s
        } else {
            parse(&stack("dgraid0", 4, ""), &[extra, "array.dgraid.diffuse_threshold=2"]).unwrap()
        };
        let all = timed(&s, &reqs).timing.unwrap().sim_time_ms;
        let before = timed(&s, &reqs[..3]).timing.unwrap().sim_time_ms;
        (all - before, counted(&s, &reqs).dgraid.unwrap().counts)
    };
    let (plain, _) = last_read("");
    let (diffused, counts) = last_read("array.dgraid.diffuse_segment=\"1MiB\"");
    // One op of 2,048 sectors: 1 + 20.48 ms; four of 512 in parallel: 1 + 5.12 ms.
    assert!((plain - 21.48).abs() < 1e-6, "{plain}");
    assert!((diffused - 6.12).abs() < 1e-6, "{diffused}");
    assert_eq!((counts.diffused_segments, counts.reads_from_diffused), (1, 256));
}

#[test]
fn writes_need_the_annotation_and_bad_keys_name_themselves() {
    let s = parse(&stack("dgraid0", 4, ""), &[]).unwrap();
    let plain = Request {
        fs: FsTag::NONE,
        ..req(0.0, Op::Write, 10, 1, 5, BlockKind::Data)
    };
    let mut st = build(&s, Executor::Count, None).unwrap();
    let e = st.count_request(&plain).unwrap_err().to_string();
    assert!(e.contains("file-system annotation"), "{e}");
    let beyond = req(0.0, Op::Read, FS / 4096, 1, 5, BlockKind::Data);
    let e = st.count_request(&beyond).unwrap_err().to_string();
    assert!(e.contains("beyond the 16384-block file system"), "{e}");
    let err = |text: String, sets: &[&str]| parse(&text, sets).unwrap_err().to_string();
    let base = stack("dgraid1", 4, "");
    assert!(err(base.clone(), &["array.disks=3"]).starts_with("d.toml: key `array.disks`: dgraid1 mirrors on pairs"));
    assert!(err(base.clone(), &["array.dgraid.meta_copies=5"]).starts_with("d.toml: key `array.dgraid.meta_copies`"));
    assert!(err(base.clone(), &["array.dgraid.grouping=disk"]).starts_with("d.toml: key `array.dgraid.grouping`"));
    assert!(err(base.clone(), &["array.raid=dgraid5"]).starts_with("d.toml: key `array.raid`: unknown D-GRAID level"));
    assert!(err(base.clone(), &["array.dgraid.diffuse_segment=\"6KiB\""])
        .starts_with("d.toml: key `array.dgraid.diffuse_segment`"));
    assert!(err(base.clone(), &["array.rebuild.at=0"])
        .starts_with("d.toml: key `array.rebuild`: a D-GRAID array is not rebuilt"));
    assert!(err(base.clone(), &["array.wrap=true"]).starts_with("d.toml: key `array.wrap`"));
    assert!(err(base.clone(), &["cache.0.policy=lru", "cache.0.size=100"]).starts_with("d.toml: key `cache`"));
    assert!(err(base.replace("fs_size = \"64MiB\"\n", ""), &[])
        .starts_with("d.toml: key `array.dgraid.fs_size`: a D-GRAID array needs"));
    assert!(err(base.replace("dgraid1", "raid5"), &[]).starts_with("d.toml: key `array.dgraid`: only a D-GRAID array"));
    // Members larger than the device.
    let s = parse(&stack("dgraid0", 4, "disk_size = \"64GiB\""), &[]).unwrap();
    assert!(build(&s, Executor::Timed, None).is_err());
}

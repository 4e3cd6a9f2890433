//! Annotated traces of model workloads, for the timed stack: the block I/O
//! of the ext2 model as native CSV requests with their `owner,kind,parent`
//! columns (a D-GRAID array places them; any other array ignores them).
//!
//! A request is a run of consecutive blocks with the same operation and
//! annotation, at most `max_request` bytes (as a block layer merges
//! adjacent I/O); requests are 1 µs apart (these traces are meant for
//! closed-loop replay, which ignores the times). Block-bitmap contents are
//! not in a trace (a D-GRAID array's live map then only grows).
//!
//! * [`postmark_trace`]: Table 2's Postmark-like workload (the counted
//!   `dgraid postmark` run, same parameters);
//! * [`seqread_trace`]: Fig 7's experiment: one file written, then read
//!   whole `passes + 1` times (the passes diffuse it);
//! * [`readers_trace`]: Fig 9's: a tree copied in, then random whole-file
//!   reads (each file's inode block and data).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::model::fitting_size;
use super::run::{PostmarkParams, TreeSpec};
use crate::error::{Error, Result};
use crate::fsmodel::fs::{FileSystem, FsOptions};
use crate::fsmodel::geometry::{MkfsParams, ROOT_INO};
use crate::fsmodel::kind::{BlockIo, Tag};
use crate::fsmodel::namespace::EntryType;
use crate::fsmodel::Allocator;
use crate::trace::native_csv::{write_annotated, ANNOTATED_HEADER};
use crate::trace::{FsTag, Op, Request};

/// What a trace writer wrote.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WorkloadSummary {
    pub requests: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    pub read_blocks: u64,
    pub write_blocks: u64,
    pub fs_bytes: u64,
    pub block_size: u64,
    /// Requests of each phase (the writers name them), in order: e.g.
    /// `[("populate", n), ("reads", m)]`; a phase starts at the request
    /// index that is the sum of those before it.
    pub phases: Vec<(String, u64)>,
}

/// Model block I/O → merged annotated requests.
struct TraceOut {
    w: std::io::BufWriter<std::fs::File>,
    name: String,
    bs: u64,
    max_blocks: u64,
    run: Option<(Op, u64, u64, Tag)>,
    sum: WorkloadSummary,
    phase_start: u64,
}

impl TraceOut {
    fn create(out: &Path, bs: u64, max_request: u64) -> Result<TraceOut> {
        let name = out.display().to_string();
        if max_request < bs {
            return Err(Error::config(format!(
                "the largest request ({max_request} B) is less than a block ({bs} B)"
            )));
        }
        let f = std::fs::File::create(out).map_err(|e| Error::io(&name, e))?;
        let mut w = std::io::BufWriter::new(f);
        writeln!(w, "{ANNOTATED_HEADER}").map_err(|e| Error::io(&name, e))?;
        Ok(TraceOut {
            w,
            name,
            bs,
            max_blocks: max_request / bs,
            run: None,
            sum: WorkloadSummary {
                block_size: bs,
                ..WorkloadSummary::default()
            },
            phase_start: 0,
        })
    }

    fn emit(&mut self) -> Result<()> {
        let Some((op, first, n, tag)) = self.run.take() else {
            return Ok(());
        };
        let r = Request {
            time: self.sum.requests as f64 * 1e-6,
            op,
            offset: first * self.bs,
            len: n * self.bs,
            tenant: 0,
            fs: FsTag::NONE,
        };
        write_annotated(&mut self.w, &r, Some(&tag)).map_err(|e| Error::io(&self.name, e))?;
        self.sum.requests += 1;
        match op {
            Op::Read => {
                self.sum.read_requests += 1;
                self.sum.read_blocks += n;
            }
            Op::Write => {
                self.sum.write_requests += 1;
                self.sum.write_blocks += n;
            }
        }
        Ok(())
    }

    fn push(&mut self, io: Vec<BlockIo>) -> Result<()> {
        for x in io {
            match &mut self.run {
                Some((op, first, n, tag))
                    if *op == x.op && *tag == x.tag && *first + *n == x.block && *n < self.max_blocks =>
                {
                    *n += 1
                }
                _ => {
                    self.emit()?;
                    self.run = Some((x.op, x.block, 1, x.tag));
                }
            }
        }
        Ok(())
    }

    /// End a phase: no request spans two phases.
    fn phase(&mut self, name: &str) -> Result<()> {
        self.emit()?;
        self.sum
            .phases
            .push((name.to_string(), self.sum.requests - self.phase_start));
        self.phase_start = self.sum.requests;
        Ok(())
    }

    fn finish(mut self, fs_bytes: u64) -> Result<WorkloadSummary> {
        self.emit()?;
        self.w.flush().map_err(|e| Error::io(&self.name, e))?;
        self.sum.fs_bytes = fs_bytes;
        Ok(self.sum)
    }
}

/// Table 2's workload as a trace: the Postmark-like run of `dgraid
/// postmark` (its parameters; the copy counts and disks are the array's
/// business, not the trace's), one phase.
pub fn postmark_trace(p: &PostmarkParams, out: &Path, max_request: u64) -> Result<WorkloadSummary> {
    let pm = p.workload();
    let mut t = TraceOut::create(out, p.block_size, max_request)?;
    let fs = pm.run(&mut |fs| t.push(fs.drain_io()))?;
    t.phase("postmark")?;
    t.finish(fs.geometry().blocks * p.block_size)
}

/// Fig 7's experiment.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SeqReadParams {
    pub file_bytes: u64,
    /// Whole-file reads before the measured one (they diffuse the file).
    pub passes: u64,
    pub block_size: u64,
    /// File-system size (0: eight times the file and the flush files, at least 64 MiB).
    pub fs_size: u64,
    pub max_request: u64,
    /// Files of `flush_bytes` written with the file and read whole just
    /// before the measured read, so that the drives' caches no longer hold
    /// the file (0: none).
    pub flush_files: u64,
    pub flush_bytes: u64,
    /// The allocator that writes the files (`libext2fs` or `linux22`).
    pub allocator: Allocator,
}

impl Default for SeqReadParams {
    fn default() -> Self {
        SeqReadParams {
            file_bytes: 1 << 20,
            passes: 2,
            block_size: 4096,
            fs_size: 0,
            max_request: 256 << 10,
            flush_files: 4,
            flush_bytes: 16 << 20,
            allocator: Allocator::Libext2fs,
        }
    }
}

/// One file of `file_bytes` written with the flush files (and synced),
/// read whole `passes` times, the flush files read, then the file read
/// once more. Phases: `write`, `pass1` .. `passN`, `flush`, `measured`.
pub fn seqread_trace(p: &SeqReadParams, out: &Path) -> Result<WorkloadSummary> {
    let size = if p.fs_size == 0 {
        ((p.file_bytes + p.flush_files * p.flush_bytes) * 8)
            .max(64 << 20)
            .div_ceil(1 << 20)
            << 20
    } else {
        p.fs_size
    };
    let mut fs = FileSystem::mkfs(&FsOptions {
        mkfs: MkfsParams::new(size, p.block_size),
        flush_every: 0,
        allocator: p.allocator,
    })?;
    let mut t = TraceOut::create(out, p.block_size, p.max_request)?;
    t.push(fs.drain_io())?;
    let ino = fs.create(ROOT_INO, "f", p.file_bytes)?;
    let flush: Vec<u64> = (0..p.flush_files)
        .map(|i| fs.create(ROOT_INO, &format!("flush{i}"), p.flush_bytes))
        .collect::<Result<_>>()?;
    fs.sync();
    t.push(fs.drain_io())?;
    t.phase("write")?;
    for i in 0..p.passes {
        fs.read_whole(ino)?;
        t.push(fs.drain_io())?;
        t.phase(&format!("pass{}", i + 1))?;
    }
    for &f in &flush {
        fs.read_whole(f)?;
        t.push(fs.drain_io())?;
    }
    t.phase("flush")?;
    fs.read_whole(ino)?;
    t.push(fs.drain_io())?;
    t.phase("measured")?;
    t.finish(fs.geometry().blocks * p.block_size)
}

/// Fig 9's workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadersParams {
    pub tree: TreeSpec,
    pub block_size: u64,
    /// File-system size (0: fitted to the tree at `fill`).
    pub size: u64,
    pub fill: f64,
    /// Whole-file reads of files drawn uniformly (seeded).
    pub reads: u64,
    pub seed: u64,
    pub max_request: u64,
}

impl Default for ReadersParams {
    fn default() -> Self {
        ReadersParams {
            tree: TreeSpec::default(),
            block_size: 4096,
            size: 0,
            fill: 0.5,
            reads: 10_000,
            seed: 1,
            max_request: 128 << 10,
        }
    }
}

/// The tree copied into a fresh file system (phase `populate`, synced),
/// then `reads` whole-file reads of random files (phase `reads`): each
/// file's inode-table block and data (directories and the path walk are
/// taken to be cached, as a running reader's would be).
pub fn readers_trace(p: &ReadersParams, out: &Path) -> Result<WorkloadSummary> {
    let ns = p.tree.load()?;
    let size = if p.size == 0 {
        fitting_size(&ns, p.block_size, p.fill)
    } else {
        p.size
    };
    let mut fs = FileSystem::mkfs(&FsOptions {
        mkfs: MkfsParams::new(size, p.block_size),
        flush_every: 0,
        allocator: crate::fsmodel::Allocator::Libext2fs,
    })?;
    let mut t = TraceOut::create(out, p.block_size, p.max_request)?;
    t.push(fs.drain_io())?;
    let inos = fs.populate_each(&ns, |_, _, fs| t.push(fs.drain_io()))?;
    fs.sync();
    t.push(fs.drain_io())?;
    t.phase("populate")?;
    let files: Vec<u64> = (1..ns.len())
        .filter(|&id| ns.entries[id].kind == EntryType::File && ns.entries[id].size > 0)
        .map(|id| inos[id])
        .collect();
    if files.is_empty() && p.reads > 0 {
        return Err(Error::config("the tree has no non-empty file to read"));
    }
    let mut rng = crate::trace::synth::SplitMix64::new(p.seed ^ 0x7265_6164);
    for _ in 0..p.reads {
        let ino = files[(rng.next_u64() % files.len() as u64) as usize];
        fs.read_whole(ino)?;
        t.push(fs.drain_io())?;
        t.emit()?;
    }
    t.phase("reads")?;
    t.finish(fs.geometry().blocks * p.block_size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::native_csv::read_annotated;

    #[test]
    fn runs_of_one_annotation_merge_up_to_the_largest_request() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s.csv");
        let s = seqread_trace(
            &SeqReadParams {
                file_bytes: 1 << 20,
                passes: 1,
                max_request: 128 << 10,
                flush_files: 0,
                ..SeqReadParams::default()
            },
            &out,
        )
        .unwrap();
        let recs: Vec<_> = read_annotated(&out).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(recs.len() as u64, s.requests);
        let names: Vec<&str> = s.phases.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["write", "pass1", "flush", "measured"]);
        assert_eq!(s.phases.iter().map(|p| p.1).sum::<u64>(), s.requests);
        // A measured pass: the inode block, the indirect block, the data in
        // at most 32-block requests (256 data blocks, two runs split by the
        // indirect block after the 12 direct ones).
        let measured = &recs[(s.requests - s.phases[3].1) as usize..];
        let data: u64 = measured
            .iter()
            .filter(|r| r.2.unwrap().kind == crate::fsmodel::kind::BlockKind::Data)
            .map(|r| r.1.len / 4096)
            .sum();
        assert_eq!(data, 256);
        assert!(measured.iter().all(|r| r.1.len <= 128 << 10 && r.1.op == Op::Read));
        assert!(measured.len() <= 2 + 256 / 32 + 2, "{}", measured.len());
        assert_eq!(s.read_blocks, 2 * (256 + 2));
    }

    #[test]
    fn flush_files_are_read_between_the_passes_and_the_measured_read() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s.csv");
        let p = SeqReadParams {
            file_bytes: 256 << 10,
            passes: 2,
            flush_files: 3,
            flush_bytes: 1 << 20,
            ..SeqReadParams::default()
        };
        let s = seqread_trace(&p, &out).unwrap();
        let names: Vec<&str> = s.phases.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["write", "pass1", "pass2", "flush", "measured"]);
        let recs: Vec<_> = read_annotated(&out).unwrap().collect::<Result<_>>().unwrap();
        let data_read = |from: u64, n: u64| -> u64 {
            recs[from as usize..(from + n) as usize]
                .iter()
                .filter(|r| r.1.op == Op::Read && r.2.unwrap().kind == crate::fsmodel::kind::BlockKind::Data)
                .map(|r| r.1.len / 4096)
                .sum()
        };
        let start = |i: usize| s.phases[..i].iter().map(|p| p.1).sum::<u64>();
        // Every flush file read whole in the flush phase, the file alone in the others.
        assert_eq!(data_read(start(3), s.phases[3].1), 3 * 256);
        assert_eq!(data_read(start(4), s.phases[4].1), 64);
        assert_eq!(data_read(start(1), s.phases[1].1), 64);
        // The flush files are written with the file.
        let written: u64 = recs[..s.phases[0].1 as usize]
            .iter()
            .filter(|r| r.1.op == Op::Write && r.2.unwrap().kind == crate::fsmodel::kind::BlockKind::Data)
            .map(|r| r.1.len / 4096)
            .sum();
        assert_eq!(written, 64 + 3 * 256);
    }

    #[test]
    fn postmark_and_readers_traces_are_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let pm = PostmarkParams {
            files: 50,
            transactions: 200,
            size: 64 << 20,
            flush_every: 50,
            ..PostmarkParams::default()
        };
        let a = postmark_trace(&pm, &dir.path().join("a.csv"), 64 << 10).unwrap();
        let b = postmark_trace(&pm, &dir.path().join("b.csv"), 64 << 10).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            std::fs::read(dir.path().join("a.csv")).unwrap(),
            std::fs::read(dir.path().join("b.csv")).unwrap()
        );
        assert!(a.write_blocks > a.write_requests && a.read_requests > 0);
        let rp = ReadersParams {
            tree: TreeSpec {
                generate: Some(crate::fsmodel::namespace::GenParams {
                    dirs: 5,
                    files: 40,
                    max_file: 64 << 10,
                    ..Default::default()
                }),
                ..TreeSpec::default()
            },
            reads: 30,
            ..ReadersParams::default()
        };
        let r = readers_trace(&rp, &dir.path().join("r.csv")).unwrap();
        assert_eq!(r.phases[1].0, "reads");
        assert!(r.phases[1].1 >= 30, "a read is one request or more");
        assert!(postmark_trace(&pm, &dir.path().join("c.csv"), 1024).is_err());
    }
}

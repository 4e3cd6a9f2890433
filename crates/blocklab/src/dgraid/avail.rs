//! Availability under k failed disks.
//!
//! Definitions (the paper's where it gives one):
//! * a file is available when every block it needs has a readable copy: its
//!   inode's inode-table block, its indirect and data blocks, and everything
//!   the path from the root needs (each ancestor directory's inode block and
//!   directory blocks; the root also needs the superblock and descriptors);
//! * a directory is available when it is reachable and all of its files are
//!   available ("a directory is available if all of its files are
//!   accessible (although subdirectories and their files may not be)");
//! * a process is fine when its executable, libraries and user files are all
//!   available;
//! * the namespace is navigable when every directory is reachable;
//!   `namespace_navigable` is the share of failure sets where it is.
//!
//! A block's need is a set of disks: all of them must survive (one copy, or
//! striping), or at least one must (copies). Under MD semantics a RAID
//! volume is either whole or lost, so every share is the probability that
//! the array survives. Each failure count is evaluated over every failure
//! set when there are at most `exact_limit` of them, else over `trials`
//! seeded random sets.

use serde::Serialize;

use crate::array::{Array, ArrayConfig, Level};
use crate::error::{Error, Result};
use crate::fsmodel::fs::FileSystem;
use crate::fsmodel::namespace::{EntryType, Namespace};
use crate::trace::synth::{SplitMix64, Zipf};

/// What a block needs to be readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Always readable (under the failure count at hand).
    Free,
    /// Every disk of the mask must survive.
    All(u64),
    /// At least one disk of the mask must survive.
    Any(u64),
}

/// Requirement of an entity: disks that must all survive, and sets of which
/// at least one disk must.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Req {
    pub all: u64,
    pub any: Vec<u64>,
}

impl Req {
    pub fn add(&mut self, n: Need) {
        match n {
            Need::Free => {}
            Need::All(m) => self.all |= m,
            Need::Any(m) if m.count_ones() == 1 => self.all |= m,
            Need::Any(m) => {
                if !self.any.contains(&m) {
                    self.any.push(m);
                }
            }
        }
    }

    /// Drop the sets made redundant by `all` (if all of `all` survive, any
    /// set meeting it has a survivor).
    pub fn simplify(&mut self) {
        let all = self.all;
        self.any.retain(|&m| m & all == 0);
        self.any.sort_unstable();
        self.any.dedup();
    }

    #[inline]
    pub fn ok(&self, failed: u64) -> bool {
        self.all & failed == 0 && self.any.iter().all(|&m| m & !failed != 0)
    }
}

/// The entities whose availability is measured.
#[derive(Debug, Clone, Default)]
pub struct Structure {
    /// Directories, parents before children; `dir_parent[0]` is 0 (the root).
    pub dir_parent: Vec<usize>,
    pub dir_req: Vec<Req>,
    /// Regular files: their directory and requirement.
    pub file_dir: Vec<usize>,
    pub file_req: Vec<Req>,
    /// Namespace entry of each file (to build processes).
    pub file_entry: Vec<usize>,
    /// Processes: the files each needs.
    pub processes: Vec<Vec<usize>>,
}

/// Build the structure of a populated model; `need(block)` says what each
/// block needs.
pub fn structure(ns: &Namespace, fs: &FileSystem, inos: &[u64], need: &dyn Fn(u64) -> Need) -> Structure {
    let geo = fs.geometry();
    let mut s = Structure::default();
    let mut dir_index = vec![usize::MAX; ns.len()];
    let mut order = vec![0usize];
    order.extend(ns.creation_order());
    for id in order {
        let e = &ns.entries[id];
        let Some(inode) = fs.inode(inos[id]) else { continue };
        let mut r = Req::default();
        r.add(need(geo.inode_block(inos[id])));
        for b in inode.map.all_blocks() {
            r.add(need(b));
        }
        match e.kind {
            EntryType::Dir => {
                if id == 0 {
                    r.add(need(geo.superblock()));
                    for g in 0..geo.group_count() {
                        r.add(need(geo.descriptor_block_of_group(g)));
                    }
                }
                r.simplify();
                dir_index[id] = s.dir_parent.len();
                s.dir_parent.push(if id == 0 { 0 } else { dir_index[e.parent] });
                s.dir_req.push(r);
            }
            EntryType::File => {
                r.simplify();
                s.file_dir.push(dir_index[e.parent]);
                s.file_req.push(r);
                s.file_entry.push(id);
            }
            EntryType::Symlink | EntryType::Special => {}
        }
    }
    s
}

/// Process model (Fig 3): an executable from the `bin` directories (Zipf by
/// a seeded rank), 2–6 libraries from the `lib` directories (Zipf), 0–3 user
/// files from elsewhere (uniform). Without executables or libraries in the
/// tree, any file stands in.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessModel {
    pub count: usize,
    pub exec_dirs: Vec<String>,
    pub lib_dirs: Vec<String>,
    pub zipf_alpha: f64,
    pub seed: u64,
}

/// The default popular directories (paths from the root, no leading `/`).
pub const EXEC_DIRS: &[&str] = &["bin", "sbin", "usr/bin", "usr/sbin"];
pub const LIB_DIRS: &[&str] = &["lib", "lib64", "usr/lib", "usr/lib64"];

impl Default for ProcessModel {
    fn default() -> Self {
        ProcessModel {
            count: 1000,
            exec_dirs: EXEC_DIRS.iter().map(|s| s.to_string()).collect(),
            lib_dirs: LIB_DIRS.iter().map(|s| s.to_string()).collect(),
            zipf_alpha: 1.0,
            seed: 1,
        }
    }
}

/// Whether `path` lies under one of `dirs`.
pub fn under(path: &str, dirs: &[String]) -> bool {
    dirs.iter().any(|d| {
        let d = d.trim_matches('/');
        !d.is_empty() && path.len() > d.len() && path.starts_with(d) && path.as_bytes()[d.len()] == b'/'
    })
}

fn shuffled(mut v: Vec<usize>, rng: &mut SplitMix64) -> Vec<usize> {
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Add processes to a structure.
pub fn add_processes(s: &mut Structure, ns: &Namespace, pm: &ProcessModel) -> Result<()> {
    if s.file_req.is_empty() || pm.count == 0 {
        return Ok(());
    }
    let mut rng = SplitMix64::new(pm.seed ^ 0x7072_6f63);
    let mut exec = Vec::new();
    let mut libs = Vec::new();
    let mut user = Vec::new();
    for (fi, &id) in s.file_entry.iter().enumerate() {
        let p = ns.path(id);
        if under(&p, &pm.exec_dirs) {
            exec.push(fi);
        } else if under(&p, &pm.lib_dirs) {
            libs.push(fi);
        } else {
            user.push(fi);
        }
    }
    let all: Vec<usize> = (0..s.file_req.len()).collect();
    let exec = shuffled(if exec.is_empty() { all.clone() } else { exec }, &mut rng);
    let libs = shuffled(libs, &mut rng);
    let user = if user.is_empty() { all } else { user };
    let ze = Zipf::new(exec.len() as u64, pm.zipf_alpha)?;
    let zl = if libs.is_empty() {
        None
    } else {
        Some(Zipf::new(libs.len() as u64, pm.zipf_alpha)?)
    };
    for _ in 0..pm.count {
        let mut p = vec![exec[ze.sample(&mut rng) as usize]];
        if let Some(z) = &zl {
            for _ in 0..2 + rng.next_u64() % 5 {
                p.push(libs[z.sample(&mut rng) as usize]);
            }
        }
        for _ in 0..rng.next_u64() % 4 {
            p.push(user[(rng.next_u64() % user.len() as u64) as usize]);
        }
        p.sort_unstable();
        p.dedup();
        s.processes.push(p);
    }
    Ok(())
}

/// One failure count's result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AvailRow {
    pub failed_count: u32,
    pub files_available: f64,
    pub dirs_available: f64,
    pub processes_available: f64,
    pub namespace_navigable: f64,
    /// Mean share of directories reachable from the root.
    pub dirs_reachable: f64,
    /// As `dirs_available` over the directories holding at least one file.
    pub nonempty_dirs_available: f64,
    /// `exact` (every failure set) or `monte-carlo`.
    pub method: &'static str,
    /// Failure sets evaluated.
    pub sets: u64,
}

/// Shares for one failure set.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    files: f64,
    dirs: f64,
    procs: f64,
    navigable: f64,
    reachable: f64,
    nonempty: f64,
}

fn evaluate(
    s: &Structure,
    failed: u64,
    reach: &mut Vec<bool>,
    bad: &mut Vec<u32>,
    fok: &mut Vec<bool>,
    has_files: &[bool],
) -> Tally {
    let nd = s.dir_parent.len();
    reach.clear();
    reach.resize(nd, false);
    bad.clear();
    bad.resize(nd, 0);
    let mut reachable = 0usize;
    for d in 0..nd {
        let up = d == 0 || reach[s.dir_parent[d]];
        reach[d] = up && s.dir_req[d].ok(failed);
        reachable += reach[d] as usize;
    }
    fok.clear();
    let mut files_ok = 0usize;
    for (f, r) in s.file_req.iter().enumerate() {
        let d = s.file_dir[f];
        let ok = reach[d] && r.ok(failed);
        fok.push(ok);
        if ok {
            files_ok += 1;
        } else {
            bad[d] += 1;
        }
    }
    let dirs_ok = (0..nd).filter(|&d| reach[d] && bad[d] == 0).count();
    let nonempty = has_files.iter().filter(|&&h| h).count();
    let nonempty_ok = (0..nd).filter(|&d| has_files[d] && reach[d] && bad[d] == 0).count();
    let procs_ok = s.processes.iter().filter(|p| p.iter().all(|&f| fok[f])).count();
    let share = |a: usize, n: usize| if n == 0 { 1.0 } else { a as f64 / n as f64 };
    Tally {
        files: share(files_ok, s.file_req.len()),
        dirs: share(dirs_ok, nd),
        procs: share(procs_ok, s.processes.len()),
        navigable: (reachable == nd) as u8 as f64,
        reachable: share(reachable, nd),
        nonempty: share(nonempty_ok, nonempty),
    }
}

/// C(n, k) saturating at u64::MAX.
pub fn binomial(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut r: u128 = 1;
    for i in 0..k {
        r = r * (n - i) as u128 / (i + 1) as u128;
        if r > u64::MAX as u128 {
            return u64::MAX;
        }
    }
    r as u64
}

/// Every k-subset of 0..d as a mask, in increasing order (Gosper's hack).
fn subsets(d: u32, k: u32) -> impl Iterator<Item = u64> {
    let limit: u64 = if d == 64 { u64::MAX } else { (1u64 << d) - 1 };
    let mut cur: Option<u64> = Some(if k == 0 { 0 } else { (u64::MAX >> (64 - k)) & limit });
    std::iter::from_fn(move || {
        let c = cur?;
        cur = if c == 0 || k == d {
            None
        } else {
            let lo = c & c.wrapping_neg();
            let r = c.wrapping_add(lo);
            if r == 0 || r > limit {
                None
            } else {
                let n = (((r ^ c) >> 2) / lo) | r;
                (n <= limit && n.count_ones() == k).then_some(n)
            }
        };
        Some(c)
    })
}

/// A random k-subset of 0..d (partial Fisher–Yates).
fn random_subset(d: u32, k: u32, rng: &mut SplitMix64) -> u64 {
    let mut v: Vec<u32> = (0..d).collect();
    let mut m = 0u64;
    for i in 0..k as usize {
        let j = i + (rng.next_u64() % (d as u64 - i as u64)) as usize;
        v.swap(i, j);
        m |= 1 << v[i];
    }
    m
}

/// How failure sets are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub trials: u64,
    pub seed: u64,
    /// Enumerate every set when there are at most this many (or at most `trials`).
    pub exact_limit: u64,
}

/// Failure sets for `k` of `d` disks: every set (exact) or `trials` random ones.
pub fn failure_sets(d: u32, k: u32, smp: &Sampling) -> (Vec<u64>, &'static str) {
    let n = binomial(d as u64, k as u64);
    if n <= smp.exact_limit.max(smp.trials) {
        (subsets(d, k).collect(), "exact")
    } else {
        let mut rng = SplitMix64::new(smp.seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ d as u64);
        (
            (0..smp.trials).map(|_| random_subset(d, k, &mut rng)).collect(),
            "monte-carlo",
        )
    }
}

/// Which failure sets to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub enum Failures {
    /// Each failure count, over every set or random ones.
    Counts(Vec<u32>, Sampling),
    /// One given set of failed disks.
    Set(u64),
}

impl Failures {
    /// (k, sets, method) per row.
    fn rows(&self, d: u32) -> Result<Vec<(u32, Vec<u64>, &'static str)>> {
        match self {
            Failures::Counts(ks, smp) => ks
                .iter()
                .map(|&k| {
                    if k > d {
                        return Err(Error::config(format!("--failed-count {k} exceeds the {d} disks")));
                    }
                    let (sets, m) = failure_sets(d, k, smp);
                    Ok((k, sets, m))
                })
                .collect(),
            Failures::Set(m) => {
                if d < 64 && m >> d != 0 {
                    return Err(Error::config(format!("failed disks beyond the {d} disks")));
                }
                Ok(vec![(m.count_ones(), vec![*m], "given")])
            }
        }
    }
}

/// Availability of a structure (block semantics) for each failure count.
pub fn availability_of(
    d: u32,
    ks: &[u32],
    smp: &Sampling,
    structure_for: &mut dyn FnMut(u32) -> Result<std::rc::Rc<Structure>>,
) -> Result<Vec<AvailRow>> {
    availability_over(d, &Failures::Counts(ks.to_vec(), *smp), structure_for)
}

/// Availability of a structure (block semantics) over the given failures.
pub fn availability_over(
    d: u32,
    failures: &Failures,
    structure_for: &mut dyn FnMut(u32) -> Result<std::rc::Rc<Structure>>,
) -> Result<Vec<AvailRow>> {
    let mut out = Vec::new();
    let (mut reach, mut bad, mut fok) = (Vec::new(), Vec::new(), Vec::new());
    for (k, sets, method) in failures.rows(d)? {
        let s = structure_for(k)?;
        let mut has_files = vec![false; s.dir_parent.len()];
        for &d in &s.file_dir {
            has_files[d] = true;
        }
        let mut t = Tally::default();
        for &f in &sets {
            let x = evaluate(&s, f, &mut reach, &mut bad, &mut fok, &has_files);
            t.nonempty += x.nonempty;
            t.files += x.files;
            t.dirs += x.dirs;
            t.procs += x.procs;
            t.navigable += x.navigable;
            t.reachable += x.reachable;
        }
        let n = sets.len() as f64;
        out.push(AvailRow {
            failed_count: k,
            files_available: t.files / n,
            dirs_available: t.dirs / n,
            processes_available: t.procs / n,
            namespace_navigable: t.navigable / n,
            dirs_reachable: t.reachable / n,
            nonempty_dirs_available: t.nonempty / n,
            method,
            sets: sets.len() as u64,
        });
    }
    Ok(out)
}

/// Distinct copy sets (as masks) of a mirrored MD array, over enough chunks
/// to see every pattern.
fn mirror_sets(a: &Array) -> Vec<u64> {
    let d = a.ndisks() as u64;
    let cb = a.chunk_blocks();
    let mut v: Vec<u64> = (0..d * 8)
        .map(|c| a.map(c * cb).disks.iter().fold(0u64, |m, &x| m | 1 << x))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether an MD array survives `failed` (its data all readable).
pub fn md_survives(a: &Array, failed: u64) -> bool {
    let k = failed.count_ones();
    match a.level() {
        Level::Raid0 => k == 0,
        Level::Raid1 | Level::Raid10 => mirror_sets(a).iter().all(|&m| m & !failed != 0),
        l => k <= l.parity_units(),
    }
}

/// MD semantics: every share is the probability that the array survives.
pub fn md_availability(cfg: &ArrayConfig, ks: &[u32], smp: &Sampling) -> Result<Vec<AvailRow>> {
    md_availability_over(cfg, &Failures::Counts(ks.to_vec(), *smp))
}

/// MD semantics over the given failures.
pub fn md_availability_over(cfg: &ArrayConfig, failures: &Failures) -> Result<Vec<AvailRow>> {
    let a = Array::new(*cfg)?;
    let d = cfg.disks;
    if d > 64 {
        return Err(Error::config("availability supports at most 64 disks"));
    }
    let mirrors = mirror_sets(&a);
    let mut out = Vec::new();
    for (k, sets, method) in failures.rows(d)? {
        let alive = sets
            .iter()
            .filter(|&&f| match a.level() {
                Level::Raid1 | Level::Raid10 => mirrors.iter().all(|&m| m & !f != 0),
                _ => md_survives(&a, f),
            })
            .count() as f64
            / sets.len() as f64;
        out.push(AvailRow {
            failed_count: k,
            files_available: alive,
            dirs_available: alive,
            processes_available: alive,
            namespace_navigable: alive,
            dirs_reachable: alive,
            nonempty_dirs_available: alive,
            method,
            sets: sets.len() as u64,
        });
    }
    Ok(out)
}

/// Block semantics over an MD array with `k` failed disks: what a block needs.
pub fn raid_need(a: &Array, block: u64, k: u32) -> Need {
    let p = a.map(block);
    let mask = p.disks.iter().fold(0u64, |m, &x| m | 1 << x);
    match a.level() {
        Level::Raid0 => Need::All(mask),
        Level::Raid1 | Level::Raid10 => Need::Any(mask),
        l => {
            if k <= l.parity_units() {
                Need::Free
            } else {
                Need::All(mask)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_enumerate_every_k_set_once() {
        for d in 1..=8u32 {
            for k in 0..=d {
                let v: Vec<u64> = subsets(d, k).collect();
                assert_eq!(v.len() as u64, binomial(d as u64, k as u64), "{d} {k}");
                assert!(v.iter().all(|m| m.count_ones() == k && *m < 1 << d));
                let mut w = v.clone();
                w.dedup();
                assert_eq!(w.len(), v.len());
            }
        }
        assert_eq!(subsets(64, 64).count(), 1);
        assert_eq!(subsets(64, 1).count(), 64);
    }

    #[test]
    fn random_subsets_have_k_disks_and_are_seeded() {
        let smp = Sampling {
            trials: 50,
            seed: 9,
            exact_limit: 0,
        };
        let (a, m) = failure_sets(32, 5, &smp);
        assert_eq!(m, "monte-carlo");
        assert!(a.iter().all(|x| x.count_ones() == 5 && *x < 1 << 32));
        assert_eq!(a, failure_sets(32, 5, &smp).0);
    }

    #[test]
    fn requirements_fold_single_copies_into_all() {
        let mut r = Req::default();
        r.add(Need::Any(0b100));
        r.add(Need::All(0b1));
        r.add(Need::Any(0b11));
        r.add(Need::Any(0b11000));
        r.simplify();
        assert_eq!(r.all, 0b101);
        assert_eq!(r.any, vec![0b11000]);
        assert!(r.ok(0b1000) && !r.ok(0b11000) && !r.ok(0b1));
    }

    #[test]
    fn raid10_md_survival_matches_the_closed_form() {
        // P(no mirror pair lost) = C(D/2, k) 2^k / C(D, k).
        for d in [4u32, 8, 12] {
            let cfg = ArrayConfig::new(Level::Raid10, d);
            let ks: Vec<u32> = (0..=d).collect();
            let smp = Sampling {
                trials: 10,
                seed: 1,
                exact_limit: 1 << 20,
            };
            let rows = md_availability(&cfg, &ks, &smp).unwrap();
            for r in rows {
                let k = r.failed_count as u64;
                let want = if k > d as u64 / 2 {
                    0.0
                } else {
                    binomial(d as u64 / 2, k) as f64 * (1u64 << k) as f64 / binomial(d as u64, k) as f64
                };
                assert!(
                    (r.files_available - want).abs() < 1e-12,
                    "d {d} k {k}: {} vs {want}",
                    r.files_available
                );
                assert_eq!(r.method, "exact");
            }
        }
        let raid5 = md_availability(
            &ArrayConfig::new(Level::Raid5, 5),
            &[0, 1, 2],
            &Sampling {
                trials: 10,
                seed: 1,
                exact_limit: 100,
            },
        )
        .unwrap();
        assert_eq!(
            raid5.iter().map(|r| r.files_available).collect::<Vec<_>>(),
            vec![1.0, 1.0, 0.0]
        );
    }
}

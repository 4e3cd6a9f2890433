//! A namespace to populate the model with: a tree of directories, files,
//! symbolic links and special files with their sizes.
//!
//! Two sources:
//! * a listing in `find DIR -printf '%y %s %p\n'` form (type letter, size in
//!   bytes, path). Paths are taken relative to the listing's root: a leading
//!   `/` or `./` is dropped, `.` alone is the root; missing ancestors are
//!   created as directories. Directory sizes are ignored (the model lays out
//!   its own directory blocks from the entries' names).
//! * [`generate`]: a seeded tree with the shapes of real file systems
//!   (Impressions-like, see [`GenParams`]).
//!
//! Children are kept in byte order of their names, the order `mke2fs -d`
//! copies a tree in (it sorts with `alphasort`; in the C locale that is byte
//! order).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Location, Result};
use crate::trace::synth::SplitMix64;

/// The type of an entry (`find`'s `%y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    /// Block or character device, fifo, socket: an inode and no blocks.
    Special,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub kind: EntryType,
    /// Bytes (files: contents; symlinks: length of the target).
    pub size: u64,
    /// Index of the parent directory (the root is its own parent).
    pub parent: usize,
    /// Children in byte order of their names (directories only).
    pub children: Vec<usize>,
}

/// A tree of entries; entry 0 is the root directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Namespace {
    pub entries: Vec<Entry>,
}

/// Longest name ext2 stores.
pub const MAX_NAME: usize = 255;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NamespaceStats {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub special: u64,
    pub file_bytes: u64,
    pub max_depth: u64,
    pub mean_file_depth: f64,
}

impl Namespace {
    pub fn new() -> Namespace {
        Namespace {
            entries: vec![Entry {
                name: String::new(),
                kind: EntryType::Dir,
                size: 0,
                parent: 0,
                children: Vec::new(),
            }],
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.len() <= 1
    }

    /// The child of directory `dir` named `name`.
    pub fn child(&self, dir: usize, name: &str) -> Option<usize> {
        let ch = &self.entries[dir].children;
        ch.binary_search_by(|&c| self.entries[c].name.as_bytes().cmp(name.as_bytes()))
            .ok()
            .map(|i| ch[i])
    }

    /// Add an entry under `parent` (kept in name order); an existing entry of
    /// the same name is returned instead when both are directories.
    pub fn add(&mut self, parent: usize, name: &str, kind: EntryType, size: u64) -> std::result::Result<usize, String> {
        if name.is_empty() || name.len() > MAX_NAME || name.contains('/') || name == "." || name == ".." {
            return Err(format!("`{name}` is not a valid file name (1..=255 bytes, no `/`)"));
        }
        if self.entries[parent].kind != EntryType::Dir {
            return Err(format!("the parent of `{name}` is not a directory"));
        }
        let pos = {
            let ch = &self.entries[parent].children;
            ch.binary_search_by(|&c| self.entries[c].name.as_bytes().cmp(name.as_bytes()))
        };
        match pos {
            Ok(i) => {
                let id = self.entries[parent].children[i];
                if kind == EntryType::Dir && self.entries[id].kind == EntryType::Dir {
                    Ok(id)
                } else {
                    Err(format!("`{name}` is listed twice"))
                }
            }
            Err(i) => {
                let id = self.entries.len();
                self.entries.push(Entry {
                    name: name.to_string(),
                    kind,
                    size,
                    parent,
                    children: Vec::new(),
                });
                self.entries[parent].children.insert(i, id);
                Ok(id)
            }
        }
    }

    /// Path of entry `id` from the root, `/`-separated, without a leading `/`.
    pub fn path(&self, mut id: usize) -> String {
        let mut parts = Vec::new();
        while id != 0 {
            parts.push(self.entries[id].name.as_str());
            id = self.entries[id].parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Depth of entry `id` (the root is 0).
    pub fn depth(&self, mut id: usize) -> u64 {
        let mut d = 0;
        while id != 0 {
            d += 1;
            id = self.entries[id].parent;
        }
        d
    }

    /// Entries in the order `mke2fs -d` creates them: depth first, each
    /// directory's children in name order, a directory's contents right
    /// after the directory.
    pub fn creation_order(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.entries.len());
        let mut stack: Vec<usize> = self.entries[0].children.iter().rev().copied().collect();
        while let Some(id) = stack.pop() {
            out.push(id);
            stack.extend(self.entries[id].children.iter().rev().copied());
        }
        out
    }

    pub fn stats(&self) -> NamespaceStats {
        let mut s = NamespaceStats {
            files: 0,
            dirs: 0,
            symlinks: 0,
            special: 0,
            file_bytes: 0,
            max_depth: 0,
            mean_file_depth: 0.0,
        };
        let mut depth_sum = 0u64;
        for id in 1..self.entries.len() {
            let e = &self.entries[id];
            let d = self.depth(id);
            s.max_depth = s.max_depth.max(d);
            match e.kind {
                EntryType::File => {
                    s.files += 1;
                    s.file_bytes += e.size;
                    depth_sum += d;
                }
                EntryType::Dir => s.dirs += 1,
                EntryType::Symlink => s.symlinks += 1,
                EntryType::Special => s.special += 1,
            }
        }
        if s.files > 0 {
            s.mean_file_depth = depth_sum as f64 / s.files as f64;
        }
        s
    }

    /// Copy `other` in under the directory `prefix` (`/`-separated, created
    /// as needed); `""` grafts at the root.
    pub fn graft(&mut self, prefix: &str, other: &Namespace) -> std::result::Result<(), String> {
        let mut at = 0usize;
        for part in prefix.split('/').filter(|p| !p.is_empty()) {
            at = self.add(at, part, EntryType::Dir, 0)?;
        }
        let mut map = vec![usize::MAX; other.len()];
        map[0] = at;
        for id in other.creation_order() {
            let e = &other.entries[id];
            map[id] = self.add(map[e.parent], &e.name, e.kind, e.size)?;
        }
        Ok(())
    }

    /// Write the namespace as a `find -printf '%y %s %p\n'` listing (paths
    /// with a leading `/`, directories sized one block of `dir_size` bytes).
    pub fn write_listing(&self, w: &mut impl std::io::Write, dir_size: u64) -> std::io::Result<()> {
        for id in self.creation_order() {
            let e = &self.entries[id];
            let (y, size) = match e.kind {
                EntryType::File => ('f', e.size),
                EntryType::Dir => ('d', dir_size),
                EntryType::Symlink => ('l', e.size),
                EntryType::Special => ('p', 0),
            };
            writeln!(w, "{y} {size} /{}", self.path(id))?;
        }
        Ok(())
    }
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace::new()
    }
}

/// Parse one listing line into (type, size, path components).
fn parse_line<'a>(line: &'a str, lineno: u64, file: &str) -> Result<(EntryType, u64, Vec<&'a str>)> {
    let err = |field: &str, msg: String| Error::parse(file, Location::Line(lineno), field, msg);
    let mut it = line.splitn(3, ' ');
    let y = it.next().unwrap_or("");
    let kind = match y {
        "f" => EntryType::File,
        "d" => EntryType::Dir,
        "l" => EntryType::Symlink,
        "b" | "c" | "p" | "s" | "D" => EntryType::Special,
        other => {
            return Err(err(
                "type",
                format!("`{other}` is not a find %y type letter (f, d, l, b, c, p, s)"),
            ))
        }
    };
    let size_s = it.next().ok_or_else(|| err("size", "missing".into()))?;
    let size: u64 = size_s
        .parse()
        .map_err(|_| err("size", format!("`{size_s}` is not a size in bytes")))?;
    let path = it.next().ok_or_else(|| err("path", "missing".into()))?;
    if path.is_empty() {
        return Err(err("path", "missing".into()));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.contains(&"..") {
        return Err(err("path", format!("`{path}` contains `..`")));
    }
    Ok((kind, size, parts))
}

/// Read a `find -printf '%y %s %p\n'` listing.
pub fn read_listing(path: &Path) -> Result<Namespace> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
    parse_listing(std::io::BufReader::new(f), &name)
}

/// Parse a listing from any reader; `file` names it in errors.
pub fn parse_listing(r: impl BufRead, file: &str) -> Result<Namespace> {
    let mut ns = Namespace::new();
    // Directories by path, so that each line costs one lookup.
    let mut dirs: BTreeMap<String, usize> = BTreeMap::new();
    for (i, line) in r.lines().enumerate() {
        let lineno = i as u64 + 1;
        let line = line.map_err(|e| Error::parse(file, Location::Line(lineno), "line", e.to_string()))?;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (kind, size, parts) = parse_line(line, lineno, file)?;
        let Some((last, ancestors)) = parts.split_last() else {
            if kind == EntryType::Dir {
                continue; // the root itself
            }
            return Err(Error::parse(
                file,
                Location::Line(lineno),
                "path",
                "the root must be a directory",
            ));
        };
        let mut parent = 0usize;
        let mut prefix = String::new();
        for a in ancestors {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(a);
            parent = match dirs.get(&prefix) {
                Some(&d) => d,
                None => {
                    let d = ns
                        .add(parent, a, EntryType::Dir, 0)
                        .map_err(|m| Error::parse(file, Location::Line(lineno), "path", m))?;
                    dirs.insert(prefix.clone(), d);
                    d
                }
            };
        }
        let id = ns
            .add(parent, last, kind, size)
            .map_err(|m| Error::parse(file, Location::Line(lineno), "path", m))?;
        if kind == EntryType::Dir {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(last);
            dirs.insert(prefix, id);
        }
    }
    Ok(ns)
}

/// Parameters of the seeded generator. Defaults follow the shapes reported
/// for real desktop file systems (Agrawal et al., FAST'07 / Impressions,
/// FAST'09): a directory tree grown by attaching each new directory to an
/// existing one with probability ∝ (its subdirectories + 2); files per
/// directory ∝ 1/(n + 2.36)^2; file sizes lognormal (μ = 9.48, σ = 2.46 in
/// ln bytes) with a Pareto tail. These are our choice of published shapes;
/// every one is a parameter.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenParams {
    pub dirs: u64,
    pub files: u64,
    pub seed: u64,
    pub size_mu: f64,
    pub size_sigma: f64,
    /// Share of files drawn from the Pareto tail instead of the lognormal body.
    pub tail_share: f64,
    pub tail_xm: f64,
    pub tail_alpha: f64,
    /// No file is larger than this (bytes).
    pub max_file: u64,
    /// Offset of the inverse-polynomial law of files per directory.
    pub dir_offset: f64,
    /// Mean length of a generated name (bytes).
    pub name_len: u64,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            dirs: 1000,
            files: 10_000,
            seed: 1,
            size_mu: 9.48,
            size_sigma: 2.46,
            tail_share: 6e-5,
            tail_xm: (1u64 << 29) as f64,
            tail_alpha: 0.91,
            max_file: 1 << 30,
            dir_offset: 2.36,
            name_len: 12,
        }
    }
}

fn normal(rng: &mut SplitMix64) -> f64 {
    // Box–Muller; 1 − u keeps the logarithm finite.
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn gen_name(rng: &mut SplitMix64, mean: u64, serial: u64) -> String {
    // A unique serial prefix, then letters up to a length around the mean.
    let mut s = format!("{serial:x}");
    let len = 1 + (rng.next_u64() % (2 * mean.max(2))) as usize;
    while s.len() < len {
        s.push((b'a' + (rng.next_u64() % 26) as u8) as char);
    }
    s
}

/// A seeded namespace with `dirs` directories (besides the root) and `files` files.
pub fn generate(p: &GenParams) -> Result<Namespace> {
    if p.files > 50_000_000 || p.dirs > 5_000_000 {
        return Err(Error::config(
            "the generator makes at most 5M directories and 50M files",
        ));
    }
    if !(p.size_sigma >= 0.0 && p.tail_alpha > 0.0 && (0.0..=1.0).contains(&p.tail_share) && p.dir_offset > 0.0) {
        return Err(Error::config(
            "generator: sigma >= 0, tail alpha > 0, tail share in [0, 1], offset > 0",
        ));
    }
    let mut rng = SplitMix64::new(p.seed ^ 0x6e61_6d65_7370_6163);
    let mut ns = Namespace::new();
    let mut serial = 0u64;
    // Directory tree: attach to d with probability ∝ subdirs(d) + 2, sampled
    // from a list holding each directory (subdirs + 2) times.
    let mut dir_ids = vec![0usize];
    let mut urn: Vec<usize> = vec![0, 0];
    for _ in 0..p.dirs {
        let parent = urn[(rng.next_u64() % urn.len() as u64) as usize];
        serial += 1;
        let name = gen_name(&mut rng, p.name_len, serial);
        let id = ns.add(parent, &name, EntryType::Dir, 0).map_err(Error::config)?;
        dir_ids.push(id);
        urn.push(parent);
        urn.push(id);
        urn.push(id);
    }
    // Files: each directory gets a weight from the inverse-polynomial law of
    // directory sizes; files land in directories in proportion to it.
    let cdf_inv = |u: f64| -> f64 {
        // P(N >= n) = c/(n + c) for P(n) ∝ 1/(n + c)^2 (continuous form).
        let c = p.dir_offset;
        c / (1.0 - u).max(1e-12) - c
    };
    let weights: Vec<f64> = dir_ids.iter().map(|_| cdf_inv(rng.next_f64()) + 0.05).collect();
    let total: f64 = weights.iter().sum();
    let mut cum = Vec::with_capacity(weights.len());
    let mut s = 0.0;
    for w in &weights {
        s += w / total;
        cum.push(s);
    }
    for _ in 0..p.files {
        let u = rng.next_f64();
        let i = cum.partition_point(|&c| c < u).min(dir_ids.len() - 1);
        let size = if rng.next_f64() < p.tail_share {
            p.tail_xm / (1.0 - rng.next_f64()).powf(1.0 / p.tail_alpha)
        } else {
            (p.size_mu + p.size_sigma * normal(&mut rng)).exp()
        };
        let size = (size as u64).min(p.max_file);
        serial += 1;
        let name = gen_name(&mut rng, p.name_len, serial);
        ns.add(dir_ids[i], &name, EntryType::File, size)
            .map_err(Error::config)?;
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Namespace> {
        parse_listing(text.as_bytes(), "t.lst")
    }

    #[test]
    fn listing_builds_a_sorted_tree_with_implicit_directories() {
        let ns = parse("d 4096 /usr\nf 10 /usr/bin/zz\nf 20 /usr/bin/aa\nl 7 /usr/lib\n").unwrap();
        let usr = ns.child(0, "usr").unwrap();
        let bin = ns.child(usr, "bin").unwrap();
        assert_eq!(ns.entries[bin].kind, EntryType::Dir);
        let names: Vec<&str> = ns.entries[bin]
            .children
            .iter()
            .map(|&c| ns.entries[c].name.as_str())
            .collect();
        assert_eq!(names, vec!["aa", "zz"]);
        assert_eq!(ns.path(ns.child(bin, "zz").unwrap()), "usr/bin/zz");
        let order: Vec<String> = ns.creation_order().into_iter().map(|i| ns.path(i)).collect();
        assert_eq!(order, vec!["usr", "usr/bin", "usr/bin/aa", "usr/bin/zz", "usr/lib"]);
        let s = ns.stats();
        assert_eq!(
            (s.files, s.dirs, s.symlinks, s.file_bytes, s.max_depth),
            (2, 2, 1, 30, 3)
        );
    }

    #[test]
    fn relative_and_root_paths() {
        let ns = parse("d 4096 .\nd 4096 ./a\nf 5 ./a/b\n").unwrap();
        assert_eq!(ns.len(), 3);
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let cases = [
            ("q 1 /a\n", "type"),
            ("f x /a\n", "size"),
            ("f 1\n", "path"),
            ("f 1 /a\nf 2 /a\n", "path"),
            ("f 1 /a\nf 2 /a/b\n", "path"),
        ];
        for (text, field) in cases {
            let e = parse(text).unwrap_err();
            match e {
                Error::Parse { field: f, location, .. } => {
                    assert_eq!(f, field, "{text}");
                    assert!(matches!(location, Location::Line(_)));
                }
                other => panic!("{other}"),
            }
        }
    }

    #[test]
    fn generator_is_seeded_and_sized() {
        let p = GenParams {
            dirs: 200,
            files: 3000,
            ..GenParams::default()
        };
        let a = generate(&p).unwrap();
        let b = generate(&p).unwrap();
        assert_eq!(a, b);
        let s = a.stats();
        assert_eq!((s.dirs, s.files), (200, 3000));
        assert!(s.max_depth >= 3, "a grown tree has depth: {s:?}");
        let c = generate(&GenParams { seed: 2, ..p }).unwrap();
        assert_ne!(a, c);
        // Median file size near e^9.48 ≈ 13 KB.
        let mut sizes: Vec<u64> = a
            .entries
            .iter()
            .filter(|e| e.kind == EntryType::File)
            .map(|e| e.size)
            .collect();
        sizes.sort_unstable();
        let med = sizes[sizes.len() / 2];
        assert!((6_000..30_000).contains(&med), "median {med}");
    }

    #[test]
    fn graft_puts_a_tree_under_a_prefix() {
        let mut a = parse("f 1 /etc/x\n").unwrap();
        let b = parse("d 1 /u\nf 7 /u/y\n").unwrap();
        a.graft("home/me", &b).unwrap();
        let y = a
            .child(
                a.child(a.child(a.child(0, "home").unwrap(), "me").unwrap(), "u")
                    .unwrap(),
                "y",
            )
            .unwrap();
        assert_eq!((a.path(y).as_str(), a.entries[y].size), ("home/me/u/y", 7));
        assert!(a.graft("etc/x", &b).is_err(), "a file cannot hold a tree");
    }

    #[test]
    fn listing_round_trips() {
        let a = generate(&GenParams {
            dirs: 30,
            files: 100,
            ..GenParams::default()
        })
        .unwrap();
        let mut buf = Vec::new();
        a.write_listing(&mut buf, 4096).unwrap();
        let b = parse_listing(&buf[..], "x").unwrap();
        assert_eq!(a.creation_order().len(), b.creation_order().len());
        assert_eq!(a.stats(), b.stats());
    }
}

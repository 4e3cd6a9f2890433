//! The counted check of inference (the paper's Fig 5 question: how many
//! blocks does inference place wrongly?): an ext2 image's blocks are
//! written through an [`Inferrer`] in a given order (a flush at the end),
//! and the outcome is compared with the truth — each in-use block's owner
//! and kind as `debugfs` reports them, extracted by
//! `python/blocklab/repro/ext2_truth.py` into a CSV.
//!
//! Two D-GRAID layers of the same configuration see the same writes: one
//! carries out the inferrer's actions, the other is told the truth with
//! every write (the annotation-driven placement). A block is misplaced in a
//! layer when its first copy is not on the home site that layer gave the
//! block's true placement unit (static metadata: when it has no copy).
//! Members are sized to hold the whole volume each, so that no block
//! spills off its home site for want of room.
//!
//! Orders: `sequential` and `reverse` copy every block of the image;
//! `seeded:N` every block in a seeded random order; `files` writes the
//! superblock and primary descriptors first (a mounted file system's layout
//! is known), then the data blocks of each file (ascending inode, then
//! block), then every other in-use block (ascending) — all metadata last,
//! the deferred list's worst case. `files` writes only in-use blocks.
//! `stream:LOG` replays a recorded write stream (a mounted file system's
//! writes, flushes included) in its order; the image is then the device's
//! final contents.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::superblock::{Superblock, SUPERBLOCK_OFFSET};
use super::{default_tag, is_default, InferConfig, InferCounts, Inferrer};
use crate::dgraid::classify::{Action, Classifier};
use crate::dgraid::layer::{Dgraid, DgraidConfig, Grouping, ReplicaPlacement};
use crate::error::{Error, Location, Result};
use crate::fsmodel::geometry::Geometry;
use crate::fsmodel::kind::{BlockKind, Tag, KINDS};
use crate::trace::synth::SplitMix64;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InferParams {
    /// The ext2 image.
    pub image: String,
    /// Its truth: CSV `block,owner,kind,parent` of every in-use block.
    pub truth: String,
    pub block_size: u64,
    pub order: String,
    pub deferred_max: usize,
    pub level: String,
    pub disks: u32,
    pub meta_copies: u32,
    pub grouping: String,
    pub placement: String,
    pub seed: u64,
}

impl Default for InferParams {
    fn default() -> Self {
        InferParams {
            image: String::new(),
            truth: String::new(),
            block_size: 4096,
            order: "sequential".into(),
            deferred_max: 1024,
            level: "dgraid0".into(),
            disks: 4,
            meta_copies: 1,
            grouping: "file".into(),
            placement: "rotate".into(),
            seed: 1,
        }
    }
}

/// Outcome for the in-use blocks of one kind (by the truth).
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindRow {
    pub kind: String,
    pub blocks: u64,
    /// Inferred owner and kind equal the truth.
    pub correct: u64,
    /// Inferred owner or kind differ from the truth.
    pub wrong: u64,
    /// Placed under the default tag (owner never inferred) or never stored.
    pub unknown: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WrongBlock {
    pub block: u64,
    pub truth: Tag,
    pub inferred: Option<Tag>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InferReport {
    pub image: String,
    pub order: String,
    pub block_size: u64,
    pub fs_blocks: u64,
    /// Blocks written through the inferrer.
    pub written: u64,
    /// In-use blocks (the truth's).
    pub in_use: u64,
    /// In-use blocks never written (a recorded stream need not write
    /// every block mke2fs reserved: zeroed inode tables, say). They are
    /// left out of every count below.
    pub unwritten: u64,
    pub correct: u64,
    pub wrong: u64,
    pub unknown: u64,
    /// In-use blocks whose inferred parent equals the truth's (a hard
    /// link's parent is whichever directory was seen last: may differ).
    pub parent_correct: u64,
    pub by_kind: Vec<KindRow>,
    pub misplaced_inferred: u64,
    pub misplaced_truth: u64,
    pub misplaced_inferred_share: f64,
    pub misplaced_truth_share: f64,
    /// In-use blocks whose first placement by the inference layer was not
    /// their final home site: misplaced at least for a while, and for good
    /// without remapping (Fig 5's upper curve).
    pub misplaced_without_remap: u64,
    pub misplaced_without_remap_share: f64,
    /// Blocks the inference layer moved after placing them (retags that
    /// changed the placement unit).
    pub remaps_inferred: u64,
    pub counts: InferCounts,
    /// The first wrong or unknown blocks, for diagnosis.
    pub examples: Vec<WrongBlock>,
}

/// Read the truth CSV: block → tag.
pub fn read_truth(path: &str) -> Result<BTreeMap<u64, Tag>> {
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut out = BTreeMap::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let n = i as u64 + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || (n == 1 && t.starts_with("block")) {
            continue;
        }
        let cols: Vec<&str> = t.split(',').collect();
        if cols.len() != 4 {
            return Err(Error::parse(
                path,
                Location::Line(n),
                "line",
                format!("{} fields, expected block,owner,kind,parent", cols.len()),
            ));
        }
        let num = |j: usize, field: &str| -> Result<u64> {
            cols[j]
                .trim()
                .parse()
                .map_err(|_| Error::parse(path, Location::Line(n), field, format!("`{}` is not a number", cols[j])))
        };
        let block = num(0, "block")?;
        let owner = num(1, "owner")?;
        let kind =
            BlockKind::parse(cols[2]).map_err(|e| Error::parse(path, Location::Line(n), "kind", e.to_string()))?;
        let parent = num(3, "parent")?;
        out.insert(block, Tag::of(owner, kind, parent));
    }
    Ok(out)
}

fn parse_order(s: &str) -> Result<Order> {
    let s = s.trim();
    if let Some(path) = s.strip_prefix("stream:") {
        return Ok(Order::Stream(path.to_string()));
    }
    match s {
        "sequential" => Ok(Order::Sequential),
        "reverse" => Ok(Order::Reverse),
        "files" => Ok(Order::Files),
        _ => match s.strip_prefix("seeded:").map(|x| x.parse::<u64>()) {
            Some(Ok(seed)) => Ok(Order::Seeded(seed)),
            _ => Err(Error::unknown(
                "order",
                s,
                &["sequential", "reverse", "seeded:N", "files", "stream:LOG"],
            )),
        },
    }
}

#[derive(Debug, Clone)]
enum Order {
    Sequential,
    Reverse,
    Seeded(u64),
    Files,
    /// A recorded write stream (see [`Stream`]).
    Stream(String),
}

/// One event of a write source.
enum Event {
    Write(u64, Vec<u8>),
    Flush,
}

/// A write log as `tests/nbd_logserver.py` records what a device saw: per
/// write `W`, u64 offset, u32 length (little-endian) and the bytes; per
/// flush `F`. Writes may be any byte extent: each fs block they touch is
/// passed whole, completed from the block's contents so far (the device
/// starts zeroed), as the array does with NBD requests. The contents of
/// every block written are kept (memory grows with the blocks written).
struct Stream {
    path: String,
    r: BufReader<File>,
    bs: u64,
    record: u64,
    current: FxHashMap<u64, Vec<u8>>,
    pending: std::collections::VecDeque<Event>,
}

impl Stream {
    fn open(path: &str, bs: u64) -> Result<Stream> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Stream {
            path: path.to_string(),
            r: BufReader::new(f),
            bs,
            record: 0,
            current: FxHashMap::default(),
            pending: Default::default(),
        })
    }

    fn next(&mut self) -> Result<Option<Event>> {
        use std::io::Read;
        if let Some(e) = self.pending.pop_front() {
            return Ok(Some(e));
        }
        let mut t = [0u8; 1];
        if self.r.read(&mut t).map_err(|e| Error::io(&self.path, e))? == 0 {
            return Ok(None);
        }
        let rec = self.record;
        self.record += 1;
        match t[0] {
            b'F' => Ok(Some(Event::Flush)),
            b'W' => {
                let mut h = [0u8; 12];
                self.r
                    .read_exact(&mut h)
                    .map_err(|_| Error::parse(&self.path, Location::Record(rec), "header", "truncated"))?;
                let off = u64::from_le_bytes(h[0..8].try_into().expect("8"));
                let len = u32::from_le_bytes(h[8..12].try_into().expect("4")) as u64;
                let mut data = vec![0u8; len as usize];
                self.r
                    .read_exact(&mut data)
                    .map_err(|_| Error::parse(&self.path, Location::Record(rec), "data", "truncated"))?;
                let bs = self.bs;
                let mut pos = off;
                while pos < off + len {
                    let b = pos / bs;
                    let in_block = (pos % bs) as usize;
                    let take = ((bs - pos % bs).min(off + len - pos)) as usize;
                    let cur = self.current.entry(b).or_insert_with(|| vec![0u8; bs as usize]);
                    let from = (pos - off) as usize;
                    cur[in_block..in_block + take].copy_from_slice(&data[from..from + take]);
                    self.pending.push_back(Event::Write(b, cur.clone()));
                    pos += take as u64;
                }
                Ok(self.pending.pop_front())
            }
            other => Err(Error::parse(
                &self.path,
                Location::Record(rec),
                "type",
                format!("record type 0x{other:02X}, expected W or F"),
            )),
        }
    }
}

/// The blocks to write, in order.
fn blocks_in_order(order: &Order, n: u64, geo: &Geometry, truth: &BTreeMap<u64, Tag>) -> Vec<u64> {
    match order {
        Order::Sequential | Order::Stream(_) => (0..n).collect(),
        Order::Reverse => (0..n).rev().collect(),
        Order::Seeded(seed) => {
            let mut v: Vec<u64> = (0..n).collect();
            let mut r = SplitMix64::new(*seed);
            for i in (1..v.len()).rev() {
                let j = (r.next_u64() % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
            v
        }
        Order::Files => {
            let layout: Vec<u64> = std::iter::once(geo.superblock())
                .chain({
                    let [a, z] = geo.groups[0].descriptors.expect("group 0 has descriptors");
                    a..=z
                })
                .collect();
            let mut data: Vec<(u64, u64)> = truth
                .iter()
                .filter(|(_, t)| t.kind == BlockKind::Data && t.owner != 0)
                .map(|(&b, t)| (t.owner, b))
                .collect();
            data.sort_unstable();
            let mut v = layout.clone();
            v.extend(data.iter().map(|x| x.1));
            let taken: rustc_hash::FxHashSet<u64> = v.iter().copied().collect();
            v.extend(truth.keys().copied().filter(|b| !taken.contains(b) && *b < n));
            v
        }
    }
}

fn layer_config(p: &InferParams) -> Result<DgraidConfig> {
    let mut cfg = DgraidConfig::new(DgraidConfig::parse_level(&p.level)?, p.disks, p.meta_copies);
    cfg.grouping = Grouping::parse(&p.grouping)?;
    cfg.placement = ReplicaPlacement::parse(&p.placement)?;
    cfg.seed = p.seed;
    cfg.validate()?;
    Ok(cfg)
}

/// Whether `block` (true tag `t`) sits on the home site `layer` gave its unit.
fn misplaced(layer: &Dgraid, block: u64, t: &Tag) -> bool {
    let copies = layer.copies(block);
    let Some(first) = copies.first() else { return true };
    if t.kind.is_static() {
        return false;
    }
    match layer.home_of(layer.unit_of(t)) {
        Some(h) => first.disk != h,
        None => true,
    }
}

/// Write the image through an inferrer in `p.order` and score it.
pub fn measure(p: &InferParams) -> Result<InferReport> {
    let order = parse_order(&p.order)?;
    let cfg = layer_config(p)?;
    let truth = read_truth(&p.truth)?;
    let img = File::open(&p.image).map_err(|e| Error::io(&p.image, e))?;
    let bs = p.block_size;
    let read = |b: u64, buf: &mut [u8]| img.read_exact_at(buf, b * bs).map_err(|e| Error::io(&p.image, e));
    let wrap = |e: Error| match e {
        Error::Parse {
            location,
            field,
            message,
            file,
        } => Error::parse(&p.image, location, field, format!("{file}: {message}")),
        other => Error::config(format!("{}: {}", p.image, other.message())),
    };
    // The truth layer's layout, read from the image as the annotation
    // side would know it.
    let geo = {
        let sb_block = SUPERBLOCK_OFFSET / bs;
        let mut b = vec![0u8; bs as usize];
        read(sb_block, &mut b)?;
        let off = (SUPERBLOCK_OFFSET % bs) as usize;
        let sb = Superblock::parse(&b[off..off + 1024], sb_block, bs).map_err(wrap)?;
        let [a, z] = sb.descriptor_blocks();
        let mut gdt = vec![0u8; ((z - a + 1) * bs) as usize];
        img.read_exact_at(&mut gdt, a * bs)
            .map_err(|e| Error::io(&p.image, e))?;
        sb.geometry(&gdt).map_err(wrap)?
    };
    if let Some((&b, _)) = truth.range(geo.blocks..).next() {
        return Err(Error::parse(
            &p.truth,
            Location::Whole,
            "block",
            format!("block {b} is beyond the {}-block file system", geo.blocks),
        ));
    }
    let n = geo.blocks;
    // Members that could each hold the whole volume: a full member spills
    // blocks off their home site, a capacity effect that would be counted
    // as misplacement in both layers.
    let mut cfg = cfg;
    let copies = if cfg.level == crate::dgraid::layer::DgraidLevel::L1 {
        2
    } else {
        1
    };
    cfg.disk_blocks = Dgraid::member_blocks_for(&cfg, &geo, n * copies * (cfg.disks as u64 - 1));
    let mut truth_layer = Dgraid::new(cfg.clone(), &geo)?;
    let mut inf_layer: Option<Dgraid> = None;
    let mut inferred: FxHashMap<u64, Tag> = FxHashMap::default();
    let mut inf = Inferrer::new(InferConfig {
        block_size: bs,
        deferred_max: p.deferred_max,
    })?;
    // The disk each block was first placed on (what it would stay on
    // without the remapping of reused and late-known blocks).
    let mut first_disk: FxHashMap<u64, u32> = FxHashMap::default();
    let apply = |acts: Vec<Action>,
                 layer: &mut Option<Dgraid>,
                 inferred: &mut FxHashMap<u64, Tag>,
                 first_disk: &mut FxHashMap<u64, u32>|
     -> Result<()> {
        for a in acts {
            match a {
                Action::Geometry(g) => *layer = Some(Dgraid::new(cfg.clone(), &g)?),
                Action::Store { block, tag, .. } | Action::Retag { block, tag } => {
                    inferred.insert(block, tag);
                    let l = layer.as_mut().expect("geometry first");
                    l.write(block, &tag)?;
                    if let Some(c) = l.copies(block).first() {
                        first_disk.entry(block).or_insert(c.disk);
                    }
                }
                Action::Free { block } => {
                    inferred.remove(&block);
                    // A freed block's next placement is a new first one.
                    first_disk.remove(&block);
                    layer.as_mut().expect("geometry first").bitmap_written(block, &[0], 1);
                }
            }
        }
        Ok(())
    };
    let mut written = 0u64;
    let mut seen: rustc_hash::FxHashSet<u64> = Default::default();
    let mut step = |b: u64,
                    data: &[u8],
                    inf: &mut Inferrer,
                    inf_layer: &mut Option<Dgraid>,
                    inferred: &mut FxHashMap<u64, Tag>,
                    first_disk: &mut FxHashMap<u64, u32>|
     -> Result<()> {
        if b >= n {
            return Err(Error::config(format!(
                "{}: a write of block {b} is beyond the {n}-block file system",
                p.image
            )));
        }
        written += 1;
        seen.insert(b);
        let acts = inf.write_checked(b, data).map_err(wrap)?;
        apply(acts, inf_layer, inferred, first_disk)?;
        truth_layer.write(b, &truth.get(&b).copied().unwrap_or_else(|| default_tag(b)))?;
        Ok(())
    };
    if let Order::Stream(log) = &order {
        let mut s = Stream::open(log, bs)?;
        while let Some(ev) = s.next()? {
            match ev {
                Event::Write(b, d) => step(b, &d, &mut inf, &mut inf_layer, &mut inferred, &mut first_disk)?,
                Event::Flush => {
                    let acts = inf.flush();
                    apply(acts, &mut inf_layer, &mut inferred, &mut first_disk)?;
                }
            }
        }
    } else {
        let blocks = blocks_in_order(&order, n, &geo, &truth);
        let mut buf = vec![0u8; bs as usize];
        for &b in &blocks {
            read(b, &mut buf)?;
            step(b, &buf, &mut inf, &mut inf_layer, &mut inferred, &mut first_disk)?;
        }
    }
    let acts = inf.flush();
    apply(acts, &mut inf_layer, &mut inferred, &mut first_disk)?;
    let Some(inf_layer) = inf_layer else {
        return Err(Error::config(format!(
            "{}: the superblock and descriptors were never written in order `{}`",
            p.image, p.order
        )));
    };

    let mut rows: BTreeMap<BlockKind, KindRow> = BTreeMap::new();
    let (mut correct, mut wrong, mut unknown, mut parent_ok) = (0, 0, 0, 0);
    let (mut mis_inf, mut mis_truth, mut mis_first) = (0u64, 0u64, 0u64);
    let mut examples = Vec::new();
    let mut unwritten = 0u64;
    for (&b, t) in &truth {
        if !seen.contains(&b) {
            // In use, never written (e.g. inode tables mke2fs left to read
            // as zeros): neither layer holds it, nothing to infer.
            unwritten += 1;
            continue;
        }
        let row = rows.entry(t.kind).or_insert_with(|| KindRow {
            kind: t.kind.name().into(),
            ..KindRow::default()
        });
        row.blocks += 1;
        let got = inferred.get(&b).copied();
        match got {
            Some(g) if g.owner == t.owner && g.kind == t.kind => {
                correct += 1;
                row.correct += 1;
                if g.parent == t.parent {
                    parent_ok += 1;
                }
            }
            Some(g) if !is_default(&g) => {
                wrong += 1;
                row.wrong += 1;
            }
            _ => {
                unknown += 1;
                row.unknown += 1;
            }
        }
        if got.is_none_or(|g| g.owner != t.owner || g.kind != t.kind) && examples.len() < 20 {
            examples.push(WrongBlock {
                block: b,
                truth: *t,
                inferred: got,
            });
        }
        mis_inf += misplaced(&inf_layer, b, t) as u64;
        if !t.kind.is_static() {
            let home = inf_layer.home_of(inf_layer.unit_of(t));
            mis_first += (first_disk.get(&b).copied() != home) as u64;
        }
        mis_truth += misplaced(&truth_layer, b, t) as u64;
    }
    let in_use = truth.len() as u64;
    // Shares are of the in-use blocks written.
    let base = in_use - unwritten;
    let share = |x: u64| if base == 0 { 0.0 } else { x as f64 / base as f64 };
    let order_rank = |k: &BlockKind| KINDS.iter().position(|(x, _)| x == k).unwrap_or(0);
    let mut by_kind: Vec<KindRow> = rows.into_values().collect();
    by_kind.sort_by_key(|r| order_rank(&BlockKind::parse(&r.kind).expect("named")));
    Ok(InferReport {
        image: p.image.clone(),
        order: p.order.clone(),
        block_size: bs,
        fs_blocks: n,
        written,
        in_use,
        unwritten,
        correct,
        wrong,
        unknown,
        parent_correct: parent_ok,
        by_kind,
        misplaced_inferred: mis_inf,
        misplaced_truth: mis_truth,
        misplaced_inferred_share: share(mis_inf),
        misplaced_truth_share: share(mis_truth),
        misplaced_without_remap: mis_first,
        misplaced_without_remap_share: share(mis_first),
        remaps_inferred: inf_layer.counts().remaps,
        counts: inf.counts().clone(),
        examples,
    })
}

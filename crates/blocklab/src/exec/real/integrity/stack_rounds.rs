//! Stack rounds of the integrity suite (`--stack-every N`): a write-back
//! host cache (one or two layers, any of a few policies) in front of the
//! round's array, healthy or degraded, writes (some of part of a block) and
//! FLUSHes until a simulated `kill -9` lands at a member write (a destage,
//! a flush); then a restart without the cache. Every block must read back
//! what the last completed FLUSH covered, or the one write acknowledged (or
//! in flight) after it: each block is written at most once between flushes,
//! so those are its only two right values.
//!
//! Half the rounds put an SSD tier (`[tier]`, write-back mostly) under the
//! host caches: its dirty blocks survive the crash in its journal and are
//! written back when the stack is opened again, before the array is checked.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::super::stack::RealStack;
use super::super::{OpenConfig, RealArray};
use super::{pick_config, stale_rows, verify, Io, Rng, Tally};
use crate::array::{ArrayConfig, Level};
use crate::error::Result;
use crate::exec::real::members::Faults;
use crate::stack::spec::{Origin, StackSpec};

/// A write-back stack over an array of `cfg`.
fn stack_spec(cfg: &ArrayConfig, rng: &mut Rng) -> Result<StackSpec> {
    let policies = ["lru", "arc", "2q", "vdf-lfu", "s3fifo"];
    let mut text = String::new();
    for _ in 0..1 + rng.below(2) {
        let policy = policies[rng.below(policies.len() as u64) as usize];
        let write = if text.is_empty() || rng.chance(0.5) {
            "back"
        } else {
            "through"
        };
        text += &format!(
            "[[cache]]\npolicy = \"{policy}\"\nsize = {}\nwrite = \"{write}\"\n",
            8 + rng.below(120)
        );
    }
    text += &format!(
        "[array]\nraid = \"{}\"\ndisks = {}\nchunk = {}\n",
        cfg.level.name(),
        cfg.disks,
        cfg.chunk_bytes
    );
    if matches!(cfg.level, Level::Raid5 | Level::Raid6) {
        text += &format!("layout = \"{}\"\n", cfg.layout_name());
    }
    text += "[device]\nmodel = \"const:0\"\n";
    if rng.chance(0.5) {
        let policies = ["wb", "wb", "wo", "adaptive", "wt"];
        let policy = policies[rng.below(policies.len() as u64) as usize];
        text += &format!("[tier]\nsize = {}\nwrite_policy = \"{policy}\"\n", 16 + rng.below(240));
    }
    StackSpec::from_str_with(
        &text,
        &[],
        Origin {
            file: "integrity-stack.toml".into(),
            ..Default::default()
        },
    )
}

/// Write and flush through `st` until a write or a flush fails (the crash
/// armed in `faults` landed) or enough was done; `image` holds what the
/// last completed FLUSH covered, `alt` the one later value of each block.
fn write_until_crash(
    st: &RealStack,
    faults: &Faults,
    image: &mut [u8],
    alt: &mut BTreeMap<u64, Vec<u8>>,
    rng: &mut Rng,
    t: &mut Tally,
) {
    faults.crash_after(1 + rng.below(80), rng.next());
    let blocks = image.len() as u64 / 4096;
    for _ in 0..4000 {
        if rng.chance(0.06) {
            if st.flush().is_err() {
                return;
            }
            for (b, v) in std::mem::take(alt) {
                image[(b * 4096) as usize..][..4096].copy_from_slice(&v);
            }
            continue;
        }
        let b = rng.below(blocks);
        let n = 1 + rng.below((blocks - b).min(8));
        if (b..b + n).any(|x| alt.contains_key(&x)) {
            continue;
        }
        let (head, tail) = if rng.chance(0.3) {
            (rng.below(8) * 512, rng.below(8) * 512)
        } else {
            (0, 0)
        };
        let (off, end) = (b * 4096 + head, (b + n) * 4096 - tail);
        if end <= off {
            continue;
        }
        let data = rng.bytes((end - off) as usize);
        let ok = st.write(off, &data, false).is_ok();
        // Acknowledged (or in flight at the crash): the block's other right value.
        for x in b..b + n {
            let mut v = image[(x * 4096) as usize..][..4096].to_vec();
            let (lo, hi) = ((x * 4096).max(off), ((x + 1) * 4096).min(end));
            v[(lo - x * 4096) as usize..(hi - x * 4096) as usize]
                .copy_from_slice(&data[(lo - off) as usize..(hi - off) as usize]);
            alt.insert(x, v);
        }
        if !ok {
            return;
        }
        t.written += data.len() as u64;
    }
}

/// One stack round: (what it found, the level's name, checksums).
pub(super) fn stack_round(i: u64, seed: u64, base: &Path) -> Result<(Tally, String, bool)> {
    let mut rng = Rng(seed ^ i.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7) ^ 0x57AC);
    // Parity levels and mirrors (their layouts round-trip through a stack file).
    let (cfg, checksums) = loop {
        let (c, s) = pick_config(&mut rng);
        if matches!(c.level, Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6) {
            break (c, s);
        }
    };
    let dir = base.join(format!("stack-round-{i}"));
    let _ = fs::remove_dir_all(&dir);
    RealArray::create(&dir, cfg, checksums)?;
    let faults = Arc::new(Faults::none());
    let a = Arc::new(RealArray::open(
        &dir,
        OpenConfig {
            faults: Some(faults.clone()),
            ..Default::default()
        },
    )?);
    let mut t = Tally::default();
    t.faults.push("crash-stack");
    if rng.chance(0.5) {
        a.fail(rng.below(cfg.disks as u64) as u32)?;
        t.faults.push("fail");
    }
    let size = a.size_bytes();
    let mut image = vec![0u8; size as usize];
    let mut alt: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let spec = stack_spec(&cfg, &mut rng)?;
    let tier = super::super::tier_store::frames(&spec)?;
    if let Some(frames) = tier {
        super::super::tier_store::create(&dir, frames, spec.block_size(), a.uuid())?;
        t.faults.push("crash-tier");
    }
    let st = RealStack::new(&spec, a.clone())?;
    write_until_crash(&st, &faults, &mut image, &mut alt, &mut rng, &mut t);
    drop(st); // kill -9: the host caches' contents are gone
    drop(a);
    let a = Arc::new(RealArray::open(&dir, OpenConfig::default())?);
    if tier.is_some() {
        // The tier's journal: its dirty blocks go back to the array at open.
        drop(RealStack::new(&spec, a.clone())?);
    }
    let mut io = Io::Api(a);
    let (v, l) = verify(&mut io, &image, &alt);
    t.verified += v;
    t.lost += l;
    t.stale += stale_rows(io.array())?;
    super::finish(io)?;
    let _ = fs::remove_dir_all(&dir);
    Ok((t, cfg.level.name().into(), checksums))
}

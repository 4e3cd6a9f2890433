//! A VFAT-shaped file-system model, of the same shape as the ext2 one for
//! what D-GRAID's Table 1 needs: the layout `mkfs.fat -F 32` gives a size
//! and a cluster size, a namespace copied in, and which blocks are
//! metadata. D-GRAID replicates the FAT (static metadata, known by address)
//! and the directories' clusters (dynamic, known once classified); files are
//! cluster chains placed whole on their home site.
//!
//! * geometry (dosfstools 4.2's rule, checked against `mkfs.fat -F 32 -S 512
//!   -s N` images): 512-byte sectors, 32 reserved sectors, two FATs of 4
//!   bytes per cluster, each FAT as long as the clusters that fit after it
//!   need, rounded up to whole clusters; the data area follows. (mkfs.fat
//!   also trims an image to its track geometry; the model takes the size as
//!   given.)
//! * a copy of a tree (depth first, names in byte order, as the ext2 model's
//!   populate): every directory and non-empty file a chain of clusters taken
//!   in order from cluster 2 (the root's) on, as a fresh volume gives them;
//!   a directory holds 32-byte entries: `.` and `..` (not the root), and per
//!   child one short entry, plus ceil(length / 13) long-name entries unless
//!   the name is a valid 8.3 name whose base and extension are each of one
//!   case (the short entry's case bits keep `readme.txt`; checked with
//!   mtools 4: `readme.txt` one entry, `file_number_00` three); a directory
//!   has at least one cluster. Symlinks and special files have no VFAT form and are left
//!   out.

use serde::Serialize;

use super::namespace::{EntryType, Namespace};
use crate::error::{Error, Result};

const SECTOR: u64 = 512;
const RESERVED_SECTORS: u64 = 32;
const FATS: u64 = 2;
/// Bytes of a directory entry (short or long).
const DIRENT: u64 = 32;
/// UTF-16 characters of a name one long-name entry holds.
const LFN_CHARS: u64 = 13;
/// The root directory's cluster on a fresh FAT32 volume.
const FIRST_CLUSTER: u64 = 2;

/// The on-disk layout of a FAT32 volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FatGeometry {
    pub cluster_bytes: u64,
    pub total_sectors: u64,
    /// Sectors of one FAT.
    pub fat_sectors: u64,
    /// First sector of the data area (cluster 2).
    pub data_start: u64,
    pub clusters: u64,
}

impl FatGeometry {
    /// `mkfs.fat -F 32 -S 512 -s cluster_bytes/512` on `size_bytes`.
    pub fn mkfs(size_bytes: u64, cluster_bytes: u64) -> Result<FatGeometry> {
        if !cluster_bytes.is_power_of_two() || !(SECTOR..=64 * 1024).contains(&cluster_bytes) {
            return Err(Error::config(format!(
                "VFAT cluster size must be a power of two from 512 B to 64 KiB, got {cluster_bytes}"
            )));
        }
        let spc = cluster_bytes / SECTOR;
        let total = size_bytes / SECTOR;
        let fatdata = total
            .checked_sub(RESERVED_SECTORS)
            .filter(|&d| d > 2 * spc)
            .ok_or_else(|| Error::config(format!("a {size_bytes}-byte volume is too small for FAT32")))?;
        // Clusters and their FAT entries sharing the space, then the FAT
        // rounded up to sectors and to whole clusters.
        let estimate = (fatdata * SECTOR + FATS * 8) / (spc * SECTOR + FATS * 4);
        let fat_sectors = ((estimate + 2) * 4).div_ceil(SECTOR).div_ceil(spc) * spc;
        let data_start = RESERVED_SECTORS + FATS * fat_sectors;
        let clusters = total.saturating_sub(data_start) / spc;
        Ok(FatGeometry {
            cluster_bytes,
            total_sectors: total,
            fat_sectors,
            data_start,
            clusters,
        })
    }

    /// Cluster-sized blocks of one FAT.
    pub fn fat_blocks(&self) -> u64 {
        (self.fat_sectors * SECTOR).div_ceil(self.cluster_bytes)
    }

    /// The volume in cluster-sized blocks.
    pub fn blocks(&self) -> u64 {
        self.total_sectors * SECTOR / self.cluster_bytes
    }
}

/// Whether `name` is stored in a short (8.3) entry alone.
pub fn short_name_only(name: &str) -> bool {
    let ok = |s: &str| {
        let chars = s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'()-@^_`{}~".contains(&c));
        let one_case = !(s.bytes().any(|c| c.is_ascii_uppercase()) && s.bytes().any(|c| c.is_ascii_lowercase()));
        chars && one_case
    };
    let (base, ext) = name.split_once('.').unwrap_or((name, ""));
    (1..=8).contains(&base.len()) && ext.len() <= 3 && !ext.contains('.') && ok(base) && ok(ext)
}

/// Directory entries (32 bytes each) the name of one child takes.
pub fn entries_for(name: &str) -> u64 {
    if short_name_only(name) {
        1
    } else {
        1 + (name.encode_utf16().count() as u64).div_ceil(LFN_CHARS)
    }
}

/// A namespace copied into a fresh VFAT volume: what it occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FatUsage {
    pub dirs: u64,
    pub files: u64,
    /// Clusters of directories (the root's included).
    pub dir_clusters: u64,
    pub file_clusters: u64,
    /// Cluster-sized FAT blocks holding the entries of clusters in use (one FAT).
    pub fat_blocks_used: u64,
    /// Symlinks and special files left out (VFAT has no form for them).
    pub skipped: u64,
}

/// Copy `ns` into a fresh volume of geometry `geo`.
pub fn populate(ns: &Namespace, geo: &FatGeometry) -> Result<FatUsage> {
    let cb = geo.cluster_bytes;
    let mut slots = vec![0u64; ns.len()];
    let mut u = FatUsage {
        dirs: 0,
        files: 0,
        dir_clusters: 0,
        file_clusters: 0,
        fat_blocks_used: 0,
        skipped: 0,
    };
    for id in 1..ns.len() {
        let e = &ns.entries[id];
        match e.kind {
            EntryType::Dir | EntryType::File => slots[e.parent] += entries_for(&e.name),
            EntryType::Symlink | EntryType::Special => u.skipped += 1,
        }
    }
    for (id, e) in ns.entries.iter().enumerate() {
        match e.kind {
            EntryType::Dir => {
                let dots = if id == 0 { 0 } else { 2 };
                u.dirs += 1;
                u.dir_clusters += ((dots + slots[id]) * DIRENT).div_ceil(cb).max(1);
            }
            EntryType::File => {
                u.files += 1;
                u.file_clusters += e.size.div_ceil(cb);
            }
            EntryType::Symlink | EntryType::Special => {}
        }
    }
    let used = u.dir_clusters + u.file_clusters;
    if used > geo.clusters {
        return Err(Error::config(format!(
            "the tree needs {used} clusters of {cb} B; the VFAT volume has {}: give it a larger size",
            geo.clusters
        )));
    }
    // Taken in order from cluster 2: the FAT entries 0..=last in use.
    let last = FIRST_CLUSTER + used - 1;
    u.fat_blocks_used = ((last + 1) * 4).div_ceil(cb);
    Ok(u)
}

/// One VFAT row of Table 1 (the ext2 rows are `dgraid::space::SpaceRow`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FatSpaceRow {
    pub cluster_bytes: u64,
    pub meta_copies: u32,
    pub usage: FatUsage,
    /// Bytes of the r copies of the directories' clusters and of the FAT blocks in use.
    pub namespace_bytes: u64,
    /// Bytes the tree occupies (file and directory clusters, one copy).
    pub tree_bytes: u64,
    pub overhead_pct: f64,
    /// Cluster-sized blocks of one whole FAT.
    pub fat_blocks: u64,
    /// r × one whole FAT / the volume, in percent.
    pub static_overhead_pct: f64,
    pub volume_bytes: u64,
}

/// Table 1's VFAT rows: the tree on a volume `1 / fill` times the tree's
/// clusters, per cluster size and copy count.
pub fn space_rows(ns: &Namespace, cluster_sizes: &[u64], copies: &[u32], fill: f64) -> Result<Vec<FatSpaceRow>> {
    if !(fill > 0.0 && fill <= 1.0) {
        return Err(Error::config(format!("fill must be in (0, 1], got {fill}")));
    }
    let mut out = Vec::new();
    for &cb in cluster_sizes {
        // Size the volume from a first count on a volume surely large enough.
        let probe = populate(ns, &FatGeometry::mkfs(1 << 50, cb)?)?;
        let tree = (probe.dir_clusters + probe.file_clusters) * cb;
        let size = ((tree as f64 / fill) as u64).max(64 << 20).div_ceil(1 << 20) << 20;
        let geo = FatGeometry::mkfs(size, cb)?;
        let usage = populate(ns, &geo)?;
        let tree_bytes = (usage.dir_clusters + usage.file_clusters) * cb;
        for &r in copies {
            let namespace_bytes = r as u64 * (usage.dir_clusters + usage.fat_blocks_used) * cb;
            out.push(FatSpaceRow {
                cluster_bytes: cb,
                meta_copies: r,
                usage,
                namespace_bytes,
                tree_bytes,
                overhead_pct: 100.0 * namespace_bytes as f64 / tree_bytes.max(1) as f64,
                fat_blocks: geo.fat_blocks(),
                static_overhead_pct: 100.0 * (r as u64 * geo.fat_sectors * SECTOR) as f64
                    / (geo.total_sectors * SECTOR) as f64,
                volume_bytes: geo.total_sectors * SECTOR,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsmodel::namespace::parse_listing;

    #[test]
    fn geometry_matches_mkfs_fat() {
        // mkfs.fat 4.2 -F 32 -S 512 -s 2 on a 256 MiB image: 32 reserved
        // sectors, FATs of 2034 sectors, data from sector 4100.
        let g = FatGeometry::mkfs(256 << 20, 1024).unwrap();
        assert_eq!((g.fat_sectors, g.data_start, g.clusters), (2034, 4100, 260_094));
        // -s 8 on 300 MiB once trimmed to its tracks (614,376 sectors): 600.
        let g = FatGeometry::mkfs(614_376 * 512, 4096).unwrap();
        assert_eq!(g.fat_sectors, 600);
        assert_eq!(g.fat_blocks(), 75);
        assert!(FatGeometry::mkfs(256 << 20, 3000).is_err());
        assert!(FatGeometry::mkfs(4096, 4096).is_err());
    }

    #[test]
    fn names_take_short_or_long_entries() {
        assert_eq!(entries_for("README.TXT"), 1);
        assert_eq!(entries_for("A"), 1);
        // One case per part: the short entry's case bits keep it.
        assert_eq!(entries_for("readme.txt"), 1);
        assert_eq!(entries_for("README.txt"), 1);
        // Mixed case, too long a base, two dots: a long name too.
        assert_eq!(entries_for("ReadMe.txt"), 2);
        assert_eq!(entries_for("ABCDEFGHI"), 2);
        assert_eq!(entries_for("A.B.C"), 2);
        // 14 characters: two long entries and the short one.
        assert_eq!(entries_for("libfoo.so.1.2a"), 3);
    }

    #[test]
    fn a_small_tree_by_hand() {
        // root: D1, f.txt, a symlink (left out) → 2 entries, one cluster. D1: . .. + 40 names of 14 characters (3 entries
        // each) = 122 entries × 32 B = 3904 B: 4 clusters of 1 KiB, 1 of
        // 4 KiB. Files: f.txt 1500 B, and 40 of 5000 B.
        let mut l = String::from("d 1 /D1\nf 1500 /f.txt\nl 10 /lnk\n");
        for i in 0..40 {
            l += &format!("f 5000 /D1/file_number_{i:02}\n");
        }
        let ns = parse_listing(l.as_bytes(), "t").unwrap();
        let g1 = FatGeometry::mkfs(256 << 20, 1024).unwrap();
        let u = populate(&ns, &g1).unwrap();
        assert_eq!((u.dirs, u.files, u.skipped), (2, 41, 1));
        assert_eq!(u.dir_clusters, 1 + 4);
        assert_eq!(u.file_clusters, 2 + 40 * 5);
        // Clusters 2..=208 in use: entries 0..=208, 836 bytes, one 1 KiB block.
        assert_eq!(u.fat_blocks_used, 1);
        let g4 = FatGeometry::mkfs(300 << 20, 4096).unwrap();
        let u = populate(&ns, &g4).unwrap();
        assert_eq!(u.dir_clusters, 2);
        assert_eq!(u.file_clusters, 1 + 40 * 2);
        let rows = space_rows(&ns, &[1024], &[1, 4], 0.5).unwrap();
        let one = (1 + 4 + 1) as f64 * 1024.0 / ((5 + 202) as f64 * 1024.0) * 100.0;
        assert!((rows[0].overhead_pct - one).abs() < 1e-9, "{rows:?}");
        assert!((rows[1].overhead_pct - 4.0 * one).abs() < 1e-9);
    }
}

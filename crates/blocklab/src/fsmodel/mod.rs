//! An ext2-shaped file-system model: the geometry `mke2fs -t ext2` gives,
//! libext2fs's allocator (or, as an option, the Linux 2.2 kernel's), and operations (create, write, read, overwrite,
//! unlink, mkdir, lookup) that emit block I/O tagged with its owner inode and
//! kind. It is the workload source of the D-GRAID layer (`crate::dgraid`):
//! a semantically-smart disk sees exactly these tags.
//!
//! * [`geometry`]: groups, superblock and descriptor copies, bitmaps, inode tables;
//! * [`kind`]: block kinds and tags, the tagged I/O record;
//! * [`namespace`]: trees from `find -printf '%y %s %p\n'` listings or a seeded generator;
//! * [`fs`]: the file system itself;
//! * [`fat`]: a VFAT (FAT32) model of the same shape, for Table 1's VFAT rows;
//! * [`linux22`]: the Linux 2.2 kernel's allocator (free-byte search, 8-block
//!   preallocation), a model option of [`fs`] beside libext2fs's.

pub mod bitmap;
pub mod fat;
pub mod fs;
pub mod geometry;
pub mod kind;
pub mod linux22;
pub mod namespace;

#[cfg(test)]
mod oracle_tests;

pub use fs::{FileSystem, FsOptions, Inode};
pub use geometry::{Geometry, Group, MkfsParams, StaticKind};
pub use kind::{BlockIo, BlockKind, Tag};
pub use linux22::Allocator;
pub use namespace::{EntryType, GenParams, Namespace};

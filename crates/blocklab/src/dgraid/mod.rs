//! D-GRAID (Sivathanu et al., FAST'04): an array that knows which file each
//! block belongs to, and uses it so that a failure beyond the array's
//! redundancy loses whole files in proportion to the failed disks, not the
//! whole volume.
//!
//! * [`layer`]: the placement layer. Each file (or each directory's files,
//!   `Grouping::Dir`) gets a home-site disk chosen greedily by least used
//!   space; its data and indirect blocks live there (level 1 mirrors them on
//!   the other disk of a fixed pair). Naming and system metadata (superblock,
//!   descriptors, bitmaps, inode tables, directories) is replicated on `r`
//!   distinct disks. Hot segments of the address space get a striped copy
//!   that reads prefer (access-driven diffusion). A conservative live-block
//!   map follows block writes and bitmap writes. It maps (owner, kind,
//!   block) to disks and physical blocks.
//! * [`live`]: live member blocks as extents (of a model run, or synthetic
//!   compact / spread layouts): what a live-block rebuild copies.
//! * [`avail`]: availability under k failed disks (files, directories as the
//!   paper defines them, processes, namespace navigability), exact or seeded
//!   Monte Carlo, for D-GRAID and for RAID-0/1/10/5/6 under MD semantics
//!   (the volume is lost) or block semantics (what a file needs is readable).
//! * [`space`]: metadata space overhead (Table 1) and the counted write cost
//!   of metadata replication under a Postmark-like workload (Table 2).
//! * [`classify`]: the seam on real bytes: a `Classifier` sees the file
//!   system's writes and answers with the actions the array carries out.
//! * [`infer`]: the inference classifier (Alexander's): the layout, inode
//!   pointers, directory parents, deferred writes, reuse and frees learnt
//!   from the block writes alone; and its counted check against `debugfs`.
//! * [`model`]: the glue: a namespace copied into the ext2 model, its I/O
//!   fed through the layer.
//! * [`workload`]: annotated traces of model workloads (Postmark, Fig 7's
//!   sequential reads, Fig 9's readers) for the timed stack, where a D-GRAID
//!   array (`stack::dgraid_target`) places them.

pub mod avail;
pub mod classify;
pub mod infer;
pub mod layer;
pub mod live;
pub mod model;
pub mod run;
pub mod space;
pub mod workload;

#[cfg(test)]
mod tests;

pub use layer::{Dgraid, DgraidConfig, DgraidLevel, Diffusion, Grouping, ReplicaPlacement};
pub use live::{LiveLayout, LiveSet};

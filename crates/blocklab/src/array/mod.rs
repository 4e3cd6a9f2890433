//! RAID arrays: layouts, failure state, and the I/O plans they emit.

pub mod plan;

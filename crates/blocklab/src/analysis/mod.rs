//! Analyses that need no stack: trace statistics, miss-ratio curves, RGR,
//! reuse analysis (TRD / URD) and the partition sizing ECI-Cache and Centaur
//! build on it.

pub mod mrc;
pub mod reuse;
pub mod rgr;
pub mod rgr_array;
pub mod stats;

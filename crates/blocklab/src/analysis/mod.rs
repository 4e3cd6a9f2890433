//! Analyses that need no stack: trace statistics, miss-ratio curves, RGR,
//! reuse analysis (TRD / URD) and the partition sizing ECI-Cache and Centaur
//! build on it.

pub mod mrc;
pub mod partition;
pub mod partition_plan;
pub mod reuse;
pub mod rgr;
pub mod sizing;
pub mod sizing_time;
pub mod stats;
pub mod write_policy;

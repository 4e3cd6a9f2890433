//! Analyses that need no stack: trace statistics, miss-ratio curves, RGR.

pub mod stats;
pub mod mrc;

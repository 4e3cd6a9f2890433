//! Analyses that need no stack: trace statistics, miss-ratio curves, RGR.

pub mod mrc;
pub mod rgr;
pub mod stats;

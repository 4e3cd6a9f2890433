//! Analyses that need no stack: trace statistics, miss-ratio curves, RGR.

pub mod mrc;
pub mod rgr;
pub mod rgr_array;
pub mod stats;

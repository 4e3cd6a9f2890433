//! (filled by its issue)

pub mod stats;

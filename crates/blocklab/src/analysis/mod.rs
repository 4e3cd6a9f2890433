//! (filled by its issue)
pub mod mrc;

//! (filled by its issue)

pub mod rgr;

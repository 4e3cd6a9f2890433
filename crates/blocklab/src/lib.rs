//! blocklab core: replay block I/O traces through a storage stack.
//!
//! Layers (see docs/ARCHITECTURE.md): `trace` (readers, Request stream),
//! `cache` (replacement policies behind one trait, counted simulation),
//! `analysis` (trace statistics, miss-ratio curves), `array` (RAID layouts and
//! I/O plans), `rebuild` (rebuild orders, without time), `exec` (executors
//! that run plans), `device` (disk and SSD models), `timed` (the
//! discrete-event engine, trace replay, the rebuild paced in time), `stack`
//! (host caches over an array or a device, from a stack file, in either executor).

pub mod analysis;
pub mod array;
pub mod cache;
pub mod device;
pub mod dgraid;
pub mod error;
pub mod exec;
pub mod fsmodel;
pub mod rebuild;
pub mod stack;
pub mod timed;
pub mod trace;

pub use error::{Error, Location, Result};

//! The composed stack: host cache layers over an array (or one device) of
//! device models, described by a TOML stack file and run by either executor
//! (counted, or in simulated time). `blocklab run`, `disk run` and `rgr`
//! all come through here; docs/stack.md describes the file and the result.
//!
//! * `spec` — the stack file, strict parsing, `--set` overrides;
//! * `address` — the stack's address space (tenants) and the pre-pass over a trace;
//! * `layer` — `Io`, the `Layer` and `Target` traits, the executor seen by layers;
//!   `data` — what layers tell an executor that moves real bytes about block contents;
//! * `cache_layer` — host cache layers (with `prefetch`: what they read
//!   ahead); `write_buffer` — a cache layer's write buffer; `tier` — the SSD
//!   tier; `target` — one disk, or an array; `device_set` — the disks of a DiskSim
//!   system, each trace device routed to its own; `dgraid_target` — a D-GRAID
//!   array (placement by the trace's file-system annotation);
//! * `failure` — when configured disks fail; `miss_trace` — a layer's misses as a trace;
//! * `build` — spec to stack; `runtime` — the stack at run time; `run` — whole runs;
//! * `batch` — many counted stacks over one trace in as few passes as keep each result;
//! * `result` — the JSON result.

pub mod address;
pub mod batch;
pub mod build;
pub mod cache_layer;
pub mod data;
pub mod device_set;
pub mod dgraid_target;
pub mod failure;
pub mod layer;
pub mod miss_trace;
pub mod prefetch;
pub mod result;
pub mod run;
pub mod runtime;
pub mod spec;
pub mod target;
pub mod tier;
pub mod write_buffer;

#[cfg(test)]
mod dgraid_tests;
#[cfg(test)]
mod hs_tests;
#[cfg(test)]
mod live_rebuild_tests;
#[cfg(test)]
mod rebuild_tests;
#[cfg(test)]
mod recording;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

pub use build::Executor;
pub use result::StackResult;
pub use run::{run, TraceInput};
pub use spec::StackSpec;

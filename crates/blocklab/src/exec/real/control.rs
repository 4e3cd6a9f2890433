//! (being written)
pub const SERVE_FILE: &str = "serve.json";

//! ECI-Cache's per-tenant write policy (§5.2, Algorithm 3): every window,
//! write-back, or read-only when re-writes dominate.
//!
//! r = (WAR + WAW) / all block accesses of the tenant in the window (cold
//! reads and writes included: "the ratio of combined WAW and WAR requests
//! over all requests"). r >= θ → read-only (writes bypass the SSD and
//! invalidate its copy), else write-back. Every tenant starts write-back; a
//! window without accesses keeps the last choice. The paper swept θ over
//! 0.2–0.9 and the value behind its figure was lost from the text: default
//! [`DEFAULT_THETA`] = 0.5.

use super::stats::AccessClasses;
use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The two policies ECI chooses between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum WritePolicy {
    #[serde(rename = "wb")]
    WriteBack,
    #[serde(rename = "ro")]
    ReadOnly,
}

impl WritePolicy {
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::WriteBack => "wb",
            WritePolicy::ReadOnly => "ro",
        }
    }
}

pub const DEFAULT_THETA: f64 = 0.5;

/// Check θ: a share in [0, 1].
pub fn validate_theta(theta: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&theta) {
        Ok(theta)
    } else {
        Err(Error::config(format!("theta must be in [0, 1], not {theta}")))
    }
}

/// The policy for a window with these access classes (θ in [0, 1], see
/// [`validate_theta`]); None without accesses.
pub fn choose(classes: &AccessClasses, theta: f64) -> Option<WritePolicy> {
    let n = classes.total();
    if n == 0 {
        return None;
    }
    let r = (classes.war + classes.waw) as f64 / n as f64;
    Some(if r >= theta {
        WritePolicy::ReadOnly
    } else {
        WritePolicy::WriteBack
    })
}

/// The adaptive chooser a tier keeps: each tenant's current policy.
#[derive(Debug, Clone)]
pub struct AdaptiveWritePolicy {
    theta: f64,
    current: FxHashMap<u32, WritePolicy>,
}

impl AdaptiveWritePolicy {
    pub fn new(theta: f64) -> Result<Self> {
        Ok(AdaptiveWritePolicy {
            theta: validate_theta(theta)?,
            current: FxHashMap::default(),
        })
    }

    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The tenant's policy now (write-back until a window says otherwise).
    pub fn policy(&self, tenant: u32) -> WritePolicy {
        self.current.get(&tenant).copied().unwrap_or(WritePolicy::WriteBack)
    }

    /// Close a window of `tenant` with these classes; returns the policy for
    /// the next window.
    pub fn end_window(&mut self, tenant: u32, classes: &AccessClasses) -> WritePolicy {
        match choose(classes, self.theta) {
            Some(p) => {
                self.current.insert(tenant, p);
                p
            }
            None => self.policy(tenant),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(cold: u64, rar: u64, war: u64, waw: u64) -> AccessClasses {
        AccessClasses {
            cold_read: cold,
            rar,
            war,
            waw,
            ..Default::default()
        }
    }

    #[test]
    fn threshold_rule() {
        // r = 5/10: read-only at θ = 0.5 (>=), write-back at θ = 0.51.
        let c = classes(3, 2, 1, 4);
        assert_eq!(choose(&c, 0.5), Some(WritePolicy::ReadOnly));
        assert_eq!(choose(&c, 0.51), Some(WritePolicy::WriteBack));
        // Cold accesses count in the denominator: 4 re-writes of 8 accesses.
        assert_eq!(choose(&classes(4, 0, 0, 4), 0.5), Some(WritePolicy::ReadOnly));
        assert_eq!(choose(&classes(5, 0, 0, 4), 0.5), Some(WritePolicy::WriteBack));
        // θ = 0: always read-only once there are accesses; θ = 1: only when every access re-writes.
        assert_eq!(choose(&classes(1, 0, 0, 0), 0.0), Some(WritePolicy::ReadOnly));
        assert_eq!(choose(&classes(0, 0, 2, 3), 1.0), Some(WritePolicy::ReadOnly));
        assert_eq!(choose(&classes(1, 0, 2, 3), 1.0), Some(WritePolicy::WriteBack));
        assert_eq!(choose(&AccessClasses::default(), 0.5), None);
    }

    #[test]
    fn research_note_e7() {
        // rw_20_80.105 at 8 KiB: r = (437 + 7,651) / 13,450 = 0.601.
        let c = AccessClasses {
            cold_read: 1321,
            cold_write: 3201,
            rar: 495,
            raw: 345,
            war: 437,
            waw: 7651,
        };
        assert_eq!(choose(&c, 0.5), Some(WritePolicy::ReadOnly));
        assert_eq!(choose(&c, 0.7), Some(WritePolicy::WriteBack));
    }

    #[test]
    fn adaptive_keeps_state_per_tenant() {
        let mut a = AdaptiveWritePolicy::new(0.5).unwrap();
        assert_eq!(a.policy(3), WritePolicy::WriteBack);
        assert_eq!(a.end_window(3, &classes(1, 0, 0, 9)), WritePolicy::ReadOnly);
        // An idle window keeps read-only; another tenant is untouched.
        assert_eq!(a.end_window(3, &AccessClasses::default()), WritePolicy::ReadOnly);
        assert_eq!(a.policy(4), WritePolicy::WriteBack);
        assert_eq!(a.end_window(3, &classes(5, 5, 0, 0)), WritePolicy::WriteBack);
        for bad in [-0.1, 1.1, f64::NAN] {
            assert!(AdaptiveWritePolicy::new(bad).is_err());
        }
        assert_eq!(serde_json::to_string(&WritePolicy::ReadOnly).unwrap(), "\"ro\"");
    }
}

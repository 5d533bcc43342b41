//! Injected faults of the fake GitHub: which calls they hit (every call, or one method and path
//! suffix) and how those calls fail — refused without effect, served and then answered with an
//! error (a write GitHub applied although its caller heard 502), or stalled past a client's
//! timeout.

use serde_json::{Value, json};

use super::action::Action;

/// How one faulty call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// Answer `status` instead of serving the call.
    Refuse {
        status: u16,
        rate_limited: bool,
        /// A `Retry-After` header (GitHub's secondary rate limits send one).
        retry_after: Option<u64>,
    },
    /// Serve the call (its change takes effect), then answer `status`.
    ApplyThenFail { status: u16 },
    /// Hold the answer for `millis` (served first when `applied`, else answered 504 after).
    Stall { millis: u64, applied: bool },
}

/// Faults still to inject, for `remaining` matching calls.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// Only calls with this method (any when `None`).
    pub method: Option<String>,
    /// Only calls whose path ends so (any when `None`).
    pub path_suffix: Option<String>,
    pub remaining: u32,
    pub kind: FaultKind,
}

impl Fault {
    fn hits(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_suffix
                .as_deref()
                .is_none_or(|s| path.ends_with(s))
    }
}

/// The queue of injected faults: the first one that matches a call takes it.
#[derive(Debug, Default)]
pub(crate) struct Faults(Vec<Fault>);

impl Faults {
    pub fn push(&mut self, fault: Fault) {
        if fault.remaining > 0 {
            self.0.push(fault);
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Applies a fault action (`failNext`, `stallNext`, `clearFaults`).
    pub fn apply(&mut self, action: Action) -> Result<Value, String> {
        match action {
            Action::FailNext {
                status,
                count,
                rate_limited,
                retry_after,
                method,
                path_suffix,
                applied,
            } => {
                if !(400..=599).contains(&status) {
                    return Err(format!("failure status {status} is not 4xx or 5xx"));
                }
                let kind = if applied {
                    FaultKind::ApplyThenFail { status }
                } else {
                    FaultKind::Refuse {
                        status,
                        rate_limited,
                        retry_after,
                    }
                };
                self.push(Fault {
                    method,
                    path_suffix,
                    remaining: count.min(1_000),
                    kind,
                });
                Ok(json!({}))
            }
            Action::StallNext {
                millis,
                count,
                method,
                path_suffix,
                applied,
            } => {
                self.push(Fault {
                    method,
                    path_suffix,
                    remaining: count.min(1_000),
                    kind: FaultKind::Stall {
                        millis: millis.min(600_000),
                        applied,
                    },
                });
                Ok(json!({}))
            }
            Action::ClearFaults {} => {
                self.clear();
                Ok(json!({}))
            }
            other => Err(format!("not a fault action: {other:?}")),
        }
    }

    /// The fault this call meets, if any (one of its remaining uses is spent).
    pub fn take(&mut self, method: &str, path: &str) -> Option<FaultKind> {
        let index = self.0.iter().position(|f| f.hits(method, path))?;
        let fault = &mut self.0[index];
        fault.remaining -= 1;
        let kind = fault.kind;
        if fault.remaining == 0 {
            self.0.remove(index);
        }
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_hit_matching_calls_in_order_and_run_out() {
        let mut faults = Faults::default();
        faults.push(Fault {
            method: Some("POST".into()),
            path_suffix: Some("/comments".into()),
            remaining: 2,
            kind: FaultKind::ApplyThenFail { status: 502 },
        });
        faults.push(Fault {
            method: None,
            path_suffix: None,
            remaining: 1,
            kind: FaultKind::Stall {
                millis: 5,
                applied: false,
            },
        });
        let post = FaultKind::ApplyThenFail { status: 502 };
        assert_eq!(
            faults.take("post", "/repos/a/b/issues/1/comments"),
            Some(post)
        );
        assert!(matches!(
            faults.take("GET", "/repos/a/b"),
            Some(FaultKind::Stall { .. })
        ));
        assert_eq!(faults.take("GET", "/repos/a/b"), None);
        assert_eq!(
            faults.take("POST", "/repos/a/b/issues/1/comments"),
            Some(post)
        );
        assert_eq!(faults.take("POST", "/repos/a/b/issues/1/comments"), None);
    }
}

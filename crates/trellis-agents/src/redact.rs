//! Secret hygiene: connection values live only in memory and are masked in every line that
//! leaves a harness.

use std::collections::BTreeMap;
use std::fmt;

/// Environment values resolved for one execution. `Debug` never shows the values.
#[derive(Clone, Default)]
pub struct SecretEnv(BTreeMap<String, String>);

impl SecretEnv {
    pub fn new(values: BTreeMap<String, String>) -> Self {
        Self(values)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The values worth masking (very short values would mask ordinary text).
    pub fn redactor(&self) -> Redactor {
        let mut needles: Vec<String> = self.0.values().filter(|v| v.len() >= 4).cloned().collect();
        // Longest first, so a value containing another is masked whole.
        needles.sort_by_key(|v| std::cmp::Reverse(v.len()));
        needles.dedup();
        Redactor { needles }
    }
}

impl fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// Replaces secret values with `[REDACTED]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    needles: Vec<String>,
}

impl Redactor {
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), "[REDACTED]");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_masked_longest_first_and_never_debug_printed() {
        let env = SecretEnv::new(BTreeMap::from([
            ("A".to_owned(), "canary-123".to_owned()),
            ("B".to_owned(), "canary-123-long".to_owned()),
        ]));
        let r = env.redactor();
        assert_eq!(
            r.apply("x canary-123-long y canary-123"),
            "x [REDACTED] y [REDACTED]"
        );
        assert!(!format!("{env:?}").contains("canary"));
    }
}

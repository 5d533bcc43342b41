//! Secret hygiene: connection values live only in memory and are masked in every line that
//! leaves a harness.

use std::collections::BTreeMap;
use std::fmt;

pub use trellis_process::Redactor;

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

    /// A redactor for every value (very short values would mask ordinary text and are left).
    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.0.values())
    }
}

impl fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
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

//! A profile's name: the one word that names it in commands, URLs and its file name, so only
//! characters safe in all three.

use std::fmt;

use crate::shared::profile_error::ProfileError;

/// The longest profile name.
pub const MAX_PROFILE_NAME_BYTES: usize = 64;

/// A checked profile name: 1–64 characters of lowercase ASCII letters, digits, `-`, `_` and
/// `.`, starting with a letter or digit (so never `.`/`..`, a hidden file or a path).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProfileName(String);

impl ProfileName {
    pub fn parse(text: &str) -> Result<Self, ProfileError> {
        let invalid = |why: &str| ProfileError::InvalidName {
            name: text.chars().take(MAX_PROFILE_NAME_BYTES + 8).collect(),
            why: why.to_owned(),
        };
        let Some(first) = text.chars().next() else {
            return Err(invalid("it is empty"));
        };
        if text.len() > MAX_PROFILE_NAME_BYTES {
            return Err(invalid("it is longer than 64 characters"));
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(invalid("it must start with a lowercase letter or a digit"));
        }
        if let Some(bad) = text.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        }) {
            return Err(invalid(&format!(
                "{bad:?} is not allowed: use lowercase letters, digits, '-', '_' and '.'"
            )));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_safe_words() {
        for good in ["nightly", "review-2", "a", "team.pr_review", "0day"] {
            assert_eq!(ProfileName::parse(good).map(|n| n.0), Ok(good.to_owned()));
        }
        for bad in [
            "", ".", "..", ".hidden", "-flag", "Upper", "a/b", "a b", "ü", "a\n", "x%2f",
        ] {
            let error = ProfileName::parse(bad).expect_err(bad);
            assert_eq!(error.code(), "profile.invalid_name", "{bad:?}");
        }
        assert!(ProfileName::parse(&"a".repeat(64)).is_ok());
        assert!(ProfileName::parse(&"a".repeat(65)).is_err());
    }
}

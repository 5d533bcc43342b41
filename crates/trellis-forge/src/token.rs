//! The forge credential: read from a declared environment variable, never printed.

use std::fmt;

use crate::ForgeError;

/// A GitHub token and the name of the variable it came from. `Debug` shows only the name, and
/// no error message ever contains the value.
#[derive(Clone)]
pub struct Token {
    value: String,
    variable: String,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token(from ${})", self.variable)
    }
}

/// True for a portable environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Token {
    /// Reads the token from the process environment variable `variable` (e.g. `GH_TOKEN`).
    pub fn from_env(variable: &str) -> Result<Token, ForgeError> {
        Token::from_lookup(variable, |name| std::env::var(name).ok())
    }

    /// Reads the token through `lookup` (a worker's declared environment, a test's map).
    pub fn from_lookup(
        variable: &str,
        lookup: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Token, ForgeError> {
        if !is_variable_name(variable) {
            return Err(ForgeError::InvalidTokenVariable {
                variable: variable.to_owned(),
            });
        }
        match lookup(variable) {
            Some(value) if !value.trim().is_empty() => Ok(Token {
                value: value.trim().to_owned(),
                variable: variable.to_owned(),
            }),
            _ => Err(ForgeError::TokenMissing {
                variable: variable.to_owned(),
            }),
        }
    }

    /// The variable the token was read from.
    pub fn variable(&self) -> &str {
        &self.variable
    }

    pub(crate) fn value(&self) -> &str {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_variable_only() {
        let token = Token::from_lookup("GH_TOKEN", |_| Some("canary-5f1e".into())).unwrap();
        let shown = format!("{token:?}");
        assert_eq!(shown, "Token(from $GH_TOKEN)");
        assert!(!shown.contains("canary"));
    }

    #[test]
    fn missing_empty_and_badly_named_variables_are_errors() {
        assert_eq!(
            Token::from_lookup("GH_TOKEN", |_| None).unwrap_err().code(),
            "forge.token_missing"
        );
        assert_eq!(
            Token::from_lookup("GH_TOKEN", |_| Some("  ".into()))
                .unwrap_err()
                .code(),
            "forge.token_missing"
        );
        assert_eq!(
            Token::from_lookup("GH-TOKEN", |_| Some("x".into()))
                .unwrap_err()
                .code(),
            "forge.invalid_token_variable"
        );
    }
}

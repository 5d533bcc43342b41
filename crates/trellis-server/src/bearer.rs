//! Bearer tokens of a team server (`trellis serve`): kept only as SHA-256 digests, loaded from a
//! token file (`trellis serve token create` appends to it) or from environment variables named
//! at startup, and compared without revealing where a guess went wrong.
//!
//! A token file holds one token per line, `sha256:<64 hex digits> <name>`; blank lines and lines
//! starting with `#` are ignored. The token itself is shown once, when it is created, and is
//! never stored, logged or echoed.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The prefix of every token Trellis creates (so a leaked one is recognisable in a scan).
pub const TOKEN_PREFIX: &str = "trellis_";

/// The longest token accepted in a request header or an environment variable.
pub const MAX_TOKEN_BYTES: usize = 512;

/// Why a set of tokens could not be loaded or a token not created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the token file {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot write the token file {}: {cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("line {line} of the token file {} is not `sha256:<64 hex digits> NAME`", path.display())]
    Malformed { path: PathBuf, line: usize },
    #[error("environment variable {0} is not set (it should hold a bearer token)")]
    MissingVariable(String),
    #[error("environment variable {0} holds no usable token (empty, too long or not text)")]
    UnusableVariable(String),
    #[error("a token name is 1–64 letters, digits, `.`, `_` or `-`; {0:?} is not")]
    BadName(String),
    #[error("the operating system gave no random bytes: {0}")]
    Random(String),
}

/// The tokens a server accepts: a name (for people) and the digest of each.
#[derive(Clone, Default)]
pub struct BearerTokens {
    entries: Vec<TokenEntry>,
}

#[derive(Clone)]
struct TokenEntry {
    name: String,
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: digests are not secrets, but nothing gains from printing them.
        formatter
            .debug_struct("BearerTokens")
            .field(
                "names",
                &self.entries.iter().map(|e| &e.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn digest_of(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

fn check_name(name: &str) -> Result<(), TokenError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(TokenError::BadName(name.to_owned()))
    }
}

impl BearerTokens {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The names of the accepted tokens, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.name.as_str())
    }

    /// Adds every token of a token file.
    pub fn add_file(&mut self, path: &Path) -> Result<(), TokenError> {
        let text = std::fs::read_to_string(path).map_err(|cause| TokenError::Read {
            path: path.to_owned(),
            cause,
        })?;
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = || TokenError::Malformed {
                path: path.to_owned(),
                line: index + 1,
            };
            let (digest, name) = line.split_once(char::is_whitespace).ok_or_else(malformed)?;
            let digest = digest.strip_prefix("sha256:").ok_or_else(malformed)?;
            let mut bytes = [0u8; 32];
            hex::decode_to_slice(digest, &mut bytes).map_err(|_| malformed())?;
            let name = name.trim();
            check_name(name).map_err(|_| malformed())?;
            self.entries.push(TokenEntry {
                name: name.to_owned(),
                digest: bytes,
            });
        }
        Ok(())
    }

    /// Adds the token held by environment variable `variable` (named after it).
    pub fn add_variable(&mut self, variable: &str) -> Result<(), TokenError> {
        self.add_variable_value(variable, std::env::var_os(variable).as_deref())
    }

    /// Adds the token `value` read from environment variable `variable` (`None`: unset).
    pub fn add_variable_value(
        &mut self,
        variable: &str,
        value: Option<&std::ffi::OsStr>,
    ) -> Result<(), TokenError> {
        let value = value.ok_or_else(|| TokenError::MissingVariable(variable.to_owned()))?;
        let secret = value
            .to_str()
            .map(str::trim)
            .filter(|secret| !secret.is_empty() && secret.len() <= MAX_TOKEN_BYTES)
            .ok_or_else(|| TokenError::UnusableVariable(variable.to_owned()))?;
        self.entries.push(TokenEntry {
            name: format!("env:{variable}"),
            digest: digest_of(secret.as_bytes()),
        });
        Ok(())
    }

    /// Adds a token given as text (tests and embedding).
    pub fn add_secret(&mut self, name: &str, secret: &str) -> Result<(), TokenError> {
        check_name(name)?;
        self.entries.push(TokenEntry {
            name: name.to_owned(),
            digest: digest_of(secret.as_bytes()),
        });
        Ok(())
    }

    /// The name of the token `offered` is, if it is one. Every entry is compared in full
    /// whatever matched, so the time taken says nothing about which digest bytes were right.
    pub fn identify(&self, offered: &[u8]) -> Option<&str> {
        if offered.is_empty() || offered.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let digest = digest_of(offered);
        let mut found = None;
        for entry in &self.entries {
            let difference = entry
                .digest
                .iter()
                .zip(&digest)
                .fold(0u8, |difference, (a, b)| difference | (a ^ b));
            if difference == 0 && found.is_none() {
                found = Some(entry.name.as_str());
            }
        }
        found
    }
}

/// A token just created: `secret` is shown once to the person who asked; `line` is what the
/// token file keeps.
pub struct NewToken {
    pub secret: String,
    pub line: String,
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("NewToken(…)")
    }
}

/// Makes a fresh token named `name`: 32 random bytes from the operating system.
pub fn create_token(name: &str) -> Result<NewToken, TokenError> {
    check_name(name)?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let line = format!(
        "sha256:{} {name}",
        hex::encode(digest_of(secret.as_bytes()))
    );
    Ok(NewToken { secret, line })
}

/// Creates a token and appends its digest to the token file at `path` (created readable by
/// its owner only); returns the token to show once.
pub fn append_new_token(path: &Path, name: &str) -> Result<String, TokenError> {
    let token = create_token(name)?;
    let write_error = |cause| TokenError::Write {
        path: path.to_owned(),
        cause,
    };
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(write_error)?;
    writeln!(file, "{}", token.line).map_err(write_error)?;
    file.sync_all().map_err(write_error)?;
    Ok(token.secret)
}

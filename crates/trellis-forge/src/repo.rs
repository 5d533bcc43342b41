//! Repository names (`owner/name`) as GitHub accepts them.

use std::fmt;

use crate::ForgeError;

/// Longest owner (GitHub: 39) and repository name (GitHub: 100) accepted.
const MAX_OWNER: usize = 39;
const MAX_NAME: usize = 100;

/// A repository `owner/name`; both parts are checked, so they are safe in a URL path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoRef {
    owner: String,
    name: String,
}

fn valid_part(part: &str, max: usize) -> bool {
    !part.is_empty()
        && part.len() <= max
        && part != "."
        && part != ".."
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl RepoRef {
    pub fn new(owner: &str, name: &str) -> Result<RepoRef, ForgeError> {
        let name = name.strip_suffix(".git").unwrap_or(name);
        if valid_part(owner, MAX_OWNER) && valid_part(name, MAX_NAME) {
            Ok(RepoRef {
                owner: owner.to_owned(),
                name: name.to_owned(),
            })
        } else {
            Err(ForgeError::InvalidRepository {
                repository: format!("{owner}/{name}"),
            })
        }
    }

    /// Parses `owner/name`.
    pub fn parse(full_name: &str) -> Result<RepoRef, ForgeError> {
        match full_name.split_once('/') {
            Some((owner, name)) => RepoRef::new(owner, name),
            None => Err(ForgeError::InvalidRepository {
                repository: full_name.to_owned(),
            }),
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The API path of the repository: `/repos/owner/name`.
    pub(crate) fn api_path(&self) -> String {
        format!("/repos/{}/{}", self.owner, self.name)
    }
}

impl fmt::Display for RepoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_owner_and_name() {
        let repo = RepoRef::parse("acme/app.git").unwrap();
        assert_eq!(repo.to_string(), "acme/app");
        assert_eq!(repo.api_path(), "/repos/acme/app");
    }

    #[test]
    fn rejects_what_github_would_not_name() {
        for bad in [
            "acme",
            "/app",
            "acme/",
            "acme/a/b",
            "ac me/app",
            "acme/..",
            "a?b/c",
        ] {
            assert_eq!(
                RepoRef::parse(bad).unwrap_err().code(),
                "forge.invalid_repository",
                "{bad}"
            );
        }
    }
}

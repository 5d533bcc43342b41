//! Finds the issues a pull request body closes: a closing keyword (`close`, `fixes`,
//! `resolved`, …) followed by `#N`, `OWNER/REPO#N` or an issue URL on the same host.

use crate::RepoRef;
use crate::task_url::{TaskKind, TaskUrl};

const KEYWORDS: [&str; 9] = [
    "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
];

/// `(repository, issue number)` for every closing reference, first mention first, no repeats.
pub(crate) fn closing_references(
    body: &str,
    here: &RepoRef,
    web_host: &str,
) -> Vec<(RepoRef, u64)> {
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut found: Vec<(RepoRef, u64)> = Vec::new();
    for pair in words.windows(2) {
        let keyword = pair[0]
            .trim_start_matches(|c: char| !c.is_alphanumeric())
            .trim_end_matches(':')
            .to_ascii_lowercase();
        if !KEYWORDS.contains(&keyword.as_str()) {
            continue;
        }
        let reference = pair[1].trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
        if let Some(target) = parse_reference(reference, here, web_host)
            && !found.contains(&target)
        {
            found.push(target);
        }
    }
    found
}

fn parse_reference(text: &str, here: &RepoRef, web_host: &str) -> Option<(RepoRef, u64)> {
    let number = |n: &str| n.parse::<u64>().ok().filter(|n| *n > 0);
    if let Some(n) = text.strip_prefix('#') {
        return Some((here.clone(), number(n)?));
    }
    if text.starts_with("https://") {
        let url = TaskUrl::parse(text).ok()?;
        return (url.kind == TaskKind::Issue && url.host == web_host)
            .then_some((url.repository, url.number));
    }
    let (repo, n) = text.split_once('#')?;
    Some((RepoRef::parse(repo).ok()?, number(n)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(body: &str) -> Vec<String> {
        let here = RepoRef::parse("acme/app").unwrap();
        closing_references(body, &here, "github.com")
            .into_iter()
            .map(|(r, n)| format!("{r}#{n}"))
            .collect()
    }

    #[test]
    fn finds_keyword_references_in_every_form() {
        assert_eq!(
            refs(
                "Fixes #12.\n\n(closes acme/lib#3) and Resolved: https://github.com/acme/app/issues/9, fixes #12"
            ),
            ["acme/app#12", "acme/lib#3", "acme/app#9"]
        );
    }

    #[test]
    fn ignores_mentions_without_a_keyword_and_foreign_hosts() {
        assert!(refs("See #12; related to #13. prefixes #4").is_empty());
        assert!(refs("fixes https://gitlab.com/acme/app/issues/9").is_empty());
        assert!(refs("fixes https://github.com/acme/app/pull/9").is_empty());
        assert!(refs("fixes #0 fixes #x").is_empty());
    }
}

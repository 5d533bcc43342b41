//! Bearer tokens: a created token is accepted by the file it was appended to, only its digest
//! is stored, malformed files and unusable variables are refused with the line or variable
//! named, and nothing prints a token.

use trellis_server::bearer::{BearerTokens, TOKEN_PREFIX, TokenError, append_new_token};

#[test]
fn a_created_token_is_accepted_and_only_its_digest_is_stored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tokens");
    let alice = append_new_token(&file, "alice").expect("alice");
    let bob = append_new_token(&file, "bob").expect("bob");
    assert!(alice.starts_with(TOKEN_PREFIX) && alice.len() == TOKEN_PREFIX.len() + 64);
    assert_ne!(alice, bob);

    let stored = std::fs::read_to_string(&file).expect("read");
    assert!(!stored.contains(&alice) && !stored.contains(&bob));
    assert_eq!(stored.lines().count(), 2);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the token file is readable by others");
    }

    let mut tokens = BearerTokens::new();
    tokens.add_file(&file).expect("load");
    assert_eq!(tokens.identify(alice.as_bytes()), Some("alice"));
    assert_eq!(tokens.identify(bob.as_bytes()), Some("bob"));
    assert_eq!(tokens.identify(b"trellis_guess"), None);
    assert_eq!(tokens.identify(b""), None);
    let debug = format!("{tokens:?}");
    assert!(debug.contains("alice") && !debug.contains(&alice));
}

#[test]
fn malformed_token_files_name_the_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tokens");
    let good = format!("sha256:{} ok", "ab".repeat(32));
    for (text, line) in [
        (format!("# comment\n\n{good}\nsha256:xyz bad\n"), 4),
        (format!("{good}\nmd5:{} old\n", "ab".repeat(16)), 2),
        (format!("sha256:{}\n", "ab".repeat(32)), 1),
        (format!("sha256:{} bad/name\n", "ab".repeat(32)), 1),
    ] {
        std::fs::write(&file, text).expect("write");
        match BearerTokens::new().add_file(&file) {
            Err(TokenError::Malformed { line: at, .. }) => assert_eq!(at, line),
            other => panic!("expected a malformed line {line}, got {other:?}"),
        }
    }
    let missing = BearerTokens::new().add_file(&dir.path().join("absent"));
    assert!(matches!(missing, Err(TokenError::Read { .. })));
}

#[test]
fn tokens_from_variables_are_named_after_them_and_never_shown() {
    use std::ffi::OsStr;
    let secret = "trellis_env_canary_0a9b8c7d6e5f";
    let mut tokens = BearerTokens::new();
    tokens
        .add_variable_value("TEAM_TOKEN", Some(OsStr::new(&format!(" {secret}\n"))))
        .expect("set");
    assert_eq!(tokens.identify(secret.as_bytes()), Some("env:TEAM_TOKEN"));
    let unset = tokens.add_variable_value("UNSET_TOKEN", None);
    assert!(matches!(unset, Err(TokenError::MissingVariable(_))));
    let empty = tokens.add_variable_value("EMPTY_TOKEN", Some(OsStr::new("  ")));
    assert!(matches!(empty, Err(TokenError::UnusableVariable(_))));
    let long = "x".repeat(513);
    let long = tokens.add_variable_value("LONG_TOKEN", Some(OsStr::new(&long)));
    assert!(matches!(long, Err(TokenError::UnusableVariable(_))));
    assert!(!format!("{tokens:?}").contains(secret));
    assert_eq!(tokens.len(), 1);
}

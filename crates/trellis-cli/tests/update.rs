//! `trellis update` against a release folder served on loopback (`python3 -m http.server`),
//! run by a copy of the binary so the one under test is never replaced: a good archive
//! replaces the copy atomically; a bad checksum, a missing version, a signature that does not
//! verify (or is missing while a key is configured) change nothing and say why.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sha2::{Digest, Sha256};
use support::{TRELLIS, python};
use tempfile::TempDir;

/// What the fake release's "binary" is: a script that answers `--version` like trellis.
const NEW_BINARY: &[u8] = b"#!/bin/sh\necho \"trellis 9.9.9\"\n";

fn platform() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

/// A `.tar.gz` holding `DIR/trellis` with `contents`.
fn archive(dir: &str, contents: &[u8]) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    let mut header = tar::Header::new_gnu();
    header.set_size(contents.len() as u64);
    header.set_mode(0o755);
    header.set_cksum();
    builder
        .append_data(&mut header, format!("{dir}/trellis"), contents)
        .unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

/// A release folder with `latest` = 9.9.9 and that version's archive; `sums` overrides the
/// SHA256SUMS text (None: the right one).
fn release_folder(root: &Path, sums: Option<&str>) {
    let version_dir = root.join("9.9.9");
    std::fs::create_dir_all(&version_dir).unwrap();
    std::fs::write(root.join("latest"), "9.9.9\n").unwrap();
    let name = format!("trellis-9.9.9-{}", platform());
    let bytes = archive(&name, NEW_BINARY);
    let digest = hex::encode(Sha256::digest(&bytes));
    std::fs::write(version_dir.join(format!("{name}.tar.gz")), bytes).unwrap();
    let right = format!("{digest}  {name}.tar.gz\n");
    std::fs::write(version_dir.join("SHA256SUMS"), sums.unwrap_or(&right)).unwrap();
}

/// `python3 -m http.server` on an ephemeral loopback port, killed when dropped.
struct FileServer {
    child: Child,
    url: String,
}

impl FileServer {
    fn start(root: &Path) -> Self {
        let mut child = Command::new(python())
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|word| *word != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("no port in {line:?}"))
            .to_owned();
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A copy of the binary under test in its own directory.
fn copy_of_trellis(dir: &TempDir) -> PathBuf {
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("trellis");
    std::fs::copy(TRELLIS, &copy).unwrap();
    copy
}

fn update(copy: &Path, args: &[&str]) -> std::process::Output {
    Command::new(copy)
        .arg("update")
        .args(args)
        .env_remove("TRELLIS_RELEASE_URL")
        .env_remove("TRELLIS_RELEASE_PUBLIC_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run the copy")
}

fn directory_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_good_archive_replaces_the_binary() {
    let dir = TempDir::new().unwrap();
    let releases = dir.path().join("releases");
    release_folder(&releases, None);
    let server = FileServer::start(&releases);
    let copy = copy_of_trellis(&dir);

    let output = update(&copy, &["--from", &server.url]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains("to 9.9.9"), "{stdout}");
    assert_eq!(std::fs::read(&copy).unwrap(), NEW_BINARY);
    let version = Command::new(&copy).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout), "trellis 9.9.9\n");
    assert_eq!(directory_entries(copy.parent().unwrap()), ["trellis"]);
}

#[test]
fn a_named_version_is_fetched_and_the_current_one_is_left_alone() {
    let dir = TempDir::new().unwrap();
    let releases = dir.path().join("releases");
    release_folder(&releases, None);
    // `latest` names a version without archives: only --version 9.9.9 can succeed.
    std::fs::write(releases.join("latest"), "10.0.0\n").unwrap();
    let server = FileServer::start(&releases);
    let copy = copy_of_trellis(&dir);
    let original = std::fs::read(&copy).unwrap();

    let missing = update(&copy, &["--from", &server.url]);
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("10.0.0/SHA256SUMS") && stderr.contains("404"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), original);

    let current = env!("CARGO_PKG_VERSION");
    let same = update(&copy, &["--from", &server.url, "--version", current]);
    assert!(same.status.success(), "{same:?}");
    assert!(String::from_utf8_lossy(&same.stdout).contains("already installed"));
    assert_eq!(std::fs::read(&copy).unwrap(), original);

    let named = update(&copy, &["--from", &server.url, "--version", "9.9.9"]);
    assert!(named.status.success(), "{named:?}");
    assert_eq!(std::fs::read(&copy).unwrap(), NEW_BINARY);
}

#[test]
fn a_bad_checksum_changes_nothing_and_says_why() {
    let dir = TempDir::new().unwrap();
    let releases = dir.path().join("releases");
    let name = format!("trellis-9.9.9-{}.tar.gz", platform());
    let wrong = format!("{}  {name}\n", "0".repeat(64));
    release_folder(&releases, Some(&wrong));
    let server = FileServer::start(&releases);
    let copy = copy_of_trellis(&dir);
    let original = std::fs::read(&copy).unwrap();

    let output = update(&copy, &["--from", &server.url]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("checksum mismatch for {name}"))
            && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), original);
    assert_eq!(directory_entries(copy.parent().unwrap()), ["trellis"]);

    // Without a configured release folder it says how to configure one.
    let unconfigured = update(&copy, &[]);
    assert!(String::from_utf8_lossy(&unconfigured.stderr).contains("--from URL"));
}

/// An Ed25519 key made by openssl (as the release instructions say) and its public half, base64.
fn signing_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(format!("{name}.pem"));
    let made = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&key)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");
    let public = Command::new("openssl")
        .args(["pkey", "-pubout", "-outform", "DER", "-in"])
        .arg(&key)
        .output()
        .expect("openssl");
    assert!(
        public.status.success() && public.stdout.len() >= 32,
        "{public:?}"
    );
    let der = public.stdout;
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&der[der.len() - 32..]);
    (key, encoded)
}

#[test]
fn a_signed_folder_made_by_the_release_script_updates_a_binary() {
    let dir = TempDir::new().unwrap();
    let releases = dir.path().join("releases");
    let (key, public_key) = signing_key(dir.path(), "release");
    let (_, other_key) = signing_key(dir.path(), "other");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/release");
    let made = Command::new("bash")
        .arg(&script)
        .args(["--binary", TRELLIS, "--version", "9.9.9", "--out"])
        .arg(&releases)
        .arg("--signing-key")
        .arg(&key)
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/release");
    assert!(made.status.success(), "{made:?}");
    assert!(String::from_utf8_lossy(&made.stdout).contains(&public_key));
    let name = format!("trellis-9.9.9-{}.tar.gz", platform());
    assert_eq!(
        directory_entries(&releases.join("9.9.9")),
        ["SHA256SUMS", "SHA256SUMS.sig", name.as_str()]
    );
    assert_eq!(
        std::fs::read_to_string(releases.join("latest")).unwrap(),
        "9.9.9\n"
    );
    let server = FileServer::start(&releases);
    let copy = copy_of_trellis(&dir);
    // A copy that differs from the release by one trailing byte shows the file was replaced.
    let mut marked = std::fs::read(&copy).unwrap();
    marked.push(0);
    std::fs::write(&copy, &marked).unwrap();

    let forged = update(&copy, &["--from", &server.url, "--public-key", &other_key]);
    assert_eq!(forged.status.code(), Some(1), "{forged:?}");
    assert!(
        String::from_utf8_lossy(&forged.stderr)
            .contains("does not verify with the release public key; nothing was changed")
    );
    assert_eq!(std::fs::read(&copy).unwrap(), marked);

    let output = update(&copy, &["--from", &server.url, "--public-key", &public_key]);
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains(&name));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(TRELLIS).unwrap()
    );
}

#[test]
fn a_configured_key_refuses_a_release_without_a_signature() {
    let dir = TempDir::new().unwrap();
    let releases = dir.path().join("releases");
    release_folder(&releases, None);
    let server = FileServer::start(&releases);
    let copy = copy_of_trellis(&dir);
    let original = std::fs::read(&copy).unwrap();
    let (_, public_key) = signing_key(dir.path(), "release");
    let output = Command::new(&copy)
        .args(["update", "--from", &server.url])
        .env("TRELLIS_RELEASE_PUBLIC_KEY", &public_key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the signature is missing"), "{stderr}");
    assert_eq!(std::fs::read(&copy).unwrap(), original);
}

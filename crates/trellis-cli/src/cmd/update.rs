//! `trellis update`: replaces this binary with a named or the latest release from a release
//! folder served over HTTP(S), after checking the archive against the release's `SHA256SUMS`.
//!
//! A release folder (what `scripts/release` writes) holds `latest` (the newest version, one
//! line) and per version `VERSION/SHA256SUMS` and `VERSION/trellis-VERSION-ARCH-OS.tar.gz`,
//! each archive holding `trellis-VERSION-ARCH-OS/trellis`. With a public key configured, the
//! folder must also hold `VERSION/SHA256SUMS.sig` (base64 of the Ed25519 signature of
//! `SHA256SUMS`), and a signature that does not verify refuses the update.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use sha2::{Digest, Sha256};

/// The environment variable naming the release folder when `--from` is not given.
pub const RELEASE_URL_ENV: &str = "TRELLIS_RELEASE_URL";

/// The environment variable holding the release public key when `--public-key` is not given.
pub const PUBLIC_KEY_ENV: &str = "TRELLIS_RELEASE_PUBLIC_KEY";

/// The largest archive accepted (a release binary is a few tens of MiB).
const MAX_DOWNLOAD_BYTES: usize = 512 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The version to install (default: the release folder's `latest`).
    #[arg(long = "version", value_name = "VERSION")]
    pub release: Option<String>,
    /// The release folder's URL (default: $TRELLIS_RELEASE_URL).
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// Install even when this binary already is that version.
    #[arg(long)]
    pub force: bool,
    /// The release signing key (base64 of an Ed25519 public key; default:
    /// $TRELLIS_RELEASE_PUBLIC_KEY): SHA256SUMS must then carry a valid SHA256SUMS.sig.
    #[arg(long, value_name = "BASE64")]
    pub public_key: Option<String>,
}

/// This platform's part of an archive name: `x86_64-linux`, `aarch64-macos`, ….
fn platform() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

pub fn run(args: &UpdateArgs) -> anyhow::Result<u8> {
    let base = match &args.from {
        Some(url) => url.clone(),
        None => std::env::var(RELEASE_URL_ENV).map_err(|_| {
            anyhow!("no release folder configured: pass --from URL or set {RELEASE_URL_ENV}")
        })?,
    };
    let base = base.trim_end_matches('/').to_owned();
    let target = std::env::current_exe()
        .and_then(|path| path.canonicalize())
        .context("cannot tell where this trellis binary is")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .timeout(Duration::from_secs(600))
        .build()?;
    let fetch = |path: String| {
        let client = client.clone();
        let url = format!("{base}/{path}");
        runtime.block_on(download(client, url))
    };
    let version = match &args.release {
        Some(version) => version.clone(),
        None => String::from_utf8_lossy(&fetch("latest".to_owned())?)
            .trim()
            .to_owned(),
    };
    if version.is_empty() || version.contains(['/', '\\']) || version.contains("..") {
        bail!("{version:?} is not a release version");
    }
    let current = env!("CARGO_PKG_VERSION");
    if version == current && !args.force {
        outln!(
            "trellis {current} is already installed at {}",
            target.display()
        );
        return Ok(0);
    }
    let archive_name = format!("trellis-{version}-{}.tar.gz", platform());
    let sums = fetch(format!("{version}/SHA256SUMS"))?;
    let public_key = match &args.public_key {
        Some(key) => Some(key.clone()),
        None => std::env::var(PUBLIC_KEY_ENV)
            .ok()
            .filter(|key| !key.is_empty()),
    };
    if let Some(key) = public_key {
        let signature = fetch(format!("{version}/SHA256SUMS.sig")).map_err(|error| {
            anyhow!("a release public key is configured but the signature is missing ({error:#}); nothing was changed")
        })?;
        verify_signature(&key, &sums, &signature)?;
    }
    let expected = expected_digest(&String::from_utf8_lossy(&sums), &archive_name)?;
    let archive = fetch(format!("{version}/{archive_name}"))?;
    let actual = hex::encode(Sha256::digest(&archive));
    if actual != expected {
        bail!(
            "checksum mismatch for {archive_name}: SHA256SUMS says {expected}, the download \
             hashes to {actual}; nothing was changed"
        );
    }
    let binary = binary_from_archive(&archive, &format!("trellis-{version}-{}", platform()))
        .with_context(|| format!("{archive_name} is not a trellis release archive"))?;
    replace_binary(&target, &binary)?;
    outln!(
        "updated {} from {current} to {version} ({archive_name}, sha256 {actual})",
        target.display()
    );
    Ok(0)
}

/// GETs `url` whole, refusing an error status and an answer over the size cap.
async fn download(client: reqwest::Client, url: String) -> anyhow::Result<Vec<u8>> {
    let mut answer = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot fetch {url}"))?;
    if !answer.status().is_success() {
        bail!("{url} answered {}", answer.status());
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .with_context(|| format!("reading {url}"))?
    {
        if body.len() + chunk.len() > MAX_DOWNLOAD_BYTES {
            bail!("{url} is larger than {MAX_DOWNLOAD_BYTES} bytes");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The lower-case SHA-256 `SHA256SUMS` gives for `name` (lines `HEX  NAME`, or `HEX *NAME`
/// for binary mode, as `sha256sum` writes them).
fn expected_digest(sums: &str, name: &str) -> anyhow::Result<String> {
    sums.lines()
        .filter_map(|line| {
            let (digest, file) = line.trim_end().split_once(char::is_whitespace)?;
            let file = file.trim_start().trim_start_matches('*');
            (file == name).then(|| digest.to_ascii_lowercase())
        })
        .find(|digest| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| anyhow!("SHA256SUMS of this release lists no checksum for {name}"))
}

/// Checks `signature` (base64 text) of `message` against `public_key` (base64 of 32 bytes).
fn verify_signature(public_key: &str, message: &[u8], signature: &[u8]) -> anyhow::Result<()> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine
        .decode(public_key.trim())
        .ok()
        .filter(|key| key.len() == 32)
        .ok_or_else(|| anyhow!("the release public key is not base64 of an Ed25519 key"))?;
    let signature = engine
        .decode(String::from_utf8_lossy(signature).trim())
        .map_err(|_| anyhow!("SHA256SUMS.sig is not base64; nothing was changed"))?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key)
        .verify(message, &signature)
        .map_err(|_| {
            anyhow!(
                "the signature of SHA256SUMS does not verify with the release public key; \
                 nothing was changed"
            )
        })
}

/// The bytes of `DIR/trellis` inside a `.tar.gz` archive.
fn binary_from_archive(archive: &[u8], dir: &str) -> anyhow::Result<Vec<u8>> {
    let wanted = Path::new(dir).join("trellis");
    let mut entries = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    for entry in entries.entries()? {
        let mut entry = entry?;
        if entry.header().entry_type().is_file() && entry.path()? == wanted {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            return Ok(bytes);
        }
    }
    bail!("it holds no {}", wanted.display())
}

/// Writes `binary` beside `target` (same directory, so the rename stays on one file system),
/// makes it executable, checks it runs, and renames it over `target` in one step.
fn replace_binary(target: &Path, binary: &[u8]) -> anyhow::Result<()> {
    let directory: PathBuf = target
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| anyhow!("{} has no directory", target.display()))?;
    let mut staged = tempfile::Builder::new()
        .prefix(".trellis-update-")
        .tempfile_in(&directory)
        .with_context(|| format!("cannot write in {}", directory.display()))?;
    staged.write_all(binary)?;
    staged.as_file().sync_all()?;
    // Closed before it is run: Linux refuses to execute a file open for writing.
    let staged = staged.into_temp_path();
    make_executable(&staged, target)?;
    // A binary that does not start for this platform is refused before anything is replaced.
    let probe = std::process::Command::new(&staged)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| "the downloaded trellis does not start on this machine".to_owned())?;
    if !probe.status.success() {
        bail!("the downloaded trellis does not start on this machine; nothing was changed");
    }
    staged
        .persist(target)
        .map_err(|error| anyhow!("cannot replace {}: {}", target.display(), error.error))?;
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path, like: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(like).map_or(0o755, |m| m.permissions().mode()) | 0o111;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777))?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path, _like: &Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_are_read_as_sha256sum_writes_them() {
        let digest = "ab".repeat(32);
        let sums = format!(
            "{digest}  trellis-1.0.0-x86_64-linux.tar.gz\n{} *other.tar.gz\n",
            "cd".repeat(32)
        );
        assert_eq!(
            expected_digest(&sums, "trellis-1.0.0-x86_64-linux.tar.gz").unwrap(),
            digest
        );
        assert_eq!(
            expected_digest(&sums, "other.tar.gz").unwrap(),
            "cd".repeat(32)
        );
        assert!(expected_digest(&sums, "missing.tar.gz").is_err());
        assert!(expected_digest("xyz  short.tar.gz", "short.tar.gz").is_err());
    }
}

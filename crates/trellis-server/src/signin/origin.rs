//! The one origin a team server is reached at by browsers ([`PublicOrigin`]): parsed from
//! `--public-origin` or derived from the bind address, and the exact `Host` and `Origin`
//! values a browser request must carry.

use std::net::SocketAddr;

/// Why a public origin is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error(
        "{0:?} is not an origin: give `http://HOST[:PORT]` or `https://HOST[:PORT]`, without a \
         path, query, user or password"
    )]
    Malformed(String),
    #[error(
        "{0} listens on every address, so no public origin follows from it: give \
         --public-origin URL (the address people's browsers open) to serve the web UI"
    )]
    Unspecified(SocketAddr),
}

/// `scheme://host[:port]` as browsers send it in `Origin` (lower case, default port left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicOrigin {
    secure: bool,
    /// `host[:port]`: what `Host` must be.
    authority: String,
    /// `scheme://authority`: what `Origin` must be.
    origin: String,
    /// The port browsers connect to (the scheme's default when none is written).
    port: u16,
}

impl PublicOrigin {
    /// Parses an origin such as `https://trellis.example.com` (a trailing `/` is allowed).
    pub fn parse(text: &str) -> Result<Self, OriginError> {
        let malformed = || OriginError::Malformed(text.to_owned());
        let trimmed = text.trim();
        let lowered = trimmed
            .strip_suffix('/')
            .unwrap_or(trimmed)
            .to_ascii_lowercase();
        let (secure, rest) = if let Some(rest) = lowered.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = lowered.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(malformed());
        };
        let valid_byte = |byte: u8| {
            byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b':' | b'[' | b']')
        };
        if rest.is_empty() || !rest.bytes().all(valid_byte) {
            return Err(malformed());
        }
        let (host, port) = split_host_port(rest).ok_or_else(malformed)?;
        if host.is_empty() {
            return Err(malformed());
        }
        let default_port = if secure { 443 } else { 80 };
        let authority = match port {
            Some(port) if port != default_port => format!("{host}:{port}"),
            _ => host,
        };
        let scheme = if secure { "https" } else { "http" };
        Ok(Self {
            secure,
            origin: format!("{scheme}://{authority}"),
            authority,
            port: port.unwrap_or(default_port),
        })
    }

    /// The origin of a server bound to `address` (https when it serves TLS); none for an
    /// unspecified address (`0.0.0.0`, `[::]`), which names no host a browser could open.
    pub fn of_address(address: SocketAddr, tls: bool) -> Result<Self, OriginError> {
        if address.ip().is_unspecified() {
            return Err(OriginError::Unspecified(address));
        }
        let scheme = if tls { "https" } else { "http" };
        Self::parse(&format!("{scheme}://{address}"))
    }

    /// Whether browsers reach the server over https (the session cookie is then `Secure`).
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The port browsers connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `scheme://host[:port]`.
    pub fn as_str(&self) -> &str {
        &self.origin
    }

    /// Whether `host` (a `Host` header) is exactly this origin's authority.
    pub fn matches_host(&self, host: &[u8]) -> bool {
        host.eq_ignore_ascii_case(self.authority.as_bytes())
    }

    /// Whether `origin` (an `Origin` header) is exactly this origin.
    pub fn matches_origin(&self, origin: &[u8]) -> bool {
        origin.eq_ignore_ascii_case(self.origin.as_bytes())
    }
}

/// `host[:port]` → host and port; a bracketed IPv6 host keeps its brackets. None: malformed.
fn split_host_port(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, after) = authority.split_at(end + 1);
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_owned(), port))
}

impl std::fmt::Display for PublicOrigin {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_read_as_browsers_send_them() {
        let origin = PublicOrigin::parse("HTTPS://Trellis.Example.com:443/").expect("origin");
        assert_eq!(origin.as_str(), "https://trellis.example.com");
        assert!(origin.is_secure());
        assert!(origin.matches_host(b"trellis.example.com"));
        assert!(!origin.matches_host(b"trellis.example.com:443"));
        let local = PublicOrigin::of_address(SocketAddr::from(([127, 0, 0, 1], 8420)), false)
            .expect("origin");
        assert_eq!(local.as_str(), "http://127.0.0.1:8420");
        assert!(local.matches_origin(b"http://127.0.0.1:8420"));
        assert!(!local.matches_origin(b"http://localhost:8420"));
        let v6 =
            PublicOrigin::of_address("[::1]:9000".parse().expect("address"), true).expect("origin");
        assert_eq!(v6.as_str(), "https://[::1]:9000");
        assert_eq!((v6.port(), origin.port(), local.port()), (9000, 443, 8420));
        for bad in [
            "trellis.example.com",
            "https://",
            "https://user:pw@host",
            "https://host/path",
            "https://host?x",
            "ftp://host",
            "https://host:99999",
            "https://::1",
        ] {
            assert!(PublicOrigin::parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            PublicOrigin::of_address(SocketAddr::from(([0, 0, 0, 0], 8420)), false),
            Err(OriginError::Unspecified(_))
        ));
    }
}

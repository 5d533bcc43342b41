//! TLS for a server (`trellis serve --tls-cert PEM --tls-key PEM`): rustls with the ring
//! provider (no OpenSSL), TLS 1.2 and 1.3, HTTP/1.1 offered by ALPN.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A server's TLS configuration, ready to accept handshakes.
#[derive(Clone)]
pub struct TlsConfig(pub(super) Arc<rustls::ServerConfig>);

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TlsConfig(…)")
    }
}

/// Why a certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain {}: {cause}", path.display())]
    Certificate {
        path: PathBuf,
        cause: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)", path.display())]
    NoCertificate { path: PathBuf },
    #[error("cannot read a private key from {} (PKCS#8, PKCS#1 or SEC1 PEM): {cause}", path.display())]
    Key {
        path: PathBuf,
        cause: rustls::pki_types::pem::Error,
    },
    #[error("the certificate and key cannot be used together: {0}")]
    Rejected(#[from] rustls::Error),
}

impl TlsConfig {
    /// The chain in `certificate` (leaf first) and the private key in `key`, both PEM.
    pub fn from_pem_files(certificate: &Path, key: &Path) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_file_iter(certificate)
            .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
            .map_err(|cause| TlsError::Certificate {
                path: certificate.to_owned(),
                cause,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: certificate.to_owned(),
            });
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|cause| TlsError::Key {
            path: key.to_owned(),
            cause,
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self(Arc::new(config)))
    }
}

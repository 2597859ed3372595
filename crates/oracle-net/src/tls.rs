//! TLS for venue connections: `wss://` WebSockets and `https://` REST snapshots.
//!
//! Real venues serve only TLS. The trust anchors are Mozilla's root store (`webpki-roots`,
//! compiled in, so a fresh machine needs no system certificate bundle) plus any extra
//! certificate authorities the operator names (a private venue gateway, a test CA). The crypto
//! provider is `ring`, chosen explicitly per configuration rather than through a process-wide
//! default, so no other crate's choice of provider can change or break it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a TLS client configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("reading CA certificates from {path}: {detail} (give a PEM file of one or more CERTIFICATE blocks)")]
    CaFile { path: PathBuf, detail: String },
    #[error(
        "{path} holds no CERTIFICATE block (give a PEM file of one or more CERTIFICATE blocks)"
    )]
    CaFileEmpty { path: PathBuf },
    #[error("a CA certificate in {path} was refused: {detail}")]
    CaRefused { path: PathBuf, detail: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The client configuration every connector of one oracle shares.
#[derive(Clone, Debug)]
pub struct TlsClient {
    pub config: Arc<rustls::ClientConfig>,
    /// How many certificate authorities were added to Mozilla's roots.
    pub extra_cas: usize,
}

impl TlsClient {
    /// Mozilla's roots only: what a connection to a public venue needs.
    pub fn public_roots() -> Result<TlsClient, TlsError> {
        TlsClient::with_extra_cas(&[])
    }

    /// Mozilla's roots plus every certificate in each PEM file.
    pub fn with_extra_cas(ca_files: &[PathBuf]) -> Result<TlsClient, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let mut extra_cas = 0;
        for path in ca_files {
            for cert in read_certificates(path)? {
                extra_cas += 1;
                roots.add(cert).map_err(|error| TlsError::CaRefused {
                    path: path.clone(),
                    detail: error.to_string(),
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Config(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsClient {
            config: Arc::new(config),
            extra_cas,
        })
    }

    /// A REST client that trusts exactly what the WebSocket connections trust.
    pub fn http_client(&self, timeout: std::time::Duration) -> Result<reqwest::Client, TlsError> {
        reqwest::Client::builder()
            .timeout(timeout)
            .use_preconfigured_tls((*self.config).clone())
            .build()
            .map_err(|error| TlsError::Config(format!("REST client: {error}")))
    }
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|error| TlsError::CaFile {
            path: path.to_path_buf(),
            detail: error.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::CaFileEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

//! One rustls client configuration for every outbound TLS connection: HTTPS (reqwest),
//! `wss://` (tokio-tungstenite) and, through tonic's own rustls setup, OTLP/gRPC.
//!
//! Trust: the Mozilla roots (webpki-roots, the same on every machine) plus the PEM bundle in
//! [`TlsConfig::ca_file`]. A client certificate ([`TlsConfig::cert_file`] +
//! [`TlsConfig::key_file`]) enables mTLS. The crypto provider is ring; there is no switch
//! to skip verification.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::config::TlsConfig;

/// Why TLS options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("{key} {path:?}: cannot read: {source}")]
    Read {
        /// `ca_file`, `cert_file` or `key_file`.
        key: &'static str,
        /// The configured path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{key} {path:?}: {reason}")]
    Pem {
        /// `ca_file`, `cert_file` or `key_file`.
        key: &'static str,
        /// The configured path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the certificates or key.
    #[error("{key}: {source}")]
    Rustls {
        /// The option at fault.
        key: &'static str,
        /// rustls' error.
        source: rustls::Error,
    },
}

impl TlsError {
    /// The option at fault (`ca_file`, `cert_file`, `key_file`).
    pub fn key(&self) -> &'static str {
        match self {
            TlsError::Read { key, .. } | TlsError::Pem { key, .. } | TlsError::Rustls { key, .. } => key,
        }
    }
}

fn read(key: &'static str, path: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { key, path: path.to_owned(), source })
}

fn certs(key: &'static str, path: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::Pem { key, path: path.to_owned(), reason };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pem).collect::<Result<_, _>>().map_err(|e| bad(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no CERTIFICATE in the file".into()));
    }
    Ok(certs)
}

/// The Mozilla roots plus the extra CA bundle, if any.
fn roots(cfg: &TlsConfig) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if !cfg.ca_file.is_empty() {
        for c in certs("ca_file", &cfg.ca_file, &read("ca_file", &cfg.ca_file)?)? {
            roots.add(c).map_err(|source| TlsError::Rustls { key: "ca_file", source })?;
        }
    }
    Ok(roots)
}

/// The ring crypto provider (the only one compiled in).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls client configuration for `cfg` (no ALPN set: each user sets its own).
pub fn client_config(cfg: &TlsConfig) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls { key: "ca_file", source })?
        .with_root_certificates(roots(cfg)?);
    let config = if cfg.cert_file.is_empty() && cfg.key_file.is_empty() {
        builder.with_no_client_auth()
    } else {
        let chain = certs("cert_file", &cfg.cert_file, &read("cert_file", &cfg.cert_file)?)?;
        let key = PrivateKeyDer::from_pem_slice(&read("key_file", &cfg.key_file)?).map_err(|e| TlsError::Pem {
            key: "key_file",
            path: cfg.key_file.clone(),
            reason: format!("no usable PRIVATE KEY: {e}"),
        })?;
        builder.with_client_auth_cert(chain, key).map_err(|source| TlsError::Rustls { key: "key_file", source })?
    };
    Ok(Arc::new(config))
}

/// The blocking HTTP client's (ureq's) TLS settings for `cfg`: the same ring provider, the
/// Mozilla roots, or with `ca_file` that bundle alone (ureq takes one root set), and the
/// client certificate. Used by the CLI clients (`tail`, `wrap`).
pub fn ureq_tls(cfg: &TlsConfig) -> Result<ureq::tls::TlsConfig, TlsError> {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsProvider};
    // Parse once here so a bad file is reported like everywhere else.
    client_config(cfg)?;
    let owned = |der: Vec<CertificateDer<'static>>| -> Vec<Certificate<'static>> {
        der.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect()
    };
    let roots = if cfg.ca_file.is_empty() {
        RootCerts::WebPki
    } else {
        RootCerts::new_with_certs(&owned(certs("ca_file", &cfg.ca_file, &read("ca_file", &cfg.ca_file)?)?))
    };
    let mut tls = ureq::tls::TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(provider())
        .root_certs(roots);
    if !cfg.cert_file.is_empty() {
        let chain = owned(certs("cert_file", &cfg.cert_file, &read("cert_file", &cfg.cert_file)?)?);
        let key = PrivateKey::from_pem(&read("key_file", &cfg.key_file)?).map_err(|e| TlsError::Pem {
            key: "key_file",
            path: cfg.key_file.clone(),
            reason: format!("no usable PRIVATE KEY: {e}"),
        })?;
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(tls.build())
}

/// tonic's TLS settings for `cfg` (the same roots, CA bundle and client certificate).
pub fn grpc_tls(cfg: &TlsConfig) -> Result<tonic::transport::ClientTlsConfig, TlsError> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    // Parse once here so a bad file is reported like everywhere else.
    client_config(cfg)?;
    let mut tls = ClientTlsConfig::new().with_webpki_roots();
    if !cfg.ca_file.is_empty() {
        tls = tls.ca_certificate(Certificate::from_pem(read("ca_file", &cfg.ca_file)?));
    }
    if !cfg.cert_file.is_empty() {
        tls = tls.identity(Identity::from_pem(read("cert_file", &cfg.cert_file)?, read("key_file", &cfg.key_file)?));
    }
    Ok(tls)
}

/// Whether an error (or any error it wraps) is a rustls certificate failure; its text.
pub fn certificate_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return matches!(r, rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
                .then(|| r.to_string());
        }
        // An io::Error's `source()` skips the error it wraps: step into it instead (rustls'
        // errors travel inside one, sometimes two, io::Errors).
        cur = match err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

impl TlsConfig {
    /// Problems of these options, as `(key, message)` with `key` prefixed by `prefix`
    /// (`export.otlp.tls`): missing pairs, unreadable or empty PEM files.
    pub fn check(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.cert_file.is_empty() != self.key_file.is_empty() {
            out.push((format!("{prefix}.cert_file"), "cert_file and key_file go together".into()));
            return out;
        }
        if let Err(e) = client_config(self) {
            out.push((format!("{prefix}.{}", e.key()), e.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_has_the_mozilla_roots_and_a_bad_bundle_is_named() {
        let c = client_config(&TlsConfig::default()).unwrap();
        assert!(c.alpn_protocols.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("empty.pem");
        std::fs::write(&f, "not a pem\n").unwrap();
        let e = client_config(&TlsConfig { ca_file: f.display().to_string(), ..TlsConfig::default() }).unwrap_err();
        assert_eq!(e.key(), "ca_file");
        assert!(e.to_string().contains("no CERTIFICATE"), "{e}");
    }
}

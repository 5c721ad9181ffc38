//! TLS settings for tonic: the server side (certificate, key, optional client CA for mTLS) and the
//! client side (CA bundle, optional client certificate), loaded from PEM files and checked up
//! front so a bad file is reported by name at startup rather than as an opaque handshake error.
//!
//! Crypto: rustls with the aws-lc-rs provider. The workspace already builds aws-lc-rs (reqwest's
//! rustls uses it; it compiles with the C compiler alone, no cmake), and a second provider (ring)
//! in the same binary would stop rustls from picking one automatically, which tonic's server
//! acceptor relies on. [`install_crypto_provider`] makes the choice explicit anyway.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::cert::ClientCertIdentifier;
use crate::crypto::{crypto_provider, install_crypto_provider};
use crate::error::{AuthError, Result};
use crate::pem;

/// How a TLS listener treats client certificates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// Never ask for one.
    #[default]
    None,
    /// Ask; verify one if presented, accept the connection without one.
    Optional,
    /// Refuse the handshake without a certificate from a configured client CA.
    Require,
}

/// Server TLS settings (`[auth.tls]` in the daemon's configuration).
///
/// ```toml
/// cert = "/etc/agentsessions/server.pem"      # chain, leaf first
/// key = "/etc/agentsessions/server.key"       # PKCS#8, PKCS#1 or SEC1
/// client_ca = "/etc/agentsessions/clients.pem" # optional: enables mTLS
/// client_auth = "require"                      # none | optional | require
/// client_issuer = "corp-clients"               # optional issuer name for those callers
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// PEM certificate chain of the server, leaf first.
    pub cert: PathBuf,
    /// PEM private key of the server.
    pub key: PathBuf,
    /// PEM bundle of the CAs whose client certificates are accepted (mTLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
    /// Whether client certificates are required; defaults to `require` when `client_ca` is set
    /// and `none` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_auth: Option<ClientAuth>,
    /// The issuer recorded for callers authenticated by a `client_ca` certificate; defaults to
    /// the anchoring CA's subject name. Setting it keeps owners stable when the CA is re-keyed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_issuer: Option<String>,
    /// Seconds a TLS handshake may take before the connection is dropped (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_timeout_secs: Option<u64>,
}

impl TlsSettings {
    /// Plain server TLS from a certificate chain and key, no client certificates.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            client_auth: None,
            client_issuer: None,
            handshake_timeout_secs: None,
        }
    }

    /// Adds mTLS with the CA bundle `client_ca` and mode `client_auth`.
    #[must_use]
    pub fn with_client_ca(
        mut self,
        client_ca: impl Into<PathBuf>,
        client_auth: ClientAuth,
    ) -> Self {
        self.client_ca = Some(client_ca.into());
        self.client_auth = Some(client_auth);
        self
    }

    /// The effective client-certificate mode.
    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth.unwrap_or_else(|| {
            if self.client_ca.is_some() {
                ClientAuth::Require
            } else {
                ClientAuth::None
            }
        })
    }

    /// Checks that the settings agree with each other (without touching files).
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] for a client CA with `client_auth = "none"`, a client mode
    /// without a client CA, or a client issuer without a client CA.
    pub fn validate(&self) -> Result<()> {
        match (self.client_ca.is_some(), self.client_auth()) {
            (true, ClientAuth::None) => Err(AuthError::InvalidConfig {
                setting: "tls.client_auth",
                problem: "client_ca is set but client_auth is \"none\"",
            }),
            (false, ClientAuth::Optional | ClientAuth::Require) => Err(AuthError::InvalidConfig {
                setting: "tls.client_auth",
                problem: "client certificates need tls.client_ca",
            }),
            (false, ClientAuth::None) if self.client_issuer.is_some() => {
                Err(AuthError::InvalidConfig {
                    setting: "tls.client_issuer",
                    problem: "a client issuer needs tls.client_ca",
                })
            }
            _ => Ok(()),
        }
    }

    /// Loads and checks the files and returns tonic's server TLS configuration, for
    /// `tonic::transport::Server::builder().tls_config(..)`.
    ///
    /// # Errors
    ///
    /// [`AuthError::ReadFile`], [`AuthError::InvalidPem`], [`AuthError::NoCertificate`],
    /// [`AuthError::NoPrivateKey`], [`AuthError::InvalidServerIdentity`] (naming the files), the
    /// client CA errors of [`ClientCertIdentifier::from_pem`], or [`TlsSettings::validate`]'s.
    pub fn server_tls_config(&self) -> Result<ServerTlsConfig> {
        self.validate()?;
        install_crypto_provider();
        let cert_pem = pem::read(&self.cert)?;
        let key_pem = pem::read(&self.key)?;
        let chain = pem::certificates(&self.cert, &cert_pem)?;
        let key = pem::private_key(&self.key, &key_pem)?;
        // Build once with rustls directly so a key that does not match the certificate is
        // reported here, naming both files, instead of when tonic binds.
        rustls::ServerConfig::builder_with_provider(Arc::new(crypto_provider().clone()))
            .with_safe_default_protocol_versions()
            .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|source| AuthError::InvalidServerIdentity {
                cert: self.cert.clone(),
                key: self.key.clone(),
                source,
            })?;
        let mut config = ServerTlsConfig::new()
            .identity(Identity::from_pem(cert_pem, key_pem))
            .timeout(Duration::from_secs(
                self.handshake_timeout_secs.unwrap_or(10),
            ));
        if let Some(path) = &self.client_ca {
            let ca_pem = pem::read(path)?;
            // Fails on any certificate tonic would silently skip.
            ClientCertIdentifier::from_pem(path, &ca_pem, self.client_issuer.as_deref())?;
            config = config
                .client_ca_root(Certificate::from_pem(ca_pem))
                .client_auth_optional(self.client_auth() == ClientAuth::Optional);
        }
        Ok(config)
    }

    /// Loads and checks the files and returns a rustls server configuration with the same
    /// identity, client CAs and client-certificate mode as [`TlsSettings::server_tls_config`],
    /// for listeners that are not tonic's (the daemon's HTTP listener), advertising `alpn`.
    /// The chain a client presents is verified in the handshake; callers are then identified
    /// from it with [`TlsSettings::client_identifier`], as gRPC identifies them.
    ///
    /// # Errors
    ///
    /// As [`TlsSettings::server_tls_config`], and [`AuthError::InvalidClientVerifier`] when
    /// rustls cannot verify clients with the client CA bundle.
    pub fn rustls_server_config(&self, alpn: &[&[u8]]) -> Result<rustls::ServerConfig> {
        self.validate()?;
        let provider = Arc::new(crypto_provider().clone());
        let cert_pem = pem::read(&self.cert)?;
        let key_pem = pem::read(&self.key)?;
        let chain = pem::certificates(&self.cert, &cert_pem)?;
        let key = pem::private_key(&self.key, &key_pem)?;
        let invalid_identity = |source| AuthError::InvalidServerIdentity {
            cert: self.cert.clone(),
            key: self.key.clone(),
            source,
        };
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(invalid_identity)?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let ca_pem = pem::read(path)?;
                let identifier =
                    ClientCertIdentifier::from_pem(path, &ca_pem, self.client_issuer.as_deref())?;
                let roots = rustls::RootCertStore {
                    roots: identifier.anchors().to_vec(),
                };
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                let verifier = if self.client_auth() == ClientAuth::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier =
                    verifier
                        .build()
                        .map_err(|source| AuthError::InvalidClientVerifier {
                            path: path.clone(),
                            source,
                        })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(invalid_identity)?;
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        Ok(config)
    }

    /// Seconds a TLS handshake may take before the connection is dropped.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_secs(self.handshake_timeout_secs.unwrap_or(10))
    }

    /// The identifier for callers presenting a certificate from `client_ca`, or `None` without
    /// mTLS.
    ///
    /// # Errors
    ///
    /// As [`ClientCertIdentifier::from_file`].
    pub fn client_identifier(&self) -> Result<Option<ClientCertIdentifier>> {
        self.validate()?;
        self.client_ca
            .as_deref()
            .map(|path| ClientCertIdentifier::from_file(path, self.client_issuer.as_deref()))
            .transpose()
    }

    /// Resolves relative paths against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for path in [&mut self.cert, &mut self.key]
            .into_iter()
            .chain(self.client_ca.as_mut())
        {
            *path = base.join(&*path);
        }
    }
}

/// Client TLS settings for `agentctl` and the client SDK.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsSettings {
    /// PEM bundle of the CAs trusted to sign the server's certificate.
    pub ca: PathBuf,
    /// PEM client certificate chain, for mTLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// PEM private key for `cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// The name to verify the server's certificate against, when it differs from the host in
    /// the endpoint URI (for example `localhost` when dialing `127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

impl ClientTlsSettings {
    /// Trust the CAs in `ca`, present no certificate.
    pub fn new(ca: impl Into<PathBuf>) -> Self {
        Self {
            ca: ca.into(),
            ..Self::default()
        }
    }

    /// Adds a client certificate chain and key, for mTLS.
    #[must_use]
    pub fn with_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// Resolves relative paths against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for path in std::iter::once(&mut self.ca)
            .chain(self.cert.as_mut())
            .chain(self.key.as_mut())
        {
            *path = base.join(&*path);
        }
    }

    /// Sets the name the server certificate must carry.
    #[must_use]
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// Loads and checks the files and returns tonic's client TLS configuration, for
    /// `tonic::transport::Endpoint::tls_config(..)` (with an `https://` endpoint).
    ///
    /// # Errors
    ///
    /// File and PEM errors naming the file, and [`AuthError::InvalidConfig`] when only one of
    /// `cert` and `key` is set.
    pub fn client_tls_config(&self) -> Result<ClientTlsConfig> {
        install_crypto_provider();
        let ca_pem = pem::read(&self.ca)?;
        pem::certificates(&self.ca, &ca_pem)?;
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let cert_pem = pem::read(cert)?;
                let key_pem = pem::read(key)?;
                pem::certificates(cert, &cert_pem)?;
                pem::private_key(key, &key_pem)?;
                config = config.identity(Identity::from_pem(cert_pem, key_pem));
            }
            (None, None) => {}
            _ => {
                return Err(AuthError::InvalidConfig {
                    setting: "tls.cert/tls.key",
                    problem: "a client certificate and its key go together",
                });
            }
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        Ok(config)
    }
}

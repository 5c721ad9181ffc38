//! Caller identity from a verified TLS client certificate.
//!
//! The TLS handshake already checked the client's chain against the client CA bundle, but it does
//! not say *which* CA vouched for it. [`ClientCertIdentifier`] re-verifies the presented chain
//! against the same anchors with webpki, which returns the anchor it chained to, and so learns the
//! issuer without trusting anything the client wrote. It also catches a certificate that expired
//! after a long-lived connection was set up.
//!
//! The identity:
//! - issuer: the configured issuer name for the bundle, or else the subject distinguished name of
//!   the anchoring CA, rendered by [`render_name`] (RFC 4514 order and escaping, e.g.
//!   `CN=Team CA,O=Example`);
//! - subject: the end-entity certificate's first URI SAN (e.g. a SPIFFE id), else its first DNS
//!   SAN, else its first subject CN. Other SAN kinds (IP, email) are never used.

use std::fmt::Write as _;
use std::path::Path;

use agentsessions_api::CallerIdentity;
use rustls::pki_types::{CertificateDer, SignatureVerificationAlgorithm, TrustAnchor, UnixTime};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate, X509Name};

use crate::error::{AuthError, Result};
use crate::pem;

/// Maps a verified client certificate chain to a [`CallerIdentity`].
#[derive(Debug, Clone)]
pub struct ClientCertIdentifier {
    anchors: Vec<TrustAnchor<'static>>,
    /// The issuer string for each anchor, in the same order.
    issuers: Vec<String>,
    algorithms: &'static [&'static dyn SignatureVerificationAlgorithm],
}

impl ClientCertIdentifier {
    /// Trusts every CA certificate in the PEM bundle `pem` (read from `path`, which errors name).
    /// With `issuer` set, every caller the bundle vouches for gets that issuer; otherwise each
    /// gets its anchoring CA's rendered subject name.
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidPem`] / [`AuthError::NoCertificate`] for a bad bundle,
    /// [`AuthError::InvalidCaCertificate`] for a certificate webpki cannot use as an anchor, and
    /// [`AuthError::AmbiguousCa`] when two CAs share a subject name without a configured issuer.
    pub fn from_pem(path: &Path, pem: &[u8], issuer: Option<&str>) -> Result<Self> {
        let certs = pem::certificates(path, pem)?;
        Self::from_der(path, &certs, issuer)
    }

    /// Reads the bundle at `path`; see [`ClientCertIdentifier::from_pem`].
    ///
    /// # Errors
    ///
    /// [`AuthError::ReadFile`] when it cannot be read, else as [`ClientCertIdentifier::from_pem`].
    pub fn from_file(path: &Path, issuer: Option<&str>) -> Result<Self> {
        Self::from_pem(path, &pem::read(path)?, issuer)
    }

    fn from_der(path: &Path, certs: &[CertificateDer<'_>], issuer: Option<&str>) -> Result<Self> {
        let mut anchors: Vec<TrustAnchor<'static>> = Vec::with_capacity(certs.len());
        let mut issuers = Vec::with_capacity(certs.len());
        for (index, cert) in certs.iter().enumerate() {
            let anchor = webpki::anchor_from_trusted_cert(cert)
                .map_err(|source| AuthError::InvalidCaCertificate {
                    path: path.to_path_buf(),
                    index,
                    source,
                })?
                .to_owned();
            let (_, parsed) = X509Certificate::from_der(cert.as_ref()).map_err(|_| {
                AuthError::InvalidCaCertificate {
                    path: path.to_path_buf(),
                    index,
                    source: webpki::Error::BadDer,
                }
            })?;
            let subject = render_name(parsed.subject());
            if issuer.is_none()
                && anchors.iter().zip(&issuers).any(|(other, name)| {
                    *name == subject
                        && other.subject_public_key_info != anchor.subject_public_key_info
                })
            {
                return Err(AuthError::AmbiguousCa {
                    path: path.to_path_buf(),
                    subject,
                });
            }
            anchors.push(anchor);
            issuers.push(issuer.map_or(subject, str::to_owned));
        }
        Ok(Self {
            anchors,
            issuers,
            algorithms: crate::crypto::crypto_provider()
                .signature_verification_algorithms
                .all,
        })
    }

    /// The CAs this identifier trusts, for a TLS listener's client verifier to accept exactly
    /// the certificates [`ClientCertIdentifier::identify`] can identify.
    pub(crate) fn anchors(&self) -> &[TrustAnchor<'static>] {
        &self.anchors
    }

    /// The identity for `chain` (end-entity certificate first, then any intermediates the client
    /// sent, as `tonic::Request::peer_certs` returns them), verified now.
    ///
    /// # Errors
    ///
    /// [`AuthError::MissingClientCertificate`] for an empty chain,
    /// [`AuthError::UntrustedCertificate`] when it does not chain to a configured CA for client
    /// authentication now, [`AuthError::MalformedCertificate`] /
    /// [`AuthError::CertificateWithoutIdentity`] when no subject can be read from it.
    pub fn identify(&self, chain: &[CertificateDer<'_>]) -> Result<CallerIdentity> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(AuthError::MissingClientCertificate);
        };
        let end_entity = webpki::EndEntityCert::try_from(leaf)
            .map_err(|source| AuthError::UntrustedCertificate { source })?;
        let path = end_entity
            .verify_for_usage(
                self.algorithms,
                &self.anchors,
                intermediates,
                UnixTime::now(),
                webpki::KeyUsage::client_auth(),
                None,
                None,
            )
            .map_err(|source| AuthError::UntrustedCertificate { source })?;
        let anchor = path.anchor();
        let issuer = self
            .anchors
            .iter()
            .position(|candidate| {
                candidate.subject == anchor.subject
                    && candidate.subject_public_key_info == anchor.subject_public_key_info
            })
            .and_then(|index| self.issuers.get(index))
            // webpki only returns anchors it was given; this is unreachable in practice.
            .ok_or(AuthError::UntrustedCertificate {
                source: webpki::Error::UnknownIssuer,
            })?;
        Ok(CallerIdentity::new(
            issuer.clone(),
            certificate_subject(leaf)?,
        ))
    }
}

/// The subject of a caller's certificate: first URI SAN, else first DNS SAN, else first CN.
///
/// # Errors
///
/// [`AuthError::MalformedCertificate`] when it does not parse, and
/// [`AuthError::CertificateWithoutIdentity`] when it has none of the three.
pub fn certificate_subject(cert: &CertificateDer<'_>) -> Result<String> {
    let (_, parsed) =
        X509Certificate::from_der(cert.as_ref()).map_err(|_| AuthError::MalformedCertificate)?;
    let san = parsed
        .subject_alternative_name()
        .map_err(|_| AuthError::MalformedCertificate)?;
    let names = san
        .map(|ext| ext.value.general_names.as_slice())
        .unwrap_or_default();
    let uri = names.iter().find_map(|name| match name {
        GeneralName::URI(uri) if !uri.is_empty() => Some(*uri),
        _ => None,
    });
    let dns = || {
        names.iter().find_map(|name| match name {
            GeneralName::DNSName(dns) if !dns.is_empty() => Some(*dns),
            _ => None,
        })
    };
    let cn = || {
        parsed
            .subject()
            .iter_common_name()
            .find_map(|cn| cn.as_str().ok().filter(|cn| !cn.is_empty()))
    };
    uri.or_else(dns)
        .or_else(cn)
        .map(str::to_owned)
        .ok_or(AuthError::CertificateWithoutIdentity)
}

/// Renders a distinguished name the RFC 4514 way: last RDN first, `,` between RDNs, `+` inside a
/// multi-valued one, short names for the common attribute types (dotted OIDs otherwise), special
/// characters escaped, and non-string values as `#` plus hex. The output is a stable function of
/// the DER, so it can be stored as an owner and compared later.
pub fn render_name(name: &X509Name<'_>) -> String {
    let rdns: Vec<_> = name.iter().collect();
    let mut out = String::new();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, attr) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attr.attr_type().to_id_string();
            out.push_str(short_name(&oid).unwrap_or(&oid));
            out.push('=');
            match attr.as_str() {
                Ok(value) => escape_value(value, &mut out),
                Err(_) => {
                    out.push('#');
                    for byte in attr.as_slice() {
                        // Writing to a String cannot fail.
                        let _ = write!(out, "{byte:02x}");
                    }
                }
            }
        }
    }
    out
}

fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return None,
    })
}

fn escape_value(value: &str, out: &mut String) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, '"' | '+' | ',' | ';' | '<' | '>' | '\\')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
            out.push(c);
        } else if c == '\0' {
            out.push_str("\\00");
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_rfc_4514() {
        let mut out = String::new();
        escape_value(" #a,b+c\"d\\e;f<g>h ", &mut out);
        assert_eq!(out, "\\ #a\\,b\\+c\\\"d\\\\e\\;f\\<g\\>h\\ ");
        let mut out = String::new();
        escape_value("#x", &mut out);
        assert_eq!(out, "\\#x");
    }
}

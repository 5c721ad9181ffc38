//! Reading PEM files, with errors that name the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{AuthError, Result};

/// The raw bytes of `path`.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| AuthError::ReadFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Every certificate in the PEM bytes `pem` read from `path`; at least one.
pub(crate) fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| AuthError::InvalidPem {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(AuthError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM bytes `pem` read from `path`.
pub(crate) fn private_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => AuthError::NoPrivateKey {
            path: path.to_path_buf(),
        },
        source => AuthError::InvalidPem {
            path: path.to_path_buf(),
            source,
        },
    })
}

//! A certificate authority for the TLS tests, made in the test with rcgen.
#![allow(clippy::unwrap_used)]

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate authority made in the test, and the certificates it issues.
pub(crate) struct Ca {
    /// Its certificate, PEM.
    pub(crate) pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM)
    pub(crate) fn issue(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A server certificate for `localhost` and 127.0.0.1: (certificate PEM, key PEM).
    pub(crate) fn server(&self) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate naming `uri`: (certificate PEM, key PEM).
    pub(crate) fn client(&self, uri: &str) -> (String, String) {
        self.issue(Self::client_params(uri))
    }

    /// A client certificate naming `uri`, valid only from `not_before` to `not_after` (Unix
    /// seconds).
    pub(crate) fn client_valid(
        &self,
        uri: &str,
        not_before: u64,
        not_after: u64,
    ) -> (String, String) {
        let mut params = Self::client_params(uri);
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        params.not_before = epoch + std::time::Duration::from_secs(not_before);
        params.not_after = epoch + std::time::Duration::from_secs(not_after);
        self.issue(params)
    }

    fn client_params(uri: &str) -> CertificateParams {
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![SanType::URI(uri.try_into().unwrap())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params
    }
}

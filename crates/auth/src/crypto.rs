//! The one rustls crypto provider this crate uses (aws-lc-rs), for the TLS configurations of
//! `tls` and the certificate checks of `cert`.

use rustls::crypto::CryptoProvider;

/// The rustls crypto provider this crate uses (aws-lc-rs), whatever the process default is.
pub(crate) fn crypto_provider() -> &'static CryptoProvider {
    static PROVIDER: std::sync::OnceLock<CryptoProvider> = std::sync::OnceLock::new();
    PROVIDER.get_or_init(rustls::crypto::aws_lc_rs::default_provider)
}

/// Installs aws-lc-rs as the process-wide rustls provider unless one is installed already. tonic
/// builds its server config with the process default, which rustls cannot pick by itself when
/// more than one provider is compiled in. Idempotent; the TLS builders here call it.
pub fn install_crypto_provider() {
    if CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: some provider is installed either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

//! Who is calling: the same [`Authenticator`](agentsessions_auth::Authenticator) as the gRPC
//! listener, over the HTTP request's `Authorization` header and, when the listener serves TLS,
//! the client certificate chain it verified. The verified caller travels to the Sessions service
//! exactly as the gRPC interceptor hands it over ([`Authenticated`] in the request's
//! extensions), so the service applies the same policy, ownership and actor rules.

use std::sync::Arc;

use agentsessions_api::CallerIdentity;
use agentsessions_auth::Authenticated;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use rustls::pki_types::CertificateDer;

use crate::console::Console;
use crate::error::ConsoleError;

/// The client certificate chain (end-entity first) a TLS HTTP listener verified for the
/// connection; the listener puts it in each request's extensions.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// The verified caller of one request; `None` inside is an anonymous caller the configuration
/// allows.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub(crate) Option<CallerIdentity>);

impl Caller {
    /// A Sessions request carrying this caller, as the gRPC interceptor would leave it.
    pub(crate) fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.extensions_mut().insert(Authenticated {
            caller: self.0.clone(),
        });
        request
    }

    pub(crate) fn identity(&self) -> Option<&CallerIdentity> {
        self.0.as_ref()
    }
}

impl FromRequestParts<Arc<Console>> for Caller {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let Some(authenticator) = &console.authenticator else {
            return Ok(Self(None));
        };
        let metadata = tonic::metadata::MetadataMap::from_headers(parts.headers.clone());
        let certs = parts.extensions.get::<PeerCertificates>();
        let caller = authenticator
            .authenticate_parts(&metadata, certs.map(|c| c.0.as_slice()))
            .map_err(|err| {
                tracing::debug!(component = "console", reason = %err, "request refused by authentication");
                ConsoleError::Unauthenticated(err)
            })?;
        Ok(Self(caller))
    }
}

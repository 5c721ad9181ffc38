//! [`Authenticator`]: one verified [`CallerIdentity`] (or an anonymous caller, when allowed) per
//! call, from the TLS client certificate and/or a bearer token, and [`AuthInterceptor`], which
//! runs it in front of every RPC and leaves the result in the request's extensions as
//! [`Authenticated`].
//!
//! Which credential counts:
//! 1. A bearer token in the `authorization` metadata, when tokens are configured. A token that
//!    fails any check fails the call, even if the connection also has a good certificate.
//! 2. Otherwise the client certificate, when mTLS is configured and the client sent one.
//! 3. Otherwise the caller is anonymous, which fails the call when authentication is required.
//!
//! Request fields and any other metadata are never read. When tokens are not configured, an
//! `authorization` header is ignored, never trusted.

use std::fmt;
use std::sync::Arc;

use agentsessions_api::CallerIdentity;
use rustls::pki_types::CertificateDer;
use tonic::metadata::{Ascii, MetadataMap, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::cert::ClientCertIdentifier;
use crate::error::{AuthError, Result};
use crate::jwt::JwtVerifier;

/// The metadata key of bearer tokens.
pub const AUTHORIZATION: &str = "authorization";

/// Authenticates calls by client certificate and/or bearer token.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    certs: Option<ClientCertIdentifier>,
    jwt: Option<JwtVerifier>,
    require: bool,
}

impl Authenticator {
    /// An authenticator with no credential kinds; every caller is anonymous. Add kinds with
    /// [`Authenticator::with_client_certs`] and [`Authenticator::with_jwt`].
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// Identifies callers by verified client certificate.
    #[must_use]
    pub fn with_client_certs(mut self, identifier: ClientCertIdentifier) -> Self {
        self.certs = Some(identifier);
        self
    }

    /// Identifies callers by verified bearer token.
    #[must_use]
    pub fn with_jwt(mut self, verifier: JwtVerifier) -> Self {
        self.jwt = Some(verifier);
        self
    }

    /// Whether an anonymous call is refused with `UNAUTHENTICATED`.
    #[must_use]
    pub fn requiring_authentication(mut self, require: bool) -> Self {
        self.require = require;
        self
    }

    /// Whether anonymous calls are refused.
    pub fn requires_authentication(&self) -> bool {
        self.require
    }

    /// Whether any credential kind that yields a [`CallerIdentity`] is configured. A server with
    /// an authorizer must not start without one (extensions §2).
    pub fn yields_identity(&self) -> bool {
        self.certs.is_some() || self.jwt.is_some()
    }

    /// The caller of `request`: `Some` when a credential verified, `None` for an allowed
    /// anonymous caller.
    ///
    /// # Errors
    ///
    /// Any `UNAUTHENTICATED` [`AuthError`]: a bad token or certificate, or no credential when one
    /// is required.
    pub fn authenticate<T>(&self, request: &Request<T>) -> Result<Option<CallerIdentity>> {
        let certs = request.peer_certs();
        self.authenticate_parts(request.metadata(), certs.as_deref().map(Vec::as_slice))
    }

    /// [`Authenticator::authenticate`] from the pieces: the call's metadata and the peer
    /// certificate chain the TLS layer verified (end-entity first; `None` without TLS).
    ///
    /// # Errors
    ///
    /// As [`Authenticator::authenticate`].
    pub fn authenticate_parts(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'_>]>,
    ) -> Result<Option<CallerIdentity>> {
        if let Some(jwt) = &self.jwt
            && let Some(token) = bearer_token(metadata)?
        {
            return jwt.verify(token).map(Some);
        }
        if let Some(identifier) = &self.certs
            && let Some(chain) = peer_certs.filter(|chain| !chain.is_empty())
        {
            return identifier.identify(chain).map(Some);
        }
        if !self.require {
            return Ok(None);
        }
        Err(match (&self.certs, &self.jwt) {
            (Some(_), None) => AuthError::MissingClientCertificate,
            (None, Some(_)) => AuthError::MissingBearerToken,
            _ => AuthError::MissingCredentials,
        })
    }

    /// The interceptor that authenticates every call; see [`AuthInterceptor`].
    pub fn interceptor(self: &Arc<Self>) -> AuthInterceptor {
        AuthInterceptor {
            authenticator: Arc::clone(self),
        }
    }
}

/// The token of `authorization: Bearer <token>`, `None` without the header.
fn bearer_token(metadata: &MetadataMap) -> Result<Option<&str>> {
    let mut values = metadata.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    // Two authorization headers are ambiguous; refuse rather than pick one.
    if values.next().is_some() {
        return Err(AuthError::MalformedAuthorization);
    }
    let value = value
        .to_str()
        .map_err(|_| AuthError::MalformedAuthorization)?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or(AuthError::MalformedAuthorization)?;
    let token = token.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return Err(AuthError::MalformedAuthorization);
    }
    Ok(Some(token))
}

/// What the authentication layer decided for one call, stored in its extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The verified caller; `None` for an anonymous caller the configuration allows.
    pub caller: Option<CallerIdentity>,
}

impl Authenticated {
    /// The caller the layer stored on `request`.
    ///
    /// # Errors
    ///
    /// [`AuthError::NotAuthenticated`] (`INTERNAL`) when the request did not pass through
    /// [`AuthInterceptor`]: a wiring fault, never a reason to treat the caller as anonymous.
    pub fn of<T>(request: &Request<T>) -> Result<Option<&CallerIdentity>> {
        request
            .extensions()
            .get::<Self>()
            .map(|authenticated| authenticated.caller.as_ref())
            .ok_or(AuthError::NotAuthenticated)
    }
}

/// A tonic interceptor running an [`Authenticator`] on every call (unary and streaming).
///
/// On success it stores [`Authenticated`] in the request extensions and removes the
/// `authorization` metadata, so handlers cannot log or forward the token. On failure it answers
/// `UNAUTHENTICATED` with the reason, before the handler runs.
///
/// Use per service, `SessionsServer::with_interceptor(svc, auth.interceptor())`, or for a whole
/// router, `Server::builder().layer(tonic::service::InterceptorLayer::new(auth.interceptor()))`.
#[derive(Clone)]
pub struct AuthInterceptor {
    authenticator: Arc<Authenticator>,
}

impl fmt::Debug for AuthInterceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthInterceptor").finish_non_exhaustive()
    }
}

impl Interceptor for AuthInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let caller = self.authenticator.authenticate(&request).map_err(|err| {
            tracing::debug!(reason = %err, "call refused by authentication");
            err.status()
        })?;
        request.metadata_mut().remove(AUTHORIZATION);
        request.extensions_mut().insert(Authenticated { caller });
        Ok(request)
    }
}

/// A client-side interceptor adding `authorization: Bearer <token>` to every call (for
/// `agentctl` and the client SDK).
#[derive(Clone)]
pub struct BearerToken {
    value: MetadataValue<Ascii>,
}

impl BearerToken {
    /// Wraps `token` (the JWT itself, without `Bearer `). Surrounding whitespace is dropped.
    ///
    /// # Errors
    ///
    /// [`AuthError::MalformedToken`] when it is empty or not a valid header value.
    pub fn new(token: &str) -> Result<Self> {
        let token = token.trim();
        if token.is_empty() || token.contains(' ') {
            return Err(AuthError::MalformedToken);
        }
        let mut value: MetadataValue<Ascii> = format!("Bearer {token}")
            .parse()
            .map_err(|_| AuthError::MalformedToken)?;
        value.set_sensitive(true);
        Ok(Self { value })
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert(AUTHORIZATION, self.value.clone());
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(values: &[&str]) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        for value in values {
            metadata.append(AUTHORIZATION, value.parse().unwrap());
        }
        metadata
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let metadata = with_authorization(&["bearer abc.def.ghi"]);
        assert_eq!(bearer_token(&metadata).unwrap(), Some("abc.def.ghi"));
    }

    #[test]
    fn other_schemes_and_duplicates_are_malformed() {
        for values in [
            &["Basic dXNlcjpwYXNz"][..],
            &["Bearer"],
            &["Bearer "],
            &["Bearer a b"],
            &["Bearer a", "Bearer b"],
        ] {
            assert!(
                matches!(
                    bearer_token(&with_authorization(values)),
                    Err(AuthError::MalformedAuthorization)
                ),
                "{values:?}"
            );
        }
    }

    #[test]
    fn no_header_is_no_token() {
        assert_eq!(bearer_token(&MetadataMap::new()).unwrap(), None);
    }

    #[test]
    fn bearer_token_interceptor_sets_the_header() {
        let mut interceptor = BearerToken::new(" abc.def.ghi\n").unwrap();
        let request = interceptor.call(Request::new(())).unwrap();
        assert_eq!(
            bearer_token(request.metadata()).unwrap(),
            Some("abc.def.ghi")
        );
        BearerToken::new("").unwrap_err();
    }
}

//! Transport security and verified caller identity for agentsessions (extensions §1–§2: "who may
//! do what").
//!
//! A caller's [`CallerIdentity`](agentsessions_api::CallerIdentity) comes only from a credential
//! this crate verified: a TLS client certificate chained to a configured CA, or a signed bearer
//! token (JWT) from a configured issuer for the configured audience. Nothing a request carries in
//! its fields, and no unverified metadata, is ever read as identity.
//!
//! Module map:
//! - [`config`]: [`AuthConfig`], the daemon's `[auth]` table, and the authorizer it selects.
//! - [`tls`]: server and client TLS settings for tonic, [`ClientAuth`].
//! - [`cert`]: [`ClientCertIdentifier`], the identity of a verified client certificate.
//! - [`jwt`]: [`JwtSettings`] and [`JwtVerifier`], bearer-token verification.
//! - [`authenticator`]: [`Authenticator`], the per-call decision, [`AuthInterceptor`] (server) and
//!   [`BearerToken`] (client).
//! - [`error`]: [`AuthError`] and its gRPC code.
//! - [`identity`]: [`IdentitySettings`], the daemon's `[identity]` table, and [`OwnerMintPolicy`].
//! - [`mint`]: [`TokenIssuer`], short-lived audience-scoped delegated tokens and their JWKS.
//! - [`delegated`]: [`TokenIssuer::minter`] for harnesses, [`DelegatedTokens`] for tool hubs.
//!
//! Server wiring, in order: `config.validate()`, `config.server_tls_config()` into
//! `Server::builder().tls_config(..)`, `Arc::new(config.authenticator()?)` and its
//! [`Authenticator::interceptor`] around every service, `config.authorizer()` into the services;
//! handlers read the caller with [`Authenticated::of`].

pub mod authenticator;
pub mod cert;
pub mod config;
pub mod crypto;
pub mod delegated;
pub mod error;
pub mod identity;
pub mod jwt;
pub mod mint;
mod pem;
pub mod tls;

pub use authenticator::{
    AUTHORIZATION, AuthInterceptor, Authenticated, Authenticator, BearerToken,
};
pub use cert::{ClientCertIdentifier, certificate_subject, render_name};
pub use config::{AllowEntry, AuthConfig, AuthorizationSettings, Policy};
pub use crypto::install_crypto_provider;
pub use delegated::{DelegatedTokens, MintBinding, PrincipalSource, SessionTokens};
pub use error::{AuthError, Result};
pub use identity::{IdentitySettings, MAX_TOKEN_LIFETIME_SECS, MintPolicy, OwnerMintPolicy};
pub use jwt::{
    DEFAULT_LEEWAY_SECS, HmacKeySettings, JwtSettings, JwtVerifier, PublicKeySettings,
    VerificationKey,
};
pub use mint::{
    ActorClaim, DEFAULT_TOKEN_LIFETIME_SECS, DelegatedClaims, MINT_METHOD, MintRequest,
    SessionPrincipal, SigningKey, TokenIssuer, TransactionContext,
};
pub use tls::{ClientAuth, ClientTlsSettings, TlsSettings};

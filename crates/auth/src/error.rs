//! [`AuthError`]: everything that can go wrong while setting up transport security or while
//! authenticating one call, and the gRPC code each maps to.

use std::io;
use std::path::PathBuf;

use agentsessions_api::{ApiError, StatusCode};

/// The crate's result type.
pub type Result<T, E = AuthError> = std::result::Result<T, E>;

/// A setup or authentication failure.
///
/// Setup variants (files, keys, configuration) happen while the daemon starts and name the file or
/// setting to fix. Authentication variants happen per call and map to `UNAUTHENTICATED` with a
/// short reason that never repeats the credential itself.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    // ---- setup ----
    /// A configured file could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A configured file is not valid PEM.
    #[error("invalid PEM in {path}: {source}")]
    InvalidPem {
        /// The file.
        path: PathBuf,
        /// The PEM parser's complaint.
        source: rustls::pki_types::pem::Error,
    },
    /// A file that should hold at least one certificate holds none.
    #[error("no certificate found in {path}")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A file that should hold a private key holds none.
    #[error("no private key found in {path}")]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// A certificate in a CA bundle cannot serve as a trust anchor.
    #[error("certificate #{index} in {path} is not a usable CA certificate: {source}")]
    InvalidCaCertificate {
        /// The bundle.
        path: PathBuf,
        /// Position of the certificate in the bundle, from 0.
        index: usize,
        /// Why webpki refused it.
        source: webpki::Error,
    },
    /// Two CAs in one bundle share a subject name but not a key, so identities they vouch for
    /// would be indistinguishable.
    #[error(
        "two certificates in {path} share the subject {subject:?} with different keys; \
         callers they vouch for would be indistinguishable"
    )]
    AmbiguousCa {
        /// The bundle.
        path: PathBuf,
        /// The shared subject name.
        subject: String,
    },
    /// rustls refused the certificate and key (for example, the key does not match).
    #[error("cannot use certificate {cert} with key {key}: {source}")]
    InvalidServerIdentity {
        /// The certificate chain file.
        cert: PathBuf,
        /// The private key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// rustls cannot verify client certificates against the client CA bundle.
    #[error("cannot verify client certificates with the CAs in {path}: {source}")]
    InvalidClientVerifier {
        /// The client CA bundle.
        path: PathBuf,
        /// rustls's reason.
        source: rustls::server::VerifierBuilderError,
    },
    /// A JWKS file is not a JSON object with a `keys` array.
    #[error("invalid JWKS in {path}: {source}")]
    InvalidJwks {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A JWKS file holds no key this server can verify signatures with.
    #[error("no usable signing key in {path}")]
    NoUsableJwk {
        /// The file.
        path: PathBuf,
    },
    /// A token verification key could not be loaded.
    #[error("invalid token verification key in {path}: {source}")]
    InvalidJwtKey {
        /// The file.
        path: PathBuf,
        /// jsonwebtoken's reason.
        source: jsonwebtoken::errors::Error,
    },
    /// A configured token algorithm is unknown, or not allowed where it is configured.
    #[error("token algorithm {algorithm:?} cannot be used for {what}")]
    UnsupportedAlgorithm {
        /// The algorithm as configured.
        algorithm: String,
        /// Where it was configured.
        what: &'static str,
    },
    /// An allowlist entry names an action that does not exist.
    #[error("unknown action {name:?} in the authorization allowlist")]
    UnknownAction {
        /// The configured name.
        name: String,
    },
    /// An allowlist entry names an action that no allowlist can grant (extensions §2).
    #[error(
        "action {action} cannot be allowlisted (only create, list, approve and the registry \
         actions can)"
    )]
    NotAllowlistable {
        /// The action.
        action: agentsessions_api::Action,
    },
    /// A configuration setting is inconsistent.
    #[error("invalid auth configuration: {setting}: {problem}")]
    InvalidConfig {
        /// The setting, as spelled in the configuration file.
        setting: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },

    /// The `[identity]` signing key cannot be loaded.
    #[error("invalid token signing key in {path}: {source}")]
    InvalidSigningKey {
        /// The file.
        path: PathBuf,
        /// jsonwebtoken's reason.
        source: jsonwebtoken::errors::Error,
    },

    // ---- per mint (delegated tokens) ----
    /// The mint policy denied [`agentsessions_api::Action::Mint`]: nothing was minted.
    #[error("minting a token for this session is not allowed")]
    MintDenied,
    /// The audience is not one `[identity].audiences` lists.
    #[error("tokens for audience {audience:?} are not minted by this host")]
    AudienceNotAllowed {
        /// The requested audience.
        audience: String,
    },
    /// The mint request is malformed (no audience, more than one, or no session or execution).
    #[error("invalid mint request: {problem}")]
    InvalidMintRequest {
        /// What is wrong.
        problem: &'static str,
    },
    /// The session has neither an owner nor an agent principal to mint for.
    #[error("session {session:?} has no principal to mint a token for")]
    NoPrincipal {
        /// The session.
        session: String,
    },
    /// The mint policy failed without a decision (a host failure; logged where it happened).
    #[error("the mint policy failed")]
    MintPolicyFailed,
    /// The token could not be signed (or the public key derived).
    #[error("cannot sign the token: {source}")]
    Signing {
        /// jsonwebtoken's reason.
        source: jsonwebtoken::errors::Error,
    },

    // ---- per call: UNAUTHENTICATED ----
    /// The server requires a bearer token and the call has none.
    #[error("missing bearer token")]
    MissingBearerToken,
    /// The server requires a client certificate and the connection has none.
    #[error("missing client certificate")]
    MissingClientCertificate,
    /// The server requires a client certificate or a bearer token and the call has neither.
    #[error("missing credentials: present a client certificate or a bearer token")]
    MissingCredentials,
    /// The `authorization` metadata is not `Bearer <token>`.
    #[error("malformed authorization header: expected \"Bearer <token>\"")]
    MalformedAuthorization,
    /// The bearer token is not a well-formed JWT.
    #[error("malformed token")]
    MalformedToken,
    /// The token's `alg` is not the one its key is configured for (or not accepted at all).
    #[error("token algorithm not accepted")]
    AlgorithmNotAccepted,
    /// No configured key matches the token's key id (or, without a key id, its algorithm).
    #[error("unknown signing key")]
    UnknownSigningKey,
    /// The signature does not verify under any candidate key.
    #[error("bad signature")]
    BadSignature,
    /// `exp` is in the past (beyond the allowed clock skew).
    #[error("token expired")]
    TokenExpired,
    /// `nbf` is in the future (beyond the allowed clock skew).
    #[error("token not yet valid")]
    TokenNotYetValid,
    /// `iss` is not a configured issuer (or not the issuer the signing key is bound to).
    #[error("wrong issuer")]
    WrongIssuer,
    /// `aud` does not contain the configured audience.
    #[error("wrong audience")]
    WrongAudience,
    /// A required claim is absent or empty.
    #[error("token lacks the {claim} claim")]
    MissingClaim {
        /// The claim name.
        claim: String,
    },
    /// A claim has the wrong JSON type.
    #[error("token claim {claim} is malformed")]
    MalformedClaim {
        /// The claim name.
        claim: String,
    },
    /// The peer certificate chain does not verify against the configured client CAs now (for
    /// example, it expired since the handshake).
    #[error("client certificate not trusted: {source}")]
    UntrustedCertificate {
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The client certificate cannot be parsed.
    #[error("client certificate cannot be parsed")]
    MalformedCertificate,
    /// The client certificate has no URI SAN, DNS SAN or subject CN to identify the caller by.
    #[error("client certificate names no identity (no URI or DNS SAN, no subject CN)")]
    CertificateWithoutIdentity,

    // ---- wiring ----
    /// A handler asked for the caller of a request that did not pass the authentication layer.
    #[error("request did not pass through the authentication layer")]
    NotAuthenticated,
}

impl AuthError {
    /// Whether this is a per-call authentication failure (as opposed to setup or wiring).
    pub fn is_unauthenticated(&self) -> bool {
        self.code() == tonic::Code::Unauthenticated
    }

    /// The gRPC code: `UNAUTHENTICATED` for every per-call failure, `INTERNAL` for setup and
    /// wiring faults (which a caller cannot fix); a refused mint is `PERMISSION_DENIED`,
    /// `INVALID_ARGUMENT` or `FAILED_PRECONDITION`.
    pub fn code(&self) -> tonic::Code {
        match self {
            Self::ReadFile { .. }
            | Self::InvalidPem { .. }
            | Self::NoCertificate { .. }
            | Self::NoPrivateKey { .. }
            | Self::InvalidCaCertificate { .. }
            | Self::AmbiguousCa { .. }
            | Self::InvalidServerIdentity { .. }
            | Self::InvalidClientVerifier { .. }
            | Self::InvalidJwks { .. }
            | Self::NoUsableJwk { .. }
            | Self::InvalidJwtKey { .. }
            | Self::UnsupportedAlgorithm { .. }
            | Self::UnknownAction { .. }
            | Self::NotAllowlistable { .. }
            | Self::InvalidConfig { .. }
            | Self::InvalidSigningKey { .. }
            | Self::MintPolicyFailed
            | Self::Signing { .. }
            | Self::NotAuthenticated => tonic::Code::Internal,
            Self::MintDenied | Self::AudienceNotAllowed { .. } => tonic::Code::PermissionDenied,
            Self::InvalidMintRequest { .. } => tonic::Code::InvalidArgument,
            Self::NoPrincipal { .. } => tonic::Code::FailedPrecondition,
            Self::MissingBearerToken
            | Self::MissingClientCertificate
            | Self::MissingCredentials
            | Self::MalformedAuthorization
            | Self::MalformedToken
            | Self::AlgorithmNotAccepted
            | Self::UnknownSigningKey
            | Self::BadSignature
            | Self::TokenExpired
            | Self::TokenNotYetValid
            | Self::WrongIssuer
            | Self::WrongAudience
            | Self::MissingClaim { .. }
            | Self::MalformedClaim { .. }
            | Self::UntrustedCertificate { .. }
            | Self::MalformedCertificate
            | Self::CertificateWithoutIdentity => tonic::Code::Unauthenticated,
        }
    }

    /// The status to answer a call with. Authentication failures carry their reason; internal
    /// faults are sanitized, since file paths and key details are for the operator's log only.
    pub fn status(&self) -> tonic::Status {
        match self.code() {
            tonic::Code::Internal => {
                tonic::Status::internal("authentication is misconfigured on the server")
            }
            code => tonic::Status::new(code, self.to_string()),
        }
    }

    /// The error a [`agentsessions_api::TokenMinter`] reports for a refused mint: a denial is
    /// [`ApiError::PermissionDenied`]; host faults are sanitized like [`AuthError::status`].
    pub fn into_api_error(self) -> ApiError {
        match self.code() {
            tonic::Code::PermissionDenied => ApiError::PermissionDenied,
            tonic::Code::InvalidArgument => {
                ApiError::status(StatusCode::InvalidArgument, self.to_string())
            }
            tonic::Code::FailedPrecondition => {
                ApiError::status(StatusCode::FailedPrecondition, self.to_string())
            }
            tonic::Code::Unauthenticated => {
                ApiError::status(StatusCode::Unauthenticated, self.to_string())
            }
            // Host faults, sanitized; [`AuthError::code`] gives none of the other codes, and a
            // new one it gives must be decided here.
            tonic::Code::Internal
            | tonic::Code::Ok
            | tonic::Code::Cancelled
            | tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::NotFound
            | tonic::Code::AlreadyExists
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted
            | tonic::Code::OutOfRange
            | tonic::Code::Unimplemented
            | tonic::Code::Unavailable
            | tonic::Code::DataLoss => {
                ApiError::status(StatusCode::Internal, "token minting failed on the host")
            }
        }
    }
}

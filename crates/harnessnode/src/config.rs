//! Command line and environment ([`Args`]), checked into a [`NodeConfig`] before anything
//! listens, and the refusals ([`ConfigError`]).

use std::path::PathBuf;
use std::sync::Arc;

use agentsessions_api::Harness;
use agentsessions_auth::{ClientAuth, TlsSettings};
use agentsessions_harnesses::{ChatHarness, CounterHarness, EchoHarness};
use agentsessions_harnesswire::{HarnessWireError, ListenAddr};
use clap::{Parser, ValueEnum};

use crate::delay::HeldAnswers;
use crate::prompt::PromptedChat;

/// Serves one reference harness over `Harness.Connect` (gRPC over HTTP/2, cleartext or TLS) with
/// gRPC health, until SIGINT or SIGTERM.
///
/// The harness never calls a model itself: every model call goes to the host through the
/// stream, and the host's provider answers it. harnessnode therefore needs no model API key.
#[derive(Debug, Parser)]
#[command(name = "harnessnode", version)]
pub(crate) struct Args {
    /// Which reference harness to serve.
    #[arg(long, env = "HARNESS_KIND", value_enum, default_value_t = Kind::Echo)]
    pub(crate) harness: Kind,

    /// Where to listen: unix:/path, unix:///path, IP:port (port 0 picks one), localhost:port or
    /// :port (all interfaces).
    #[arg(long, env = "HARNESS_ADDR", default_value = "127.0.0.1:50051")]
    pub(crate) listen: String,

    /// The model the chat harness asks the host for (required for chat; the host resolves it).
    #[arg(long, env = "HARNESS_MODEL", default_value = "")]
    pub(crate) model: String,

    /// Chat only: the system prompt used when an execution's config sets none. Changes the
    /// advertised harness version.
    #[arg(long, env = "HARNESS_SYSTEM_PROMPT")]
    pub(crate) system_prompt: Option<String>,

    /// Exit (gracefully) when stdin reaches end of file: a supervising parent holds the pipe, so
    /// this process ends with it even if the parent is killed.
    #[arg(long, env = "HARNESSNODE_EXIT_ON_STDIN_EOF")]
    pub(crate) exit_on_stdin_eof: bool,

    /// Test hook: hold each output and usage report of the harness this many milliseconds before
    /// sending it (the counter has counted, its answer is not sent yet), so a test can kill the
    /// harness, its VM or the host while a turn is in progress. 0 (the default) holds nothing.
    #[arg(long, env = "HARNESS_ANSWER_DELAY_MS", default_value_t = 0)]
    pub(crate) answer_delay_ms: u64,

    /// Serve TLS with this PEM certificate chain (leaf first); needs --tls-key. TCP only.
    #[arg(long, env = "HARNESS_TLS_CERT", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "HARNESS_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,

    /// Require hosts to present a certificate issued by a CA in this PEM bundle (mutual TLS).
    #[arg(long, env = "HARNESS_TLS_CLIENT_CA", requires = "tls_cert")]
    pub(crate) tls_client_ca: Option<PathBuf>,
}

/// The reference harnesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kind {
    /// Answers with `echo:` and the last input (one `echo` model call).
    Echo,
    /// The whole conversation, one call to `--model`.
    Chat,
    /// An in-memory counter (needs a memory-snapshot runtime to be placed by a host).
    Counter,
}

impl Kind {
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Echo => EchoHarness::ID,
            Self::Chat => ChatHarness::ID,
            Self::Counter => CounterHarness::ID,
        }
    }
}

/// A configuration refused before listening.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// Chat without `--model`.
    #[error("the chat harness needs a model: pass --model or set HARNESS_MODEL")]
    ChatNeedsModel,

    /// `--system-prompt` for a harness that has no system prompt.
    #[error("--system-prompt applies to the chat harness only, not {harness}")]
    PromptNotChat {
        /// The harness asked for.
        harness: &'static str,
    },

    /// The listen address is not one harnessnode can bind.
    #[error("{0}")]
    Listen(HarnessWireError),

    /// TLS settings that cannot be served.
    #[error("TLS: {0}")]
    Tls(String),
}

/// A checked configuration.
pub(crate) struct NodeConfig {
    pub(crate) kind: Kind,
    pub(crate) listen: ListenAddr,
    pub(crate) harness: Arc<dyn Harness>,
    pub(crate) exit_on_stdin_eof: bool,
    /// Server TLS (and client certificates), loaded and checked before listening.
    pub(crate) tls: Option<tonic::transport::ServerTlsConfig>,
}

impl NodeConfig {
    pub(crate) fn check(args: Args) -> Result<Self, ConfigError> {
        let listen = ListenAddr::parse(&args.listen).map_err(ConfigError::Listen)?;
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => {
                if matches!(listen, ListenAddr::Unix(_)) {
                    return Err(ConfigError::Tls(
                        "TLS applies to TCP listeners; a unix socket is protected by its file \
                         permissions"
                            .to_owned(),
                    ));
                }
                let mut settings = TlsSettings::new(cert, key);
                if let Some(ca) = &args.tls_client_ca {
                    settings = settings.with_client_ca(ca, ClientAuth::Require);
                }
                let config = settings
                    .server_tls_config()
                    .map_err(|e| ConfigError::Tls(e.to_string()))?;
                Some(config)
            }
            _ => None,
        };
        let prompt = args.system_prompt.filter(|prompt| !prompt.is_empty());
        let harness: Arc<dyn Harness> = match args.harness {
            Kind::Chat => {
                let chat = ChatHarness::new(args.model.as_str())
                    .map_err(|_| ConfigError::ChatNeedsModel)?;
                match prompt {
                    Some(prompt) => Arc::new(PromptedChat::new(chat, &prompt)),
                    None => Arc::new(chat),
                }
            }
            kind => {
                if prompt.is_some() {
                    return Err(ConfigError::PromptNotChat { harness: kind.id() });
                }
                if !args.model.is_empty() {
                    tracing::warn!(harness = kind.id(), "--model is ignored: only chat uses it");
                }
                if kind == Kind::Echo {
                    Arc::new(EchoHarness::new())
                } else {
                    Arc::new(CounterHarness::new())
                }
            }
        };
        let harness: Arc<dyn Harness> = if args.answer_delay_ms > 0 {
            Arc::new(HeldAnswers::new(
                harness,
                std::time::Duration::from_millis(args.answer_delay_ms),
            ))
        } else {
            harness
        };
        Ok(Self {
            kind: args.harness,
            listen,
            harness,
            exit_on_stdin_eof: args.exit_on_stdin_eof,
            tls,
        })
    }
}

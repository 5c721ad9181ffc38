//! [`ServerBuilder`]: assembles a [`SessionsService`] from a journal, a model provider and the
//! harness routes it serves.

use std::sync::Arc;

use agentsessions_api::{
    Authorizer, Harness, HarnessDialer, ModelPolicy, ModelProvider, Redactor, Runtime,
    RuntimeCapabilities,
};
use agentsessions_controller::{TokenMinting, ToolExecutor};
use agentsessions_journal::Journal;
use agentsessions_journal::rows::DEFAULT_PROJECT;
use agentsessions_placement::{Backend, DescriptorSource, Placer, Registry};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::authz::CallAuthorizer;
use crate::error::{Result, ServerError};
use crate::limits::{Admission, Limits};
use crate::service::{Inner, SessionsService};

/// Assembles a [`SessionsService`].
pub struct ServerBuilder {
    journal: Arc<dyn Journal>,
    model: Arc<dyn ModelProvider>,
    harnesses: Registry,
    routes: Vec<(String, Backend)>,
    default_harness: Option<String>,
    project: String,
    tools: Option<Arc<dyn ToolExecutor>>,
    stream_deltas: bool,
    model_policy: Option<ModelPolicy>,
    authorizer: Option<Arc<dyn Authorizer>>,
    link_tls: Option<tonic::transport::ClientTlsConfig>,
    minting: Option<Arc<dyn TokenMinting>>,
    redactor: Option<Arc<Redactor>>,
    limits: Limits,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field(
                "routes",
                &self.routes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// A service over `journal` whose harnesses call models through `model`.
    pub fn new(journal: Arc<dyn Journal>, model: Arc<dyn ModelProvider>) -> Self {
        Self {
            journal,
            model,
            harnesses: Registry::default(),
            routes: Vec::new(),
            default_harness: None,
            project: DEFAULT_PROJECT.to_owned(),
            tools: None,
            stream_deltas: true,
            model_policy: None,
            authorizer: None,
            link_tls: None,
            minting: None,
            redactor: None,
            limits: Limits::default(),
        }
    }

    /// Serves `harness` under `name`, on compute with `capabilities` (an in-process harness
    /// has no memory snapshots: `RuntimeCapabilities::default()`). The first harness added is
    /// the default unless [`ServerBuilder::default_harness`] says otherwise.
    #[must_use]
    pub fn harness(
        self,
        name: impl Into<String>,
        harness: Arc<dyn Harness>,
        capabilities: RuntimeCapabilities,
    ) -> Self {
        self.route(name, Backend::attached(harness, capabilities))
    }

    /// Serves the harness `runtime` places and `dialer` reaches under `name`; the admission gate
    /// checks the descriptor from `source` before any compute is created, then again on the
    /// dialed harness.
    #[must_use]
    pub fn runtime_harness(
        self,
        name: impl Into<String>,
        runtime: Arc<dyn Runtime>,
        dialer: Arc<dyn HarnessDialer>,
        source: DescriptorSource,
    ) -> Self {
        self.route(name, Backend::new(runtime, dialer, source))
    }

    /// Serves `backend` under `name` (static route). The first route added is the default.
    #[must_use]
    pub fn route(mut self, name: impl Into<String>, backend: Backend) -> Self {
        self.routes.push((name.into(), backend));
        self
    }

    /// The harness used when a session names none.
    #[must_use]
    pub fn default_harness(mut self, name: impl Into<String>) -> Self {
        self.default_harness = Some(name.into());
        self
    }

    /// The project used when a request names none (default `default`).
    #[must_use]
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }

    /// The executor for CONTROLLER_MEDIATED and approved tool calls (none by default, as the
    /// stock daemon).
    #[must_use]
    pub fn tools(mut self, tools: Arc<dyn ToolExecutor>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Whether model deltas are streamed on Exec (default true). Deltas are transport only:
    /// the journal is the same either way.
    #[must_use]
    pub fn stream_deltas(mut self, stream: bool) -> Self {
        self.stream_deltas = stream;
        self
    }

    /// Admits only the models of `policy` (extensions §4): its default is each turn's model,
    /// a model request outside it fails the turn, and a harness declaring a model outside it is
    /// refused at placement. Without one, models are the provider's business (the published
    /// server).
    #[must_use]
    pub fn model_policy(mut self, policy: ModelPolicy) -> Self {
        self.model_policy = Some(policy);
        self
    }

    /// Enforces `authorizer` on every Sessions and HarnessRegistry RPC (extensions §2), and
    /// creates sessions owned by their verified caller. Without one, every call is allowed and
    /// sessions have no owner (the published server). Serve it behind an authenticator that
    /// yields caller identities ([`crate::ServeOptions::authenticator`]): an anonymous caller is refused
    /// by every built-in policy.
    #[must_use]
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Dials harnesses registered at run time (HarnessRegistry) over TLS with `tls`, as the
    /// daemon's `[harness_tls]` does for its static `--harness` entries.
    #[must_use]
    pub fn harness_link_tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.link_tls = Some(tls);
        self
    }

    /// Hands each live turn's harness a delegated-token minter (the daemon's `[identity]`).
    #[must_use]
    pub fn token_minting(mut self, minting: Arc<dyn TokenMinting>) -> Self {
        self.minting = Some(minting);
        self
    }

    /// Journals every turn's records without the secrets `redactor` knows (`docs/security.md`,
    /// "Redaction").
    #[must_use]
    pub fn redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// The overload limits (default [`Limits::default`]): calls over them are refused with
    /// `RESOURCE_EXHAUSTED`.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The service.
    ///
    /// # Errors
    /// [`ServerError::NoHarnesses`] when no harness was added, [`ServerError::StaticRoute`] for
    /// an empty or repeated name; [`ServerError::ZeroLimit`] for a limit of 0;
    /// `Placement(UnknownHarness)` for a default that is not served.
    pub fn build(self) -> Result<SessionsService> {
        if self.routes.is_empty() {
            return Err(ServerError::NoHarnesses);
        }
        self.limits.validate()?;
        for (name, backend) in self.routes {
            self.harnesses
                .add_static(name, backend)
                .map_err(|source| ServerError::StaticRoute { source })?;
        }
        if let Some(name) = &self.default_harness {
            self.harnesses.set_default(name)?;
        }
        let mut placer = Placer::new(Arc::clone(&self.journal), self.model, self.harnesses)
            .with_stream_deltas(self.stream_deltas);
        if let Some(tools) = self.tools {
            placer = placer.with_tools(tools);
        }
        if let Some(minting) = self.minting {
            placer = placer.with_token_minting(minting);
        }
        if let Some(redactor) = self.redactor {
            placer = placer.with_redactor(redactor);
        }
        if let Some(policy) = self.model_policy {
            placer = placer.with_policy(policy);
        }
        let project = if self.project.is_empty() {
            DEFAULT_PROJECT.to_owned()
        } else {
            self.project
        };
        Ok(SessionsService {
            inner: Arc::new(Inner {
                placer,
                journal: self.journal,
                project,
                authz: CallAuthorizer::new(self.authorizer),
                link_tls: self.link_tls,
                tasks: TaskTracker::new(),
                stop: CancellationToken::new(),
                admission: Admission::new(self.limits),
            }),
        })
    }
}

//! The `HarnessRegistry` admin service (semantics §7.2): register, get, list and retire
//! harnesses at run time. Registrations are immutable (a changed spec needs a new name), stored
//! in the journal's registry table with their canonical spec and digest, and served by this host
//! as soon as the row commits. It is served on its own (operator) listener, never on the
//! Sessions port.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{Action, RuntimeCapabilities};
use agentsessions_harnesswire::RemoteHarness;
use agentsessions_journal::{HarnessRow, HarnessState, Journal, RegisterOutcome};
use agentsessions_placement::{Backend, Registry, Source};
use agentsessions_wire::convert::timestamp_to_pb;
use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_registry_server::{HarnessRegistry, HarnessRegistryServer};
use tonic::Request;

use crate::authz::{Call, CallAuthorizer, method};
use crate::error::{Result, ServerError};
pub use crate::harness_spec::spec_from_json;
use crate::harness_spec::{
    Servable, canonical_spec, decode_token, encode_token, is_rfc1123_label, servable_placement,
};
use crate::rpc::{Rpc, unary};
use crate::service::SessionsService;

/// Longest retirement reason.
const MAX_REASON_BYTES: usize = 1024;
/// Bound on an `observe` Describe.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Page size when the request gives 0, and the largest page.
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

/// The HarnessRegistry service, sharing the harness table of a [`SessionsService`].
#[derive(Clone)]
pub struct RegistryService {
    journal: Arc<dyn Journal>,
    harnesses: Registry,
    authz: CallAuthorizer,
    link_tls: Option<tonic::transport::ClientTlsConfig>,
    substrate: Option<Arc<dyn SubstrateBackends>>,
}

impl std::fmt::Debug for RegistryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryService").finish_non_exhaustive()
    }
}

/// Builds the routes of `substrate {atespace, template}` registrations on compute this host
/// runs and snapshots itself (the daemon's `[runtime.microvm]`; semantics §10.4 names the
/// atespace and template an actor is created in and from). Without one, substrate placements
/// are refused as the spec says (`NoSubstrateBackend`).
pub trait SubstrateBackends: Send + Sync + std::fmt::Debug {
    /// The route for one registration.
    ///
    /// # Errors
    /// Why this host cannot serve `atespace`/`template` (reported as FAILED_PRECONDITION).
    fn backend(&self, atespace: &str, template: &str) -> std::result::Result<Backend, String>;
}

fn entry_for(
    name: &str,
    spec: &pb::HarnessSpec,
    link_tls: Option<&tonic::transport::ClientTlsConfig>,
    substrate: Option<&dyn SubstrateBackends>,
) -> Result<Backend> {
    let backend =
        match servable_placement(spec)? {
            Servable::Remote(address) => {
                let harness = RemoteHarness::connect_lazy_tls(&address, link_tls.cloned())
                    .map_err(|source| ServerError::HarnessLink {
                        name: name.to_owned(),
                        source,
                    })?;
                // A remote harness runs on compute this host does not snapshot: a memory harness
                // registered there is admitted as a name and refused by the admission gate.
                Backend::attached(Arc::new(harness), RuntimeCapabilities::default())
            }
            Servable::Substrate { atespace, template } => {
                let substrate = substrate.ok_or(ServerError::NoSubstrateBackend)?;
                substrate.backend(&atespace, &template).map_err(|reason| {
                    ServerError::SubstrateRefused {
                        atespace,
                        template,
                        reason,
                    }
                })?
            }
        };
    Ok(backend.expect_descriptor_id(spec.descriptor_id.clone()))
}

fn is_static(harnesses: &Registry, name: &str) -> bool {
    harnesses.contains(name) && harnesses.source(name) == Some(Source::Static)
}

fn registration(row: &HarnessRow) -> pb::HarnessRegistration {
    pb::HarnessRegistration {
        metadata: Some(pb::ResourceMetadata {
            name: row.name.clone(),
            uid: row.uid.clone(),
            create_time: Some(timestamp_to_pb(row.created_at)),
            update_time: Some(timestamp_to_pb(row.updated_at)),
            ..pb::ResourceMetadata::default()
        }),
        spec: spec_from_json(&row.spec).ok(),
        spec_digest: row.spec_digest.clone(),
        state: match row.state {
            HarnessState::Active => pb::HarnessState::Active as i32,
            HarnessState::Retired => pb::HarnessState::Retired as i32,
        },
        source: pb::HarnessSource::Registered as i32,
        retire_time: row.retired_at.map(timestamp_to_pb),
        retire_reason: row.retire_reason.clone(),
        ..pb::HarnessRegistration::default()
    }
}

fn static_registration(name: &str) -> pb::HarnessRegistration {
    pb::HarnessRegistration {
        metadata: Some(pb::ResourceMetadata {
            name: name.to_owned(),
            ..pb::ResourceMetadata::default()
        }),
        state: pb::HarnessState::Active as i32,
        source: pb::HarnessSource::Static as i32,
        ..pb::HarnessRegistration::default()
    }
}

impl RegistryService {
    /// The registry of `sessions`' harnesses.
    pub fn new(sessions: &SessionsService) -> Self {
        Self {
            journal: Arc::clone(&sessions.inner.journal),
            harnesses: sessions.inner.placer.registry().clone(),
            authz: sessions.inner.authz.clone(),
            link_tls: sessions.inner.link_tls.clone(),
            substrate: None,
        }
    }

    /// Serves substrate placements on `substrate` (before [`RegistryService::load`]).
    #[must_use]
    pub fn with_substrate(mut self, substrate: Arc<dyn SubstrateBackends>) -> Self {
        self.substrate = Some(substrate);
        self
    }

    /// Registry actions are global: no session, no owner (extensions §2).
    async fn authorize(&self, call: &Call, action: Action) -> Result<()> {
        self.authz
            .global(call, action, agentsessions_api::CallerIdentity::default())
            .await
    }

    /// The tonic service.
    pub fn into_server(self) -> HarnessRegistryServer<Self> {
        HarnessRegistryServer::new(self)
    }

    /// Startup (semantics §7.2): reserves the static names so no registration can take them,
    /// then serves every stored registration this host can serve. A registration that cannot
    /// be loaded is skipped with a warning; the rest still load.
    ///
    /// # Errors
    /// A static name that already has a registration row (a collision an operator must
    /// resolve); storage failures.
    pub async fn load(&self) -> Result<usize> {
        let statics = self.harnesses.static_names();
        for name in &statics {
            if self.journal.get_harness(name).await?.is_some() {
                return Err(ServerError::StaticNameStored { name: name.clone() });
            }
        }
        self.journal.reserve_harness_names(&statics).await?;
        let mut loaded = 0;
        let mut after = String::new();
        loop {
            let rows = self.journal.list_harnesses(&after, MAX_PAGE, true).await?;
            let Some(last) = rows.last() else { break };
            after.clone_from(&last.name);
            for row in &rows {
                match spec_from_json(&row.spec).and_then(|spec| {
                    entry_for(
                        &row.name,
                        &spec,
                        self.link_tls.as_ref(),
                        self.substrate.as_deref(),
                    )
                }) {
                    Ok(backend) => {
                        if self.harnesses.register(row.name.clone(), backend).is_ok() {
                            loaded += 1;
                        }
                    }
                    Err(e) => tracing::warn!(
                        component = "registry",
                        harness = %row.name,
                        error_kind = e.kind(),
                        "stored registration is not served by this host"
                    ),
                }
            }
        }
        Ok(loaded)
    }

    async fn register(
        &self,
        req: pb::RegisterHarnessRequest,
    ) -> Result<pb::RegisterHarnessResponse> {
        if !is_rfc1123_label(&req.name) {
            return Err(ServerError::InvalidHarnessName { name: req.name });
        }
        if is_static(&self.harnesses, &req.name) {
            return Err(ServerError::StaticNameTaken { name: req.name });
        }
        let spec = req
            .spec
            .ok_or(ServerError::MissingField { field: "spec" })?;
        let entry = entry_for(
            &req.name,
            &spec,
            self.link_tls.as_ref(),
            self.substrate.as_deref(),
        )?;
        let (json, digest) = canonical_spec(&spec)?;
        let (row, outcome) = self
            .journal
            .register_harness(&req.name, &json, &digest)
            .await
            .map_err(|e| match e {
                agentsessions_journal::JournalError::HarnessExists(name) => {
                    ServerError::RegistrationImmutable { name }
                }
                other => other.into(),
            })?;
        // Already served (an identical registration, or one loaded at startup): keep it.
        let _kept = self.harnesses.register(req.name.clone(), entry);
        Ok(pb::RegisterHarnessResponse {
            harness: Some(registration(&row)),
            outcome: match outcome {
                RegisterOutcome::Created => pb::RegisterOutcome::Created,
                RegisterOutcome::Unchanged => pb::RegisterOutcome::Unchanged,
                RegisterOutcome::Reactivated => pb::RegisterOutcome::Reactivated,
            } as i32,
        })
    }

    async fn get(&self, req: pb::GetHarnessRequest) -> Result<pb::HarnessRegistration> {
        if req.name.is_empty() {
            return Err(ServerError::MissingField { field: "name" });
        }
        let mut found = if is_static(&self.harnesses, &req.name) {
            static_registration(&req.name)
        } else {
            match self.journal.get_harness(&req.name).await? {
                Some(row) => registration(&row),
                None => {
                    return Err(ServerError::HarnessNotFound {
                        name: req.name.clone(),
                    });
                }
            }
        };
        match self.harnesses.resolve(&req.name) {
            Ok(route) if req.observe => {
                match tokio::time::timeout(OBSERVE_TIMEOUT, route.backend.describe()).await {
                    Ok(Ok(descriptor)) => found.observed = Some(descriptor.into()),
                    Ok(Err(e)) => found.observe_error = e.to_string(),
                    Err(_) => found.observe_error = "describe timed out after 10 s".into(),
                }
            }
            Ok(_) => {}
            Err(_) => {
                found.unservable_reason = "registered after this host started, or its spec \
                                           cannot be served here"
                    .into();
            }
        }
        Ok(found)
    }

    async fn list(&self, req: pb::ListHarnessesRequest) -> Result<pb::ListHarnessesResponse> {
        let size = match usize::try_from(req.page_size) {
            Err(_) => {
                return Err(ServerError::NegativePageSize {
                    page_size: req.page_size,
                });
            }
            Ok(0) => DEFAULT_PAGE,
            Ok(n) => n.min(MAX_PAGE),
        };
        let after = if req.page_token.is_empty() {
            String::new()
        } else {
            decode_token(&req.page_token)?
        };
        // Static names and stored rows, merged in name order, strictly after the cursor.
        let mut merged: Vec<(String, pb::HarnessRegistration)> = self
            .harnesses
            .static_names()
            .into_iter()
            .filter(|n| *n > after)
            .map(|n| {
                let r = static_registration(&n);
                (n, r)
            })
            .collect();
        for row in self
            .journal
            .list_harnesses(&after, size + 1, req.include_retired)
            .await?
        {
            merged.push((row.name.clone(), registration(&row)));
        }
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        merged.dedup_by(|a, b| a.0 == b.0);
        let more = merged.len() > size;
        merged.truncate(size);
        let next_page_token = match (more, merged.last()) {
            (true, Some((name, _))) => encode_token(name),
            _ => String::new(),
        };
        Ok(pb::ListHarnessesResponse {
            harnesses: merged.into_iter().map(|(_, r)| r).collect(),
            next_page_token,
        })
    }

    async fn retire(&self, req: pb::RetireHarnessRequest) -> Result<pb::HarnessRegistration> {
        if req.name.is_empty() {
            return Err(ServerError::MissingField { field: "name" });
        }
        if is_static(&self.harnesses, &req.name) {
            return Err(ServerError::StaticHarnessRetire { name: req.name });
        }
        if req.reason.len() > MAX_REASON_BYTES {
            return Err(ServerError::RetireReasonTooLong {
                bytes: req.reason.len(),
                limit: MAX_REASON_BYTES,
            });
        }
        let row = self
            .journal
            .retire_harness(&req.name, &req.reason)
            .await
            .map_err(|e| match e {
                agentsessions_journal::JournalError::HarnessNotFound(name) => {
                    ServerError::HarnessNotFound { name }
                }
                other => other.into(),
            })?;
        Ok(registration(&row))
    }
}

#[tonic::async_trait]
impl HarnessRegistry for RegistryService {
    async fn register_harness(
        &self,
        request: Request<pb::RegisterHarnessRequest>,
    ) -> Rpc<pb::RegisterHarnessResponse> {
        unary(method::REGISTER_HARNESS, request, |call, req| async move {
            self.authorize(&call, Action::RegistryRegister).await?;
            self.register(req).await
        })
        .await
    }

    async fn get_harness(
        &self,
        request: Request<pb::GetHarnessRequest>,
    ) -> Rpc<pb::HarnessRegistration> {
        unary(method::GET_HARNESS, request, |call, req| async move {
            self.authorize(&call, Action::RegistryRead).await?;
            self.get(req).await
        })
        .await
    }

    async fn list_harnesses(
        &self,
        request: Request<pb::ListHarnessesRequest>,
    ) -> Rpc<pb::ListHarnessesResponse> {
        unary(method::LIST_HARNESSES, request, |call, req| async move {
            self.authorize(&call, Action::RegistryList).await?;
            self.list(req).await
        })
        .await
    }

    async fn retire_harness(
        &self,
        request: Request<pb::RetireHarnessRequest>,
    ) -> Rpc<pb::HarnessRegistration> {
        unary(method::RETIRE_HARNESS, request, |call, req| async move {
            self.authorize(&call, Action::RegistryRetire).await?;
            self.retire(req).await
        })
        .await
    }
}

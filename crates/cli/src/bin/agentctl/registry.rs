//! The operator API: registering, showing, listing and retiring harnesses.

use std::time::Duration;

use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_registry_client::HarnessRegistryClient;

use crate::args::{Cli, HarnessOp};
use crate::connect::server_channel;
use crate::error::CliError;
use crate::out::Out;

fn registration_line(r: &pb::HarnessRegistration) -> String {
    let name = r.metadata.as_ref().map_or("", |m| m.name.as_str());
    let state = pb::HarnessState::try_from(r.state)
        .map_or("UNKNOWN", |s| s.as_str_name())
        .trim_start_matches("HARNESS_STATE_");
    let source = pb::HarnessSource::try_from(r.source)
        .map_or("UNKNOWN", |s| s.as_str_name())
        .trim_start_matches("HARNESS_SOURCE_");
    let mut line = format!("{name} state={state} source={source}");
    if let Some(pb::harness_spec::Placement::Remote(remote)) =
        r.spec.as_ref().and_then(|s| s.placement.as_ref())
    {
        line.push_str(&format!(" address={}", remote.address));
    }
    if !r.spec_digest.is_empty() {
        line.push_str(&format!(" digest={}", r.spec_digest));
    }
    if !r.retire_reason.is_empty() {
        line.push_str(&format!(" retired: {}", r.retire_reason));
    }
    if let Some(observed) = &r.observed {
        line.push_str(&format!(" observed_id={}", observed.id));
    }
    if !r.observe_error.is_empty() {
        line.push_str(&format!(" observe_error: {}", r.observe_error));
    }
    line
}

fn call<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(Duration::from_secs(30));
    request
}

pub(crate) async fn harness(cli: &Cli, op: &HarnessOp, out: &mut Out) -> Result<(), CliError> {
    if cli.server.is_empty() {
        return Err(CliError::Usage(
            "harness commands talk to a daemon's operator listener: give --server <--registry-addr>"
                .into(),
        ));
    }
    let bearer = cli
        .token
        .as_deref()
        .map(agentsessions_auth::BearerToken::new)
        .transpose()
        .map_err(|e| CliError::Credentials(format!("--token: {e}")))?;
    let mut registry = HarnessRegistryClient::with_interceptor(
        server_channel(cli)?,
        move |request: tonic::Request<()>| match &bearer {
            Some(bearer) => tonic::service::Interceptor::call(&mut bearer.clone(), request),
            None => Ok(request),
        },
    );
    match op {
        HarnessOp::Register { name, spec } => {
            let text = std::fs::read_to_string(spec).map_err(|source| CliError::ReadFile {
                path: spec.display().to_string(),
                source,
            })?;
            let spec = agentsessions_server::registry::spec_from_json(&text)
                .map_err(|e| CliError::Spec(e.to_string()))?;
            let response = registry
                .register_harness(call(pb::RegisterHarnessRequest {
                    name: name.clone(),
                    spec: Some(spec),
                }))
                .await?
                .into_inner();
            let outcome = pb::RegisterOutcome::try_from(response.outcome)
                .map_or("UNKNOWN", |o| o.as_str_name())
                .trim_start_matches("REGISTER_OUTCOME_");
            let line = response
                .harness
                .as_ref()
                .map(registration_line)
                .unwrap_or_default();
            out.line(&format!("{outcome} {line}"))
        }
        HarnessOp::Get { name, observe } => {
            let r = registry
                .get_harness(call(pb::GetHarnessRequest {
                    name: name.clone(),
                    observe: *observe,
                }))
                .await?
                .into_inner();
            out.line(&registration_line(&r))
        }
        HarnessOp::List {
            include_retired,
            page_size,
        } => {
            if *page_size < 0 {
                return Err(CliError::Usage("--page-size must not be negative".into()));
            }
            let mut token = String::new();
            loop {
                let page = registry
                    .list_harnesses(call(pb::ListHarnessesRequest {
                        page_size: *page_size,
                        page_token: token,
                        include_retired: *include_retired,
                    }))
                    .await?
                    .into_inner();
                for r in &page.harnesses {
                    out.line(&registration_line(r))?;
                }
                if page.next_page_token.is_empty() {
                    return Ok(());
                }
                token = page.next_page_token;
            }
        }
        HarnessOp::Retire { name, reason } => {
            let r = registry
                .retire_harness(call(pb::RetireHarnessRequest {
                    name: name.clone(),
                    reason: reason.clone(),
                }))
                .await?
                .into_inner();
            out.line(&registration_line(&r))
        }
    }
}

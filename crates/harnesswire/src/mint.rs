//! Delegated tokens over `Harness.Connect` (an extension, `docs/extensions.md`): a served
//! harness's [`TokenMinter`] sends a `mint_request` event and waits for the host's matching
//! `mint_result` frame; the host answers with the minter it bound to the execution, never with
//! the caller's own credential.
//!
//! ```text
//! host (RemoteHarness)                        harness (HarnessService)
//!  |                    <-----------  Event{mint_request{request_id, audience}}  (minter.mint)
//!  | ControllerFrame{mint_result{request_id, token | error}} ----------->  ...returns the token
//! ```
//!
//! Mints do not go through the sink's serialized calls: several may be in flight at once, and
//! each answer is matched to its request by id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentsessions_api::{ApiError, Result as ApiResult, TokenMinter};
use agentsessions_wire::pb;
use agentsessions_wire::pb::event::Body;
use tokio::sync::oneshot;

use crate::error::{HarnessWireError, end_error};
use crate::frames::event;
use crate::stream_sink::EventSender;

/// How long a served harness's mint waits for the host's answer.
pub(crate) const MINT_TIMEOUT: Duration = Duration::from_secs(30);

/// The serve side of one execution's mints: the requests waiting for an answer, by id.
#[derive(Debug, Clone)]
pub(crate) struct MintDesk(Arc<Desk>);

#[derive(Debug)]
struct Desk {
    execution_id: String,
    timeout: Duration,
    next_id: AtomicU64,
    /// `None` once the execution is over, so a minter the harness kept cannot hold the stream
    /// open or mint after its turn.
    state: Mutex<Option<Open>>,
}

#[derive(Debug)]
struct Open {
    events: EventSender,
    waiting: HashMap<String, oneshot::Sender<pb::MintResult>>,
}

impl MintDesk {
    pub(crate) fn new(execution_id: String, events: EventSender) -> Self {
        Self::with_timeout(execution_id, events, MINT_TIMEOUT)
    }

    fn with_timeout(execution_id: String, events: EventSender, timeout: Duration) -> Self {
        Self(Arc::new(Desk {
            execution_id,
            timeout,
            next_id: AtomicU64::new(1),
            state: Mutex::new(Some(Open {
                events,
                waiting: HashMap::new(),
            })),
        }))
    }

    /// The minter handed to the served harness.
    pub(crate) fn minter(&self) -> TokenMinter {
        let desk = self.clone();
        TokenMinter::new(move |audience| {
            let desk = desk.clone();
            async move { desk.mint(audience).await }
        })
    }

    /// Hands the host's answer to the mint waiting for it; an answer nobody waits for (a mint
    /// that timed out or was dropped) is ignored.
    pub(crate) fn answer(&self, result: pb::MintResult) {
        let waiter = self
            .lock()
            .as_mut()
            .and_then(|open| open.waiting.remove(&result.request_id));
        match waiter {
            Some(waiter) => {
                let _gone = waiter.send(result);
            }
            None => tracing::warn!(
                request_id = %result.request_id,
                "dropped a mint result nobody waits for"
            ),
        }
    }

    /// Ends the execution's mints: waiting ones fail as the host having closed, later ones too.
    pub(crate) fn close(&self) {
        self.lock().take();
    }

    fn lock(&self) -> MutexGuard<'_, Option<Open>> {
        // Every write is one insert, remove or take, so a poisoned lock still holds a usable map.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn mint(&self, audience: Vec<String>) -> ApiResult<String> {
        let request_id = format!("mint-{}", self.0.next_id.fetch_add(1, Ordering::Relaxed));
        let (answered, answer) = oneshot::channel();
        let events = {
            let mut state = self.lock();
            let open = state
                .as_mut()
                .ok_or(ApiError::from(HarnessWireError::HostClosed))?;
            open.waiting.insert(request_id.clone(), answered);
            open.events.clone()
        };
        let forget = Forget {
            desk: self,
            request_id: &request_id,
        };
        let request = event(
            &self.0.execution_id,
            pb::EventKind::Unspecified,
            Body::MintRequest(pb::MintRequest {
                request_id: request_id.clone(),
                audience,
            }),
        );
        events
            .send(Ok(request))
            .await
            .map_err(|_| ApiError::from(HarnessWireError::HostClosed))?;
        drop(events);
        let result = match tokio::time::timeout(self.0.timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_closed)) => return Err(HarnessWireError::HostClosed.into()),
            Err(_elapsed) => {
                return Err(HarnessWireError::MintTimeout {
                    timeout: self.0.timeout,
                }
                .into());
            }
        };
        drop(forget);
        token_of(result)
    }
}

/// Removes a mint's waiter however the mint ends (answered, timed out, or dropped).
struct Forget<'a> {
    desk: &'a MintDesk,
    request_id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.desk.lock().as_mut() {
            open.waiting.remove(self.request_id);
        }
    }
}

/// The token of a host answer, or its error.
fn token_of(result: pb::MintResult) -> ApiResult<String> {
    match result.error {
        Some(error) => Err(HarnessWireError::MintRefused {
            code: error.code,
            description: error.description,
        }
        .into()),
        None => Ok(result.token),
    }
}

/// The host side: answers a remote harness's mint with the execution's own minter, within the
/// same bound the harness waits (the stream's other events wait behind it).
pub(crate) async fn answer(
    minter: Option<&TokenMinter>,
    request: pb::MintRequest,
) -> pb::MintResult {
    let minted = match minter {
        Some(minter) => tokio::time::timeout(MINT_TIMEOUT, minter.mint(request.audience))
            .await
            .unwrap_or_else(|_elapsed| {
                Err(HarnessWireError::MintTimeout {
                    timeout: MINT_TIMEOUT,
                }
                .into())
            }),
        None => Err(HarnessWireError::NoMinter.into()),
    };
    match minted {
        Ok(token) => pb::MintResult {
            request_id: request.request_id,
            token,
            error: None,
        },
        Err(err) => {
            tracing::info!(error = %err, "refused a remote harness's token mint");
            pb::MintResult {
                request_id: request.request_id,
                token: String::new(),
                error: Some(end_error(&err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::StatusCode;
    use tokio::sync::mpsc;

    use super::*;

    fn request_of(event: &pb::Event) -> pb::MintRequest {
        match &event.body {
            Some(Body::MintRequest(request)) => request.clone(),
            other => panic!("not a mint request: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_mint_without_an_answer_times_out_and_forgets_its_request() {
        let (events, mut sent) = mpsc::channel(4);
        let desk = MintDesk::with_timeout("exec".into(), events, Duration::from_millis(20));
        let err = desk.minter().mint(vec!["api".into()]).await.unwrap_err();
        assert_eq!(
            crate::error::status_code_of(&err),
            StatusCode::DeadlineExceeded,
            "{err}"
        );
        let request = request_of(&sent.recv().await.unwrap().unwrap());
        assert_eq!(request.audience, ["api"]);
        assert!(desk.lock().as_ref().unwrap().waiting.is_empty());
    }

    #[tokio::test]
    async fn a_closed_desk_fails_waiting_and_later_mints() {
        let (events, mut sent) = mpsc::channel(4);
        let desk = MintDesk::new("exec".into(), events);
        let minter = desk.minter();
        let waiting = tokio::spawn(async move { minter.mint(vec!["api".into()]).await });
        let _request = sent.recv().await.unwrap().unwrap();
        desk.close();
        let err = waiting.await.unwrap().unwrap_err();
        assert!(matches!(err, ApiError::Cancelled), "{err}");
        let err = desk.minter().mint(vec!["api".into()]).await.unwrap_err();
        assert!(matches!(err, ApiError::Cancelled), "{err}");
        assert!(sent.recv().await.is_none(), "the desk let go of the stream");
    }

    #[tokio::test]
    async fn the_host_answers_from_its_minter_or_refuses_without_one() {
        let minter = TokenMinter::new(|audience: Vec<String>| async move {
            Ok(format!("tok:{}", audience.join(",")))
        });
        let request = pb::MintRequest {
            request_id: "mint-7".into(),
            audience: vec!["api".into()],
        };
        let minted = answer(Some(&minter), request.clone()).await;
        assert_eq!(
            (minted.request_id.as_str(), minted.token.as_str()),
            ("mint-7", "tok:api")
        );
        assert!(minted.error.is_none());
        let refused = answer(None, request).await;
        assert_eq!(refused.request_id, "mint-7");
        assert!(refused.token.is_empty());
        assert_eq!(
            refused.error.map(|e| e.code),
            Some(StatusCode::FailedPrecondition.number())
        );
    }
}

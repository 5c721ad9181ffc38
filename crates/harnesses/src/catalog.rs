//! [`reference_harness`]: one of the reference harnesses by id, for binaries that pick one from
//! configuration (`HARNESS_KIND`).

use std::sync::Arc;

use agentsessions_api::Harness;

use crate::chat::ChatHarness;
use crate::counter::CounterHarness;
use crate::echo::EchoHarness;
use crate::error::{HarnessesError, Result};

/// The reference harness with id `kind`: `echo`, `counter` or `chat` (which calls `model`; the
/// other two ignore it).
///
/// # Errors
///
/// [`HarnessesError::UnknownHarness`] for any other id; [`HarnessesError::EmptyModel`] for `chat`
/// without a model.
pub fn reference_harness(kind: &str, model: &str) -> Result<Arc<dyn Harness>> {
    Ok(match kind {
        EchoHarness::ID => Arc::new(EchoHarness::new()),
        CounterHarness::ID => Arc::new(CounterHarness::new()),
        ChatHarness::ID => Arc::new(ChatHarness::new(model)?),
        _ => {
            return Err(HarnessesError::UnknownHarness {
                name: kind.to_owned(),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn picks_each_reference_harness_by_id() {
        for kind in ["echo", "counter", "chat"] {
            let harness = reference_harness(kind, "m").unwrap();
            assert_eq!(harness.describe().await.unwrap().id, kind);
        }
        assert_eq!(
            reference_harness("chat", "").err(),
            Some(HarnessesError::EmptyModel)
        );
        assert_eq!(
            reference_harness("bash", "m").err(),
            Some(HarnessesError::UnknownHarness {
                name: "bash".into()
            })
        );
    }
}

//! The reference harnesses of semantics §10.5: small, deterministic implementations of
//! [`agentsessions_api::Harness`] that exercise the SPI end to end and serve as examples for
//! harness authors. All three advertise version `"1"`.
//!
//! | harness | id | resumability | fork-safe | what one run does |
//! |---|---|---|---|---|
//! | [`EchoHarness`] | `echo` | stateless replay | yes | one model call (`echo`) with the last input's text |
//! | [`CounterHarness`] | `counter` | requires memory snapshot | no | bumps an in-memory counter and outputs it |
//! | [`ChatHarness`] | `chat` | stateless replay | yes | model calls with the whole conversation, running the tools the model asks for |
//!
//! They follow the determinism rules for harness authors (semantics §9.6): every model call goes
//! through [`agentsessions_api::EventSink::model`], a mediated completion is never re-emitted as
//! output, and a sink error is returned, never retried or swallowed.
//!
//! Module map:
//! - [`echo`]: the [`EchoHarness`].
//! - [`counter`]: [`CounterHarness`], the one stateful harness.
//! - [`chat`]: [`ChatHarness`], its tool loop and its per-execution JSON config.
//! - `tool_round`: one round of tool calls of the chat harness (offer, ids, results).
//! - [`catalog`]: [`reference_harness`], picking one of the three by id (for `harnessnode`).
//! - [`error`]: the crate error, [`HarnessesError`].

pub mod catalog;
pub mod chat;
pub mod counter;
pub mod echo;
pub mod error;
mod tool_round;

#[cfg(any(test, feature = "test-util"))]
pub mod testsink;

pub use catalog::reference_harness;
pub use chat::ChatHarness;
pub use counter::CounterHarness;
pub use echo::EchoHarness;
pub use error::{HarnessesError, Result};

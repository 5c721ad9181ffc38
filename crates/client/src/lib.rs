//! A Rust client for the agentsessions `Sessions` API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentsessions_client::ClientError> {
//! use agentsessions_client::{Client, ExecOptions};
//!
//! let mut client = Client::dial("127.0.0.1:8080")?;
//! let turn = client
//!     .exec(ExecOptions::new("hello"), |_event| {})
//!     .await
//!     .map_err(|failed| failed.error)?;
//! println!("{} said {}", turn.session_uid(), turn.output);
//! let records = client.replay(&turn.session_uid(), 0, 0).await?;
//! agentsessions_client::verify(&records)?;
//! # Ok(()) }
//! ```
//!
//! Every call sends an `x-request-id`; errors keep the server's gRPC code
//! ([`ClientError::code`]).
//!
//! Module map:
//! - [`client`](mod@client): [`Client`].
//! - [`options`]: what a call takes and a turn returns.
//! - [`records`]: [`text_of`], [`uid_of`], [`verify`].
//! - [`filter`]: [`SessionFilter`], which sessions of a listing to keep.
//! - [`watch`]: [`Watch`], a live follow of a session.
//! - [`error`]: [`ClientError`], [`code_name`].
#![warn(missing_docs)]

pub mod client;
pub mod error;
pub mod filter;
pub mod options;
pub mod records;
pub mod watch;

pub use client::Client;
pub use error::{ClientError, Result, code_name};
pub use filter::{SessionFilter, exec_state};
pub use options::{Decision, ExecEvent, ExecOptions, ForkOptions, TurnFailed, TurnResult};
pub use records::{decode, text_of, uid_of, verify};
pub use watch::{Watch, WatchItem};

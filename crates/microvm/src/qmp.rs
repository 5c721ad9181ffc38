//! A minimal QMP client (QEMU's JSON machine protocol) over the VM's unix socket: the greeting,
//! `qmp_capabilities`, then one command at a time. Asynchronous events interleaved with answers
//! are skipped.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::error::{MicrovmError, Result};

/// Longest QMP line accepted; QEMU's answers to the commands used here are far shorter.
const MAX_LINE: u64 = 1 << 20;
/// Bound on one command's answer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// One QMP connection in command mode.
#[derive(Debug)]
pub(crate) struct Qmp {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

fn failed(command: &str, reason: impl Into<String>) -> MicrovmError {
    MicrovmError::Qmp {
        command: command.to_owned(),
        reason: reason.into(),
    }
}

impl Qmp {
    /// Connects to `socket`, retrying until QEMU listens or `timeout` passes, and negotiates
    /// command mode.
    pub(crate) async fn connect(socket: &Path, timeout: Duration) -> Result<Self> {
        let deadline = tokio::time::Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(socket).await {
                Ok(stream) => break stream,
                Err(err) if tokio::time::Instant::now() >= deadline => {
                    return Err(failed("connect", format!("{}: {err}", socket.display())));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let (read, writer) = stream.into_split();
        let mut qmp = Self {
            reader: BufReader::new(read),
            writer,
        };
        let greeting = qmp.read_message("greeting").await?;
        if greeting.get("QMP").is_none() {
            return Err(failed("greeting", format!("unexpected {greeting}")));
        }
        qmp.execute("qmp_capabilities", None).await?;
        Ok(qmp)
    }

    /// Runs `command` with `arguments` and returns its `return` value.
    pub(crate) async fn execute(
        &mut self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value> {
        let mut message = json!({ "execute": command });
        if let Some(arguments) = arguments {
            message["arguments"] = arguments;
        }
        let mut line = message.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .map_err(|e| failed(command, e.to_string()))?;
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, async {
            loop {
                let message = self.read_message(command).await?;
                if message.get("event").is_some() {
                    continue;
                }
                return Ok(message);
            }
        })
        .await
        .map_err(|_| failed(command, "no answer within 30 s"))??;
        if let Some(value) = answer.get("return") {
            return Ok(value.clone());
        }
        let reason = answer
            .get("error")
            .and_then(|e| e.get("desc"))
            .and_then(Value::as_str)
            .map_or_else(|| answer.to_string(), str::to_owned);
        Err(failed(command, reason))
    }

    async fn read_message(&mut self, command: &str) -> Result<Value> {
        let mut line = String::new();
        let read = (&mut self.reader)
            .take(MAX_LINE)
            .read_line(&mut line)
            .await
            .map_err(|e| failed(command, e.to_string()))?;
        if read == 0 {
            return Err(failed(command, "QEMU closed the connection"));
        }
        serde_json::from_str(&line).map_err(|e| failed(command, format!("bad JSON: {e}")))
    }

    /// The VM's run state (`running`, `paused`, `inmigrate`, `postmigrate`, …).
    pub(crate) async fn status(&mut self) -> Result<String> {
        let status = self.execute("query-status", None).await?;
        Ok(status
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned())
    }

    /// The outgoing migration's state (`active`, `completed`, `failed`, …) and its error.
    pub(crate) async fn migration(&mut self) -> Result<(String, String)> {
        let info = self.execute("query-migrate", None).await?;
        let field = |name: &str| {
            info.get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok((field("status"), field("error-desc")))
    }
}

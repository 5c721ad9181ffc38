//! Stopping a stdio server's child process within a bound: SIGTERM, then SIGKILL once a grace
//! period has passed.
//!
//! rmcp owns the child (inside its transport) and, when its service is cancelled, closes the
//! child's stdin and waits for it up to 3 s, then sends SIGTERM and waits 3 s more before it
//! kills: a server that ignores stdin held the host's shutdown 6 s per stop. The supervisor
//! therefore keeps the child's pid ([`ChildPid`]) and signals it itself. The pid stays the
//! child's while the transport holds it: nothing reaps the child before the transport waits
//! for it, which is after the attempt or connection the supervisor is still waiting on.

use std::sync::atomic::{AtomicU32, Ordering};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The pid of the child a connection attempt started (none for an HTTP server, or before the
/// spawn).
#[derive(Debug, Default)]
pub(crate) struct ChildPid(AtomicU32);

impl ChildPid {
    /// Records the child `connect` just spawned.
    pub(crate) fn started(&self, pid: Option<u32>) {
        self.0.store(pid.unwrap_or(0), Ordering::SeqCst);
    }

    /// Asks the child to stop (SIGTERM); false when there is none.
    pub(crate) fn terminate(&self, server: &str) -> bool {
        self.signal(server, Signal::SIGTERM)
    }

    /// Kills the child (SIGKILL); false when there is none.
    pub(crate) fn kill(&self, server: &str) -> bool {
        self.signal(server, Signal::SIGKILL)
    }

    fn signal(&self, server: &str, signal: Signal) -> bool {
        let Ok(pid) = i32::try_from(self.0.load(Ordering::SeqCst)) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        match kill(Pid::from_raw(pid), signal) {
            Ok(()) => {
                tracing::info!(component = "mcp", server, pid, %signal, "signalled MCP server process");
                true
            }
            // Already gone (ESRCH) is what stopping wanted.
            Err(e) => {
                tracing::debug!(component = "mcp", server, pid, %signal, error = %e, "MCP server process not signalled");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_reaches_the_child_and_no_pid_signals_nothing() {
        let none = ChildPid::default();
        assert!(!none.terminate("x"));
        assert!(!none.kill("x"));
        let mut child = tokio::process::Command::new("sleep")
            .arg("1000")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = ChildPid::default();
        pid.started(child.id());
        assert!(pid.terminate("x"));
        let status = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait())
            .await
            .unwrap()
            .unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(15));
    }
}

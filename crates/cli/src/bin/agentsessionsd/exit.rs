//! Why `agentsessionsd` stopped, and the exit status a supervisor (systemd, a container runtime,
//! a script) sees for it. One table, documented in README ("Exit codes of agentsessionsd"):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | stopped by SIGINT or SIGTERM (also during startup) |
//! | 1 | failed while serving (a listener or task ended with an error), or the runtime could not start |
//! | 2 | the configuration was refused: flags, the TOML file, a file it names, a setting that cannot work |
//! | 3 | the journal could not be opened or read (its address, a schema this build does not know) |
//! | 4 | an address could not be bound (port in use, no permission) |

use std::process::ExitCode;

/// A stop with its cause, as the daemon reports it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stop {
    /// The configuration was refused before anything was opened.
    #[error("{0:#}")]
    Config(anyhow::Error),
    /// The journal could not be opened or read.
    #[error("{0:#}")]
    Journal(anyhow::Error),
    /// A listener could not be bound.
    #[error("{0:#}")]
    Listen(anyhow::Error),
    /// Serving failed.
    #[error("{0:#}")]
    Serving(anyhow::Error),
}

impl Stop {
    /// The exit status of this stop (the table above).
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Self::Serving(_) => 1,
            Self::Config(_) => 2,
            Self::Journal(_) => 3,
            Self::Listen(_) => 4,
        })
    }
}

/// Tags a failure with the stop it causes: `.map_err(config)`.
pub(crate) fn config(e: impl Into<anyhow::Error>) -> Stop {
    Stop::Config(e.into())
}

/// See [`config`].
pub(crate) fn journal(e: impl Into<anyhow::Error>) -> Stop {
    Stop::Journal(e.into())
}

/// See [`config`].
pub(crate) fn listen(e: impl Into<anyhow::Error>) -> Stop {
    Stop::Listen(e.into())
}

/// See [`config`].
pub(crate) fn serving(e: impl Into<anyhow::Error>) -> Stop {
    Stop::Serving(e.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_has_its_own_status() {
        let codes: Vec<ExitCode> = [
            serving(anyhow::anyhow!("x")),
            config(anyhow::anyhow!("x")),
            journal(anyhow::anyhow!("x")),
            listen(anyhow::anyhow!("x")),
        ]
        .iter()
        .map(Stop::exit_code)
        .collect();
        assert_eq!(
            codes,
            [1, 2, 3, 4].map(ExitCode::from),
            "the documented table"
        );
    }
}

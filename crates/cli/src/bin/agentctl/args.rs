//! The command line as clap definitions: global flags, commands and their flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit codes, shown after `agentctl --help` (the table is `From<CliError> for ExitCode`).
const EXIT_CODES: &str = "\
Output:
  Text for people by default. With --json the session commands print JSON Lines: one JSON value
  per line (sessions and records as canonical protobuf JSON), so `agentctl --json list | jq`
  works. export writes the format it is asked for; harness commands print text.

Exit codes:
  0  success
  1  internal: the server or journal failed, or a chain does not verify
  2  usage: a flag, argument or range is wrong
  3  not found: no such session (or harness)
  4  refused: authentication or permission denied
  5  unavailable: the server cannot be reached or does not serve this API
  6  conflict: the session moved on, already exists, has no pending approval to decide, the
     import is already there, or its last turn has not ended (resume, decide, cancel or
     --abandon it; stderr says which) or cannot be decided on this host
  7  parked: the turn (exec, resume, approve, deny) waits for an approval decision; stderr
     names the request
  130  interrupted (Ctrl-C) while exec or watch followed a session; stderr shows the
       `agentctl watch` command that reattaches
  141  stdout was closed by its reader (`agentctl replay ... | head -1`): the command ends
       quietly, as a shell command killed by SIGPIPE

Examples:
  agentctl exec what did I say            # one message, in a new session
  agentctl --json list | jq .metadata.uid
  agentctl --server 127.0.0.1:8080 replay --session sess-1 --from 5
  agentctl completions bash > /etc/bash_completion.d/agentctl";

/// Create, run, replay, fork, suspend, resume and audit durable agent sessions.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Sessions server (host:port or unix:/path); empty runs an embedded server over --journal.
    #[arg(long, env = "AGENTCTL_SERVER", default_value = "", global = true)]
    pub(crate) server: String,
    /// Local journal for the embedded server, import and export (SQLite path or postgres:// URL).
    #[arg(
        long,
        env = "AGENTSESSIONS_JOURNAL",
        default_value = "agentsessions.db",
        global = true
    )]
    pub(crate) journal: String,
    /// Project for create and list (empty: the server's default).
    #[arg(long, default_value = "", global = true)]
    pub(crate) project: String,
    /// Print JSON Lines (one JSON value per line; sessions and records as protobuf JSON).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Talk TLS to --server, trusting this CA bundle (PEM).
    #[arg(long, env = "AGENTCTL_TLS_CA", global = true)]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mTLS, with --tls-key.
    #[arg(long, env = "AGENTCTL_TLS_CERT", global = true, requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mTLS, with --tls-cert.
    #[arg(long, env = "AGENTCTL_TLS_KEY", global = true, requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Server name to verify when it differs from the host in --server.
    #[arg(long, global = true)]
    pub(crate) tls_domain: Option<String>,
    /// Bearer token (a JWT) sent on every call; never a flag value in scripts' history: prefer
    /// the environment variable.
    #[arg(long, env = "AGENTCTL_TOKEN", global = true, hide_env_values = true)]
    pub(crate) token: Option<String>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create a session and print its uid.
    #[command(after_long_help = "Examples:\n  \
        agentctl create --name notes\n  \
        agentctl --server 127.0.0.1:8080 create --harness chat --model gpt-4o-mini")]
    Create {
        /// Display name.
        #[arg(long, default_value = "")]
        name: String,
        /// Harness (empty: the server's default).
        #[arg(long, default_value = "")]
        harness: String,
        /// Model recorded on the session.
        #[arg(long, default_value = "")]
        model: String,
    },
    /// List every session of the project (or those the filters keep, as the console's
    /// `GET /api/v1/sessions` filters them).
    #[command(after_long_help = "Examples:\n  \
        agentctl list\n  \
        agentctl list --state awaiting\n  \
        agentctl list --harness chat --name notes\n  \
        agentctl --json list | jq -r .metadata.uid")]
    List {
        /// Page size for each request (0: the server's default; all pages are walked).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
        #[command(flatten)]
        filter: ListFilter,
    },
    /// Show one session.
    #[command(after_long_help = "Examples:\n  agentctl get --session sess-1")]
    Get {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Run one turn, streaming records as they commit.
    #[command(after_long_help = "Examples:\n  \
        agentctl exec what did I say          # the words are one message\n  \
        agentctl exec --session sess-1 \"and then?\"\n  \
        git diff | agentctl exec -             # the message from stdin\n  \
        agentctl exec --input first --input second   # two messages\n  \
        agentctl exec --session sess-1 --abandon \"start over\"   # close its unfinished turn")]
    Exec {
        /// Input text: the words are joined into one user message; `-` reads it from stdin.
        text: Vec<String>,
        /// One more user message (repeatable).
        #[arg(long)]
        input: Vec<String>,
        /// Session uid (empty: create one).
        #[arg(long, default_value = "")]
        session: String,
        /// Harness for this turn (empty: the session's).
        #[arg(long, default_value = "")]
        harness: String,
        /// Commit only if the session's last seq is this (optimistic concurrency).
        #[arg(long)]
        expected_last_seq: Option<i64>,
        /// When the session's last turn has not ended (interrupted, or waiting for an
        /// approval), close it first instead of being refused: its open tool calls are
        /// recorded as "outcome unknown, not retried" (or "not run") and it ends CANCELED.
        #[arg(long)]
        abandon: bool,
    },
    /// Print a session's stored records.
    #[command(after_long_help = "Examples:\n  \
        agentctl replay --session sess-1\n  \
        agentctl replay --session sess-1 --from 6 --to 9\n  \
        agentctl --json replay --session sess-1 | jq .event")]
    Replay {
        /// Session uid.
        #[arg(long)]
        session: String,
        #[command(flatten)]
        range: SeqRange,
    },
    /// Follow a session like `tail -f`: its records from --from on, then each one as it
    /// commits (on any host sharing the journal), until the session is deleted (or, with
    /// --until-end, until a turn ends).
    #[command(after_long_help = "Examples:\n  \
        agentctl --server 127.0.0.1:8080 watch --session sess-1\n  \
        agentctl --server 127.0.0.1:8080 watch --session sess-1 --from 12\n  \
        agentctl --server 127.0.0.1:8080 watch --session sess-1 --from 12 --until-end\n  \
        agentctl --json --server 127.0.0.1:8080 watch --session sess-1 | jq .event")]
    Watch {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// First seq to print.
        #[arg(long, default_value_t = 1)]
        from: i64,
        /// Stop (exit 0) after the first record at or after --from that ends a turn: its END,
        /// or the ERROR of a failed turn. `--from` the running turn's next seq follows that
        /// turn to its end.
        #[arg(long)]
        until_end: bool,
    },
    /// Fork a session into children that share its history.
    #[command(after_long_help = "Examples:\n  \
        agentctl fork --session sess-1 --at 5 --count 2 --names left,right")]
    Fork {
        /// Parent session uid.
        #[arg(long)]
        session: String,
        /// Seq to fork at (default: the head).
        #[arg(long)]
        at: Option<i64>,
        /// Number of children (1 to 128).
        #[arg(long, default_value_t = 1)]
        count: i32,
        /// Child names, comma separated (none, or one per child).
        #[arg(long, value_delimiter = ',')]
        names: Vec<String>,
    },
    /// Suspend a session's compute.
    #[command(after_long_help = "Examples:\n  agentctl suspend --session sess-1")]
    Suspend {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Resume a session (re-drives an interrupted or decided turn).
    #[command(after_long_help = "Examples:\n  agentctl resume --session sess-1")]
    Resume {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// List every tool call waiting for an approval decision that you may see.
    #[command(after_long_help = "Examples:\n  \
        agentctl approvals\n  \
        agentctl --json approvals | jq -r .session_uid")]
    Approvals {
        /// Page size for each request (0: the server's default; all pages are walked).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
    },
    /// Approve the pending tool call, then resume the session.
    #[command(after_long_help = "Examples:\n  \
        agentctl approve --session sess-1 --reason \"looks safe\"\n  \
        agentctl approve --session sess-1 --execution e1 --tool-call t1 --request-seq 7")]
    Approve(Decide),
    /// Deny the pending tool call, then resume the session.
    #[command(after_long_help = "Examples:\n  \
        agentctl deny --session sess-1 --reason \"not on production\"")]
    Deny(Decide),
    /// Stop a session's turn: one running, one waiting for an approval, or one interrupted
    /// (its open tool calls are recorded as outcome unknown, or not run, and it ends CANCELED).
    #[command(after_long_help = "Examples:\n  \
        agentctl cancel --session sess-1 --reason \"taking too long\"")]
    Cancel {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// The execution to stop (default: the session's unfinished one).
        #[arg(long, default_value = "")]
        execution: String,
        /// Why (recorded on the cancel record).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Mark a session for deletion; it accepts no further effects.
    #[command(after_long_help = "Examples:\n  agentctl delete --session sess-1")]
    Delete {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Recompute every hash and link of a session from its records.
    #[command(after_long_help = "Examples:\n  \
        agentctl verify --session sess-1\n  \
        agentctl --json verify --session sess-1")]
    Verify {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Draw a session's fork lineage.
    #[command(after_long_help = "Examples:\n  \
        agentctl tree --session sess-1\n  \
        agentctl --json tree --session sess-1")]
    Tree {
        /// Any session of the family.
        #[arg(long)]
        session: String,
    },
    /// Write a session's records to stdout: from the local journal, or with --server from
    /// what the server returns (ReadRecords), in the same formats.
    #[command(after_long_help = "Examples:\n  \
        agentctl export --session sess-1 > sess-1.json\n  \
        agentctl export --session sess-1 --format audit > audit.json\n  \
        agentctl --server 127.0.0.1:8080 export --session sess-1 --format audit > audit.json")]
    Export {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// `reference` (the reference implementation's JSON journal) or `audit` (proto3-JSON
        /// events for tools/verify_chain.py).
        #[arg(long, default_value = "reference", value_parser = ["reference", "audit"])]
        format: String,
    },
    /// Manage registered harnesses (the operator API: --server is the daemon's --registry-addr).
    #[command(after_long_help = "Examples:\n  \
        agentctl --server 127.0.0.1:8081 harness register --name remote --spec spec.json\n  \
        agentctl --server 127.0.0.1:8081 harness list")]
    Harness {
        #[command(subcommand)]
        op: HarnessOp,
    },
    /// Load a reference JSON journal into the local journal as a new session.
    #[command(after_long_help = "Examples:\n  \
        agentctl import sess-1.json\n  \
        agentctl import sess-1.json --copy   # a second copy of a session already imported")]
    Import {
        /// The JSON file.
        file: PathBuf,
        /// Session uid to create (default: a new uid).
        #[arg(long, default_value = "")]
        session: String,
        /// Import even when the journal already holds a session with the same chain.
        #[arg(long)]
        copy: bool,
    },
    /// Serve the web console over the local journal (embedded, like exec) and print its URL.
    #[command(after_long_help = "Examples:\n  \
        agentctl ui                          # http://127.0.0.1:7780/\n  \
        agentctl --journal agents.db ui --addr 127.0.0.1:0\n\n\
        It listens on a loopback address only and answers only to loopback host names; for a\n\
        console others can reach, start agentsessionsd with --http-addr.")]
    Ui {
        /// Address to listen on (a loopback address; port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:7780")]
        addr: String,
    },
    /// Print a shell completion script.
    #[command(after_long_help = "Examples:\n  \
        agentctl completions bash > ~/.local/share/bash-completion/completions/agentctl\n  \
        agentctl completions zsh > ~/.zfunc/_agentctl")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `list` filters: the fields of the console's `GET /api/v1/sessions` query, with the same
/// meaning (`agentsessions_client::SessionFilter`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ListFilter {
    /// Only sessions in this execution state: pending, running, awaiting, completed, failed,
    /// canceled or interrupted (any case; `EXEC_` optional).
    #[arg(long, default_value = "")]
    pub(crate) state: String,
    /// Only sessions of this harness.
    #[arg(long, default_value = "")]
    pub(crate) harness: String,
    /// Only sessions whose name or uid contains this text (any case).
    #[arg(long, default_value = "")]
    pub(crate) name: String,
    /// Only sessions whose owner has this subject.
    #[arg(long, default_value = "")]
    pub(crate) owner: String,
}

/// A range of seqs, both ends inclusive.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct SeqRange {
    /// First seq.
    #[arg(long, default_value_t = 1)]
    pub(crate) from: i64,
    /// Last seq (default: the head).
    #[arg(long)]
    pub(crate) to: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HarnessOp {
    /// Register a harness running elsewhere under a new name.
    Register {
        /// Name (an RFC 1123 label).
        #[arg(long)]
        name: String,
        /// File with the HarnessSpec as proto JSON, e.g.
        /// {"remote":{"address":"127.0.0.1:9000"},"capabilities":{"resumability":"RESUMABILITY_STATELESS_REPLAY"}}
        #[arg(long)]
        spec: PathBuf,
    },
    /// Show one harness.
    Get {
        /// Name.
        #[arg(long)]
        name: String,
        /// Also ask the harness to describe itself.
        #[arg(long)]
        observe: bool,
    },
    /// List harnesses (all pages).
    List {
        /// Include retired registrations.
        #[arg(long)]
        include_retired: bool,
        /// Page size per request (0: the server's default; at most 500).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        page_size: i32,
    },
    /// Retire a registration: new sessions cannot select it, existing ones keep it.
    Retire {
        /// Name.
        #[arg(long)]
        name: String,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct Decide {
    /// Session uid.
    #[arg(long)]
    pub(crate) session: String,
    /// Execution of the request (default: the pending approval's, as for --tool-call and
    /// --request-seq; name all three to decide another request).
    #[arg(long)]
    pub(crate) execution: Option<String>,
    /// Tool call of the request.
    #[arg(long)]
    pub(crate) tool_call: Option<String>,
    /// Seq of the APPROVAL_REQUEST.
    #[arg(long)]
    pub(crate) request_seq: Option<i64>,
    /// Why.
    #[arg(long, default_value = "")]
    pub(crate) reason: String,
    /// Who decides (recorded on the decision).
    #[arg(long, default_value = "")]
    pub(crate) actor: String,
    /// Issuer of the decider's identity.
    #[arg(long, default_value = "")]
    pub(crate) identity_issuer: String,
    /// Subject of the decider's identity.
    #[arg(long, default_value = "")]
    pub(crate) identity_subject: String,
}

impl Cli {
    /// Whether the command only reads the journal: a read-only journal file will do, and a
    /// missing one is refused, never created.
    pub(crate) fn only_reads(&self) -> bool {
        matches!(
            self.command,
            Command::List { .. }
                | Command::Watch { .. }
                | Command::Approvals { .. }
                | Command::Get { .. }
                | Command::Replay { .. }
                | Command::Verify { .. }
                | Command::Tree { .. }
                | Command::Export { .. }
        )
    }
}

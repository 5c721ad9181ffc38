//! A session's records: replay and verify them through the Sessions API, export them from and
//! import them into the local journal.

use std::io::Write as _;
use std::path::Path;

use agentsessions_cli::output::{record_json, record_line};
use agentsessions_client::{Client, decode, verify as verify_chain};
use agentsessions_journal::export::{
    JsonFormat, export_reference_json, import_reference_json, load_records,
};
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{Journal, JournalError, ListQuery, audit};
use serde::Serialize;

use crate::args::SeqRange;
use crate::error::CliError;
use crate::out::Out;

/// Records appended per step of an import; progress is reported after each.
const IMPORT_STEP: usize = 1_000;

impl SeqRange {
    /// The range as the API takes it (`to` 0: the head), refusing empty and inverted ranges.
    pub(crate) fn checked(self) -> Result<(i64, i64), CliError> {
        if self.from < 1 {
            return Err(CliError::Usage(format!(
                "--from {}: seqs start at 1",
                self.from
            )));
        }
        match self.to {
            None => Ok((self.from, 0)),
            Some(to) if to < self.from => Err(CliError::Usage(format!(
                "--from {} --to {to} is an empty range: --to must not be below --from",
                self.from
            ))),
            Some(to) => Ok((self.from, to)),
        }
    }
}

/// Fails with [`CliError::SessionNotFound`] unless the server knows `uid`.
async fn known(client: &mut Client, uid: &str, place: &str) -> Result<(), CliError> {
    match client.get(uid).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == tonic::Code::NotFound => Err(CliError::SessionNotFound {
            session: uid.to_owned(),
            place: place.to_owned(),
        }),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn replay(
    client: &mut Client,
    out: &mut Out,
    place: &str,
    uid: &str,
    range: SeqRange,
) -> Result<(), CliError> {
    let (from, to) = range.checked()?;
    let records = client.read_records(uid, from, to).await?;
    if records.is_empty() {
        known(client, uid, place).await?;
    }
    for record in &records {
        out.either(&record_json(record), || record_line(record))?;
    }
    Ok(())
}

/// `verify --json`.
#[derive(Serialize)]
struct Verified<'a> {
    session: &'a str,
    records: usize,
    head_hash: &'a str,
}

pub(crate) async fn verify(
    client: &mut Client,
    out: &mut Out,
    place: &str,
    uid: &str,
) -> Result<(), CliError> {
    let records = client.read_records(uid, 0, 0).await?;
    if records.is_empty() {
        // A session that exists with no records has an empty chain, and it verifies.
        known(client, uid, place).await?;
    }
    let summary = verify_chain(&records)?;
    let verified = Verified {
        session: uid,
        records: summary.records,
        head_hash: &summary.head_hash,
    };
    out.either(&verified, || {
        if summary.records == 0 {
            format!("verified 0 records of {uid}: the chain is empty")
        } else {
            format!(
                "verified {} records of {uid}: every hash and link checks out (head {})",
                summary.records, summary.head_hash
            )
        }
    })
}

/// `export --server`: the same bundle [`export`] writes from the local journal, built from what
/// the server returns (the records through ReadRecords, GetSession to tell a session with no
/// records from one that does not exist).
pub(crate) async fn export_from_server(
    client: &mut Client,
    out: &mut Out,
    place: &str,
    uid: &str,
    format: &str,
) -> Result<(), CliError> {
    let records = client.read_records(uid, 1, 0).await?;
    if records.is_empty() {
        known(client, uid, place).await?;
        return Err(CliError::NoRecords {
            session: uid.to_owned(),
            place: place.to_owned(),
        });
    }
    let records = decode(&records)?;
    out.partial(&bundle(uid, &records, format)?)
}

/// `records` of `uid` in the export `format`: `audit` or `reference`.
fn bundle(
    uid: &str,
    records: &[agentsessions_journal::LogRecord],
    format: &str,
) -> Result<String, CliError> {
    Ok(if format == "audit" {
        audit::audit_json(uid, records)?
    } else {
        export_reference_json(records, JsonFormat::V030)?
    })
}

pub(crate) async fn export(
    journal: &dyn Journal,
    out: &mut Out,
    place: &str,
    uid: &str,
    format: &str,
) -> Result<(), CliError> {
    let records = journal.read(uid, 1, 0).await?;
    if records.is_empty() {
        return Err(match journal.session_info(uid).await {
            Err(JournalError::SessionNotFound(_)) => CliError::SessionNotFound {
                session: uid.to_owned(),
                place: place.to_owned(),
            },
            Err(e) => e.into(),
            Ok(_) => CliError::NoRecords {
                session: uid.to_owned(),
                place: place.to_owned(),
            },
        });
    }
    out.partial(&bundle(uid, &records, format)?)
}

/// `import --json`.
#[derive(Serialize)]
struct Imported<'a> {
    session: &'a str,
    records: usize,
}

pub(crate) async fn import(
    journal: &dyn Journal,
    out: &mut Out,
    file: &Path,
    session: &str,
    copy: bool,
) -> Result<(), CliError> {
    let text = std::fs::read_to_string(file).map_err(|source| CliError::ReadFile {
        path: file.display().to_string(),
        source,
    })?;
    let imported = import_reference_json(&text)?;
    let records = imported.records;
    let uid = if session.is_empty() {
        new_session_uid()
    } else {
        session.to_owned()
    };
    if journal.head(&uid).await? > 0 {
        return Err(CliError::SessionExists { session: uid });
    }
    if !copy && let Some(existing) = holder_of_chain(journal, &records).await? {
        return Err(CliError::AlreadyImported {
            file: file.display().to_string(),
            existing,
        });
    }
    let total = records.len();
    let mut stderr = std::io::stderr();
    let _ignored = writeln!(
        stderr,
        "agentctl: importing {total} records from {} into {uid}",
        file.display()
    );
    let mut done = 0;
    for chunk in records.chunks(IMPORT_STEP) {
        load_records(journal, &uid, chunk).await?;
        done += chunk.len();
        let _ignored = writeln!(stderr, "agentctl: imported {done}/{total} records");
    }
    let summary = Imported {
        session: &uid,
        records: total,
    };
    out.either(&summary, || format!("imported {total} records into {uid}"))
}

/// A session of the default project whose record at the file's last seq has the file's last
/// hash: it holds the same chain (hashes cover every record before them, not the session uid).
async fn holder_of_chain(
    journal: &dyn Journal,
    records: &[agentsessions_journal::LogRecord],
) -> Result<Option<String>, CliError> {
    let Some(last) = records.last() else {
        return Ok(None);
    };
    let mut page_token = String::new();
    loop {
        let page = journal
            .list_sessions(ListQuery {
                page_token,
                ..ListQuery::default()
            })
            .await?;
        for info in &page.sessions {
            if info.last_seq < last.seq {
                continue;
            }
            let uid = &info.row.uid;
            let at = journal.read(uid, last.seq, last.seq).await?;
            if at.first().is_some_and(|r| r.hash == last.hash) {
                return Ok(Some(uid.clone()));
            }
        }
        if page.next_page_token.is_empty() {
            return Ok(None);
        }
        page_token = page.next_page_token;
    }
}

//! Import and export of journals in the reference JSON format.
//!
//! The reference implementation keeps test journals as JSON files: `json.MarshalIndent(records,
//! "", "  ")` of a slice of its `eventlog.Record {Seq, PrevHash, Hash, Fence, Event}`, followed by
//! a newline. The event inside is Go's `encoding/json` form of its domain `Event`, which this
//! crate reads and writes through [`agentsessions_wire::gojson`].
//!
//! The Go structs gained fields over time, so files from different writers differ in which keys
//! they carry. [`JsonFormat`] names the layouts seen in the published journals:
//!
//! | format | written by | differs in |
//! | --- | --- | --- |
//! | [`JsonFormat::V012`] | the tagged v0.1.2 release | no `ExecutionStart` key on events |
//! | [`JsonFormat::V012ExecutionStart`] | the binary that upgraded them (`upgraded-resume`, `mixed-*`) | `ExecutionStart` is `{Config, ResumeFromSeq, InputCount}` |
//! | [`JsonFormat::V030`] | v0.3.0 | every field of the v0.3.0 structs |
//!
//! [`import_reference_json`] reports the oldest format that has every key the file uses, and
//! [`export_reference_json`] in that format reproduces a file a Go writer produced byte for byte.
//! Exporting in an older format refuses a record that format has no room for (an execution start
//! in v0.1.2, a receipt code before v0.3.0 …) instead of dropping the value.
//!
//! Neither direction checks the chain: hashes are carried as they are. Verify imported records
//! with the journal's chain verifier before trusting them.
//!
//! Domain values have no "empty but not nil" for most collections, so an empty list, map or byte
//! string is exported as Go's `null`; a file that wrote `[]` or `{}` there (no Go writer of these
//! types does) imports fine but exports differently.

use std::fmt::Write as _;

use agentsessions_api::Event;
use agentsessions_wire::WireError;
use agentsessions_wire::gojson::{
    GoValue, check_struct, decode_array, decode_event, decode_int64, decode_string, indent,
    write_event, write_string,
};

use crate::error::JournalError;
use crate::journal::Journal;
use crate::record::LogRecord;

use crate::LogExt as _;
/// A layout of the reference JSON journal; see the [module documentation](self).
pub use agentsessions_wire::gojson::GoShape as JsonFormat;

/// What [`import_reference_json`] read: the records in file order and the format the file is in.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedJournal {
    /// The records, in file order, with their stored hashes and fences.
    pub records: Vec<LogRecord>,
    /// The oldest format with every key the file uses; exporting the records in it gives back
    /// the same file when a Go writer produced it. An empty file reads as [`JsonFormat::V012`].
    pub format: JsonFormat,
}

/// Why a reference JSON journal could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The text is not a reference journal: not JSON (the reason gives line and column), or a
    /// value that does not decode into the Go type expected where it sits.
    #[error("invalid reference journal{}: {reason}", location(.path))]
    Invalid {
        /// Where, e.g. `[2].Seq` or `[4].Event.Message.Parts[0].File.Bytes`; empty for the
        /// document as a whole.
        path: String,
        /// What is wrong there.
        reason: String,
    },

    /// A record holds a value the requested format has no field for.
    #[error("record seq {seq}: {path} cannot be written in the {format} json format")]
    Unrepresentable {
        /// The record's seq.
        seq: i64,
        /// The field, e.g. `Event.ExecutionStart` or `Event.Result.Code`.
        path: String,
        /// The format asked for.
        format: JsonFormat,
    },

    /// A record holds a value Go's encoder cannot write at all (a timestamp outside years
    /// 0..=9999).
    #[error("record seq {seq}: {source}")]
    Encode {
        /// The record's seq.
        seq: i64,
        /// What the encoder refused.
        source: WireError,
    },
}

/// Renders a path for [`ExportError::Invalid`]: ` at <path>`, or nothing for the whole document.
fn location(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

impl ExportError {
    /// The import error for a decoding failure.
    fn invalid(error: WireError) -> Self {
        match error {
            WireError::GoJson { path, reason } => Self::Invalid { path, reason },
            // The decoders report nothing else; keep whatever it says rather than guess.
            other => Self::Invalid {
                path: String::new(),
                reason: other.to_string(),
            },
        }
    }
}

/// Reads a reference JSON journal: a JSON array of `eventlog.Record` objects, pretty-printed or
/// not.
///
/// Decoding follows Go's `json.Unmarshal`: missing keys read as zero values, unknown keys are
/// ignored, `null` records and events read as zero values, and types are checked.
///
/// # Errors
///
/// [`ExportError::Invalid`] naming the line and column of a syntax error, or the path of a value
/// of the wrong type (`[1].Seq: expected an int64, found a string`).
pub fn import_reference_json(text: &str) -> Result<ImportedJournal, ExportError> {
    let document = GoValue::parse(text).map_err(ExportError::invalid)?;
    let items = decode_array(&document).map_err(ExportError::invalid)?;
    let mut format = JsonFormat::V012;
    let records = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            import_record(item, &mut format)
                .map_err(|e| ExportError::invalid(e.within(&format!("[{i}]"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ImportedJournal { records, format })
}

fn import_record(value: &GoValue, format: &mut JsonFormat) -> Result<LogRecord, WireError> {
    check_struct(value)?;
    let int = |name: &str| {
        value
            .field(name)
            .map_or(Ok(0), |v| decode_int64(v).map_err(|e| e.within(name)))
    };
    let string = |name: &str| {
        value.field(name).map_or(Ok(String::new()), |v| {
            decode_string(v).map_err(|e| e.within(name))
        })
    };
    let event = match value.field("Event") {
        Some(v) => decode_event(v, format).map_err(|e| e.within("Event"))?,
        None => Event::default(),
    };
    Ok(LogRecord {
        committed_at: None,
        seq: int("Seq")?,
        prev_hash: string("PrevHash")?,
        hash: string("Hash")?,
        fence: int("Fence")?,
        event,
    })
}

/// Writes records as a reference JSON journal in `format`: what Go's
/// `json.MarshalIndent(records, "", "  ")` writes, plus a trailing newline. No records give
/// `[]` and a newline.
///
/// # Errors
///
/// - [`ExportError::Unrepresentable`] for the first record holding something `format` has no
///   field for, naming its seq and the field.
/// - [`ExportError::Encode`] for a record whose timestamp Go cannot write.
pub fn export_reference_json(
    records: &[LogRecord],
    format: JsonFormat,
) -> Result<String, ExportError> {
    let mut compact = String::from("[");
    for (i, record) in records.iter().enumerate() {
        if i > 0 {
            compact.push(',');
        }
        // Writing into a String cannot fail.
        let _ = write!(compact, "{{\"Seq\":{},\"PrevHash\":", record.seq);
        write_string(&mut compact, &record.prev_hash);
        compact.push_str(",\"Hash\":");
        write_string(&mut compact, &record.hash);
        let _ = write!(compact, ",\"Fence\":{},\"Event\":", record.fence);
        write_event(&mut compact, &record.event, format).map_err(|e| match e {
            WireError::GoShape { path, .. } => ExportError::Unrepresentable {
                seq: record.seq,
                path: format!("Event.{path}"),
                format,
            },
            other => ExportError::Encode {
                seq: record.seq,
                source: other,
            },
        })?;
        compact.push('}');
    }
    compact.push(']');
    let mut out = indent(&compact);
    out.push('\n');
    Ok(out)
}

/// The most a loaded record may raise a session's fence by: writers take fences one at a time,
/// so a real journal's fences grow by a handful between records.
pub const MAX_FENCE_RAISE: i64 = 100_000;

/// Loads imported records into `session` of `journal` the way the reference loader does: for
/// each record the session's fence is raised until it reaches the record's fence, then the event
/// is appended at `seq - 1` with that fence, and the committed record must equal the imported one
/// (same seq, prev_hash, hash, fence and event). So a successful load proves this writer
/// reproduces every imported hash.
///
/// # Errors
/// [`JournalError::ImportMismatch`] when a record is not reproduced (nothing after it is
/// written) or would raise the fence by more than [`MAX_FENCE_RAISE`], and any append error (a non-empty target session is a CAS conflict).
pub async fn load_records(
    journal: &dyn Journal,
    session: &str,
    records: &[LogRecord],
) -> Result<(), JournalError> {
    let mut fence = journal
        .session_info(session)
        .await
        .map(|info| info.fence)
        .or_else(|e| match e {
            JournalError::SessionNotFound(_) => Ok(0),
            other => Err(other),
        })?;
    for record in records {
        // Each raise is a commit: a file claiming an absurd fence would hold the loader (and
        // the journal's writer) for ever.
        if record.fence.saturating_sub(fence) > MAX_FENCE_RAISE {
            return Err(JournalError::ImportMismatch {
                seq: record.seq,
                reason: format!(
                    "fence {} is more than {MAX_FENCE_RAISE} above the session's fence {fence}",
                    record.fence
                ),
            });
        }
        while fence < record.fence {
            fence = journal.new_fence(session).await?;
        }
        let Some(expected_last_seq) = record.seq.checked_sub(1) else {
            return Err(JournalError::ImportMismatch {
                seq: record.seq,
                reason: "seq is not a record's seq".to_owned(),
            });
        };
        let committed = journal
            .append_one(
                session,
                expected_last_seq,
                record.fence,
                record.event.clone(),
            )
            .await?;
        if &committed != record {
            let reason = if committed.seq != record.seq {
                format!("committed at seq {}", committed.seq)
            } else if committed.prev_hash != record.prev_hash {
                "prev_hash differs".to_owned()
            } else {
                format!("hash {} differs from {}", committed.hash, record.hash)
            };
            return Err(JournalError::ImportMismatch {
                seq: record.seq,
                reason,
            });
        }
    }
    Ok(())
}

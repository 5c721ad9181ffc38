//! How `agentctl exec` and `agentctl watch` show a running tool's progress (extensions §11):
//! `time__slow: 2/4 — step 2` as text, `{"progress": {..}}` as a JSON line. Progress is transport
//! only, so it is shown as it comes and never kept.

use agentsessions_wire::pb;
use serde::Serialize;

/// One progress report as a `--json` line.
#[derive(Serialize)]
pub(crate) struct ProgressLine<'a> {
    progress: ProgressJson<'a>,
}

#[derive(Serialize)]
struct ProgressJson<'a> {
    execution_id: &'a str,
    tool_call_id: &'a str,
    tool: &'a str,
    progress: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<f64>,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
}

/// `progress` as a `--json` line.
pub(crate) fn progress_json(progress: &pb::ToolProgress) -> ProgressLine<'_> {
    ProgressLine {
        progress: ProgressJson {
            execution_id: &progress.execution_id,
            tool_call_id: &progress.tool_call_id,
            tool: &progress.tool,
            progress: progress.progress,
            total: progress.total,
            message: &progress.message,
        },
    }
}

/// `progress` as a text line: the tool, how far (out of the total when known), and what it says.
pub(crate) fn progress_line(progress: &pb::ToolProgress) -> String {
    let done = number(progress.progress);
    let counted = match progress.total {
        Some(total) => format!("{done}/{}", number(total)),
        None => done,
    };
    if progress.message.is_empty() {
        format!("{}: {counted}", progress.tool)
    } else {
        format!("{}: {counted} — {}", progress.tool, progress.message)
    }
}

/// A count without a trailing `.0`; a fraction as it is.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(progress: f64, total: Option<f64>, message: &str) -> pb::ToolProgress {
        pb::ToolProgress {
            tool: "time__slow".into(),
            progress,
            total,
            message: message.into(),
            ..pb::ToolProgress::default()
        }
    }

    // extensions §11: how a person reads a tool's progress.
    #[test]
    fn a_progress_line_says_the_tool_how_far_and_what_it_says() {
        assert_eq!(
            progress_line(&report(2.0, Some(4.0), "step 2")),
            "time__slow: 2/4 — step 2"
        );
        assert_eq!(progress_line(&report(3.0, None, "")), "time__slow: 3");
        assert_eq!(
            progress_line(&report(0.5, Some(1.0), "")),
            "time__slow: 0.5/1"
        );
    }
}

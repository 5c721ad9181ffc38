//! The two text formats `GET /metrics` answers in, and which one a scraper gets.
//!
//! The registry writes OpenMetrics 1.0. The Prometheus text format 0.0.4 is the default, and
//! the answer to `Accept: text/plain`, because it is what `promtool check metrics` and older
//! scrapers read: OpenMetrics names a counter's family without its `_total` suffix, adds
//! `# UNIT` lines and ends with `# EOF`, and read as 0.0.4 that leaves every counter without
//! help text. OpenMetrics is served when the `Accept` header prefers it (Prometheus asks for it
//! first).

/// A text exposition format of the metrics registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// The Prometheus text format, version 0.0.4.
    PrometheusText,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

const PROMETHEUS_TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Exposition {
    /// The format to answer a request carrying `accept` (its `Accept` header, if any) in:
    /// OpenMetrics when `application/openmetrics-text` has a quality above zero and at least that
    /// of every range that admits the Prometheus text format (`text/plain`, `text/*`, `*/*`);
    /// otherwise, and when the header is absent or unreadable, the Prometheus text format.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Self::PrometheusText;
        };
        let mut openmetrics = 0.0_f32;
        let mut text = 0.0_f32;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let quality = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
                "text/plain" | "text/*" | "*/*" => text = text.max(quality),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Self::OpenMetrics
        } else {
            Self::PrometheusText
        }
    }

    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::PrometheusText => PROMETHEUS_TEXT_TYPE,
            Self::OpenMetrics => OPENMETRICS_TYPE,
        }
    }
}

/// Rewrites an OpenMetrics exposition, as this registry writes it, in the Prometheus text format
/// 0.0.4: a counter's `# HELP`/`# TYPE` name its samples (`_total` added), `unknown` becomes
/// `untyped`, and the `# UNIT` and `# EOF` lines go. Sample lines are the same in both formats
/// for the metric types the registry holds (counters without exemplars or `_created`, gauges,
/// histograms).
pub(crate) fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's HELP line comes before its TYPE line, which says whether the name changes.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut out, help.take(), None);
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), kind),
                "unknown" => (name.to_owned(), "untyped"),
                _ => (name.to_owned(), kind),
            };
            flush_help(&mut out, help.take(), Some(&name));
            out.push_str("# TYPE ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            // Neither exists in the 0.0.4 format.
        } else {
            flush_help(&mut out, help.take(), None);
            out.push_str(line);
            out.push('\n');
        }
    }
    flush_help(&mut out, help, None);
    out
}

/// Writes a held HELP line, under `renamed` when its family's TYPE renamed it.
fn flush_help(out: &mut String, help: Option<(&str, &str)>, renamed: Option<&str>) {
    if let Some((name, text)) = help {
        out.push_str("# HELP ");
        out.push_str(renamed.unwrap_or(name));
        out.push(' ');
        out.push_str(text);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prometheus_text_format_is_the_default() {
        assert_eq!(Exposition::negotiate(None), Exposition::PrometheusText);
        assert_eq!(Exposition::negotiate(Some("")), Exposition::PrometheusText);
        assert_eq!(
            Exposition::negotiate(Some("*/*")),
            Exposition::PrometheusText
        );
        assert_eq!(
            Exposition::negotiate(Some("application/json")),
            Exposition::PrometheusText,
            "a format this endpoint does not write gets the default"
        );
    }

    #[test]
    fn text_plain_gets_the_prometheus_text_format() {
        for accept in [
            "text/plain",
            "text/plain; version=0.0.4",
            "TEXT/PLAIN;version=0.0.4;q=1",
            "text/plain;q=0.9, application/openmetrics-text;q=0.5",
            "application/openmetrics-text;q=0",
            "application/openmetrics-text;q=0.2, */*;q=0.3",
        ] {
            assert_eq!(
                Exposition::negotiate(Some(accept)),
                Exposition::PrometheusText,
                "{accept}"
            );
        }
    }

    #[test]
    fn openmetrics_when_asked() {
        for accept in [
            "application/openmetrics-text",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            // What Prometheus itself sends.
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;\
             version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            "application/openmetrics-text, text/plain",
        ] {
            assert_eq!(
                Exposition::negotiate(Some(accept)),
                Exposition::OpenMetrics,
                "{accept}"
            );
        }
    }

    #[test]
    fn each_format_names_its_content_type() {
        assert!(
            Exposition::PrometheusText
                .content_type()
                .starts_with("text/plain; version=0.0.4")
        );
        assert!(
            Exposition::OpenMetrics
                .content_type()
                .starts_with("application/openmetrics-text; version=1.0.0")
        );
    }

    #[test]
    fn counters_are_named_by_their_samples_and_openmetrics_lines_go() {
        let openmetrics = "\
# HELP app_turns Turns run.
# TYPE app_turns counter
app_turns_total{outcome=\"ok\"} 2
# HELP app_duration_seconds Latency.
# TYPE app_duration_seconds histogram
# UNIT app_duration_seconds seconds
app_duration_seconds_sum 0.5
app_duration_seconds_count 1
app_duration_seconds_bucket{le=\"+Inf\"} 1
# HELP app_pending Pending.
# TYPE app_pending gauge
app_pending 3
# HELP app_odd Odd.
# TYPE app_odd unknown
app_odd 1
# EOF
";
        assert_eq!(
            prometheus_text(openmetrics),
            "\
# HELP app_turns_total Turns run.
# TYPE app_turns_total counter
app_turns_total{outcome=\"ok\"} 2
# HELP app_duration_seconds Latency.
# TYPE app_duration_seconds histogram
app_duration_seconds_sum 0.5
app_duration_seconds_count 1
app_duration_seconds_bucket{le=\"+Inf\"} 1
# HELP app_pending Pending.
# TYPE app_pending gauge
app_pending 3
# HELP app_odd Odd.
# TYPE app_odd untyped
app_odd 1
"
        );
    }
}

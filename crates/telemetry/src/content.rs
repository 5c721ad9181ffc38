//! Whether prompt and completion content may be put on spans. Content is sensitive and large, so
//! it is off unless the operator turns it on (`capture_content` in `[telemetry]`, or
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`); set once at startup.

use std::sync::atomic::{AtomicBool, Ordering};

static CAPTURE: AtomicBool = AtomicBool::new(false);

/// Turns content capture on or off for the whole process.
pub fn set_capture_content(on: bool) {
    CAPTURE.store(on, Ordering::Relaxed);
}

/// Whether spans may carry prompt and completion content.
pub fn capture_content() -> bool {
    CAPTURE.load(Ordering::Relaxed)
}

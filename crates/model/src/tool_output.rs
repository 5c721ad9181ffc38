//! What a model reads of a tool result (extensions §10), before a dialect puts it in its own form:
//! a sequence of text and images in content order. Both HTTP dialects read a result through
//! [`pieces`]; only the wrapping differs (an OpenAI `tool` message plus a user message carrying
//! the images, an Anthropic `tool_result` holding `text` and `image` blocks).
//!
//! The journal keeps the result as the tool gave it (an MCP server's blocks as `text`, `file` and
//! `data` parts, annotations included); everything here is a reading of it, so changing it changes
//! no record and no model-input hash.

use std::borrow::Cow;

use agentsessions_api::{FilePart, JsonObject, Part, ToolResult};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// The image types both dialects send as images; any other is described in text.
pub(crate) const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The largest image sent to a model (the smaller of the two vendors' per-image limits); a larger
/// one is described in text.
pub(crate) const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// How much of an embedded text resource is inlined; the rest is cut, saying so.
pub(crate) const MAX_RESOURCE_TEXT_BYTES: usize = 32 * 1024;

/// One piece of what the model reads: text, or an image it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Text; consecutive texts are already joined by a newline.
    Text(String),
    /// An image of one of [`IMAGE_TYPES`], at most [`MAX_IMAGE_BYTES`].
    Image(Image<'a>),
}

/// An image to show the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image<'a> {
    /// Its MIME type, one of [`IMAGE_TYPES`].
    pub(crate) mime: String,
    /// Its bytes.
    pub(crate) bytes: Cow<'a, [u8]>,
}

impl Image<'_> {
    /// The bytes as standard base64.
    pub(crate) fn base64(&self) -> String {
        STANDARD.encode(&self.bytes)
    }

    /// What the model reads in place of the image where it cannot be inline (an OpenAI `tool`
    /// message): which image of the call it is, and where it went.
    pub(crate) fn stand_in(&self, number: usize) -> String {
        format!(
            "[image {number}: {}, {} bytes, in the next user message]",
            self.mime,
            self.bytes.len()
        )
    }
}

/// What the model reads of `result` (extensions §10): its content in order, each part as the
/// table there says; its structured output as JSON text when the content has no text; its error
/// text first, once (left out when the content's text already says it). Images are kept only
/// when `images` is true (the model takes them); otherwise each is described in text.
pub(crate) fn pieces(result: &ToolResult, images: bool) -> Vec<Piece<'_>> {
    let mut reader = Reader {
        images,
        pieces: Vec::new(),
        content_text: Vec::new(),
    };
    for part in &result.content {
        reader.part(part);
    }
    if reader.content_text.is_empty() {
        if let Some(output) = &result.output {
            reader.text(Value::Object(output.clone()).to_string());
        } else if !result.output_uri.is_empty() {
            reader.text(format!(
                "[structured output at {}: not shown]",
                result.output_uri
            ));
        }
    }
    if result.is_error && !result.error.is_empty() && reader.content_text.join("\n") != result.error
    {
        reader.pieces.insert(0, Piece::Text(result.error.clone()));
    }
    merge_texts(reader.pieces)
}

/// The text of `pieces` with each image replaced by its stand-in, and the images in order.
pub(crate) fn text_and_images<'p, 'a>(pieces: &'p [Piece<'a>]) -> (String, Vec<&'p Image<'a>>) {
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => texts.push(Cow::Borrowed(text.as_str())),
            Piece::Image(image) => {
                images.push(image);
                texts.push(Cow::Owned(image.stand_in(images.len())));
            }
        }
    }
    (texts.join("\n"), images)
}

struct Reader<'a> {
    images: bool,
    pieces: Vec<Piece<'a>>,
    /// The text the tool's own text parts said, for the "error once" and "output when no text"
    /// rules.
    content_text: Vec<String>,
}

impl<'a> Reader<'a> {
    fn text(&mut self, text: String) {
        if !text.is_empty() {
            self.pieces.push(Piece::Text(text));
        }
    }

    fn content_text(&mut self, text: &str) {
        if !text.is_empty() {
            self.content_text.push(text.to_owned());
            self.pieces.push(Piece::Text(text.to_owned()));
        }
    }

    fn part(&mut self, part: &'a Part) {
        match part {
            Part::Text(text) => self.content_text(&text.text),
            Part::File(file) if file.mime.starts_with("image/") && !file.bytes.is_empty() => {
                self.image(&file.mime, Cow::Borrowed(&file.bytes));
            }
            Part::File(file) => self.text(file_stand_in(file)),
            Part::Data(data) => self.data(data),
            // Nothing a tool result's content should hold; a model is not shown them.
            Part::Reasoning(_) | Part::ToolCall(_) | Part::ToolResult(_) | Part::Empty => {}
        }
    }

    fn image(&mut self, mime: &str, bytes: Cow<'a, [u8]>) {
        let why_not = if !self.images {
            Some("this model takes text only".to_owned())
        } else if !IMAGE_TYPES.contains(&mime) {
            Some("the model takes png, jpeg, gif and webp images".to_owned())
        } else if bytes.len() > MAX_IMAGE_BYTES {
            Some(format!("larger than {MAX_IMAGE_BYTES} bytes"))
        } else {
            None
        };
        match why_not {
            Some(why) => self.text(format!(
                "[image {mime}, {} bytes: not shown, {why}]",
                bytes.len()
            )),
            None => self.pieces.push(Piece::Image(Image {
                mime: mime.to_owned(),
                bytes,
            })),
        }
    }

    /// A data part: an MCP content block kept whole (a resource, a link, or a block with
    /// annotations), read by its `type`; any other object as its JSON.
    fn data(&mut self, data: &JsonObject) {
        let field = |name: &str| data.get(name).and_then(Value::as_str);
        match field("type") {
            Some("text") if field("text").is_some() => {
                self.content_text(field("text").unwrap_or_default());
            }
            Some("image") if field("data").is_some() => {
                let mime = field("mimeType").unwrap_or_default();
                match STANDARD.decode(field("data").unwrap_or_default()) {
                    Ok(bytes) => self.image(mime, Cow::Owned(bytes)),
                    Err(_) => self.text(format!(
                        "[image {mime}: not shown, its data is not valid base64]"
                    )),
                }
            }
            Some("audio") if field("data").is_some() => self.text(format!(
                "[audio {}, {} bytes: not shown]",
                field("mimeType").unwrap_or_default(),
                base64_len(field("data").unwrap_or_default())
            )),
            Some("resource_link") if field("uri").is_some() => self.text(format!(
                "resource link {:?}: {} ({})",
                field("name").unwrap_or_default(),
                field("uri").unwrap_or_default(),
                field("mimeType").unwrap_or("MIME type not given")
            )),
            Some("resource") if data.get("resource").is_some_and(Value::is_object) => {
                if let Some(Value::Object(resource)) = data.get("resource") {
                    self.text(resource_text(resource));
                }
            }
            _ => self.text(Value::Object(data.clone()).to_string()),
        }
    }
}

/// An embedded resource: its text inlined up to [`MAX_RESOURCE_TEXT_BYTES`], or, for a binary
/// one, its MIME type and size.
fn resource_text(resource: &JsonObject) -> String {
    let field = |name: &str| resource.get(name).and_then(Value::as_str);
    let uri = field("uri").unwrap_or_default();
    let mime = field("mimeType").unwrap_or("MIME type not given");
    if let Some(text) = field("text") {
        if text.len() <= MAX_RESOURCE_TEXT_BYTES {
            return format!("resource {uri} ({mime}):\n{text}");
        }
        let mut end = MAX_RESOURCE_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return format!(
            "resource {uri} ({mime}):\n{}\n[truncated: {end} of {} bytes shown]",
            &text[..end],
            text.len()
        );
    }
    let size = field("blob").map_or(0, base64_len);
    format!("[resource {uri} ({mime}), {size} bytes: binary, not shown]")
}

/// A file that is not an image to show: what it is, never its bytes.
fn file_stand_in(file: &FilePart) -> String {
    let mut text = String::from("[file");
    if !file.name.is_empty() {
        text.push_str(&format!(" {:?}", file.name));
    }
    if !file.mime.is_empty() {
        text.push_str(&format!(" {}", file.mime));
    }
    if file.bytes.is_empty() && !file.uri.is_empty() {
        text.push_str(&format!(" at {}", file.uri));
    } else {
        text.push_str(&format!(", {} bytes", file.bytes.len()));
    }
    text.push_str(": not shown]");
    text
}

/// The decoded size of standard base64 text, without decoding it.
fn base64_len(text: &str) -> usize {
    let text = text.trim_end();
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4 * 3 + [0, 0, 1, 2][text.len() % 4]).saturating_sub(padding)
}

/// Joins runs of text pieces with a newline, so parts never run into each other.
fn merge_texts(pieces: Vec<Piece<'_>>) -> Vec<Piece<'_>> {
    let mut merged: Vec<Piece<'_>> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match (merged.last_mut(), piece) {
            (Some(Piece::Text(before)), Piece::Text(text)) => {
                before.push('\n');
                before.push_str(&text);
            }
            (_, piece) => merged.push(piece),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use agentsessions_api::TextPart;
    use serde_json::json;

    use super::*;

    fn text(text: &str) -> Part {
        Part::Text(TextPart { text: text.into() })
    }

    fn png(bytes: &[u8]) -> Part {
        Part::File(FilePart {
            mime: "image/png".into(),
            bytes: bytes.to_vec(),
            ..FilePart::default()
        })
    }

    fn data(value: Value) -> Part {
        Part::Data(value.as_object().cloned().unwrap())
    }

    fn result(content: Vec<Part>) -> ToolResult {
        ToolResult {
            id: "c".into(),
            content,
            ..ToolResult::default()
        }
    }

    fn texts(pieces: &[Piece<'_>]) -> Vec<String> {
        pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Image(image) => format!("<{} {}>", image.mime, image.bytes.len()),
            })
            .collect()
    }

    // extensions §10: parts keep their order, texts are separated, an image stays an image.
    #[test]
    fn text_and_images_keep_their_order_with_separators() {
        let result = result(vec![
            text("Here's the image you requested:"),
            png(b"png!"),
            text("The image above"),
            text("is the MCP logo."),
        ]);
        assert_eq!(
            texts(&pieces(&result, true)),
            [
                "Here's the image you requested:",
                "<image/png 4>",
                "The image above\nis the MCP logo."
            ]
        );
        let all = pieces(&result, true);
        let (text, images) = text_and_images(&all);
        assert_eq!(
            text,
            "Here's the image you requested:\n[image 1: image/png, 4 bytes, in the next user \
             message]\nThe image above\nis the MCP logo."
        );
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].base64(), "cG5nIQ==");
    }

    // extensions §10: a text-only model, an unsupported type and an oversized image get a
    // placeholder naming the type and size.
    #[test]
    fn images_a_model_cannot_take_are_described() {
        let only = |part: Part, images: bool| texts(&pieces(&result(vec![part]), images));
        assert_eq!(
            only(png(b"abc"), false),
            ["[image image/png, 3 bytes: not shown, this model takes text only]"]
        );
        let svg = Part::File(FilePart {
            mime: "image/svg+xml".into(),
            bytes: b"<svg/>".to_vec(),
            ..FilePart::default()
        });
        assert_eq!(
            only(svg, true),
            [
                "[image image/svg+xml, 6 bytes: not shown, the model takes png, jpeg, gif and \
                 webp images]"
            ]
        );
        let big = png(&vec![0; MAX_IMAGE_BYTES + 1]);
        assert_eq!(
            only(big, true),
            [format!(
                "[image image/png, {} bytes: not shown, larger than {MAX_IMAGE_BYTES} bytes]",
                MAX_IMAGE_BYTES + 1
            )]
        );
    }

    // extensions §10: a resource link is a line naming its name, URI and MIME type.
    #[test]
    fn a_resource_link_is_a_line() {
        let link = data(json!({
            "type": "resource_link", "uri": "test://static/resource/1", "name": "Resource 1",
            "mimeType": "text/plain", "description": "d"
        }));
        let bare = data(json!({"type": "resource_link", "uri": "file:///x", "name": "x"}));
        assert_eq!(
            texts(&pieces(&result(vec![link, bare]), true)),
            [
                "resource link \"Resource 1\": test://static/resource/1 (text/plain)\n\
                 resource link \"x\": file:///x (MIME type not given)"
            ]
        );
    }

    // extensions §10: an embedded text resource is inlined up to the bound; a binary one is a
    // placeholder with its MIME type and size.
    #[test]
    fn embedded_resources_are_inlined_or_described() {
        let small = data(json!({"type": "resource", "resource": {
            "uri": "test://r/1", "mimeType": "text/plain", "text": "hello"}}));
        let blob = data(json!({"type": "resource", "resource": {
            "uri": "test://r/2.gz", "mimeType": "application/gzip", "blob": "H4sIAAAA"}}));
        assert_eq!(
            texts(&pieces(&result(vec![small, blob]), true)),
            [
                "resource test://r/1 (text/plain):\nhello\n[resource test://r/2.gz \
                 (application/gzip), 6 bytes: binary, not shown]"
            ]
        );
        let long = "é".repeat(MAX_RESOURCE_TEXT_BYTES);
        let big = data(json!({"type": "resource", "resource": {"uri": "u", "text": long}}));
        let big = result(vec![big]);
        let read = pieces(&big, true);
        let [Piece::Text(text)] = read.as_slice() else {
            panic!("one text, got {read:?}")
        };
        assert!(
            text.starts_with("resource u (MIME type not given):\né"),
            "{text}"
        );
        assert!(
            text.ends_with(&format!(
                "\n[truncated: {MAX_RESOURCE_TEXT_BYTES} of {} bytes shown]",
                2 * MAX_RESOURCE_TEXT_BYTES
            )),
            "{}",
            &text[text.len() - 80..]
        );
    }

    // extensions §10: blocks kept whole for their annotations read as their own kind; the
    // annotations are not sent.
    #[test]
    fn annotated_blocks_read_as_their_kind() {
        let annotated = data(json!({"type": "text", "text": "Error: Operation failed",
            "annotations": {"priority": 1.0, "audience": ["user", "assistant"]}}));
        let image = data(
            json!({"type": "image", "data": "cG5nIQ==", "mimeType": "image/png",
            "annotations": {"priority": 0.5}}),
        );
        let broken = data(json!({"type": "image", "data": "!!", "mimeType": "image/png"}));
        let audio = data(json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}));
        assert_eq!(
            texts(&pieces(
                &result(vec![annotated, image, broken, audio]),
                true
            )),
            [
                "Error: Operation failed",
                "<image/png 4>",
                "[image image/png: not shown, its data is not valid base64]\n[audio audio/wav, \
                 3 bytes: not shown]"
            ]
        );
    }

    // extensions §10: structured output goes as JSON only when there is no text; other data
    // parts and files are described.
    #[test]
    fn structured_output_only_without_text() {
        let mut with_output = result(vec![png(b"x")]);
        with_output.output = json!({"temp": 21}).as_object().cloned();
        assert_eq!(
            texts(&pieces(&with_output, true)),
            ["<image/png 1>", r#"{"temp":21}"#]
        );
        with_output.content.push(text("21C"));
        assert_eq!(texts(&pieces(&with_output, true)), ["<image/png 1>", "21C"]);
        let other = result(vec![
            data(json!({"rows": 2})),
            Part::File(FilePart {
                mime: "application/pdf".into(),
                uri: "s3://b/r.pdf".into(),
                name: "r.pdf".into(),
                ..FilePart::default()
            }),
        ]);
        assert_eq!(
            texts(&pieces(&other, true)),
            ["{\"rows\":2}\n[file \"r.pdf\" application/pdf at s3://b/r.pdf: not shown]"]
        );
    }

    // extensions §10: an error's text is sent once: first, unless the content says it already.
    #[test]
    fn an_error_is_said_once() {
        let mut failed = result(vec![text("nope")]);
        failed.is_error = true;
        failed.error = "nope".into();
        assert_eq!(texts(&pieces(&failed, true)), ["nope"]);
        failed.error = "partial".into();
        assert_eq!(texts(&pieces(&failed, true)), ["partial\nnope"]);
        let denied = ToolResult {
            is_error: true,
            error: "approval denied: no".into(),
            ..ToolResult::default()
        };
        assert_eq!(texts(&pieces(&denied, true)), ["approval denied: no"]);
    }

    #[test]
    fn base64_sizes() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd"] {
            assert_eq!(base64_len(&STANDARD.encode(bytes)), bytes.len());
        }
    }
}

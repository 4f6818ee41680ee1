//! A job's body at the command line: read for `delayer push` (`--body`,
//! `--body-file PATH`, `-` for standard input) and shown by `delayer job
//! --body`.
//!
//! A body is any bytes, up to Redis's 512 MiB, so what is read is bounded
//! and what is shown is cut: text as is up to [`SHOWN`] (control characters
//! and bytes that are not UTF-8 escaped, so a body cannot drive the
//! terminal), with a note of what was left out; JSON byte for byte (`body`,
//! or `body_base64`) up to [`FETCHED`]. A larger body is not fetched at all:
//! Redis has no partial read of a hash field.

use crate::fatal::Fatal;
use delayer_protocol::connection::Conn;
use delayer_protocol::keys::Names;
use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

/// The most `delayer push` reads: Redis's largest string.
const READ_MAX: u64 = 512 << 20;
/// The most `delayer job --body` fetches.
pub const FETCHED: u64 = 16 << 20;
/// The most `delayer job --body` shows as text.
const SHOWN: usize = 64 << 10;

/// `delayer push`'s body: `--body` as given, `--body-file` (`-`: standard
/// input) byte for byte, else empty.
pub fn read(body: Option<OsString>, file: Option<&Path>) -> Result<Vec<u8>, Fatal> {
    if let Some(body) = body {
        return Ok(body.into_encoded_bytes());
    }
    let Some(path) = file else { return Ok(Vec::new()) };
    let (name, source): (String, Box<dyn Read>) = if path == Path::new("-") {
        ("standard input".into(), Box::new(std::io::stdin().lock()))
    } else {
        let file =
            std::fs::File::open(path).map_err(|e| Fatal::usage(format!("--body-file {}: {e}", path.display())))?;
        (path.display().to_string(), Box::new(file))
    };
    let mut bytes = Vec::new();
    source
        .take(READ_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Fatal::usage(format!("--body-file: reading {name}: {e}")))?;
    if bytes.len() as u64 > READ_MAX {
        return Err(Fatal::usage(format!("--body-file: {name} holds more than 512 MiB, Redis's largest value")));
    }
    Ok(bytes)
}

/// A job's body as fetched for `delayer job --body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    Body(Vec<u8>),
    /// Larger than [`FETCHED`]: its size.
    TooLarge(u64),
    /// The job ended or was replaced by another topic's between the lookup
    /// and this read.
    Gone,
}

/// Reads the body of job `id` of `topic` (`size`: the lookup's body size).
pub fn fetch(conn: &mut Conn, names: &Names, topic: &str, id: &[u8], size: u64) -> redis::RedisResult<Fetched> {
    if size > FETCHED {
        return Ok(Fetched::TooLarge(size));
    }
    let (owner, body): (Option<Vec<u8>>, Option<Vec<u8>>) =
        redis::cmd("HMGET").arg(names.bucket_bytes(topic, id)).arg("topic").arg("body").query(conn)?;
    Ok(match (owner, body) {
        (Some(owner), Some(body)) if owner == topic.as_bytes() => Fetched::Body(body),
        _ => Fetched::Gone,
    })
}

/// The body for people: indented lines under a `body` heading.
pub fn text(fetched: &Fetched) -> String {
    let (shown, note) = match fetched {
        Fetched::Body(body) if body.is_empty() => return "  body content  (empty)\n".into(),
        Fetched::Body(body) => {
            let cut = &body[..body.len().min(SHOWN)];
            let (shown, whole) = escaped(cut, body.len() > SHOWN);
            let mut notes = Vec::new();
            if !whole {
                notes.push("bytes that are not UTF-8 text shown as \\xNN".to_string());
            }
            if body.len() > SHOWN {
                notes.push(format!("first {} of {} bytes: --json --body gives it whole", SHOWN, body.len()));
            }
            (shown, notes.join("; "))
        }
        Fetched::TooLarge(size) => {
            return format!("  body content  not shown: {size} bytes, more than {} MiB\n", FETCHED >> 20)
        }
        Fetched::Gone => return "  body content  gone (the job ended or was replaced while being read)\n".into(),
    };
    let mut out = String::from("  body content\n");
    for line in shown.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    if !note.is_empty() {
        out.push_str(&format!("  ({note})\n"));
    }
    out
}

/// `bytes` as printable text: UTF-8 as is (newlines and tabs kept, other
/// control characters escaped), anything else as `\xNN`. `cut`: the bytes
/// end mid-body, so a character split at the end is not an error. Also
/// says whether it all was UTF-8.
fn escaped(bytes: &[u8], cut: bool) -> (String, bool) {
    let mut out = String::with_capacity(bytes.len());
    let mut whole = true;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' | '\t' => out.push(c),
                c if c.is_control() => out.extend(c.escape_default()),
                c => out.push(c),
            }
        }
        let invalid = chunk.invalid();
        // A character cut at SHOWN is the cut's, not the body's.
        let at_end = cut && invalid.as_ptr_range().end == bytes.as_ptr_range().end && invalid.len() < 4;
        if !invalid.is_empty() && !at_end {
            whole = false;
        }
        out.extend(invalid.iter().map(|b| format!("\\x{b:02x}")));
    }
    (out, whole)
}

/// The body in a job's JSON: `body` (UTF-8 text) or `body_base64`, whole;
/// `body: null` with `body_omitted` saying why when it is not given.
pub fn put_json(item: &mut serde_json::Value, fetched: &Fetched) {
    match fetched {
        Fetched::Body(body) => crate::inspect::add_body(item, Some(body)),
        Fetched::TooLarge(size) => {
            item["body"] = serde_json::Value::Null;
            item["body_omitted"] = format!("{size} bytes, more than {} MiB", FETCHED >> 20).into();
        }
        Fetched::Gone => {
            item["body"] = serde_json::Value::Null;
            item["body_omitted"] = "gone (the job ended or was replaced while being read)".into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_show_as_text_with_the_rest_escaped() {
        assert_eq!(escaped(b"line 1\n\ttab", false), ("line 1\n\ttab".into(), true));
        assert_eq!(escaped("h\u{e9}\x1b[31m".as_bytes(), false), ("h\u{e9}\\u{1b}[31m".into(), true));
        assert_eq!(escaped(&[b'a', 0xff, b'b'], false), ("a\\xffb".into(), false));
        // A character cut by the size limit is not called binary.
        assert_eq!(escaped(&"é".as_bytes()[..1], true), ("\\xc3".into(), true));
        let long = vec![b'x'; SHOWN + 10];
        let shown = text(&Fetched::Body(long));
        assert!(shown.contains(&format!("first {SHOWN} of {} bytes", SHOWN + 10)), "{shown}");
        assert!(text(&Fetched::Body(vec![0xc3, 0x28])).contains("not UTF-8"));
        assert!(text(&Fetched::TooLarge(FETCHED + 1)).contains("not shown"));
    }
}

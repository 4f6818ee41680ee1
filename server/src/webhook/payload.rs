//! What a delivery POSTs: one job as JSON,
//! `{"id" | "id_base64", "topic", "body" | "body_base64", "attempts"}`.
//!
//! Bodies and ids are bytes: one that is UTF-8 goes as text (`body`, `id`),
//! any other as base64 (`body_base64`, `id_base64`: an id a Delayer 1.x or
//! PHP client wrote), so a receiver never gets a lossy copy. The bytes
//! built here are the ones signed and sent, unchanged.

use crate::jobview::put_name;
use serde_json::{json, Value};

/// The request body for a job.
pub fn payload(id: &[u8], topic: &str, body: &[u8], attempts: u32) -> Vec<u8> {
    let mut job = json!({ "topic": topic, "attempts": attempts });
    if let Value::Object(fields) = &mut job {
        put_name(fields, "id", id);
        put_name(fields, "body", body);
    }
    job.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("JSON")
    }

    #[test]
    fn text_bodies_go_as_text_and_others_as_base64() {
        let text = parsed(&payload(b"order 42", "close", "{\"a\":\"é\"}".as_bytes(), 3));
        assert_eq!(text, json!({"id": "order 42", "topic": "close", "body": "{\"a\":\"é\"}", "attempts": 3}));
        let binary = parsed(&payload(b"b", "t", &[0xff, 0, 1], 1));
        assert_eq!(binary, json!({"id": "b", "topic": "t", "body_base64": "/wAB", "attempts": 1}));
        let raw_id = parsed(&payload(b"\xe9t\xe9", "t", b"x", 1));
        assert_eq!(raw_id, json!({"id_base64": "6XTp", "topic": "t", "body": "x", "attempts": 1}));
        let empty = parsed(&payload(b"e", "t", b"", 1));
        assert_eq!(empty["body"], "");
    }
}

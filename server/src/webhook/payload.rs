//! What a delivery POSTs: one job as JSON,
//! `{"id", "topic", "body" | "body_base64", "attempts"}`.
//!
//! Bodies are bytes: one that is UTF-8 goes as text (`body`), any other as
//! base64 (`body_base64`), so a receiver never gets a lossy copy. The bytes
//! built here are the ones signed and sent, unchanged.

use base64::Engine;
use serde_json::{json, Value};

/// The request body for a job.
pub fn payload(id: &str, topic: &str, body: &[u8], attempts: u32) -> Vec<u8> {
    let mut job = json!({ "id": id, "topic": topic, "attempts": attempts });
    let (key, value) = match std::str::from_utf8(body) {
        Ok(text) => ("body", Value::from(text)),
        Err(_) => ("body_base64", Value::from(base64::engine::general_purpose::STANDARD.encode(body))),
    };
    if let Value::Object(fields) = &mut job {
        fields.insert(key.to_string(), value);
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
        let text = parsed(&payload("order 42", "close", "{\"a\":\"é\"}".as_bytes(), 3));
        assert_eq!(text, json!({"id": "order 42", "topic": "close", "body": "{\"a\":\"é\"}", "attempts": 3}));
        let binary = parsed(&payload("b", "t", &[0xff, 0, 1], 1));
        assert_eq!(binary, json!({"id": "b", "topic": "t", "body_base64": "/wAB", "attempts": 1}));
        let empty = parsed(&payload("e", "t", b"", 1));
        assert_eq!(empty["body"], "");
    }
}

//! Signing a delivery, so its receiver can tell it came from us, unchanged
//! and recently: `X-Delayer-Signature: sha256=<hex HMAC-SHA256(secret,
//! timestamp + "." + body)>` beside `X-Delayer-Timestamp: <Unix seconds>`.
//!
//! The timestamp is inside the signed text, so a receiver that refuses old
//! timestamps also refuses a replayed request. The README shows receivers
//! (docs/webhook-verify/) that check both.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// An HMAC-SHA256 keyed with a webhook's secret. The secret is kept only
/// inside the keyed state, and never shown (`Debug` says `Signer(..)`).
#[derive(Clone)]
pub struct Signer {
    mac: HmacSha256,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Signer(..)")
    }
}

impl Signer {
    /// A signer for `secret`. HMAC takes a key of any length (a long one is
    /// hashed first); the crate's API still says it may refuse one.
    pub fn new(secret: &[u8]) -> Result<Signer, String> {
        let mac = <HmacSha256 as KeyInit>::new_from_slice(secret)
            .map_err(|_| "HMAC-SHA256 cannot be keyed with it".to_string())?;
        Ok(Signer { mac })
    }

    /// The `X-Delayer-Signature` value for `body` sent at `timestamp`.
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let mut mac = self.mac.clone();
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        let mut out = String::with_capacity(7 + 2 * digest.len());
        out.push_str("sha256=");
        for byte in digest.iter() {
            out.push_str(&format!("{byte:02x}"));
        }
        out
    }

    /// Whether `signature` is ours for `body` at `timestamp`, compared in
    /// constant time (a receiver's check, used by the tests).
    #[cfg(test)]
    pub fn verify(&self, timestamp: u64, body: &[u8], signature: &str) -> bool {
        let Some(hex) = signature.strip_prefix("sha256=") else { return false };
        let Some(bytes) = decode_hex(hex) else { return false };
        let mut mac = self.mac.clone();
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.verify_slice(&bytes).is_ok()
    }
}

#[cfg(test)]
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed by Python's hmac module:
    /// `hmac.new(b"Jefe", b'1700000000.{"id":"a"}', sha256).hexdigest()`.
    #[test]
    fn signs_timestamp_dot_body() {
        let signer = Signer::new(b"Jefe").expect("any key");
        assert_eq!(
            signer.sign(1_700_000_000, b"{\"id\":\"a\"}"),
            "sha256=b0b07c7f580f6dd3e93c8fbec955b9cf9a6c5f31ec1847b90892fbd8efb0adc8"
        );
        // Any key length: empty keys are refused by the configuration, not here.
        assert!(Signer::new(&[7; 1000]).is_ok());
    }

    #[test]
    fn verifies_only_its_own_signature() {
        let signer = Signer::new(b"secret").expect("key");
        let sig = signer.sign(42, b"body");
        assert!(signer.verify(42, b"body", &sig));
        assert!(!signer.verify(43, b"body", &sig), "another timestamp");
        assert!(!signer.verify(42, b"bodx", &sig), "another body");
        assert!(!Signer::new(b"other").expect("key").verify(42, b"body", &sig), "another secret");
        assert!(!signer.verify(42, b"body", sig.trim_start_matches("sha256=")), "no scheme");
        assert!(!signer.verify(42, b"body", "sha256=zz"));
        assert_eq!(format!("{signer:?}"), "Signer(..)");
    }
}

//! What a request may do ([`Access`]), and comparing what it presents
//! with a secret in constant time ([`same`]): what the tokens (`auth`) and
//! the dashboard's sessions (`session`) both decide with, below either.

use subtle::ConstantTimeEq;

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Denied,
    Read,
    Full,
}

/// Constant-time equality: the time depends on the lengths only, never on
/// where the bytes first differ.
pub fn same(presented: &[u8], expected: &[u8]) -> bool {
    let mut equal = presented.len().ct_eq(&expected.len());
    for (i, b) in presented.iter().enumerate() {
        let e = expected.get(i).copied().unwrap_or(0);
        equal &= b.ct_eq(&e);
    }
    bool::from(equal)
}

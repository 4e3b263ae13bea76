//! IPsec ESP in tunnel mode with AES-GCM (RFC 4303, RFC 4106): `ESPEncap` wraps each IP
//! packet in a new IPv4 or IPv6 header and an ESP payload sealed with the security
//! association's key; `ESPDecap` checks, opens and unwraps them, with the anti-replay
//! window of RFC 4303 section 3.4.3.
//!
//! Click's own IPsec elements split ESP over several elements and take their security
//! associations from an annotation an `IPsecRouteTable` sets; these two hold one
//! association each, configured as `ip xfrm state` configures the kernel's
//! (`rfc4106(gcm(aes))`: the AES key followed by a 4-byte salt).

use crate::args::FromArg;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};

pub(crate) mod decap;
pub(crate) mod encap;
mod replay;
#[cfg(test)]
mod tests;

/// IP protocol number of ESP.
pub(crate) const PROTO_ESP: u8 = 50;
/// The ESP header: SPI and sequence number.
const ESP_HEADER: usize = 8;
/// The explicit part of the GCM nonce carried in each packet (RFC 4106 section 3.1).
const IV_LEN: usize = 8;
/// The integrity check value: GCM's full 16-byte tag.
const ICV_LEN: usize = 16;
/// The outer IPv4 header `ESPEncap` writes (no options); an IPv6 one is 40 bytes.
const OUTER_LEN: usize = 20;
/// The ESP trailer's fixed part: pad length and next header.
const TRAILER: usize = 2;
/// "Next header" values of the inner packet (IP protocol numbers).
const NEXT_IPV4: u8 = 4;
const NEXT_IPV6: u8 = 41;
/// A dummy packet (RFC 4303 section 2.6), to be discarded.
const NEXT_NONE: u8 = 59;
/// SPIs below this are reserved (RFC 4303 section 2.1).
const MIN_SPI: u32 = 256;

/// An association's key material as `ip xfrm` takes it for `rfc4106(gcm(aes))`: an
/// AES-128 or AES-256 key followed by the 4-byte salt, in hexadecimal (`0x` optional).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct KeyArg(Vec<u8>);

impl KeyArg {
    fn hex(s: &str) -> Option<Vec<u8>> {
        let s = s.trim();
        let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
        if h.is_empty() || !h.len().is_multiple_of(2) || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
            .collect()
    }
}

impl FromArg for KeyArg {
    const WHAT: &'static str = "AES-GCM key and salt in hexadecimal (20 or 36 bytes)";
    fn from_arg(s: &str) -> Option<Self> {
        Self::hex(s)
            .filter(|k| k.len() == 20 || k.len() == 36)
            .map(KeyArg)
    }
    fn why_not(s: &str) -> Option<String> {
        let t = s.trim();
        let h = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
        Some(match Self::hex(s) {
            Some(k) => format!(
                "{} bytes, where an AES-128 key and salt are 20 and an AES-256 key and salt 36",
                k.len()
            ),
            None => match h.chars().find(|c| !c.is_ascii_hexdigit()) {
                Some(c) => format!("'{c}' is not a hexadecimal digit"),
                None if h.is_empty() => "no hexadecimal digits".to_string(),
                None => "an odd number of hexadecimal digits".to_string(),
            },
        })
    }
}

// The key is secret: no Debug that would print it.
impl std::fmt::Debug for KeyArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyArg({} bytes)", self.0.len())
    }
}

/// One security association: what both ends agree on.
pub(crate) struct Sa {
    spi: u32,
    key: LessSafeKey,
    salt: [u8; 4],
    /// Extended (64-bit) sequence numbers, RFC 4303 section 2.2.1: only the low 32 bits
    /// travel, the high ones enter the integrity check.
    esn: bool,
    /// The key material's SHA-256: tells whether another element holds the same
    /// association without keeping a second copy of the key.
    fingerprint: [u8; 32],
}

impl Sa {
    pub(crate) fn new(spi: u32, key: &KeyArg, esn: bool) -> Result<Sa, String> {
        if spi < MIN_SPI {
            return Err(format!(
                "SPI {spi} is reserved (RFC 4303 2.1): use {MIN_SPI} or more"
            ));
        }
        let fingerprint = ring::digest::digest(&ring::digest::SHA256, &key.0);
        let (aes, salt) = key.0.split_at(key.0.len() - 4);
        let alg = if aes.len() == 16 {
            &AES_128_GCM
        } else {
            &AES_256_GCM
        };
        let key = UnboundKey::new(alg, aes).map_err(|_| "unusable AES-GCM key".to_string())?;
        Ok(Sa {
            spi,
            key: LessSafeKey::new(key),
            salt: salt.try_into().expect("4 bytes"),
            esn,
            fingerprint: fingerprint.as_ref().try_into().expect("32 bytes"),
        })
    }

    /// Whether `other` is the same association: SPI, key, salt and sequence number
    /// size. Its sequence numbers and anti-replay window carry over a `hotconfig`.
    pub(crate) fn same(&self, other: &Sa) -> bool {
        self.spi == other.spi && self.esn == other.esn && self.fingerprint == other.fingerprint
    }

    /// The nonce of a packet whose explicit IV is `iv`: salt, then IV (RFC 4106 4).
    fn nonce(&self, iv: [u8; IV_LEN]) -> Nonce {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&self.salt);
        n[4..].copy_from_slice(&iv);
        Nonce::assume_unique_for_key(n)
    }

    /// The associated data of sequence number `seq` (RFC 4106 5): SPI and the 32-bit
    /// sequence number, or SPI and the whole 64-bit one with ESN. Its bytes, and how
    /// many of them count.
    fn aad(&self, seq: u64) -> ([u8; 12], usize) {
        let mut a = [0u8; 12];
        a[..4].copy_from_slice(&self.spi.to_be_bytes());
        if self.esn {
            a[4..].copy_from_slice(&seq.to_be_bytes());
            (a, 12)
        } else {
            a[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
            (a, 8)
        }
    }

    /// Seals `plain` in place; the tag.
    fn seal(&self, seq: u64, iv: [u8; IV_LEN], plain: &mut [u8]) -> Option<[u8; ICV_LEN]> {
        let (aad, n) = self.aad(seq);
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(iv), Aad::from(&aad[..n]), plain)
            .ok()?;
        tag.as_ref().try_into().ok()
    }

    /// Opens `sealed` in place if `tag` authenticates it; false (and `sealed`
    /// overwritten) if not.
    fn open(&self, seq: u64, iv: [u8; IV_LEN], tag: [u8; ICV_LEN], sealed: &mut [u8]) -> bool {
        let (aad, n) = self.aad(seq);
        self.key
            .open_in_place_separate_tag(self.nonce(iv), Aad::from(&aad[..n]), tag.into(), sealed, 0..)
            .is_ok()
    }
}

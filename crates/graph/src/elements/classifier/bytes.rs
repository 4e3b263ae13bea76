//! `Classifier` patterns: space-separated clauses `[!]OFFSET/VALUE[%MASK]` (offset in
//! decimal, value and mask in hex with `?` for "any nibble"), all of which must match;
//! `-` alone matches every packet. Offsets count from the packet data start.

use super::program::{Base, Expr};

/// Offsets past this are past any packet; larger ones are clamped here so word
/// arithmetic cannot overflow (the clause then never matches, as in Click).
const MAX_OFFSET: u32 = 1 << 24;

fn nibble(c: u8) -> (u8, u8) {
    match c {
        b'?' => (0, 0),
        b'0'..=b'9' => (c - b'0', 0xF),
        b'a'..=b'f' => (c - b'a' + 10, 0xF),
        b'A'..=b'F' => (c - b'A' + 10, 0xF),
        _ => (0, 0),
    }
}

/// Value and mask of the byte written as two pattern characters.
fn byte(hi: u8, lo: u8) -> (u8, u8) {
    let (vh, mh) = nibble(hi);
    let (vl, ml) = nibble(lo);
    ((vh << 4) | vl, (mh << 4) | ml)
}

fn is_digit_or_wild(c: u8) -> bool {
    c.is_ascii_hexdigit() || c == b'?'
}

/// Parses pattern number `slot`; errors are worded as Click words them.
pub fn parse_pattern(slot: usize, s: &str) -> Result<Expr, String> {
    let b = s.as_bytes();
    let len = b.len();
    if s == "-" {
        return Ok(Expr::True);
    }
    let mut clauses = Vec::new();
    let mut i = 0;
    loop {
        while i < len && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= len {
            break;
        }
        let mut negated = false;
        if b[i] == b'!' {
            negated = true;
            i += 1;
            while i < len && b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        if i >= len || !b[i].is_ascii_digit() {
            return Err(format!("pattern {}: expected a digit", slot));
        }
        let mut offset: u32 = 0;
        while i < len && b[i].is_ascii_digit() {
            offset = (offset.saturating_mul(10).saturating_add((b[i] - b'0') as u32)).min(MAX_OFFSET);
            i += 1;
        }
        if i >= len || b[i] != b'/' {
            return Err(format!("pattern {}: expected '/'", slot));
        }
        i += 1;
        let value_pos = i;
        while i < len && is_digit_or_wild(b[i]) {
            i += 1;
        }
        let value = &b[value_pos..i];
        let mut mask: Option<&[u8]> = None;
        if i < len && b[i] == b'%' {
            i += 1;
            let mask_pos = i;
            while i < len && is_digit_or_wild(b[i]) {
                i += 1;
            }
            mask = Some(&b[mask_pos..i]);
        }
        if value.len() < 2 {
            return Err(format!("pattern {}: value has less than 2 hex digits", slot));
        }
        if !value.len().is_multiple_of(2) {
            return Err(format!("pattern {}: value has odd number of hex digits", slot));
        }
        if let Some(m) = mask {
            if m.len() != value.len() {
                return Err(format!(
                    "pattern {}: mask has too {} hex digits",
                    slot,
                    if m.len() > value.len() { "many" } else { "few" }
                ));
            }
        }
        // One test per 4-byte aligned word the clause touches, as Click compiles it.
        let mut words: Vec<(u32, u32, u32)> = Vec::new();
        for k in 0..value.len() / 2 {
            let off = offset + k as u32;
            let (mut v, mut m) = byte(value[2 * k], value[2 * k + 1]);
            if let Some(mk) = mask {
                let (mv, mm) = byte(mk[2 * k], mk[2 * k + 1]);
                m &= mv & mm;
                v &= m;
            }
            let word = off & !3;
            let shift = 24 - 8 * (off & 3);
            if words.last().map(|w| w.0) != Some(word) {
                words.push((word, 0, 0));
            }
            if let Some(w) = words.last_mut() {
                w.1 |= (v as u32) << shift;
                w.2 |= (m as u32) << shift;
            }
        }
        let clause = Expr::and(
            words
                .into_iter()
                .map(|(off, v, m)| Expr::test(Base::Data, off, v, m))
                .collect(),
        );
        clauses.push(if negated { clause.not() } else { clause });
    }
    Ok(Expr::and(clauses))
}

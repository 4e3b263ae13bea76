//! `SetIPDSCP(DSCP)` and `SetIPECN(ECN)`: set the differentiated-services code point
//! (the TOS byte's upper six bits) or the ECN field (its lower two bits) of the IPv4
//! header at the network header annotation, updating the header checksum
//! incrementally, as Click's elements of the same names.

use crate::args::{uncomment, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{checksum, Packet, PacketBatch};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// The TOS byte's DSCP bits.
const DSCP_MASK: u8 = 0xfc;
/// The TOS byte's ECN bits.
const ECN_MASK: u8 = 0x03;

/// Sets the bits `!keep` of the TOS byte to `bits`, with Click's incremental checksum
/// update over the header's first 16-bit word. False for a packet without 20 bytes of
/// IPv4 header at its network header annotation.
#[inline(always)]
fn set_tos(p: &mut Packet, keep: u8, bits: u8) -> bool {
    let Some(h) = p.network_header_chunk_mut::<20>() else {
        return false;
    };
    let old = u16::from_be_bytes([h[0], h[1]]);
    h[1] = (h[1] & keep) | bits;
    let new = u16::from_be_bytes([h[0], h[1]]);
    let sum = checksum::update16(u16::from_be_bytes([h[10], h[11]]), old, new);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}

/// The shared part of both elements: the bits to set, the text of the argument that
/// gave them (which the read handler returns, as Click's `read_keyword_handler`) and
/// the argument's parser.
struct TosSpec {
    keep: u8,
    bits: Arc<AtomicU8>,
    text: Mutex<String>,
    handler: &'static str,
    parse: fn(&str) -> Result<u8, String>,
}

impl ElementSpec for TosSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(SetTos {
            keep: self.keep,
            bits: self.bits.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        let kw = if self.handler == "dscp" { "DSCP" } else { "ECN" };
        vec![HandlerInfo::read_write(self.handler).reconfiguring(0, kw)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == self.handler).then(|| match self.text.lock() {
            Ok(t) => t.clone(),
            Err(p) => p.into_inner().clone(),
        })
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == self.handler).then(|| {
            let text = uncomment(value).trim().to_string();
            let bits = (self.parse)(&text)?;
            let mut t = match self.text.lock() {
                Ok(t) => t,
                Err(p) => p.into_inner(),
            };
            self.bits.store(bits, Ordering::Relaxed);
            *t = text;
            Ok(())
        })
    }
}

struct SetTos {
    keep: u8,
    bits: Arc<AtomicU8>,
}

impl Element for SetTos {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let (keep, bits) = (self.keep, self.bits.load(Ordering::Relaxed));
        // Click asserts the network header; a packet without one is dropped.
        out.route_each(batch, |p| if set_tos(p, keep, bits) { 0 } else { DROP });
    }
}

/// An argument kept as its text (Click's `AnyArg`).
struct Text(String);

impl FromArg for Text {
    const WHAT: &'static str = "string";
    fn from_arg(s: &str) -> Option<Self> {
        Some(Text(s.trim().to_string()))
    }
}

/// Builds one of the two elements: `kw` is the argument, `parse` reads it.
fn build_tos(
    args: &mut Args,
    cx: &BuildContext,
    kw: &str,
    handler: &'static str,
    keep: u8,
    parse: fn(&str) -> Result<u8, String>,
) -> Result<Arc<dyn ElementSpec>, ConfigError> {
    let text = args.required::<Text>(kw).map_err(|e| cx.error(e))?.0;
    args.finish().map_err(|e| cx.error(e))?;
    let bits = parse(&text).map_err(|e| cx.error(e))?;
    Ok(Arc::new(TosSpec {
        keep,
        bits: Arc::new(AtomicU8::new(bits)),
        text: Mutex::new(text),
        handler,
        parse,
    }))
}

/// A DSCP: an unsigned integer up to 0x3F, as the TOS byte's upper six bits.
fn parse_dscp(s: &str) -> Result<u8, String> {
    let v = u32::from_arg(s).ok_or_else(|| format!("DSCP expects {}", u32::WHAT))?;
    if v > 0x3f {
        return Err("diffserv code point out of range".to_string());
    }
    Ok((v as u8) << 2)
}

/// An ECN value in Click's words: `0` to `3`, `no` or `-` (Not-ECT), `ect1` or
/// `ECT(1)` (1), `ect2` or `ECT(0)` (2), `ce` or `CE` (3).
fn parse_ecn(s: &str) -> Result<u8, String> {
    Ok(match s {
        "0" | "no" | "-" => 0,
        "1" | "ect1" | "ECT(1)" => 1,
        "2" | "ect2" | "ECT(0)" => 2,
        "3" | "ce" | "CE" => 3,
        _ => return Err("bad ECN argument".to_string()),
    })
}

pub struct SetIPDSCPClass;

impl ElementClass for SetIPDSCPClass {
    fn name(&self) -> &'static str {
        "SetIPDSCP"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        build_tos(args, cx, "DSCP", "dscp", !DSCP_MASK, parse_dscp)
    }
}

pub struct SetIPECNClass;

impl ElementClass for SetIPECNClass {
    fn name(&self) -> &'static str {
        "SetIPECN"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        build_tos(args, cx, "ECN", "ecn", !ECN_MASK, parse_ecn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{build_error, Harness};

    /// A 20-byte IPv4 header, TOS `tos`, checksum `sum`, then two payload bytes.
    fn packet(tos: u8, sum: [u8; 2]) -> Packet {
        let mut p = Packet::from_slice(&[
            0x45, tos, 0x00, 0x16, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, sum[0], sum[1], 10, 0, 0, 1, 10, 0, 0,
            2, 0xde, 0xad,
        ]);
        p.set_network_header(0, 20);
        p
    }

    // Checksums worked out by hand (RFC 1071 over the ten header words). Words other
    // than the first: 0x0016 + 0x1234 + 0x0000 + 0x4011 + 0x0a00 + 0x0001 + 0x0a00 +
    // 0x0002 = 0x665e. With the first word 0x4500: 0xab5e, checksum 0x54a1. With
    // 0x45b8 (DSCP 46, ECN 0): 0xac16, checksum 0x53e9. With 0x45bb (DSCP 46, CE):
    // 0xac19, checksum 0x53e6. With 0x4503 (ECN CE): 0xab61, checksum 0x549e. With
    // 0x4501: 0xab5f, checksum 0x54a0.

    #[test]
    fn set_ip_dscp_sets_the_upper_six_bits_and_the_checksum() {
        let mut h = Harness::new(&SetIPDSCPClass, "46", 1, 1);
        let out = h.push(0, vec![packet(0x00, [0x54, 0xa1])]);
        assert_eq!(
            out[0][0].data(),
            &[
                0x45, 0xb8, 0x00, 0x16, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x53, 0xe9, 10, 0, 0, 1, 10, 0,
                0, 2, 0xde, 0xad
            ]
        );
        // The ECN bits stay.
        let out = h.push(0, vec![packet(0x03, [0x54, 0x9e])]);
        assert_eq!(
            &out[0][0].data()[..12],
            &[0x45, 0xbb, 0x00, 0x16, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x53, 0xe6]
        );
        // DSCP 0 clears them back.
        let mut h = Harness::new(&SetIPDSCPClass, "DSCP 0", 1, 1);
        let out = h.push(0, vec![packet(0xbb, [0x53, 0xe6])]);
        assert_eq!(out[0][0].data()[1], 0x03);
        assert_eq!(&out[0][0].data()[10..12], &[0x54, 0x9e]);
    }

    #[test]
    fn set_ip_ecn_sets_the_lower_two_bits_and_the_checksum() {
        for word in ["3", "ce", "CE"] {
            let mut h = Harness::new(&SetIPECNClass, word, 1, 1);
            let out = h.push(0, vec![packet(0x00, [0x54, 0xa1])]);
            assert_eq!(
                &out[0][0].data()[..12],
                &[0x45, 0x03, 0x00, 0x16, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x54, 0x9e]
            );
        }
        // The DSCP bits stay.
        let mut h = Harness::new(&SetIPECNClass, "ect1", 1, 1);
        let out = h.push(0, vec![packet(0xbb, [0x53, 0xe6])]);
        assert_eq!(out[0][0].data()[1], 0xb9);
        for (word, ecn) in [
            ("0", 0),
            ("no", 0),
            ("-", 0),
            ("1", 1),
            ("ECT(1)", 1),
            ("2", 2),
            ("ect2", 2),
            ("ECT(0)", 2),
        ] {
            assert_eq!(parse_ecn(word), Ok(ecn), "{}", word);
        }
        let mut h = Harness::new(&SetIPECNClass, "ECT(1)", 1, 1);
        let out = h.push(0, vec![packet(0x00, [0x54, 0xa1])]);
        assert_eq!(
            &out[0][0].data()[..12],
            &[0x45, 0x01, 0x00, 0x16, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x54, 0xa0]
        );
    }

    #[test]
    fn packets_without_an_ip_header_are_dropped() {
        for class in [&SetIPDSCPClass as &dyn ElementClass, &SetIPECNClass] {
            let mut h = Harness::new(class, "1", 1, 1);
            // No network header annotation.
            let bare = Packet::from_slice(&[0x45; 20]);
            // A network header with fewer than 20 bytes behind it.
            let mut short = Packet::from_slice(&[0x45, 0, 0, 12, 0, 0, 0, 0, 64, 17, 0, 0]);
            short.set_network_header(0, 12);
            let out = h.push(0, vec![bare, short, packet(0x00, [0x54, 0xa1])]);
            assert_eq!(out[0].len(), 1);
            assert_eq!(out[0][0].len(), 22);
        }
    }

    #[test]
    fn handlers_read_the_argument_and_reconfigure() {
        let h = Harness::new(&SetIPDSCPClass, "0x2e", 1, 1);
        assert_eq!(h.read("dscp"), "0x2e");
        h.write("dscp", "10 // AF11\n").unwrap();
        assert_eq!(h.read("dscp"), "10");
        assert_eq!(
            h.write("dscp", "64"),
            Err("diffserv code point out of range".to_string())
        );
        assert_eq!(
            h.write("dscp", "x"),
            Err("DSCP expects unsigned integer".to_string())
        );
        assert_eq!(h.read("dscp"), "10");
        assert_eq!(
            h.spec.handlers(),
            vec![HandlerInfo::read_write("dscp").reconfiguring(0, "DSCP")]
        );
        let mut h = h;
        let out = h.push(0, vec![packet(0x00, [0x54, 0xa1])]);
        assert_eq!(out[0][0].data()[1], 10 << 2);

        let h = Harness::new(&SetIPECNClass, "ECN CE", 1, 1);
        assert_eq!(h.read("ecn"), "CE");
        h.write("ecn", "no").unwrap();
        assert_eq!(h.read("ecn"), "no");
        assert_eq!(h.write("ecn", "4"), Err("bad ECN argument".to_string()));
        assert_eq!(
            h.spec.handlers(),
            vec![HandlerInfo::read_write("ecn").reconfiguring(0, "ECN")]
        );
    }

    #[test]
    fn configuration_errors() {
        assert_eq!(
            build_error(&SetIPDSCPClass, "64", 1, 1),
            "e :: SetIPDSCP: diffserv code point out of range"
        );
        assert_eq!(
            build_error(&SetIPDSCPClass, "", 1, 1),
            "e :: SetIPDSCP: missing mandatory DSCP argument"
        );
        assert_eq!(
            build_error(&SetIPDSCPClass, "af11", 1, 1),
            "e :: SetIPDSCP: DSCP expects unsigned integer"
        );
        assert_eq!(
            build_error(&SetIPECNClass, "ect0", 1, 1),
            "e :: SetIPECN: bad ECN argument"
        );
        assert_eq!(
            build_error(&SetIPECNClass, "", 1, 1),
            "e :: SetIPECN: missing mandatory ECN argument"
        );
        assert_eq!(
            build_error(&SetIPECNClass, "1, 2", 1, 1),
            "e :: SetIPECN: too many arguments"
        );
    }
}

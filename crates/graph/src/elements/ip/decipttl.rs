//! `DecIPTTL([ACTIVE, MULTICAST])`: decrements the IP TTL with Click's incremental
//! checksum update; packets whose TTL is 0 or 1 go to output 1 unchanged (dropped if
//! output 1 is unused). Handlers `drops` (read) and `active` (read/write).

use crate::args::{Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub struct DecIPTTLClass;

impl ElementClass for DecIPTTLClass {
    fn name(&self) -> &'static str {
        "DecIPTTL"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let active = args.keyword::<bool>("ACTIVE").map_err(e)?.unwrap_or(true);
        let multicast = args.keyword::<bool>("MULTICAST").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        Ok(Arc::new(DecIPTTLSpec {
            active: Arc::new(AtomicBool::new(active)),
            multicast,
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct DecIPTTLSpec {
    active: Arc<AtomicBool>,
    multicast: bool,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for DecIPTTLSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(DecIPTTL {
            active: self.active.clone(),
            multicast: self.multicast,
            drops: self.drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops"), HandlerInfo::read_write("active")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.load(Ordering::Relaxed).to_string()),
            "active" => Some(self.active.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
    fn write_handler(&self, name: &str, value: &str) -> Option<Result<(), String>> {
        (name == "active").then(|| match bool::from_arg(value) {
            Some(b) => {
                self.active.store(b, Ordering::Relaxed);
                Ok(())
            }
            None => Err("expected boolean".to_string()),
        })
    }
}

struct DecIPTTL {
    active: Arc<AtomicBool>,
    multicast: bool,
    drops: Arc<AtomicU64>,
}

/// Click's checksum update for a TTL decrement: with ~HC + ~m + m' = ~HC + 0xFEFF,
/// `sum = (~old & 0xFFFF) + 0xFEFF; new = ~(sum + (sum >> 16))` truncated to 16 bits.
/// (Exactly one end-around carry is folded, as Click does.)
/// (Kept as the reference the in-place form is tested against.)
#[cfg(test)]
fn click_ttl_checksum(old: u16) -> u16 {
    let sum = (!old as u32) + 0xFEFF;
    !((sum + (sum >> 16)) as u16)
}

/// [`click_ttl_checksum`] on the checksum's two bytes as they lie in the header, in
/// either byte order: one's-complement addition commutes with swapping the bytes of
/// both operands, and 0xFEFF swapped is 0xFFFE. Saves the two byte swaps per packet.
#[inline(always)]
fn click_ttl_checksum_bytes(field: [u8; 2]) -> [u8; 2] {
    // 0xFEFF as its bytes would lie in the header, read in native order.
    let add = u16::from_ne_bytes(0xFEFFu16.to_be_bytes());
    let sum = (!u16::from_ne_bytes(field) as u32) + add as u32;
    (!((sum + (sum >> 16)) as u16)).to_ne_bytes()
}

enum Verdict {
    Forward,
    Expired,
    Unparseable,
}

#[inline(always)]
fn decrement(p: &mut Packet, multicast: bool) -> Verdict {
    // The fixed header's fields by position: one length check, no per-field checks.
    let Some(h) = p.network_header_mut().and_then(|nh| nh.first_chunk_mut::<20>()) else {
        return Verdict::Unparseable;
    };
    if !multicast && h[16] & 0xf0 == 0xe0 {
        return Verdict::Forward;
    }
    if h[8] <= 1 {
        return Verdict::Expired;
    }
    h[8] -= 1;
    [h[10], h[11]] = click_ttl_checksum_bytes([h[10], h[11]]);
    Verdict::Forward
}

impl Element for DecIPTTL {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if !self.active.load(Ordering::Relaxed) {
            out.push_batch(0, batch);
            return;
        }
        let mut drops = 0;
        let multicast = self.multicast;
        out.route_each(batch, |p| match decrement(p, multicast) {
            Verdict::Forward => 0,
            Verdict::Expired => {
                drops += 1;
                1
            }
            // No IPv4 network header (Click asserts one): dropped.
            Verdict::Unparseable => crate::element::DROP,
        });
        if drops > 0 {
            self.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    fn ip_packet(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, 20);
        p
    }

    #[test]
    fn decrements_and_matches_full_recompute() {
        let h = ip_header(0, 20, 0x1c46, 0x4000, 64, 6, [10, 0, 0, 1], [10, 0, 0, 2]);
        let mut want = h.clone();
        want[8] = 63;
        want[10] = 0;
        want[11] = 0;
        let c = cksum(&want);
        want[10..12].copy_from_slice(&c.to_be_bytes());
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
        let out = e.push(0, vec![ip_packet(&h)]);
        assert_eq!(out[0][0].data(), &want[..]);
        assert!(out[1].is_empty());
        assert_eq!(e.read("drops"), "0");
    }

    #[test]
    fn click_checksum_corner_cases() {
        // Worked by hand from Click's formula sum = (~old & 0xffff) + 0xfeff,
        // new = ~(sum + (sum >> 16)) as 16 bits.
        // old 0x0000: sum = 0xffff + 0xfeff = 0x1fefe; + 1 = 0x1feff -> 0xfeff; new 0x0100.
        assert_eq!(click_ttl_checksum(0x0000), 0x0100);
        // old 0xffff: sum = 0x0000 + 0xfeff = 0xfeff; new = ~0xfeff = 0x0100.
        assert_eq!(click_ttl_checksum(0xffff), 0x0100);
        // old 0xfeff: sum = 0x0100 + 0xfeff = 0xffff; new = 0x0000.
        assert_eq!(click_ttl_checksum(0xfeff), 0x0000);
        // old 0x0100: sum = 0xfeff + 0xfeff = 0x1fdfe; + 1 = 0x1fdff -> 0xfdff; new 0x0200.
        assert_eq!(click_ttl_checksum(0x0100), 0x0200);
        // old 0x1234: sum = 0xedcb + 0xfeff = 0x1ecca; + 1 = 0x1eccb -> 0xeccb; new 0x1334.
        assert_eq!(click_ttl_checksum(0x1234), 0x1334);
        // The in-place form agrees on every checksum value.
        for c in 0..=u16::MAX {
            assert_eq!(
                click_ttl_checksum_bytes(c.to_be_bytes()),
                click_ttl_checksum(c).to_be_bytes(),
                "{:#06x}",
                c
            );
        }
    }

    #[test]
    fn checksum_corner_case_in_packet() {
        // A header whose checksum field is 0xfeff: after the decrement Click writes
        // 0x0000 (RFC 1624 would also give 0x0000 here; Click never yields -0 = 0xffff
        // from 0xfeff).
        let mut h = ip_header(0, 20, 0, 0, 5, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        h[10] = 0xfe;
        h[11] = 0xff;
        let mut want = h.clone();
        want[8] = 4;
        want[10] = 0x00;
        want[11] = 0x00;
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 1);
        assert_eq!(e.push(0, vec![ip_packet(&h)])[0][0].data(), &want[..]);
    }

    #[test]
    fn ttl_one_and_zero_go_to_output_1_unchanged() {
        let h1 = ip_header(0, 20, 1, 0, 1, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        let h0 = ip_header(0, 20, 2, 0, 0, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
        let out = e.push(0, vec![ip_packet(&h1), ip_packet(&h0)]);
        assert!(out[0].is_empty());
        assert_eq!(out[1][0].data(), &h1[..]);
        assert_eq!(out[1][1].data(), &h0[..]);
        assert_eq!(e.read("drops"), "2");
        // Without output 1 they are dropped, still counted.
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 1);
        assert!(e.push(0, vec![ip_packet(&h1)])[0].is_empty());
        assert_eq!(e.read("drops"), "1");
    }

    #[test]
    fn multicast_and_active() {
        let m = ip_header(0, 20, 0, 0, 1, 17, [1, 1, 1, 1], [224, 0, 0, 5]);
        let mut e = Harness::new(&DecIPTTLClass, "MULTICAST false", 1, 2);
        assert_eq!(e.push(0, vec![ip_packet(&m)])[0][0].data(), &m[..]);
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
        assert_eq!(e.push(0, vec![ip_packet(&m)])[1][0].data(), &m[..]);
        let u = ip_header(0, 20, 0, 0, 9, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        let mut e = Harness::new(&DecIPTTLClass, "ACTIVE false", 1, 2);
        assert_eq!(e.read("active"), "false");
        assert_eq!(e.push(0, vec![ip_packet(&u)])[0][0].data(), &u[..]);
        e.write("active", "true").unwrap();
        assert_eq!(e.push(0, vec![ip_packet(&u)])[0][0].data()[8], 8);
        assert_eq!(e.write("active", "maybe"), Err("expected boolean".to_string()));
    }

    #[test]
    fn no_network_header_is_dropped() {
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
        let out = e.push_bytes(0, &[0x45; 20]);
        assert!(out[0].is_empty() && out[1].is_empty());
        let mut p = Packet::from_slice(&[0x45; 10]);
        p.set_network_header(0, 20);
        let out = e.push(0, vec![p]);
        assert!(out[0].is_empty() && out[1].is_empty());
        assert_eq!(
            build_error(&DecIPTTLClass, "1", 1, 1),
            "e :: DecIPTTL: too many arguments"
        );
    }
}

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

/// The header's bytes 8..12 (TTL, protocol, checksum) as one native-order word, with
/// the TTL decremented and [`click_ttl_checksum`] applied to the checksum. The TTL
/// must be at least 2.
///
/// In native (little-endian) order the checksum field `c` is the high half of the word
/// and Click's update comes out as `c + 1`, except `c = 0xFFFE` gives 0 and `c = 0xFFFF`
/// gives 1 (one's-complement addition commutes with swapping the bytes of both
/// operands; Click folds one end-around carry). That is `c + 1 + (c >= 0xFFFE)` in 16
/// bits: `w - 1 + (1 << 16)` plus one more `1 << 16` when `w >= 0xFFFE_0000`, whose
/// carry out of the word is the 16-bit wrap. The TTL is the low byte and at least 2:
/// no borrow reaches the protocol.
#[inline(always)]
fn decrement_word(w: u32) -> u32 {
    #[cfg(target_endian = "big")]
    compile_error!("decrement_word assumes a little-endian word");
    // `w >= 0xFFFE_0000` as the carry out of 32 bits of `w + 0x2_0000`: an add and a
    // shift instead of a compare and a flag.
    let carry = ((w as u64 + 0x2_0000) >> 32) as u32;
    w.wrapping_add(0xFFFF).wrapping_add(carry << 16)
}

/// What happens to one packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Output 0 (TTL decremented, or a multicast packet left alone).
    Forward,
    /// TTL 0 or 1: output 1, unchanged.
    Expired,
    /// No IPv4 network header (Click asserts one): dropped.
    Unparseable,
}

/// Decrements one packet's TTL. `MULTICAST` is a constant at each call site, so the
/// usual configuration's loop carries no multicast test.
#[inline(always)]
fn decrement<const MULTICAST: bool>(p: &mut Packet) -> Verdict {
    // The fixed header's fields by position: one length check, no per-field checks.
    let Some(h) = p.network_header_chunk_mut::<20>() else {
        return Verdict::Unparseable;
    };
    if !MULTICAST && h[16] & 0xf0 == 0xe0 {
        return Verdict::Forward;
    }
    // TTL, protocol and checksum as one word: one load, one store. (The chunk of a
    // 20-byte array at 8 always exists; the check compiles away.)
    let field: &mut [u8; 4] = h.split_at_mut(8).1.first_chunk_mut::<4>().expect("20 > 12");
    let w = u32::from_ne_bytes(*field);
    if (w as u8) <= 1 {
        return Verdict::Expired;
    }
    *field = decrement_word(w).to_ne_bytes();
    Verdict::Forward
}

impl DecIPTTL {
    /// Decrements every packet in place; `route_each` passes the batch on whole when
    /// all of them forward (only a forwarded packet is changed).
    #[inline(always)]
    fn run<const MULTICAST: bool>(&mut self, batch: &mut PacketBatch, out: &mut Outputs<'_>) {
        let mut drops = 0;
        out.route_each(batch, |p| match decrement::<MULTICAST>(p) {
            Verdict::Forward => 0,
            Verdict::Expired => {
                drops += 1;
                1
            }
            Verdict::Unparseable => DROP,
        });
        if drops > 0 {
            self.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

impl Element for DecIPTTL {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        if !self.active.load(Ordering::Relaxed) {
            out.push_batch(0, batch);
            return;
        }
        if self.multicast {
            self.run::<true>(batch, out)
        } else {
            self.run::<false>(batch, out)
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
        // The in-place form agrees on every checksum value, and leaves the protocol
        // alone and the TTL one lower, for the lowest and highest TTL it sees.
        for c in 0..=u16::MAX {
            for (ttl, proto) in [(2u8, 0xffu8), (255, 0), (64, 17)] {
                let [c0, c1] = c.to_be_bytes();
                let w = decrement_word(u32::from_ne_bytes([ttl, proto, c0, c1]));
                let [t, p, n0, n1] = w.to_ne_bytes();
                assert_eq!((t, p), (ttl - 1, proto), "{:#06x}", c);
                assert_eq!(u16::from_be_bytes([n0, n1]), click_ttl_checksum(c), "{:#06x}", c);
            }
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

    /// `h` with TTL `ttl` and checksum field `c`, as written (no recompute).
    fn with_ttl_and_checksum(h: &[u8], ttl: u8, c: [u8; 2]) -> Vec<u8> {
        let mut b = h.to_vec();
        b[8] = ttl;
        b[10..12].copy_from_slice(&c);
        b
    }

    #[test]
    fn checksum_field_0000_and_ffff_in_packets() {
        // Hand-worked with Click's formula (see click_checksum_corner_cases): 0x0000 and
        // 0xffff both become 0x0100; 0xfffe becomes 0x00ff; 0x00ff becomes 0x01ff.
        let h = ip_header(0, 20, 0, 0, 9, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        for (old, new) in [
            ([0x00, 0x00], [0x01, 0x00]),
            ([0xff, 0xff], [0x01, 0x00]),
            ([0xff, 0xfe], [0x00, 0xff]),
            ([0x00, 0xff], [0x01, 0xff]),
        ] {
            let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
            let out = e.push(0, vec![ip_packet(&with_ttl_and_checksum(&h, 9, old))]);
            assert_eq!(
                out[0][0].data(),
                &with_ttl_and_checksum(&h, 8, new)[..],
                "{:02x?}",
                old
            );
        }
    }

    #[test]
    fn ttl_two_becomes_one_and_255_becomes_254() {
        for (ttl, proto) in [(2u8, 0xffu8), (255, 6)] {
            let h = ip_header(0, 20, 7, 0, ttl, proto, [9, 9, 9, 9], [8, 8, 8, 8]);
            let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
            let out = e.push(0, vec![ip_packet(&h)]);
            let got = out[0][0].data();
            assert_eq!((got[8], got[9]), (ttl - 1, proto));
            // The updated checksum verifies: the header sums to 0xffff.
            assert_eq!(cksum(got), 0, "TTL {}", ttl);
        }
    }

    #[test]
    fn mixed_batches_keep_order_per_output_and_count_drops() {
        let fwd = |id: u16, ttl: u8| ip_header(0, 20, id, 0, ttl, 17, [1, 1, 1, 1], [2, 2, 2, 2]);
        let dec = |h: &[u8]| {
            let mut w = h.to_vec();
            w[8] -= 1;
            w[10] = 0;
            w[11] = 0;
            let c = cksum(&w);
            w[10..12].copy_from_slice(&c.to_be_bytes());
            w
        };
        let (a, b, c) = (fwd(1, 64), fwd(2, 2), fwd(3, 30));
        let (x1, x0) = (fwd(4, 1), fwd(5, 0));
        let mut short = Packet::from_slice(&[0x45; 10]);
        short.set_network_header(0, 20);
        // Expiry in the middle, at the start and at the end; an unparseable packet
        // between forwarded ones.
        let mut e = Harness::new(&DecIPTTLClass, "", 1, 2);
        let out = e.push(
            0,
            vec![ip_packet(&a), ip_packet(&x1), ip_packet(&b), short, ip_packet(&c)],
        );
        let data = |v: &Vec<Packet>| v.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>();
        assert_eq!(data(&out[0]), vec![dec(&a), dec(&b), dec(&c)]);
        assert_eq!(data(&out[1]), vec![x1.clone()]);
        assert_eq!(e.read("drops"), "1");
        let out = e.push(0, vec![ip_packet(&x0), ip_packet(&a), ip_packet(&x1)]);
        assert_eq!(data(&out[0]), vec![dec(&a)]);
        assert_eq!(data(&out[1]), vec![x0, x1]);
        assert_eq!(e.read("drops"), "3");
        // MULTICAST false: a multicast packet after an expired one is left alone.
        let m = ip_header(0, 20, 6, 0, 1, 17, [1, 1, 1, 1], [239, 1, 2, 3]);
        let mut e = Harness::new(&DecIPTTLClass, "MULTICAST false", 1, 2);
        let out = e.push(0, vec![ip_packet(&fwd(7, 0)), ip_packet(&m), ip_packet(&a)]);
        assert_eq!(data(&out[0]), vec![m, dec(&a)]);
        assert_eq!(out[1].len(), 1);
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

//! `ESPEncap(SPI, KEY, SRC, DST [, TTL, ESN])`: IPsec ESP tunnel-mode encapsulation
//! with AES-GCM (RFC 4303, RFC 4106).
//!
//! Each packet (an IPv4 or IPv6 datagram from its first byte) becomes the payload of an
//! ESP packet in a new IPv4 or IPv6 header (as SRC and DST are) from SRC to DST: ESP
//! header (SPI, sequence number),
//! the 8-byte IV, the inner packet, padding to a 4-byte boundary (bytes 1, 2, 3), pad
//! length and next header (4 or 41) sealed by AES-GCM, then the 16-byte tag. Sequence
//! numbers count from 1 across all workers. The IV is the 64-bit sequence number XORed
//! with a random value drawn when the element is built (as Linux's `seqiv`): unique
//! within a run, and a restarted router with the same key does not repeat the nonces
//! of its last run (GCM loses its integrity if a nonce is used twice with one key). The
//! outer header copies the inner packet's TOS (traffic class, so the ECN field as RFC
//! 6040's normal mode) and, for an IPv4 outer header, an IPv4 packet's DF bit; the
//! destination annotation (IPv4 or IPv6) is set to DST.

use super::*;
use crate::args::Args;
use crate::element::*;
use crate::elements::ip::encap::{FixedFields, IpIds, MAX_IP_LEN};
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use ring::rand::SecureRandom;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct ESPEncapClass;

/// Don't Fragment, in the flags and fragment offset word.
const DF_BIT: u16 = 0x4000;
/// The outer IPv6 header (no extension headers).
const OUTER6_LEN: usize = 40;

/// A tunnel's ends: the outer header's family and addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outer {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

impl Outer {
    fn header_len(self) -> usize {
        match self {
            Outer::V4 { .. } => OUTER_LEN,
            Outer::V6 { .. } => OUTER6_LEN,
        }
    }
}

/// SRC or DST: an IPv4 or an IPv6 address.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl FromArg for End {
    const WHAT: &'static str = "IPv4 or IPv6 address";
    fn from_arg(s: &str) -> Option<End> {
        Ipv4Addr::from_arg(s)
            .map(End::V4)
            .or_else(|| Ipv6Addr::from_arg(s).map(End::V6))
    }
}

impl ElementClass for ESPEncapClass {
    fn name(&self) -> &'static str {
        "ESPEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let spi = args.required::<u32>("SPI").map_err(e)?;
        let key = args.required::<KeyArg>("KEY").map_err(e)?;
        let src = args.required::<End>("SRC").map_err(e)?;
        let dst = args.required::<End>("DST").map_err(e)?;
        let ttl = args.keyword::<u8>("TTL").map_err(e)?.unwrap_or(64);
        let esn = args.keyword::<bool>("ESN").map_err(e)?.unwrap_or(false);
        args.finish().map_err(e)?;
        if ttl == 0 {
            return Err(cx.error("TTL must be at least 1"));
        }
        let outer = match (src, dst) {
            (End::V4(s), End::V4(d)) => Outer::V4 {
                src: s.octets(),
                dst: d.octets(),
            },
            (End::V6(s), End::V6(d)) => Outer::V6 {
                src: s.octets(),
                dst: d.octets(),
            },
            _ => return Err(cx.error("SRC and DST must both be IPv4 or both IPv6 addresses")),
        };
        let sa = Sa::new(spi, &key, esn).map_err(e)?;
        let mut mask = [0u8; 8];
        ring::rand::SystemRandom::new()
            .fill(&mut mask)
            .map_err(|_| cx.error("no random numbers from the system for the IVs"))?;
        Ok(Arc::new(ESPEncapSpec {
            shared: Arc::new(Shared {
                sa,
                outer,
                ttl,
                next_seq: AtomicU64::new(1),
                iv_mask: AtomicU64::new(u64::from_ne_bytes(mask)),
                next_id: IpIds::default(),
                drops: AtomicU64::new(0),
            }),
        }))
    }
}

/// The association and counters every worker shares.
pub(super) struct Shared {
    pub(super) sa: Sa,
    pub(super) outer: Outer,
    /// The outer header's TTL or hop limit.
    pub(super) ttl: u8,
    /// The next sequence number to give out.
    pub(super) next_seq: AtomicU64,
    /// XORed into each sequence number to make its IV (taken over, with the
    /// sequence numbers, by the association's element in a replacing configuration).
    pub(super) iv_mask: AtomicU64,
    pub(super) next_id: IpIds,
    pub(super) drops: AtomicU64,
}

struct ESPEncapSpec {
    shared: Arc<Shared>,
}

impl ElementSpec for ESPEncapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ESPEncap {
            shared: self.shared.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![
            HandlerInfo::read("spi"),
            HandlerInfo::read("seq"),
            HandlerInfo::read("drops"),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        match name {
            "spi" => Some(s.sa.spi.to_string()),
            // The last sequence number given out (0 before the first packet; without
            // ESN at most 2^32 - 1, past which packets are dropped).
            "seq" => {
                let last = s.next_seq.load(Ordering::Relaxed) - 1;
                let max = if s.sa.esn { u64::MAX } else { u64::from(u32::MAX) };
                Some(last.min(max).to_string())
            }
            "drops" => Some(s.drops.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// The same association (SPI, key, ESN) goes on with the old element's sequence
    /// numbers and IV mask, so the peer's anti-replay window takes its packets and no
    /// nonce repeats under the key; the outer IDs and drops go on too.
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<ESPEncapSpec>(old) else {
            return false;
        };
        let (s, o) = (&self.shared, &old.shared);
        if !s.sa.same(&o.sa) {
            return false;
        }
        s.next_seq
            .fetch_max(o.next_seq.load(Ordering::Relaxed), Ordering::Relaxed);
        s.iv_mask
            .store(o.iv_mask.load(Ordering::Relaxed), Ordering::Relaxed);
        s.next_id.go_on_from(&o.next_id);
        s.drops
            .fetch_add(o.drops.load(Ordering::Relaxed), Ordering::Relaxed);
        true
    }
}

struct ESPEncap {
    shared: Arc<Shared>,
}

impl Shared {
    /// Encapsulates one packet with sequence number `seq` and outer IP ID `id` (unused
    /// under an IPv6 header); false (the packet unchanged) if it cannot be: not an IP
    /// datagram, too long for the outer header with ESP's overhead, or out of sequence
    /// numbers (32 bits without ESN: the association must not wrap, RFC 4303 3.3.3).
    pub(super) fn encapsulate(&self, p: &mut Packet, seq: u64, id: u16) -> bool {
        if !self.sa.esn && seq > u64::from(u32::MAX) {
            return false;
        }
        let d = p.data();
        let (next, tos, frag) = match d.first().map(|b| b >> 4) {
            Some(4) if d.len() >= 20 => (NEXT_IPV4, d[1], u16::from_be_bytes([d[6], d[7]]) & DF_BIT),
            Some(6) if d.len() >= 40 => (NEXT_IPV6, d[0] << 4 | d[1] >> 4, 0),
            _ => return false,
        };
        let inner = d.len();
        let pad = (4 - (inner + TRAILER) % 4) % 4;
        let sealed = inner + pad + TRAILER;
        let outer_len = self.outer.header_len();
        let front_len = outer_len + ESP_HEADER + IV_LEN;
        let total = front_len + sealed + ICV_LEN;
        // IPv4's total length, IPv6's payload length: 16 bits.
        let too_long = match self.outer {
            Outer::V4 { .. } => total > MAX_IP_LEN,
            Outer::V6 { .. } => total - OUTER6_LEN > usize::from(u16::MAX),
        };
        if too_long || !p.try_put(pad + TRAILER + ICV_LEN) {
            return false;
        }
        if !p.try_push(front_len) {
            p.take(pad + TRAILER + ICV_LEN);
            return false;
        }
        let iv = (seq ^ self.iv_mask.load(Ordering::Relaxed)).to_be_bytes();
        let d = p.data_mut();
        let (front, rest) = d.split_at_mut(front_len);
        let (plain, icv) = rest.split_at_mut(sealed);
        for (i, b) in plain[inner..inner + pad].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        plain[inner + pad] = pad as u8;
        plain[inner + pad + 1] = next;
        let Some(tag) = self.sa.seal(seq, iv, plain) else {
            // (Only for inputs of gigabytes: a packet is never one.)
            return false;
        };
        icv.copy_from_slice(&tag);
        match self.outer {
            Outer::V4 { src, dst } => {
                let fields = FixedFields {
                    tos,
                    frag,
                    ttl: self.ttl,
                    proto: PROTO_ESP,
                    src,
                };
                front[..OUTER_LEN].copy_from_slice(&fields.header(total as u16, id, dst));
            }
            Outer::V6 { src, dst } => {
                // Version 6, the traffic class, flow label 0, payload length, next
                // header ESP, hop limit, addresses.
                let h = &mut front[..OUTER6_LEN];
                h[..4].copy_from_slice(&[0x60 | tos >> 4, tos << 4, 0, 0]);
                h[4..6].copy_from_slice(&((total - OUTER6_LEN) as u16).to_be_bytes());
                h[6] = PROTO_ESP;
                h[7] = self.ttl;
                h[8..24].copy_from_slice(&src);
                h[24..40].copy_from_slice(&dst);
            }
        }
        front[outer_len..outer_len + 4].copy_from_slice(&self.sa.spi.to_be_bytes());
        front[outer_len + 4..outer_len + 8].copy_from_slice(&(seq as u32).to_be_bytes());
        front[outer_len + ESP_HEADER..].copy_from_slice(&iv);
        p.set_network_header(0, outer_len);
        match self.outer {
            Outer::V4 { dst, .. } => p.set_dst_ip_anno(dst),
            Outer::V6 { dst, .. } => p.set_dst_ip6_anno(dst),
        }
        true
    }
}

impl Element for ESPEncap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let s = &*self.shared;
        // A batch's sequence numbers and IDs are reserved together: one atomic add each.
        let n = batch.len();
        let mut seq = s.next_seq.fetch_add(n as u64, Ordering::Relaxed);
        let mut id = s.next_id.take(n);
        let mut drops = 0;
        out.route_each(batch, |p| {
            let ok = s.encapsulate(p, seq, id);
            seq += 1;
            id = id.wrapping_add(1);
            if ok {
                0
            } else {
                drops += 1;
                DROP
            }
        });
        if drops > 0 {
            s.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

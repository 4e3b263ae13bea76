//! `ICMPRewriter(MAPS, DST_ANNO)`: rewrites ICMP errors about packets a rewriter
//! changed, so that they read as errors about the packets before the change. MAPS is a
//! space-separated list of rewriters (IPRewriter, TCPRewriter, UDPRewriter,
//! IPAddrRewriter, IPAddrPairRewriter, ICMPPingRewriter), asked in order.
//!
//! An error (destination unreachable, source quench, redirect, time exceeded,
//! parameter problem) quotes the IP header and 8 bytes of the packet it is about. If
//! that packet's reply flow is mapped, the quoted addresses and ports (an echo
//! request's identifier) become the original ones, with the quoted IP checksum, the
//! quoted UDP checksum (when not 0) and the quoted echo checksum updated
//! incrementally; the error's destination becomes the original source when it was
//! the quoted source; the error's IP checksum is updated and its ICMP checksum
//! computed again. Rewritten errors leave by output 0; other ICMP packets (and errors
//! about no mapped flow) by output 1, or are dropped without it. Packets that are not
//! ICMP, or errors too short to quote an IP header and 8 bytes, are dropped.
//! Configured after the rewriters (Click's `CONFIGURE_PHASE_USER`).

use super::flow::{FlowId, ECHO, ICMP, TCP, UDP};
use super::napt::{RewriterSpec, Shared};
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::checksum::{checksum, update16, update32};
use packet::{Packet, PacketBatch};
use std::sync::Arc;

pub(crate) struct ICMPRewriterClass;

struct Spec {
    maps: Arc<Vec<Arc<Shared>>>,
    dst_anno: bool,
    noutputs: usize,
}

impl ElementClass for ICMPRewriterClass {
    fn name(&self) -> &'static str {
        "ICMPRewriter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn configure_phase(&self) -> i32 {
        configure_phase::DEFAULT + 1
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let maps_text: String = args.required("MAPS").map_err(e)?;
        let dst_anno = args.keyword::<bool>("DST_ANNO").map_err(e)?.unwrap_or(true);
        args.finish().map_err(e)?;
        let mut maps = Vec::new();
        let mut errors = Vec::new();
        for word in maps_text.split_whitespace() {
            match cx.peer(word) {
                None => errors.push(cx.error(format!("no element named '{}'", word))),
                Some(p) => match spec_as::<RewriterSpec>(p.spec.as_ref()) {
                    Some(rw) => maps.push(rw.shared.clone()),
                    None => errors.push(cx.error(format!("element '{}' is not an IP rewriter", word))),
                },
            }
        }
        if let Some(err) = ConfigError::all(errors) {
            return Err(err);
        }
        if maps.is_empty() {
            return Err(cx.error("no IP rewriters supplied"));
        }
        Ok(Arc::new(Spec {
            maps: Arc::new(maps),
            dst_anno,
            noutputs: cx.noutputs,
        }))
    }
}

impl ElementSpec for Spec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ICMPRewriter {
            maps: self.maps.clone(),
            dst_anno: self.dst_anno,
            unmapped: if self.noutputs > 1 { Some(1) } else { None },
        })
    }
}

struct ICMPRewriter {
    maps: Arc<Vec<Arc<Shared>>>,
    dst_anno: bool,
    unmapped: Option<usize>,
}

/// What became of one packet.
enum Verdict {
    Rewritten,
    Unmapped,
    Bad,
}

impl ICMPRewriter {
    fn rewrite(&self, p: &mut Packet) -> Verdict {
        let Some(h) = p.network_header() else {
            return Verdict::Bad;
        };
        if h.len() < 20 || h[9] != ICMP {
            return Verdict::Bad;
        }
        let hl = usize::from(h[0] & 0x0f) * 4;
        if hl < 20 || h.len() < hl + 8 {
            return Verdict::Bad;
        }
        if !matches!(h[hl], 3 | 4 | 5 | 11 | 12) {
            return Verdict::Unmapped;
        }
        // The quoted packet: an IP header and 8 bytes.
        let q = hl + 8;
        let Some(&qv) = h.get(q) else {
            return Verdict::Bad;
        };
        let qhl = usize::from(qv & 0x0f) * 4;
        if qhl < 20 || h.len() < q + qhl + 8 {
            return Verdict::Bad;
        }
        let qp = h[q + 9];
        let t = q + qhl;
        let addr = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let quoted = match qp {
            TCP | UDP => FlowId::new(addr(q + 12), word(t), addr(q + 16), word(t + 2)),
            ICMP if h[t] == ECHO => FlowId::new(addr(q + 12), word(t + 4), addr(q + 16), 0),
            _ => return Verdict::Unmapped,
        };
        let Some(orig) = self.maps.iter().find_map(|m| m.original_of(qp, quoted)) else {
            return Verdict::Unmapped;
        };
        let outer_dst = addr(16);
        let Some(h) = p.network_header_mut() else {
            return Verdict::Bad;
        };
        // The quoted IP header.
        let mut qsum = u16::from_be_bytes([h[q + 10], h[q + 11]]);
        qsum = update32(qsum, quoted.saddr, orig.saddr);
        qsum = update32(qsum, quoted.daddr, orig.daddr);
        h[q + 10..q + 12].copy_from_slice(&qsum.to_be_bytes());
        h[q + 12..q + 16].copy_from_slice(&orig.saddr.to_be_bytes());
        h[q + 16..q + 20].copy_from_slice(&orig.daddr.to_be_bytes());
        // The quoted transport header's 8 bytes.
        match qp {
            TCP | UDP => {
                // The quoted transport checksum follows the addresses and ports: UDP's
                // (unless 0, none), and TCP's when the quote reaches it (18 bytes; an
                // ICMPError quotes the whole packet), as Click's ICMPRewriter does.
                let at = match qp {
                    UDP if (h[t + 6], h[t + 7]) != (0, 0) => Some(t + 6),
                    TCP if h.len() >= t + 18 => Some(t + 16),
                    _ => None,
                };
                if let Some(at) = at {
                    let mut s = u16::from_be_bytes([h[at], h[at + 1]]);
                    s = update32(s, quoted.saddr, orig.saddr);
                    s = update32(s, quoted.daddr, orig.daddr);
                    s = update16(s, quoted.sport, orig.sport);
                    s = update16(s, quoted.dport, orig.dport);
                    if qp == UDP && s == 0 {
                        s = 0xffff;
                    }
                    h[at..at + 2].copy_from_slice(&s.to_be_bytes());
                }
                h[t..t + 2].copy_from_slice(&orig.sport.to_be_bytes());
                h[t + 2..t + 4].copy_from_slice(&orig.dport.to_be_bytes());
            }
            _ => {
                let s = update16(u16::from_be_bytes([h[t + 2], h[t + 3]]), quoted.sport, orig.sport);
                h[t + 2..t + 4].copy_from_slice(&s.to_be_bytes());
                h[t + 4..t + 6].copy_from_slice(&orig.sport.to_be_bytes());
            }
        }
        // The error itself: its destination, its checksums.
        let new_dst = (outer_dst == quoted.saddr).then_some(orig.saddr);
        if let Some(d) = new_dst {
            let s = update32(u16::from_be_bytes([h[10], h[11]]), outer_dst, d);
            h[10..12].copy_from_slice(&s.to_be_bytes());
            h[16..20].copy_from_slice(&d.to_be_bytes());
        }
        let ip_len = usize::from(u16::from_be_bytes([h[2], h[3]])).clamp(hl + 8, h.len());
        h[hl + 2] = 0;
        h[hl + 3] = 0;
        let c = checksum(&h[hl..ip_len]);
        h[hl + 2..hl + 4].copy_from_slice(&c.to_be_bytes());
        if let (Some(d), true) = (new_dst, self.dst_anno) {
            p.set_dst_ip_anno(d.to_be_bytes());
        }
        Verdict::Rewritten
    }
}

impl Element for ICMPRewriter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for mut p in batch.drain() {
            match self.rewrite(&mut p) {
                Verdict::Rewritten => out.push(0, p),
                Verdict::Unmapped => match self.unmapped {
                    Some(o) => out.push(o, p),
                    None => drop(p),
                },
                Verdict::Bad => drop(p),
            }
        }
    }
}

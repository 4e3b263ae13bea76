//! `CheckIP6Header([BADADDRS, OFFSET])` and `MarkIP6Header([OFFSET])`, as Click 2.x.
//!
//! CheckIP6Header checks the IPv6 header at OFFSET: at least 40 bytes, version 6, a
//! payload length that fits the packet, and a source address not in BADADDRS (which
//! always holds `ffff:...:ffff`). A packet that passes gets its network header set
//! there and loses the bytes past its payload length (Ethernet padding); one that
//! fails goes to output 1, or is dropped if output 1 is not connected, and is counted
//! in `drops`. The element's first failure prints `IP6 header check failed`, as Click
//! does. MarkIP6Header only sets the network header, 40 bytes at OFFSET.

use crate::args::{split_words, Args, FromArg};
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The fixed IPv6 header's length.
const HEADER: usize = 40;

/// A space-separated list of IPv6 addresses.
struct Ip6List(Vec<u128>);

impl FromArg for Ip6List {
    const WHAT: &'static str = "list of IPv6 addresses";
    fn from_arg(s: &str) -> Option<Self> {
        split_words(s)
            .iter()
            .map(|w| Ipv6Addr::from_arg(w).map(u128::from))
            .collect::<Option<Vec<_>>>()
            .map(Ip6List)
    }
}

pub struct CheckIP6HeaderClass;

impl ElementClass for CheckIP6HeaderClass {
    fn name(&self) -> &'static str {
        "CheckIP6Header"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let bad = args.positional::<Ip6List>("BADADDRS").map_err(e)?;
        let offset = args.positional::<usize>("OFFSET").map_err(e)?.unwrap_or(0);
        args.finish().map_err(e)?;
        let mut listed_bad = Vec::new();
        for a in bad.map_or(Vec::new(), |l| l.0) {
            if a != u128::MAX && !listed_bad.contains(&a) {
                listed_bad.push(a);
            }
        }
        Ok(Arc::new(CheckIP6HeaderSpec {
            cfg: Arc::new(Config { offset, listed_bad }),
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

struct Config {
    offset: usize,
    /// BADADDRS but `ffff:...:ffff`, which is always bad and tested on its own: with
    /// the default (empty) list, the source test is one comparison.
    listed_bad: Vec<u128>,
}

struct CheckIP6HeaderSpec {
    cfg: Arc<Config>,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for CheckIP6HeaderSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(CheckIP6Header {
            cfg: self.cfg.clone(),
            drops: self.drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| self.drops.load(Ordering::Relaxed).to_string())
    }
}

struct CheckIP6Header {
    cfg: Arc<Config>,
    drops: Arc<AtomicU64>,
}

/// Checks one packet; on success sets its network header and trims it. `LISTED`: the
/// configuration lists bad sources besides `ffff:...:ffff` (a constant, so that the
/// default configuration's loop has no list search in it at all).
#[inline(always)]
fn check<const LISTED: bool>(listed_bad: &[u128], off: usize, p: &mut Packet) -> bool {
    let Some(h) = p.data().get(off..).and_then(|d| d.first_chunk::<HEADER>()) else {
        return false;
    };
    let avail = p.len() - off - HEADER;
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let src = u128::from_be_bytes(h[8..24].try_into().expect("16 bytes"));
    let bad_src = src == u128::MAX || (LISTED && listed_bad.contains(&src));
    if h[0] >> 4 != 6 || plen > avail || bad_src {
        return false;
    }
    p.set_network_header_within(off, HEADER);
    p.take(avail - plen);
    true
}

impl CheckIP6Header {
    /// Checks the batch's packets, sending them on; returns how many failed.
    #[inline(always)]
    fn check_all<const LISTED: bool>(&self, batch: &mut PacketBatch, out: &mut Outputs<'_>) -> u64 {
        // Copied out of the `Arc`: fields behind it would be reloaded after each store
        // into a packet (the compiler cannot rule out that they alias).
        let (listed_bad, off) = (&self.cfg.listed_bad[..], self.cfg.offset);
        let mut failed = 0;
        out.route_each(batch, |p| {
            if check::<LISTED>(listed_bad, off, p) {
                0
            } else {
                failed += 1;
                1
            }
        });
        failed
    }
}

impl Element for CheckIP6Header {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // (Even an empty list's search, tested per packet, cost 9 instructions a packet
        // on the route6 path: the register pressure of the loop.)
        let failed = if self.cfg.listed_bad.is_empty() {
            self.check_all::<false>(batch, out)
        } else {
            self.check_all::<true>(batch, out)
        };
        if failed > 0 && self.drops.fetch_add(failed, Ordering::Relaxed) == 0 {
            crate::warn!("IP6 header check failed");
        }
    }
}

pub struct MarkIP6HeaderClass;

impl ElementClass for MarkIP6HeaderClass {
    fn name(&self) -> &'static str {
        "MarkIP6Header"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let offset = args.positional::<usize>("OFFSET").map_err(e)?.unwrap_or(0);
        args.finish().map_err(e)?;
        Ok(Arc::new(MarkIP6Header { offset }))
    }
}

#[derive(Clone, Copy)]
struct MarkIP6Header {
    offset: usize,
}

impl ElementSpec for MarkIP6Header {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(*self)
    }
}

impl Element for MarkIP6Header {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        for p in batch.iter_mut() {
            // (Header views clamp an offset past the data: a short packet's header
            // reads as missing, and the elements after it treat it so.)
            p.set_network_header(self.offset as isize, HEADER);
        }
        out.push_batch(0, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ip6_packet;
    use super::*;
    use crate::testing::{build_error, Harness};

    #[test]
    fn good_packets_pass_with_their_header_marked_and_padding_trimmed() {
        let good = ip6_packet("2001:db8::1", "2001:db8::2", 64, b"payload!");
        let mut padded = good.clone();
        padded.extend_from_slice(&[0; 6]);
        let mut e = Harness::new(&CheckIP6HeaderClass, "", 1, 2);
        let out = e.push(0, vec![Packet::from_slice(&good), Packet::from_slice(&padded)]);
        assert_eq!(out[0].len(), 2);
        for p in &out[0] {
            assert_eq!(p.data(), &good[..]);
            assert_eq!(p.network_header(), Some(&good[..]));
            assert_eq!(p.network_header_length(), 40);
        }
        assert!(out[1].is_empty());
        assert_eq!(e.read("drops"), "0");
        // Behind an Ethernet header, with OFFSET.
        let mut framed = vec![0u8; 14];
        framed.extend_from_slice(&good);
        let mut e = Harness::new(&CheckIP6HeaderClass, "OFFSET 14", 1, 1);
        let out = e.push(0, vec![Packet::from_slice(&framed)]);
        assert_eq!(out[0][0].network_header(), Some(&good[..]));
    }

    #[test]
    fn bad_packets_go_to_output_1_and_are_counted() {
        let good = ip6_packet("2001:db8::1", "2001:db8::2", 64, b"payload!");
        let mut v4 = good.clone();
        v4[0] = 0x45;
        let mut too_long = good.clone();
        too_long[5] = 9; // payload length 9 > the 8 bytes there
        let all_ones = ip6_packet("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::2", 64, b"");
        let listed = ip6_packet("2001:db8::bad", "2001:db8::2", 64, b"");
        let bad = [
            good[..39].to_vec(),
            v4,
            too_long,
            all_ones.clone(),
            listed.clone(),
        ];
        let mut e = Harness::new(&CheckIP6HeaderClass, "2001:db8::bad fe80::1", 1, 2);
        let mut pkts: Vec<Packet> = bad.iter().map(|b| Packet::from_slice(b)).collect();
        pkts.push(Packet::from_slice(&good));
        let out = e.push(0, pkts);
        assert_eq!(out[0].len(), 1);
        let got: Vec<&[u8]> = out[1].iter().map(|p| p.data()).collect();
        let want: Vec<&[u8]> = bad.iter().map(|b| &b[..]).collect();
        assert_eq!(got, want, "unchanged, in order");
        assert_eq!(e.read("drops"), "5");
        // Without output 1 they are dropped, still counted.
        let mut e = Harness::new(&CheckIP6HeaderClass, "", 1, 1);
        assert!(e.push(0, vec![Packet::from_slice(&good[..39])])[0].is_empty());
        assert_eq!(e.read("drops"), "1");
        // The default list (all-ones only) refuses the all-ones source, and only it.
        let mut e = Harness::new(&CheckIP6HeaderClass, "", 1, 2);
        let mut near = all_ones.clone();
        near[23] = 0xfe; // ffff:...:fffe
        let pkts = [&all_ones, &listed, &near].map(|b| Packet::from_slice(b));
        let out = e.push(0, pkts.into());
        assert_eq!(
            out[0].iter().map(|p| p.data()).collect::<Vec<_>>(),
            [&listed[..], &near[..]]
        );
        assert_eq!(
            out[1].iter().map(|p| p.data()).collect::<Vec<_>>(),
            [&all_ones[..]]
        );
        assert_eq!(e.read("drops"), "1");
    }

    #[test]
    fn mark_sets_the_header_only() {
        let good = ip6_packet("2001:db8::1", "2001:db8::2", 64, b"xy");
        let mut framed = vec![0u8; 14];
        framed.extend_from_slice(&good);
        let mut e = Harness::new(&MarkIP6HeaderClass, "14", 1, 1);
        let out = e.push(0, vec![Packet::from_slice(&framed)]);
        assert_eq!(out[0][0].data(), &framed[..]);
        assert_eq!(out[0][0].network_header(), Some(&good[..]));
        assert_eq!(out[0][0].network_header_length(), 40);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&CheckIP6HeaderClass, "10.0.0.1", 1, 2),
            "e :: CheckIP6Header: BADADDRS expects list of IPv6 addresses"
        );
        assert_eq!(
            build_error(&CheckIP6HeaderClass, "::1, -4", 1, 2),
            "e :: CheckIP6Header: OFFSET expects unsigned integer"
        );
        assert_eq!(
            build_error(&MarkIP6HeaderClass, "0, 1", 1, 1),
            "e :: MarkIP6Header: too many arguments"
        );
    }
}

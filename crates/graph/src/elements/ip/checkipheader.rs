//! `CheckIPHeader` and `CheckIPHeader2`: validate IPv4 headers (Click 2.x semantics).
//!
//! Checks, in Click's order: at least 20 bytes after OFFSET ("tiny packet"), version 4,
//! header length at least 20, IP length neither beyond the packet nor below the header
//! length, the header checksum (unless CHECKSUM false; CheckIPHeader2 skips it by
//! default), and the source address against BADSRC unless the destination is in
//! GOODDST. Good packets get the network header annotation, are trimmed to the IP
//! length (Ethernet padding goes) and get the destination IP annotation.

use super::checkdrops::CheckDrops;
use super::IpList;
use crate::args::{split_words, Args, FromArg, Ipv4Prefix};
use crate::element::*;
use crate::error::ConfigError;
use packet::{checksum, Packet, PacketBatch};
use std::sync::Arc;

const REASON_TEXTS: [&str; 6] = [
    "tiny packet",
    "bad IP version",
    "bad IP header length",
    "bad IP length",
    "bad IP checksum",
    "bad source address",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Tiny = 0,
    BadVersion = 1,
    BadHlen = 2,
    BadIpLen = 3,
    BadChecksum = 4,
    BadSaddr = 5,
}

/// `CheckIPHeader` (checksum checked by default) or `CheckIPHeader2` (not checked).
pub struct CheckIPHeaderClass {
    name: &'static str,
    checksum_default: bool,
}

pub const CHECK_IP_HEADER: CheckIPHeaderClass = CheckIPHeaderClass {
    name: "CheckIPHeader",
    checksum_default: true,
};
pub const CHECK_IP_HEADER2: CheckIPHeaderClass = CheckIPHeaderClass {
    name: "CheckIPHeader2",
    checksum_default: false,
};

/// INTERFACES: `ADDR/PREFIX ...`; the broadcast address of each prefix becomes a bad
/// source, the address itself a good destination; 0.0.0.0 and 255.255.255.255 are bad.
struct Interfaces {
    bad_src: Vec<[u8; 4]>,
    good_dst: Vec<[u8; 4]>,
}

impl FromArg for Interfaces {
    const WHAT: &'static str = "list of IP address prefixes";
    fn from_arg(s: &str) -> Option<Self> {
        let mut r = Interfaces {
            bad_src: Vec::new(),
            good_dst: Vec::new(),
        };
        for w in split_words(s) {
            let p = Ipv4Prefix::from_arg(&w)?;
            let a = u32::from(p.addr);
            let m = u32::from(p.mask);
            r.bad_src.push(((a & m) | !m).to_be_bytes());
            r.good_dst.push(p.addr.octets());
        }
        r.bad_src.push([0, 0, 0, 0]);
        r.bad_src.push([255, 255, 255, 255]);
        Some(r)
    }
}

impl ElementClass for CheckIPHeaderClass {
    fn name(&self) -> &'static str {
        self.name
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let mut bad_src = Vec::new();
        let mut good_dst = Vec::new();
        if let Some(i) = args.keyword::<Interfaces>("INTERFACES").map_err(e)? {
            bad_src = i.bad_src;
            good_dst = i.good_dst;
        }
        if let Some(l) = args.keyword::<IpList>("BADSRC").map_err(e)? {
            bad_src = l.0;
        }
        if let Some(l) = args.keyword::<IpList>("GOODDST").map_err(e)? {
            good_dst = l.0;
        }
        let mut offset = args.keyword::<u32>("OFFSET").map_err(e)?.unwrap_or(0);
        let verbose = args.keyword::<bool>("VERBOSE").map_err(e)?.unwrap_or(false);
        let details = args.keyword::<bool>("DETAILS").map_err(e)?.unwrap_or(false);
        let checksum = args
            .keyword::<bool>("CHECKSUM")
            .map_err(e)?
            .unwrap_or(self.checksum_default);
        // Click 2.x takes one positional argument, an integer OFFSET. Its older
        // `CheckIPHeader(BADSRC, OFFSET)` form is gone: 2.x re-reads the leftover
        // positionals with keyword-only BADSRC/OFFSET, so any other positional use ends
        // in "too many arguments". (The slot names are internal: no keyword matches.)
        let p1 = args.positional::<String>("\u{0}OFFSET").map_err(e)?;
        let p2 = args.positional::<String>("\u{0}EXTRA").map_err(e)?;
        args.finish().map_err(e)?;
        match (p1, p2) {
            (None, _) => {}
            (Some(a), None) => {
                offset = u32::from_arg(&a).ok_or_else(|| cx.error("too many arguments"))?;
            }
            (Some(_), Some(_)) => return Err(cx.error("too many arguments")),
        }
        Ok(Arc::new(CheckIPHeaderSpec {
            cfg: Arc::new(Config {
                offset: offset as usize,
                check_src: !bad_src.is_empty(),
                bad_src,
                good_dst,
                checksum,
            }),
            check_drops: Arc::new(CheckDrops::new(
                format!("{}: IP header check failed", cx.name),
                &REASON_TEXTS,
                details,
                verbose,
            )),
        }))
    }
}

struct Config {
    offset: usize,
    bad_src: Vec<[u8; 4]>,
    good_dst: Vec<[u8; 4]>,
    /// `bad_src` is not empty (one flag test per packet instead of a list walk).
    check_src: bool,
    checksum: bool,
}

struct CheckIPHeaderSpec {
    cfg: Arc<Config>,
    check_drops: Arc<CheckDrops>,
}

impl ElementSpec for CheckIPHeaderSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(CheckIPHeader {
            cfg: self.cfg.clone(),
            check_drops: self.check_drops.clone(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        self.check_drops.handlers()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.check_drops.read_handler(name)
    }
}

struct CheckIPHeader {
    cfg: Arc<Config>,
    check_drops: Arc<CheckDrops>,
}

impl Config {
    // Inlined into the per-packet loop: a call per packet costs more than the checks.
    #[inline(always)]
    fn check(&self, p: &mut Packet, fast: FastCfg) -> Result<(), Reason> {
        let off = fast.offset;
        let d = p.data();
        // One bounds check for the fixed header; the field reads below need none.
        let Some(h) = d.get(off..).and_then(|r| r.first_chunk::<20>()) else {
            return Err(Reason::Tiny);
        };
        let plen = d.len() - off;
        // 0x45 (version 4, no options) is nearly every packet: one comparison.
        let hlen = if h[0] == 0x45 {
            20
        } else {
            if h[0] >> 4 != 4 {
                return Err(Reason::BadVersion);
            }
            let hlen = ((h[0] & 0x0f) as usize) << 2;
            if hlen < 20 {
                return Err(Reason::BadHlen);
            }
            hlen
        };
        let len = u16::from_be_bytes([h[2], h[3]]) as usize;
        if len > plen || len < hlen {
            return Err(Reason::BadIpLen);
        }
        if fast.checksum {
            // hlen <= len <= plen, so the whole header is in the buffer.
            let ok = if hlen == 20 {
                checksum::verify20(h)
            } else {
                checksum::checksum(&d[off..off + hlen]) == 0
            };
            if !ok {
                return Err(Reason::BadChecksum);
            }
        }
        let src = [h[12], h[13], h[14], h[15]];
        let dst = [h[16], h[17], h[18], h[19]];
        if fast.check_src && self.bad_src.contains(&src) && !self.good_dst.contains(&dst) {
            return Err(Reason::BadSaddr);
        }
        // off + hlen <= off + len <= d.len(): the header lies inside the data.
        p.set_network_header_within(off, hlen);
        if plen > len {
            p.take(plen - len);
        }
        p.set_dst_ip_anno(dst);
        Ok(())
    }
}

/// The settings every packet's check reads, copied out of the shared [`Config`] for
/// the batch: kept in registers, where fields behind the `Arc` are reloaded after each
/// store into a packet (the compiler cannot rule out that they alias).
#[derive(Clone, Copy, PartialEq, Eq)]
struct FastCfg {
    offset: usize,
    checksum: bool,
    check_src: bool,
}

impl FastCfg {
    /// `CheckIPHeader` behind `Strip(14)` with no source list.
    const USUAL: FastCfg = FastCfg {
        offset: 0,
        checksum: true,
        check_src: false,
    };
}

/// CheckIPHeader's per-packet decision: output 0 if the header passes, 1 if not.
/// `USUAL`: the settings are [`FastCfg::USUAL`].
struct Verdicts<'a, const USUAL: bool> {
    me: &'a CheckIPHeader,
    fast: FastCfg,
    drops: &'a mut u64,
}

impl<const USUAL: bool> PerPacket for Verdicts<'_, USUAL> {
    #[inline(always)]
    fn verdict(&mut self, p: &mut Packet) -> u8 {
        let fast = if USUAL { FastCfg::USUAL } else { self.fast };
        match self.me.cfg.check(p, fast) {
            Ok(()) => 0,
            Err(r) => {
                self.me.check_drops.failed(r as usize, self.drops);
                // Output 1 if it exists; otherwise the packet is dropped.
                1
            }
        }
    }
}

impl Element for CheckIPHeader {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let mut drops = 0;
        let fast = FastCfg {
            offset: self.cfg.offset,
            checksum: self.cfg.checksum,
            check_src: self.cfg.check_src,
        };
        // The usual configuration (behind `Strip(14)`, checksum checked, no source
        // list) gets a loop of its own with those settings as constants: no per-packet
        // tests of them, and the offset arithmetic folds away.
        if fast == FastCfg::USUAL {
            out.route_each_by(
                batch,
                Verdicts::<true> {
                    me: self,
                    fast,
                    drops: &mut drops,
                },
            );
        } else {
            out.route_each_by(
                batch,
                Verdicts::<false> {
                    me: self,
                    fast,
                    drops: &mut drops,
                },
            );
        }
        self.check_drops.add(drops);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{fix_ip_cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    /// UDP 10.0.0.1 -> 10.0.0.2, IP length 28 (20 + 8 bytes of UDP).
    fn udp28() -> Vec<u8> {
        let mut b = ip_header(0, 28, 0x1234, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        b.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]);
        b
    }

    fn with_src(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut b = udp28();
        b[12..16].copy_from_slice(&src);
        b[16..20].copy_from_slice(&dst);
        fix_ip_cksum(&mut b);
        b
    }

    fn one(h: &mut Harness, bytes: &[u8]) -> (Vec<Packet>, Vec<Packet>) {
        let mut out = h.push_bytes(0, bytes);
        let bad = if out.len() > 1 {
            out.pop().unwrap_or_default()
        } else {
            Vec::new()
        };
        (out.pop().unwrap_or_default(), bad)
    }

    #[test]
    fn good_packet_trims_ethernet_padding_and_sets_annotations() {
        let want = udp28();
        let mut padded = want.clone();
        padded.resize(46, 0); // minimum Ethernet payload
        let mut h = Harness::new(&CHECK_IP_HEADER, "", 1, 2);
        let (good, bad) = one(&mut h, &padded);
        assert!(bad.is_empty());
        let p = &good[0];
        assert_eq!(p.data(), &want[..]);
        assert_eq!(p.network_header_offset(), Some(0));
        assert_eq!(p.network_header_length(), 20);
        assert_eq!(p.anno().dst_ip(), [10, 0, 0, 2]);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn offset_keeps_the_link_header() {
        let mut frame = vec![0xff; 6];
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        frame.extend_from_slice(&udp28());
        let want = frame.clone();
        frame.extend_from_slice(&[0xaa; 4]);
        for cfg in ["14", "OFFSET 14"] {
            let mut h = Harness::new(&CHECK_IP_HEADER, cfg, 1, 1);
            let (good, _) = one(&mut h, &frame);
            assert_eq!(good[0].data(), &want[..]);
            assert_eq!(good[0].network_header_offset(), Some(14));
        }
    }

    #[test]
    fn every_malformed_case_goes_to_output_1_unchanged_with_details() {
        let mut h = Harness::new(&CHECK_IP_HEADER, "DETAILS true", 1, 2);
        let good = udp28();
        let mut cases: Vec<Vec<u8>> = Vec::new();
        cases.push(good[..19].to_vec()); // tiny packet
        let mut v = good.clone();
        v[0] = 0x65; // version 6
        fix_ip_cksum(&mut v);
        cases.push(v);
        let mut v = good.clone();
        v[0] = 0x44; // header length 16
        cases.push(v);
        let mut v = good.clone();
        v[3] = 29; // IP length beyond the packet
        fix_ip_cksum(&mut v);
        cases.push(v);
        let mut v = good.clone();
        v[3] = 19; // IP length shorter than the header
        fix_ip_cksum(&mut v);
        cases.push(v);
        let mut v = good.clone();
        v[0] = 0x46; // 24-byte header but IP length 20
        v[3] = 20;
        v.truncate(24);
        fix_ip_cksum(&mut v);
        cases.push(v);
        let mut v = good.clone();
        v[11] ^= 1; // checksum
        cases.push(v);
        for c in &cases {
            let (ok, bad) = one(&mut h, c);
            assert!(ok.is_empty(), "{:x?} accepted", c);
            assert_eq!(bad[0].data(), &c[..]);
            assert_eq!(bad[0].network_header_offset(), None);
        }
        assert_eq!(h.read("drops"), "7");
        assert_eq!(
            h.read("drop_details"),
            "1\ttiny packet\n1\tbad IP version\n1\tbad IP header length\n\
             3\tbad IP length\n1\tbad IP checksum\n0\tbad source address\n"
        );
    }

    #[test]
    fn without_output_1_bad_packets_are_dropped_and_counted() {
        let mut h = Harness::new(&CHECK_IP_HEADER, "", 1, 1);
        let out = h.push(
            0,
            vec![Packet::from_slice(&[0x45; 10]), Packet::from_slice(&udp28())],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 1);
        assert_eq!(h.read("drops"), "1");
        assert!(h.spec.read_handler("drop_details").is_none());
        assert_eq!(h.spec.handlers(), vec![HandlerInfo::read("drops")]);
    }

    #[test]
    fn checksum_off_and_checkipheader2() {
        let mut v = udp28();
        v[11] ^= 1;
        for (class, cfg) in [(&CHECK_IP_HEADER, "CHECKSUM false"), (&CHECK_IP_HEADER2, "")] {
            let mut h = Harness::new(class, cfg, 1, 2);
            let (ok, _) = one(&mut h, &v);
            assert_eq!(ok[0].data(), &v[..]);
        }
        let mut h = Harness::new(&CHECK_IP_HEADER2, "CHECKSUM true", 1, 2);
        assert!(one(&mut h, &v).0.is_empty());
    }

    #[test]
    fn options_are_accepted_and_counted_in_the_header_length() {
        // IHL 6: four bytes of options (NOP NOP NOP EOL), IP length 32.
        let mut v = udp28();
        v[0] = 0x46;
        v[3] = 32;
        v.splice(20..20, [1, 1, 1, 0]);
        fix_ip_cksum(&mut v);
        let mut h = Harness::new(&CHECK_IP_HEADER, "", 1, 2);
        let (ok, _) = one(&mut h, &v);
        assert_eq!(ok[0].data(), &v[..]);
        assert_eq!(ok[0].network_header_length(), 24);
        assert_eq!(ok[0].transport_header().unwrap(), &v[24..]);
    }

    #[test]
    fn source_addresses() {
        // Default: no source check at all, even 0.0.0.0 and 255.255.255.255 pass.
        let mut h = Harness::new(&CHECK_IP_HEADER, "", 1, 2);
        assert_eq!(one(&mut h, &with_src([0, 0, 0, 0], [10, 0, 0, 2])).0.len(), 1);
        assert_eq!(one(&mut h, &with_src([255; 4], [10, 0, 0, 2])).0.len(), 1);
        assert_eq!(one(&mut h, &with_src([224, 0, 0, 1], [10, 0, 0, 2])).0.len(), 1);

        let mut h = Harness::new(&CHECK_IP_HEADER, "BADSRC 10.0.0.255 1.2.3.4, DETAILS true", 1, 2);
        let b = with_src([10, 0, 0, 255], [10, 0, 0, 2]);
        let (ok, bad) = one(&mut h, &b);
        assert!(ok.is_empty());
        assert_eq!(bad[0].data(), &b[..]);
        assert_eq!(one(&mut h, &with_src([1, 2, 3, 4], [9, 9, 9, 9])).1.len(), 1);
        assert_eq!(one(&mut h, &with_src([0, 0, 0, 0], [9, 9, 9, 9])).0.len(), 1);
        assert!(h.read("drop_details").ends_with("2\tbad source address\n"));

        let mut h = Harness::new(&CHECK_IP_HEADER, "BADSRC 10.0.0.255, GOODDST 10.0.0.1", 1, 2);
        assert_eq!(one(&mut h, &with_src([10, 0, 0, 255], [10, 0, 0, 1])).0.len(), 1);
        assert_eq!(one(&mut h, &with_src([10, 0, 0, 255], [10, 0, 0, 3])).1.len(), 1);

        // INTERFACES: subnet broadcasts plus 0.0.0.0 and 255.255.255.255 are bad
        // sources, except towards the interface addresses.
        let mut h = Harness::new(&CHECK_IP_HEADER, "INTERFACES 10.0.0.1/24 18.32.9.44/28", 1, 2);
        for src in [
            [10, 0, 0, 255],
            [18, 32, 9, 47],
            [0, 0, 0, 0],
            [255, 255, 255, 255],
        ] {
            assert_eq!(one(&mut h, &with_src(src, [10, 0, 0, 2])).1.len(), 1, "{:?}", src);
            assert_eq!(
                one(&mut h, &with_src(src, [18, 32, 9, 44])).0.len(),
                1,
                "{:?}",
                src
            );
        }
        assert_eq!(one(&mut h, &with_src([18, 32, 9, 46], [10, 0, 0, 2])).0.len(), 1);
    }

    #[test]
    fn config_errors() {
        assert_eq!(
            build_error(&CHECK_IP_HEADER, "VERBOSE maybe", 1, 1),
            "e :: CheckIPHeader: VERBOSE expects bool"
        );
        // Click 2.x no longer accepts the old positional BADSRC form.
        for cfg in ["1.2.3.4, 0", "1.2.3.4", "14, 0", "1.2.3.4, 0, 3"] {
            assert_eq!(
                build_error(&CHECK_IP_HEADER, cfg, 1, 1),
                "e :: CheckIPHeader: too many arguments",
                "{}",
                cfg
            );
        }
        assert_eq!(
            build_error(&CHECK_IP_HEADER, "BADSRC 1.2.3", 1, 1),
            "e :: CheckIPHeader: BADSRC expects list of IP addresses"
        );
        assert_eq!(
            build_error(&CHECK_IP_HEADER, "FOO 1", 1, 1),
            "e :: CheckIPHeader: bad keyword 'FOO'"
        );
    }
}

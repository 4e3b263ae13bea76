//! `IPFragmenter(MTU [, HONOR_DF, VERBOSE, I<keywords> HEADROOM])`: fragments IP packets
//! whose network part exceeds MTU, as Click 2.x does.
//!
//! Packets with network length <= MTU pass unchanged. Larger packets with DF set (and
//! HONOR_DF true, the default), or whose first fragment could not carry 8 data bytes,
//! go to output 1 (dropped if unused) and count as drops. Otherwise the first fragment
//! is the input trimmed to header + ((MTU - hlen) & ~7) data bytes, with everything in
//! front of the network header kept, MF set and (when DF was ignored) DF cleared and a
//! random IP ID. Later fragments are fresh packets starting at the IP header: the base
//! header, then only the options with the copy bit set, padded with EOL to a multiple
//! of 4; data sizes are multiples of 8 except the last; MF set on all but the last
//! (unless the input had MF); the annotations of the input; fresh checksums.

use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::views::ipv4::{IP_DF, IP_MF};
use packet::views::Ipv4Header;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct IPFragmenterClass;

impl ElementClass for IPFragmenterClass {
    fn name(&self) -> &'static str {
        "IPFragmenter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let mtu = args.required::<u32>("MTU").map_err(e)?;
        let honor_df = args.positional::<bool>("HONOR_DF").map_err(e)?.unwrap_or(true);
        let verbose = args.positional::<bool>("VERBOSE").map_err(e)?.unwrap_or(false);
        let headroom = args
            .keyword::<u32>("HEADROOM")
            .map_err(e)?
            .unwrap_or(packet::DEFAULT_HEADROOM as u32);
        args.finish().map_err(e)?;
        if mtu < 8 {
            return Err(cx.error("MTU must be at least 8"));
        }
        Ok(Arc::new(IPFragmenterSpec {
            cfg: Config {
                mtu: mtu as usize,
                honor_df,
                verbose,
                headroom: headroom as usize,
            },
            fragments: Arc::new(AtomicU64::new(0)),
            drops: Arc::new(AtomicU64::new(0)),
        }))
    }
}

#[derive(Clone, Copy)]
struct Config {
    mtu: usize,
    honor_df: bool,
    verbose: bool,
    headroom: usize,
}

struct IPFragmenterSpec {
    cfg: Config,
    fragments: Arc<AtomicU64>,
    drops: Arc<AtomicU64>,
}

impl ElementSpec for IPFragmenterSpec {
    fn instantiate(&self, w: WorkerInfo) -> Box<dyn Element> {
        Box::new(IPFragmenter {
            cfg: self.cfg,
            fragments: self.fragments.clone(),
            drops: self.drops.clone(),
            rng: seed(w.index),
            scratch: Vec::new(),
        })
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops"), HandlerInfo::read("fragments")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.load(Ordering::Relaxed).to_string()),
            "fragments" => Some(self.fragments.load(Ordering::Relaxed).to_string()),
            _ => None,
        }
    }
}

fn seed(index: usize) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (t ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
}

struct IPFragmenter {
    cfg: Config,
    fragments: Arc<AtomicU64>,
    drops: Arc<AtomicU64>,
    rng: u64,
    scratch: Vec<u8>,
}

/// The options of `opts` that must be copied into every fragment (copy bit 0x80),
/// padded with EOL to a multiple of 4 bytes. Returns the bytes written into `out`.
fn copied_options(opts: &[u8], out: &mut [u8; 40]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < opts.len() {
        let t = opts[i];
        let len = if t == 1 {
            1
        } else {
            if t == 0 || i + 1 >= opts.len() {
                break;
            }
            let l = opts[i + 1] as usize;
            if l < 2 || i + l > opts.len() {
                break;
            }
            l
        };
        if t & 0x80 != 0 {
            out[n..n + len].copy_from_slice(&opts[i..i + len]);
            n += len;
        }
        i += len;
    }
    while n & 3 != 0 {
        out[n] = 0;
        n += 1;
    }
    n
}

enum Outcome {
    Whole(Packet),
    TooBig(Packet),
    Fragmented,
    Unparseable,
}

impl IPFragmenter {
    fn random_id(&mut self) -> u16 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 48) as u16
    }

    fn handle(&mut self, mut p: Packet, out: &mut Outputs<'_>, nfrags: &mut u64) -> Outcome {
        let Some(noff) = p.network_header_offset() else {
            return Outcome::Unparseable;
        };
        let Some(nh) = p.network_header() else {
            return Outcome::Unparseable;
        };
        if nh.len() <= self.cfg.mtu {
            return Outcome::Whole(p);
        }
        let Some(ip) = Ipv4Header::new_checked(nh) else {
            return Outcome::Unparseable;
        };
        let hlen = ip.header_len();
        if hlen < 20 || hlen > nh.len() || noff < 0 {
            return Outcome::Unparseable;
        }
        let first_dlen = (self.cfg.mtu as i64 - hlen as i64) & !7;
        if (ip.dont_frag() && self.cfg.honor_df) || first_dlen < 8 {
            if self.cfg.verbose || self.drops.load(Ordering::Relaxed) < 5 {
                crate::warn!(
                    "IPFragmenter({}) DF {} {} len={}",
                    self.cfg.mtu,
                    super::ip_text(ip.src()),
                    super::ip_text(ip.dst()),
                    p.len()
                );
            }
            return Outcome::TooBig(p);
        }
        let first_dlen = first_dlen as usize;
        // Data length per the IP length field, never beyond the bytes present.
        let in_dlen = (ip.total_len() as usize)
            .saturating_sub(hlen)
            .min(nh.len() - hlen);

        let new_id = ip.dont_frag().then(|| self.random_id());
        let nh = p.network_header_mut().unwrap_or(&mut []);
        let Some(mut ipm) = Ipv4Header::new_checked(nh) else {
            return Outcome::Unparseable;
        };
        if let Some(id) = new_id {
            ipm.set_ident(id);
            ipm.set_frag_field(ipm.frag_field() & !IP_DF);
        }
        let had_mf = ipm.more_frags();
        ipm.set_total_len((hlen + first_dlen) as u16);
        ipm.set_frag_field(ipm.frag_field() | IP_MF);
        ipm.fill_checksum();

        // Later fragments' header: the base header plus the copied options.
        let nh = ipm.into_inner();
        let mut base = [0u8; 60];
        let mut opts = [0u8; 40];
        let olen = copied_options(&nh[20..hlen], &mut opts);
        let out_hlen = 20 + olen;
        base[..20].copy_from_slice(&nh[..20]);
        base[20..out_hlen].copy_from_slice(&opts[..olen]);
        // Click sets only ip_hl: the version nibble is copied from the input.
        base[0] = (nh[0] & 0xf0) | (out_hlen / 4) as u8;
        let frag0 = u16::from_be_bytes([nh[6], nh[7]]);
        // The data of the later fragments, kept aside (in a buffer reused from packet
        // to packet) because the first fragment, pushed first, is the trimmed input.
        self.scratch.clear();
        if first_dlen < in_dlen {
            self.scratch
                .extend_from_slice(&nh[hlen + first_dlen..hlen + in_dlen]);
        }
        let anno = *p.anno();
        let keep = noff as usize + hlen + first_dlen;
        p.take(p.len().saturating_sub(keep));
        out.push(0, p);
        *nfrags += 1;

        let rest = &self.scratch[..];
        let mut off = 0;
        while off < rest.len() {
            let mut dlen = self.cfg.mtu.saturating_sub(out_hlen) & !7;
            if dlen == 0 {
                // Options leave no room for data (Click would loop forever): stop.
                break;
            }
            if dlen + off > rest.len() {
                dlen = rest.len() - off;
            }
            let last = off + dlen >= rest.len();
            let mut q = Packet::alloc_with_headroom(self.cfg.headroom, out_hlen + dlen);
            {
                let qd = q.data_mut();
                qd[..out_hlen].copy_from_slice(&base[..out_hlen]);
                qd[out_hlen..].copy_from_slice(&rest[off..off + dlen]);
                if let Some(mut qip) = Ipv4Header::new_checked(&mut qd[..]) {
                    let mut f = frag0.wrapping_add(((first_dlen + off) >> 3) as u16);
                    if last && !had_mf {
                        f &= !IP_MF;
                    }
                    qip.set_frag_field(f);
                    qip.set_total_len((out_hlen + dlen) as u16);
                    qip.fill_checksum();
                }
            }
            q.set_network_header(0, out_hlen);
            *q.anno_mut() = anno;
            out.push(0, q);
            *nfrags += 1;
            off += dlen;
        }
        Outcome::Fragmented
    }
}

impl IPFragmenter {
    /// A batch in which some packet does not fit the MTU (or has no network header):
    /// packet by packet. Out of line, so the usual call keeps a small frame.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, batch: &mut PacketBatch, out: &mut Outputs<'_>) {
        let mut nfrags = 0u64;
        for p in batch.drain() {
            match self.handle(p, out, &mut nfrags) {
                Outcome::Whole(p) => out.push(0, p),
                Outcome::TooBig(p) => {
                    // Counted at once: the "first 5 drops" message reads the count.
                    self.drops.fetch_add(1, Ordering::Relaxed);
                    out.push(1, p);
                }
                Outcome::Fragmented => {}
                // No usable IPv4 header on a packet too big for the MTU: dropped.
                Outcome::Unparseable => {}
            }
        }
        if nfrags > 0 {
            self.fragments.fetch_add(nfrags, Ordering::Relaxed);
        }
    }
}

impl Element for IPFragmenter {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        // Most batches hold only packets that fit the MTU: they move on whole. The
        // longest network part decides, found without a branch per packet (a packet
        // without a network header counts as too long: the slow path drops it).
        let longest = batch.iter().fold(0usize, |m, p| {
            m.max(p.network_header().map_or(usize::MAX, <[u8]>::len))
        });
        if longest <= self.cfg.mtu {
            out.push_batch(0, batch);
        } else {
            self.push_slow(batch, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{cksum, fix_ip_cksum, ip_header};
    use super::*;
    use crate::testing::{build_error, Harness};

    /// An IP packet with header `hdr` (checksum fixed) and `dlen` data bytes 0, 1, 2...
    fn packet(hdr: &[u8], dlen: usize) -> Vec<u8> {
        let mut b = hdr.to_vec();
        let total = hdr.len() + dlen;
        b[2] = (total >> 8) as u8;
        b[3] = total as u8;
        fix_ip_cksum(&mut b);
        b.extend((0..dlen).map(|i| (i % 251) as u8));
        b
    }

    fn ip_packet(b: &[u8], noff: usize) -> Packet {
        let mut p = Packet::from_slice(b);
        let hl = ((b[noff] & 0xf) as usize) * 4;
        p.set_network_header(noff as isize, hl);
        p
    }

    /// A fragment as the test expects it: `hdr` with IHL from its length, the given
    /// fragment field and total length, fresh checksum, then `data`.
    fn frag(hdr: &[u8], frag_field: u16, data: &[u8]) -> Vec<u8> {
        let mut b = hdr.to_vec();
        b[0] = 0x40 | (hdr.len() / 4) as u8;
        let total = hdr.len() + data.len();
        b[2] = (total >> 8) as u8;
        b[3] = total as u8;
        b[6] = (frag_field >> 8) as u8;
        b[7] = frag_field as u8;
        fix_ip_cksum(&mut b);
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn small_packets_pass_unchanged() {
        let h = ip_header(0, 0, 7, 0x4000, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 556);
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 2);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0][0].data(), &b[..]);
        assert_eq!(e.read("fragments"), "0");
    }

    #[test]
    fn batches_mixing_small_big_and_headerless_packets() {
        let h = ip_header(0, 0, 3, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let hdf = ip_header(0, 0, 4, 0x4000, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let small = packet(&h, 30);
        // Network part exactly the MTU (100): passes; one byte more with DF: output 1.
        let exact = packet(&h, 80);
        let df = packet(&hdf, 81);
        // 20 + 96 bytes, no DF: (100 - 20) & ~7 = 80 data bytes, then 16.
        let big = packet(&h, 96);
        let headerless = Packet::from_slice(&small);
        let mut e = Harness::new(&IPFragmenterClass, "100", 1, 2);
        let out = e.push(
            0,
            vec![
                ip_packet(&small, 0),
                ip_packet(&df, 0),
                ip_packet(&exact, 0),
                headerless,
                ip_packet(&big, 0),
                ip_packet(&small, 0),
            ],
        );
        let data = |v: &Vec<Packet>| v.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>();
        assert_eq!(
            data(&out[0]),
            vec![
                small.clone(),
                exact.clone(),
                frag(&h, 0x2000, &big[20..100]),
                frag(&h, 10, &big[100..]),
                small.clone(),
            ]
        );
        assert_eq!(data(&out[1]), vec![df]);
        assert_eq!(
            (e.read("drops").as_str(), e.read("fragments").as_str()),
            ("1", "2")
        );
        // All within the MTU, the largest exactly at it: the batch passes whole.
        let out = e.push(0, vec![ip_packet(&exact, 0), ip_packet(&small, 0)]);
        assert_eq!(data(&out[0]), vec![exact, small]);
        assert!(out[1].is_empty());
    }

    #[test]
    fn two_fragments_with_link_header_in_front() {
        let h = ip_header(0, 0, 0x1234, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 980);
        let data = &b[20..];
        let mut framed = vec![0xee; 14];
        framed.extend_from_slice(&b);
        let mut p = ip_packet(&framed, 14);
        p.anno_mut().set_paint(7);
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 2);
        let out = e.push(0, vec![p]);
        assert_eq!(out[0].len(), 2);
        // First: 552 data bytes (556 rounded down to 8), MF; link header kept.
        let mut want0 = vec![0xee; 14];
        want0.extend_from_slice(&frag(&h, 0x2000, &data[..552]));
        assert_eq!(out[0][0].data(), &want0[..]);
        assert_eq!(out[0][0].network_header_offset(), Some(14));
        // Second: the remaining 428 bytes at offset 552/8 = 69, no MF, starts at IP.
        let want1 = frag(&h, 69, &data[552..]);
        assert_eq!(out[0][1].data(), &want1[..]);
        assert_eq!(out[0][1].network_header_offset(), Some(0));
        assert_eq!(out[0][1].network_header_length(), 20);
        assert_eq!(out[0][1].anno().paint(), 7);
        assert_eq!(e.read("fragments"), "2");
        assert_eq!(e.read("drops"), "0");
    }

    #[test]
    fn only_copied_options_go_to_later_fragments() {
        // Options (12 bytes): record route (7 bytes, not copied), loose source route
        // with pointer 4 (3 bytes, copied), NOP, EOL.
        let mut h = ip_header(0, 0, 0x0101, 0, 64, 6, [10, 0, 0, 1], [10, 0, 0, 2]);
        h[0] = 0x48;
        h.extend_from_slice(&[7, 7, 4, 0, 0, 0, 0, 0x83, 3, 4, 1, 0]);
        let b = packet(&h, 200);
        let data = &b[32..];
        let mut e = Harness::new(&IPFragmenterClass, "100", 1, 1);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0].len(), 3);
        // First: (100 - 32) & ~7 = 64 data bytes, all options kept.
        assert_eq!(out[0][0].data(), &frag(&h, 0x2000, &data[..64])[..]);
        // Later: header 20 + [0x83, 3, 4, EOL] = 24; (100 - 24) & ~7 = 72 data bytes.
        let mut h2 = h[..20].to_vec();
        h2.extend_from_slice(&[0x83, 3, 4, 0]);
        assert_eq!(out[0][1].data(), &frag(&h2, 0x2000 | 8, &data[64..136])[..]);
        assert_eq!(out[0][2].data(), &frag(&h2, 17, &data[136..])[..]);
        assert_eq!(out[0][2].network_header_length(), 24);
    }

    #[test]
    fn fragmenting_a_fragment_keeps_offset_and_mf() {
        // Offset 10 (80 bytes), MF set: every piece keeps MF, offsets add.
        let h = ip_header(0, 0, 9, 0x2000 | 10, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 100);
        let data = &b[20..];
        let mut e = Harness::new(&IPFragmenterClass, "68", 1, 1);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        // (68 - 20) & ~7 = 48 per fragment: 48, 48, 4.
        assert_eq!(out[0].len(), 3);
        assert_eq!(out[0][0].data(), &frag(&h, 0x2000 | 10, &data[..48])[..]);
        assert_eq!(out[0][1].data(), &frag(&h, 0x2000 | 16, &data[48..96])[..]);
        assert_eq!(out[0][2].data(), &frag(&h, 0x2000 | 22, &data[96..])[..]);
    }

    #[test]
    fn df_goes_to_output_1_or_is_dropped() {
        let h = ip_header(0, 0, 5, 0x4000, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 600);
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 2);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert!(out[0].is_empty());
        assert_eq!(out[1][0].data(), &b[..]);
        assert_eq!(e.read("drops"), "1");
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 1);
        assert!(e.push(0, vec![ip_packet(&b, 0)])[0].is_empty());
        assert_eq!(
            (e.read("drops").as_str(), e.read("fragments").as_str()),
            ("1", "0")
        );
        // MTU too small for 8 data bytes: output 1 too, DF or not.
        let h = ip_header(0, 0, 5, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 40);
        let mut e = Harness::new(&IPFragmenterClass, "MTU 27", 1, 2);
        assert_eq!(e.push(0, vec![ip_packet(&b, 0)])[1][0].data(), &b[..]);
    }

    #[test]
    fn df_ignored_clears_df_and_picks_a_new_id() {
        let h = ip_header(0, 0, 5, 0x4000, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let b = packet(&h, 600);
        let data = &b[20..];
        let mut e = Harness::new(&IPFragmenterClass, "576, false", 1, 2);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0].len(), 2);
        let id = [out[0][0].data()[4], out[0][0].data()[5]];
        let mut h2 = h.clone();
        h2[4..6].copy_from_slice(&id);
        assert_eq!(out[0][0].data(), &frag(&h2, 0x2000, &data[..552])[..]);
        assert_eq!(out[0][1].data(), &frag(&h2, 69, &data[552..])[..]);
        assert_eq!(cksum(&out[0][1].data()[..20]), 0);
    }

    #[test]
    fn ip_length_shorter_than_frame_uses_ip_length() {
        // IP length 600 in a 700-byte network part: later fragments stop at 600.
        let h = ip_header(0, 0, 5, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let mut b = packet(&h, 580);
        b.extend_from_slice(&[0xcc; 100]);
        let data = &b[20..600];
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 1);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0].len(), 2);
        assert_eq!(out[0][0].data(), &frag(&h, 0x2000, &data[..552])[..]);
        assert_eq!(out[0][1].data(), &frag(&h, 69, &data[552..])[..]);
    }

    #[test]
    fn ip_length_far_below_frame_still_cuts_first_fragment_at_mtu() {
        // IP length 100 in a 700-byte network part (nothing trimmed it): Click cuts the
        // first fragment at hlen + 552 bytes, writes IP length 572 and MF, and makes no
        // later fragment since its data (80 bytes by the IP length) is used up.
        let h = ip_header(0, 0, 5, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        let mut b = packet(&h, 80);
        b.extend_from_slice(&[0xcc; 600]);
        let mut e = Harness::new(&IPFragmenterClass, "576", 1, 1);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &frag(&h, 0x2000, &b[20..572])[..]);
        assert_eq!(e.read("fragments"), "1");
    }

    #[test]
    fn later_fragments_keep_the_version_nibble() {
        // Version 5 (nothing checked it): Click sets only ip_hl in later fragments.
        let mut h = ip_header(0, 0, 3, 0, 64, 17, [10, 0, 0, 1], [10, 0, 0, 2]);
        h[0] = 0x55;
        let b = packet(&h, 60);
        let mut e = Harness::new(&IPFragmenterClass, "68", 1, 1);
        let out = e.push(0, vec![ip_packet(&b, 0)]);
        assert_eq!(out[0].len(), 2);
        let mut want1 = vec![0x55, 0, 0, 32, 0, 3, 0, 6, 64, 17, 0, 0];
        want1.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        fix_ip_cksum(&mut want1);
        want1.extend_from_slice(&b[68..80]);
        assert_eq!(out[0][1].data(), &want1[..]);
    }

    #[test]
    fn config_errors() {
        let e = |c: &str| build_error(&IPFragmenterClass, c, 1, 1);
        assert_eq!(e("7"), "e :: IPFragmenter: MTU must be at least 8");
        assert_eq!(e(""), "e :: IPFragmenter: missing mandatory MTU argument");
        assert_eq!(e("576, maybe"), "e :: IPFragmenter: HONOR_DF expects bool");
        assert_eq!(e("576, true, false, 1"), "e :: IPFragmenter: too many arguments");
    }
}

//! `IPGWOptions(MYADDR [, OTHERADDRS])`: processes the IP options every router must
//! process on the packets it forwards, as Click's IPGWOptions: Record Route and
//! Timestamp (RFC 791; RFC 1812 5.3.13.5 and 5.3.13.6). Source routes are processed
//! only by the router a packet is addressed to, so they pass untouched here, as do
//! options the element does not know (RFC 1812 5.3.13.1).
//!
//! MYADDR is the address of the interface the packet leaves by: the address Record
//! Route and Timestamp flag 1 record. A Timestamp with prespecified addresses (flag 3)
//! is stamped when the next address is MYADDR or one of OTHERADDRS, the router's other
//! addresses. A changed header gets a recomputed checksum; an unchanged one (no
//! options, a full Record Route, a prespecified address of someone else) is left
//! exactly as it came.
//!
//! A packet whose options are malformed goes to output 1 unchanged (dropped if output
//! 1 is unused), with the ICMP_PARAMPROB annotation set to the offset in the IP header
//! of the byte at fault, for `ICMPError(..., parameterproblem)`; `drops` counts them,
//! and packets with no IPv4 header at their network header annotation (dropped).
//!
//! Timestamps are milliseconds since midnight UT (RFC 791) of the wall clock when the
//! batch is processed (read once per batch, only if a packet needs one), as Click
//! stamps the current time rather than the packet's arrival time.

use super::IpList;
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::anno::ICMP_PARAMPROB_ANNO_OFFSET;
use packet::{Packet, PacketBatch, Timestamp};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const IPOPT_EOL: u8 = 0;
const IPOPT_NOP: u8 = 1;
const IPOPT_RR: u8 = 7;
const IPOPT_TS: u8 = 68;

/// Timestamp flags (RFC 791): timestamps only; address and timestamp; timestamps at
/// prespecified addresses.
const TS_ONLY: u8 = 0;
const TS_AND_ADDR: u8 = 1;
const TS_PRESPECIFIED: u8 = 3;

/// The IPGWOptions class. `clock` is the time Timestamp options record: the wall
/// clock in the router ([`IPGW_OPTIONS`]), a fixed one in tests.
pub struct IPGWOptionsClass {
    clock: fn() -> Timestamp,
}

pub const IPGW_OPTIONS: IPGWOptionsClass = IPGWOptionsClass {
    clock: Timestamp::now,
};

impl ElementClass for IPGWOptionsClass {
    fn name(&self) -> &'static str {
        "IPGWOptions"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let my_addr = args.required::<Ipv4Addr>("MYADDR").map_err(e)?;
        let others = args.positional::<IpList>("OTHERADDRS").map_err(e)?;
        args.finish().map_err(e)?;
        Ok(Arc::new(IPGWOptionsSpec(Arc::new(Config {
            addrs: Addrs {
                mine: my_addr.octets(),
                others: others.map(|l| l.0).unwrap_or_default(),
            },
            clock: self.clock,
            drops: AtomicU64::new(0),
        }))))
    }
}

/// The router's addresses, as the options see them.
struct Addrs {
    /// The outgoing interface's address (MYADDR).
    mine: [u8; 4],
    /// The router's other addresses (OTHERADDRS).
    others: Vec<[u8; 4]>,
}

impl Addrs {
    fn is_ours(&self, a: [u8; 4]) -> bool {
        a == self.mine || self.others.contains(&a)
    }
}

struct Config {
    addrs: Addrs,
    clock: fn() -> Timestamp,
    drops: AtomicU64,
}

struct IPGWOptionsSpec(Arc<Config>);

impl ElementSpec for IPGWOptionsSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(IPGWOptions(self.0.clone()))
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        vec![HandlerInfo::read("drops")]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| self.0.drops.load(Ordering::Relaxed).to_string())
    }
}

struct IPGWOptions(Arc<Config>);

/// Milliseconds since midnight UT, RFC 791's standard timestamp (below 2^31, so its
/// high "nonstandard" bit is clear).
fn ms_since_midnight(t: Timestamp) -> u32 {
    let secs = t.sec.rem_euclid(86_400) as u32;
    secs * 1000 + (t.nsec / 1_000_000).min(999)
}

/// The clock, read at most once per batch: only packets with Timestamp options need it.
struct BatchClock {
    read: fn() -> Timestamp,
    ms: Option<[u8; 4]>,
}

impl BatchClock {
    fn stamp(&mut self) -> [u8; 4] {
        let read = self.read;
        *self
            .ms
            .get_or_insert_with(|| ms_since_midnight(read()).to_be_bytes())
    }
}

/// What became of one packet.
enum Outcome {
    /// Options processed; the header is as it was, or rewritten with its checksum.
    Forward,
    /// Malformed options: the offset of the byte at fault in the IP header.
    Problem(u8),
    /// No IPv4 header at the network header annotation.
    NoHeader,
}

/// The longest IPv4 header (IHL 15).
const MAX_HEADER: usize = 60;

/// Processes the options of the IPv4 header at `p`'s network header. They are worked
/// on in a copy, written back only when all of them were good, so a packet sent to
/// output 1 is the packet that came in, for ICMPError to quote. Kept out of line:
/// packets with options are rare, and the per-packet loop stays small without them.
#[inline(never)]
fn process(p: &mut Packet, addrs: &Addrs, clock: &mut BatchClock) -> Outcome {
    let Some(nh) = super::ipv4_header_mut(p) else {
        return Outcome::NoHeader;
    };
    let hlen = nh.len();
    let mut copy = [0u8; MAX_HEADER];
    let h = &mut copy[..hlen];
    h.copy_from_slice(nh);
    match process_options(h, addrs, clock) {
        Ok(false) => Outcome::Forward,
        Ok(true) => {
            super::set_header_checksum(h);
            nh.copy_from_slice(h);
            Outcome::Forward
        }
        // (Offsets are below the header length, at most 60.)
        Err(at) => Outcome::Problem(at as u8),
    }
}

/// Walks the options of header `h` (options from byte 20 to its end) and records in
/// place. Ok(true) if anything was written; Err(offset in `h` of the byte at fault).
fn process_options(h: &mut [u8], addrs: &Addrs, clock: &mut BatchClock) -> Result<bool, usize> {
    let mut at = 20;
    let mut changed = false;
    while at < h.len() {
        let kind = h[at];
        if kind == IPOPT_EOL {
            break;
        }
        if kind == IPOPT_NOP {
            at += 1;
            continue;
        }
        // An option cut off after its type byte: the type is what cannot be right.
        let len = usize::from(*h.get(at + 1).ok_or(at)?);
        if len < 2 || at + len > h.len() {
            return Err(at + 1);
        }
        let opt = &mut h[at..at + len];
        let wrote = match kind {
            IPOPT_RR => record_route(opt, addrs.mine),
            IPOPT_TS => timestamp(opt, addrs, clock),
            _ => Ok(false),
        };
        changed |= wrote.map_err(|off| at + off)?;
        at += len;
    }
    Ok(changed)
}

/// Record Route (RFC 791): the outgoing address goes at the pointer (1-based, at
/// least 4), which moves on by 4. A pointer past the length means the route is full:
/// the option is left alone. Some room but less than an address is an error.
/// Err carries the offset in the option of the byte at fault.
fn record_route(opt: &mut [u8], mine: [u8; 4]) -> Result<bool, usize> {
    if opt.len() < 3 {
        return Err(1);
    }
    let ptr = usize::from(opt[2]);
    if ptr < 4 {
        return Err(2);
    }
    if ptr > opt.len() {
        return Ok(false);
    }
    let slot = opt.get_mut(ptr - 1..ptr + 3).ok_or(2usize)?;
    slot.copy_from_slice(&mine);
    opt[2] += 4;
    Ok(true)
}

/// Timestamp (RFC 791): the pointer (1-based, at least 5) names the next entry, 4
/// bytes for flag 0 (a timestamp), 8 for flags 1 (our address and a timestamp) and 3
/// (a prespecified address, stamped only if it is one of ours). A pointer past the
/// length means the option is full: the overflow count (high nibble of byte 3) goes
/// up, and its own overflow is an error. Some room but less than an entry, another
/// flag or a pointer below 5 are errors too. Err carries the offset in the option.
fn timestamp(opt: &mut [u8], addrs: &Addrs, clock: &mut BatchClock) -> Result<bool, usize> {
    if opt.len() < 4 {
        return Err(1);
    }
    let ptr = usize::from(opt[2]);
    let overflow = opt[3] >> 4;
    let flag = opt[3] & 0x0f;
    if ptr < 5 {
        return Err(2);
    }
    let entry = match flag {
        TS_ONLY => 4,
        TS_AND_ADDR | TS_PRESPECIFIED => 8,
        _ => return Err(3),
    };
    if ptr > opt.len() {
        if overflow == 0x0f {
            return Err(3);
        }
        opt[3] += 0x10;
        return Ok(true);
    }
    let slot = opt.get_mut(ptr - 1..ptr - 1 + entry).ok_or(2usize)?;
    let (addr, stamp) = slot.split_at_mut(entry - 4);
    match flag {
        TS_AND_ADDR => addr.copy_from_slice(&addrs.mine),
        TS_PRESPECIFIED => {
            let named: [u8; 4] = (&*addr).try_into().expect("an 8-byte entry");
            if !addrs.is_ours(named) {
                return Ok(false);
            }
        }
        _ => {}
    }
    stamp.copy_from_slice(&clock.stamp());
    opt[2] += entry as u8;
    Ok(true)
}

impl Element for IPGWOptions {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let cfg = &*self.0;
        let mut clock = BatchClock {
            read: cfg.clock,
            ms: None,
        };
        let mut drops = 0;
        out.route_each(batch, |p| {
            // Nearly every packet has no options: one length check and one byte.
            match p.network_header_chunk_mut::<20>() {
                Some(h) if h[0] & 0x0f == 5 => return 0,
                Some(_) => {}
                None => {
                    drops += 1;
                    return DROP;
                }
            }
            match process(p, &cfg.addrs, &mut clock) {
                Outcome::Forward => 0,
                Outcome::Problem(at) => {
                    p.anno_mut().set_u8_at(ICMP_PARAMPROB_ANNO_OFFSET, at);
                    drops += 1;
                    1
                }
                Outcome::NoHeader => {
                    drops += 1;
                    DROP
                }
            }
        });
        if drops > 0 {
            cfg.drops.fetch_add(drops, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::cksum;
    use super::*;
    use crate::testing::{build_error, Harness};

    /// 05:07:09.123 UT: 18_429_123 ms since midnight, 0x011934c3.
    fn fixed_clock() -> Timestamp {
        Timestamp::new(1_641_618_429, 123_456_789)
    }
    const STAMP: [u8; 4] = [0x01, 0x19, 0x34, 0xc3];

    const CLASS: IPGWOptionsClass = IPGWOptionsClass { clock: fixed_clock };
    const MY: [u8; 4] = [18, 26, 4, 1];
    const PAYLOAD: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

    /// An IPv4 header from 10.0.0.1 to 10.0.0.2 with `opts` (a multiple of 4 bytes)
    /// and a correct checksum, followed by 4 payload bytes.
    fn with_options(opts: &[u8]) -> Vec<u8> {
        assert_eq!(opts.len() % 4, 0);
        let hlen = 20 + opts.len();
        let total = (hlen + PAYLOAD.len()) as u16;
        let mut b = vec![0x40 | (hlen / 4) as u8, 0, (total >> 8) as u8, total as u8];
        b.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0]);
        b.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        b.extend_from_slice(opts);
        let c = cksum(&b);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b.extend_from_slice(&PAYLOAD);
        b
    }

    fn ip_packet(bytes: &[u8]) -> Packet {
        let mut p = Packet::from_slice(bytes);
        p.set_network_header(0, usize::from(bytes[0] & 0x0f) * 4);
        p
    }

    /// Packets out of output 1: their bytes and ICMP_PARAMPROB annotation.
    type Rejected = Vec<(Vec<u8>, u8)>;

    /// Pushes one packet; returns the bytes out of output 0 and what came out of 1.
    fn run(h: &mut Harness, bytes: &[u8]) -> (Vec<Vec<u8>>, Rejected) {
        let out = h.push(0, vec![ip_packet(bytes)]);
        let zero = out[0].iter().map(|p| p.data().to_vec()).collect();
        let one = out
            .get(1)
            .map(|v| {
                v.iter()
                    .map(|p| (p.data().to_vec(), p.anno().u8_at(ICMP_PARAMPROB_ANNO_OFFSET)))
                    .collect()
            })
            .unwrap_or_default();
        (zero, one)
    }

    /// The packet must come out of output 0 as `want`.
    fn forwards(h: &mut Harness, input: &[u8], want: &[u8]) {
        let (zero, one) = run(h, input);
        assert!(one.is_empty(), "sent to output 1: {:?}", one);
        assert_eq!(zero, vec![want.to_vec()]);
    }

    /// The packet must come out of output 1 unchanged, with ICMP_PARAMPROB `at`.
    fn rejects(h: &mut Harness, input: &[u8], at: u8) {
        let (zero, one) = run(h, input);
        assert!(zero.is_empty(), "forwarded: {:02x?}", zero);
        assert_eq!(one, vec![(input.to_vec(), at)]);
    }

    #[test]
    fn record_route_records_at_the_pointer_until_full() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let empty = with_options(&[7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let one = with_options(&[7, 11, 8, 18, 26, 4, 1, 0, 0, 0, 0, 1]);
        let two = with_options(&[7, 11, 12, 18, 26, 4, 1, 18, 26, 4, 1, 1]);
        forwards(&mut h, &empty, &one);
        forwards(&mut h, &one, &two);
        // Full (pointer 12 past length 11): untouched, down to a wrong checksum.
        let mut full = two.clone();
        full[10] ^= 0x5a;
        forwards(&mut h, &full, &full);
        // A route recorded by someone else first.
        let theirs = with_options(&[7, 11, 8, 9, 9, 9, 9, 0, 0, 0, 0, 0]);
        let ours = with_options(&[7, 11, 12, 9, 9, 9, 9, 18, 26, 4, 1, 0]);
        forwards(&mut h, &theirs, &ours);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn timestamp_flag_0_records_the_time() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let [a, b, c, d] = STAMP;
        forwards(
            &mut h,
            &with_options(&[68, 12, 5, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]),
            &with_options(&[68, 12, 9, 0x00, a, b, c, d, 0, 0, 0, 0]),
        );
        forwards(
            &mut h,
            &with_options(&[68, 12, 9, 0x00, 7, 7, 7, 7, 0, 0, 0, 0]),
            &with_options(&[68, 12, 13, 0x00, 7, 7, 7, 7, a, b, c, d]),
        );
    }

    #[test]
    fn timestamp_flag_1_records_address_and_time() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let [a, b, c, d] = STAMP;
        let [m0, m1, m2, m3] = MY;
        forwards(
            &mut h,
            &with_options(&[68, 12, 5, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]),
            &with_options(&[68, 12, 13, 0x01, m0, m1, m2, m3, a, b, c, d]),
        );
    }

    #[test]
    fn timestamp_flag_3_stamps_only_our_addresses() {
        let [a, b, c, d] = STAMP;
        let opts = |ptr: u8, first: [u8; 4], second: [u8; 4]| {
            let mut o = vec![68, 20, ptr, 0x03];
            o.extend_from_slice(&[18, 26, 4, 1]);
            o.extend_from_slice(&first);
            o.extend_from_slice(&[10, 9, 9, 9]);
            o.extend_from_slice(&second);
            with_options(&o)
        };
        let mut h = Harness::new(&CLASS, "18.26.4.1, 10.8.8.8 10.9.9.9", 1, 2);
        // MYADDR first, then one of OTHERADDRS.
        forwards(&mut h, &opts(5, [0; 4], [0; 4]), &opts(13, [a, b, c, d], [0; 4]));
        forwards(
            &mut h,
            &opts(13, [1, 2, 3, 4], [0; 4]),
            &opts(21, [1, 2, 3, 4], [a, b, c, d]),
        );
        // 10.9.9.9 is not ours without OTHERADDRS: untouched.
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let theirs = opts(13, [1, 2, 3, 4], [0; 4]);
        forwards(&mut h, &theirs, &theirs);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn full_timestamp_counts_overflow_until_the_count_overflows() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let ts = |flags: u8| with_options(&[68, 8, 9, flags, 1, 1, 1, 1]);
        forwards(&mut h, &ts(0x00), &ts(0x10));
        forwards(&mut h, &ts(0x21), &ts(0x31));
        forwards(&mut h, &ts(0xe3), &ts(0xf3));
        // Overflow 15 cannot count one more: the flags byte, offset 20 + 3, is at fault.
        rejects(&mut h, &ts(0xf1), 23);
        // A length 4 option has no room at all: always full.
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        forwards(
            &mut h,
            &with_options(&[68, 4, 8, 0x00]),
            &with_options(&[68, 4, 8, 0x10]),
        );
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn malformed_options_go_to_output_1_with_the_offset_at_fault() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        // Record Route pointer below 4: the pointer, at 20 + 2.
        rejects(&mut h, &with_options(&[7, 7, 3, 0, 0, 0, 0, 0]), 22);
        // Room for part of an address only (pointer 8 in a length 9 option).
        rejects(&mut h, &with_options(&[7, 9, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 22);
        // Record Route without a pointer byte: the length, 20 + 1.
        rejects(&mut h, &with_options(&[7, 2, 1, 1]), 21);
        // Length 1, after a NOP: the length byte, at 22.
        rejects(&mut h, &with_options(&[1, 68, 1, 0]), 22);
        // Length past the header's end (24 bytes): the length byte.
        rejects(&mut h, &with_options(&[7, 40, 4, 0]), 21);
        // An option cut off after its type byte, the header's last: the type byte.
        rejects(&mut h, &with_options(&[1, 1, 1, 68]), 23);
        // Timestamp pointer below 5.
        rejects(&mut h, &with_options(&[68, 8, 4, 0, 0, 0, 0, 0]), 22);
        // Timestamp flag 2 does not exist: the flags byte.
        rejects(&mut h, &with_options(&[68, 8, 5, 0x02, 0, 0, 0, 0]), 23);
        // Flag 1 with 4 bytes of room for an 8-byte entry: the pointer.
        rejects(
            &mut h,
            &with_options(&[68, 12, 9, 0x01, 1, 1, 1, 1, 0, 0, 0, 0]),
            22,
        );
        // Timestamp of length 3: no flags byte, the length is wrong.
        rejects(&mut h, &with_options(&[68, 3, 5, 0]), 21);
        assert_eq!(h.read("drops"), "10");
    }

    #[test]
    fn a_bad_option_after_a_good_one_leaves_the_packet_as_it_came() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        // Record Route with room (recorded in the copy), then a Timestamp at 27 whose
        // pointer, at 29, is 4.
        let input = with_options(&[7, 7, 4, 0, 0, 0, 0, 68, 4, 4, 0, 0]);
        rejects(&mut h, &input, 29);
        // Without output 1: dropped, still counted.
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 1);
        let (zero, one) = run(&mut h, &input);
        assert!(zero.is_empty() && one.is_empty());
        assert_eq!(h.read("drops"), "1");
    }

    #[test]
    fn nop_eol_and_other_options() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        // NOPs before Record Route; after the EOL, bytes that would be a bad option
        // are not options at all.
        forwards(
            &mut h,
            &with_options(&[1, 1, 7, 7, 4, 0, 0, 0, 0, 0, 7, 2]),
            &with_options(&[1, 1, 7, 7, 8, 18, 26, 4, 1, 0, 7, 2]),
        );
        // A security option and a loose source route pass untouched around a
        // Timestamp that is recorded.
        let [a, b, c, d] = STAMP;
        forwards(
            &mut h,
            &with_options(&[
                130, 4, 0xaa, 0xbb, 131, 7, 4, 1, 2, 3, 4, 68, 8, 5, 0, 0, 0, 0, 0, 0,
            ]),
            &with_options(&[
                130, 4, 0xaa, 0xbb, 131, 7, 4, 1, 2, 3, 4, 68, 8, 9, 0, a, b, c, d, 0,
            ]),
        );
        // Only NOPs and EOLs, and only unknown options: nothing changes.
        let quiet = with_options(&[1, 1, 1, 0]);
        forwards(&mut h, &quiet, &quiet);
        let lsrr = with_options(&[131, 7, 4, 1, 2, 3, 4, 0]);
        forwards(&mut h, &lsrr, &lsrr);
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn packets_without_options_pass_untouched() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let plain = with_options(&[]);
        let mut bad_checksum = plain.clone();
        bad_checksum[11] ^= 1;
        let out = h.push(0, vec![ip_packet(&plain), ip_packet(&bad_checksum)]);
        assert_eq!(out[0].len(), 2);
        assert_eq!(out[0][0].data(), &plain[..]);
        assert_eq!(out[0][1].data(), &bad_checksum[..]);
        assert!(out[1].is_empty());
        assert_eq!(h.read("drops"), "0");
    }

    #[test]
    fn packets_without_an_ip_header_are_dropped_and_counted() {
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let plain = with_options(&[]);
        // No network header annotation.
        let unmarked = Packet::from_slice(&plain);
        // Fewer than 20 bytes.
        let mut short = Packet::from_slice(&plain[..19]);
        short.set_network_header(0, 20);
        // IHL 6 with 20 bytes of data; IHL 4.
        let mut cut = Packet::from_slice(&plain[..20]);
        cut.data_mut()[0] = 0x46;
        cut.set_network_header(0, 24);
        let mut tiny_ihl = ip_packet(&plain);
        tiny_ihl.data_mut()[0] = 0x44;
        let out = h.push(0, vec![unmarked, short, cut, tiny_ihl, ip_packet(&plain)]);
        assert_eq!(out[0].len(), 1);
        assert_eq!(out[0][0].data(), &plain[..]);
        assert!(out[1].is_empty());
        assert_eq!(h.read("drops"), "4");
    }

    #[test]
    fn works_on_the_header_where_the_annotation_says() {
        // An Ethernet header in front: the options are found from the network header.
        let ip = with_options(&[7, 7, 4, 0, 0, 0, 0, 0]);
        let mut frame = vec![0xee; 14];
        frame.extend_from_slice(&ip);
        let mut p = Packet::from_slice(&frame);
        p.set_network_header(14, 28);
        let mut want = vec![0xee; 14];
        want.extend_from_slice(&with_options(&[7, 7, 8, 18, 26, 4, 1, 0]));
        let mut h = Harness::new(&CLASS, "18.26.4.1", 1, 2);
        let out = h.push(0, vec![p]);
        assert_eq!(out[0][0].data(), &want[..]);
    }

    #[test]
    fn milliseconds_since_midnight() {
        assert_eq!(ms_since_midnight(fixed_clock()), 18_429_123);
        assert_eq!(ms_since_midnight(Timestamp::new(86_400 * 3, 0)), 0);
        assert_eq!(
            ms_since_midnight(Timestamp::new(86_400 * 3 - 1, 999_999_999)),
            86_399_999
        );
        // One second before the epoch is 23:59:59 UT.
        assert_eq!(ms_since_midnight(Timestamp::new(-1, 5_000_000)), 86_399_005);
    }

    #[test]
    fn configuration_errors() {
        assert_eq!(
            build_error(&CLASS, "", 1, 2),
            "e :: IPGWOptions: missing mandatory MYADDR argument"
        );
        assert_eq!(
            build_error(&CLASS, "18.26.4.1, 10.0.0.1 10.0.0", 1, 2),
            "e :: IPGWOptions: OTHERADDRS expects list of IP addresses"
        );
        assert_eq!(
            build_error(&CLASS, "18.26.4.1, 10.0.0.1, 10.0.0.2", 1, 2),
            "e :: IPGWOptions: too many arguments"
        );
        assert_eq!(
            build_error(&CLASS, "me", 1, 2),
            "e :: IPGWOptions: MYADDR expects IP address"
        );
    }
}

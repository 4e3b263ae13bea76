//! RSS for AF_PACKET ports: the Toeplitz hash and a live indirection table, computed by
//! a BPF program that the kernel runs for each frame to choose the fanout group's
//! socket (`PACKET_FANOUT_EBPF`), as a multi-queue NIC's RSS chooses a receive queue.
//!
//! The program hashes exactly what [`classify::Toeplitz::hash_frame`] hashes (a TCP or
//! UDP 4-tuple, else the 2-tuple of IPv4 and IPv6 packets, 0 for anything else; VLAN
//! tags and IPv6 extension headers skipped alike), so a frame lands on the queue
//! [`classify::RssSettings::queue_for_frame`] names. Its key's per-byte tables and the
//! indirection table sit in one BPF array map of one entry.
//!
//! Flow rules come first: each is compiled into the program as tests of the fields the
//! hash reads (and the protocol), and a frame that passes one goes to its queue
//! unhashed. The tests run where the program has parsed the frame, once for each
//! kind of packet it tells apart (IPv4 or IPv6, ports or none); a rule that cannot
//! match a kind is not compiled there.
//!
//! A change of key, table or rules builds a new map and program and hands the program to the
//! fanout group (`PACKET_FANOUT_DATA`). The kernel publishes it with one pointer store
//! and frees the old one after a grace period, so each frame is steered entirely by the
//! old settings or entirely by the new ones.
//!
//! What the program sees: the kernel runs it on the socket buffer with its data at the
//! network header and the outer VLAN tag, if any, already moved out of the frame into
//! the buffer's metadata (`skb_vlan_untag`), with `skb->protocol` the type behind it.
//! A second (inner) tag is still in the data, and the program steps over it.

use crate::bpf::asm::*;
use crate::bpf::{self, BPF_MAP_TYPE_ARRAY};
use classify::rss::{Family, FlowRule, RssSettings, MAX_INPUT};
use classify::RETA_SIZE;
use std::os::fd::{AsRawFd, OwnedFd};

/// The name the program is loaded under (as `bpftool prog` lists it).
pub const PROGRAM_NAME: &str = "brickroute_rss";

/// Bytes of the key's tables at the start of the map's value: a 256-entry `u32` table
/// per hash input byte.
const TABLES_BYTES: usize = MAX_INPUT * 256 * 4;
/// The value: the tables, then the indirection table as 128 `u32` queue numbers.
const VALUE_BYTES: usize = TABLES_BYTES + RETA_SIZE * 4;

/// Offset of `protocol` in `struct __sk_buff`.
const SKB_PROTOCOL: i16 = 16;

// The program's stack (offsets from r10):
/// The map key, 0.
const KEY_AT: i16 = -4;
/// An inner VLAN tag: TCI, then the type behind it.
const TAG_AT: i16 = -8;
/// IPv4: the 20-byte header, so that its addresses (bytes 12..20) are at `V4_INPUT`,
/// followed by the 4 bytes of ports: the 12-byte hash input, contiguous.
const V4_HEADER_AT: i16 = -64;
const V4_INPUT: i16 = V4_HEADER_AT + 12;
const V4_PORTS_AT: i16 = V4_HEADER_AT + 20;
/// IPv6: the 40-byte header, addresses at `V6_INPUT` (bytes 8..40), ports behind them.
const V6_HEADER_AT: i16 = -112;
const V6_INPUT: i16 = V6_HEADER_AT + 8;
const V6_PORTS_AT: i16 = V6_HEADER_AT + 40;
/// The next-header value of the IPv6 walk (a `u32`).
const V6_NEXT_AT: i16 = -120;
/// An extension header's first two bytes: next header and length.
const V6_EXT_AT: i16 = -124;

/// How many IPv6 extension headers the walk looks at, as `hash_ipv6_packet` does.
const V6_WALK: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Tag,
    Ethertype,
    Ipv4,
    V4Ports,
    V4Two,
    Ipv6,
    /// Step k of the extension-header walk.
    V6Step(usize),
    V6Ext(usize),
    V6Ah(usize),
    V6Ports,
    V6Two,
    Queue,
    Zero,
    /// Past flow rule `.1` of the rules compiled at site `.0`.
    RuleMiss(usize, usize),
}

/// Where a packet's fields lie on the program's stack when its rules are tested.
struct Site {
    family: Family,
    src: i16,
    dst: i16,
    /// The ports, when the packet has them.
    ports: Option<i16>,
    /// The protocol: a byte of the IPv4 header, or the IPv6 walk's `u32`.
    proto: (u8, i16),
}

/// Compiles `rules` at `site` (number `n`): the first that the packet passes sets r0 to
/// its queue and ends the program; a packet that passes none goes on. Returns true if
/// one rule tests nothing here (`ip queue 1` for an IPv4 packet): every packet stops
/// there, so the rules after it, and the hash, are not compiled (the verifier refuses
/// a program with code no path reaches).
fn rules_at(a: &mut Asm, n: usize, site: &Site, rules: &[FlowRule]) -> bool {
    for (i, r) in rules.iter().enumerate() {
        let wrong_family = r.family.is_some_and(|f| f != site.family);
        let needs_ports = r.sport.is_some() || r.dport.is_some();
        if wrong_family || (needs_ports && site.ports.is_none()) {
            continue;
        }
        let miss = Label::RuleMiss(n, i);
        let tests_before = a.len();
        if let Some(p) = r.proto {
            a.op(site.proto.0, R1, R10, site.proto.1, 0);
            a.jump(JNE32_K, R1, i32::from(p), miss);
        }
        for (prefix, at) in [(r.src, site.src), (r.dst, site.dst)] {
            let Some(prefix) = prefix else { continue };
            let (addr, mask) = prefix.bytes();
            for w in 0..addr.len() / 4 {
                let word =
                    |b: &[u8]| i32::from_ne_bytes([b[4 * w], b[4 * w + 1], b[4 * w + 2], b[4 * w + 3]]);
                let m = word(&mask);
                if m == 0 {
                    continue;
                }
                a.op(LDX_W, R1, R10, at + 4 * w as i16, 0);
                a.op(AND32_K, R1, 0, 0, m);
                a.jump(JNE32_K, R1, word(&addr), miss);
            }
        }
        if let Some(ports) = site.ports {
            for (port, at) in [(r.sport, ports), (r.dport, ports + 2)] {
                if let Some(p) = port {
                    a.op(LDX_H, R1, R10, at, 0);
                    a.jump(JNE32_K, R1, wire16(p.to_be_bytes()), miss);
                }
            }
        }
        let unconditional = a.len() == tests_before;
        a.op(MOV64_K, R0, 0, 0, i32::from(r.queue));
        a.op(EXIT, 0, 0, 0, 0);
        if unconditional {
            return true;
        }
        a.label(miss);
    }
    false
}

type Asm = crate::bpf::asm::Asm<Label>;

/// `r0 = bpf_skb_load_bytes(skb, r9 + extra, r10 + to, len)`: copies `len` bytes from
/// `extra` bytes past the IP header's offset (r9) to the stack; r0 is 0 when the frame
/// held them. The kernel runs the program with the buffer's data at the network
/// header, so offsets count from there. This helper reads the whole frame, also the
/// part past the buffer's linear head (a large frame's payload, or the headers of a
/// frame a driver or a sending socket left in fragments).
fn load(a: &mut Asm, extra: i32, to: i16, len: i32) {
    a.op(MOV64_X, R1, R6, 0, 0);
    a.op(MOV64_X, R2, R9, 0, 0);
    if extra != 0 {
        a.op(ADD64_K, R2, 0, 0, extra);
    }
    a.op(MOV64_X, R3, R10, 0, 0);
    a.op(ADD64_K, R3, 0, 0, i32::from(to));
    a.op(MOV64_K, R4, 0, 0, len);
    a.op(CALL, 0, 0, 0, HELPER_SKB_LOAD_BYTES);
}

/// `r8 = hash of the n input bytes at r10 + at`: the XOR of each byte's table entry
/// (r7 points at the tables).
fn hash(a: &mut Asm, at: i16, n: usize) {
    a.op(MOV64_K, R8, 0, 0, 0);
    for i in 0..n {
        a.op(LDX_B, R1, R10, at + i as i16, 0);
        a.op(LSH64_K, R1, 0, 0, 2);
        a.op(ADD64_K, R1, 0, 0, (i * 256 * 4) as i32);
        a.op(ADD64_X, R1, R7, 0, 0);
        a.op(LDX_W, R1, R1, 0, 0);
        a.op(XOR64_X, R8, R1, 0, 0);
    }
    a.jump(JA, 0, 0, Label::Queue);
}

/// At `at`: steps over the IPv6 extension header at r9 (whose length byte L makes it
/// `(L + plus) << shift` bytes long), keeps its next-header field, and goes to `next`;
/// to the 2-tuple hash if the frame ends inside it.
fn skip_extension(a: &mut Asm, at: Label, plus: i32, shift: i32, next: Label) {
    a.label(at);
    load(a, 0, V6_EXT_AT, 2);
    a.jump(JNE_K, R0, 0, Label::V6Two);
    a.op(LDX_B, R1, R10, V6_EXT_AT, 0);
    a.op(STX_W, R10, R1, V6_NEXT_AT, 0);
    a.op(LDX_B, R2, R10, V6_EXT_AT + 1, 0);
    a.op(ADD64_K, R2, 0, 0, plus);
    a.op(LSH64_K, R2, 0, 0, shift);
    a.op(ADD64_X, R9, R2, 0, 0);
    a.jump(JA, 0, 0, next);
}

/// Site number `n` of the program: the rules, then, unless one stops every packet, the
/// hash of the site's input (source and destination address, and its ports if any,
/// which lie right behind the addresses).
fn rules_then_hash(a: &mut Asm, n: usize, site: &Site, rules: &[FlowRule]) {
    if rules_at(a, n, site, rules) {
        return;
    }
    let address = match site.family {
        Family::V4 => 4,
        Family::V6 => 16,
    };
    let ports = if site.ports.is_some() { 4 } else { 0 };
    hash(a, site.src, 2 * address + ports);
}

/// The program's instructions, reading the map `map_fd`, with `rules` ahead of the hash.
fn instructions(map_fd: i32, rules: &[FlowRule]) -> Vec<u64> {
    use Label::*;
    let mut a = Asm::new();
    a.op(MOV64_X, R6, R1, 0, 0); // r6 = skb (kept across calls)
    a.op(ST_W, R10, 0, KEY_AT, 0);
    a.ld_map_fd(R1, map_fd);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, i32::from(KEY_AT));
    a.op(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM);
    a.jump(JEQ_K, R0, 0, Zero); // (an array map always has entry 0)
    a.op(MOV64_X, R7, R0, 0, 0); // r7 = the tables, then the indirection table
    a.op(MOV64_K, R8, 0, 0, 0); // r8 = the hash: 0 unless a hash is computed below
    a.op(MOV64_K, R9, 0, 0, 0); // r9 = the IP header's offset from the network header
    a.op(LDX_W, R2, R6, SKB_PROTOCOL, 0);
    a.jump(JEQ_K, R2, wire16([0x81, 0x00]), Tag);
    a.jump(JEQ_K, R2, wire16([0x88, 0xa8]), Tag);
    a.jump(JA, 0, 0, Ethertype);

    a.label(Tag);
    load(&mut a, 0, TAG_AT, 4);
    a.jump(JNE_K, R0, 0, Queue);
    a.op(LDX_H, R2, R10, TAG_AT + 2, 0);
    a.op(MOV64_K, R9, 0, 0, 4);

    a.label(Ethertype);
    a.jump(JEQ_K, R2, wire16([0x08, 0x00]), Ipv4);
    a.jump(JEQ_K, R2, wire16([0x86, 0xdd]), Ipv6);
    a.jump(JA, 0, 0, Queue);

    a.label(Ipv4);
    load(&mut a, 0, V4_HEADER_AT, 20);
    a.jump(JNE_K, R0, 0, Queue);
    a.op(LDX_B, R1, R10, V4_HEADER_AT, 0);
    a.op(MOV64_X, R2, R1, 0, 0);
    a.op(RSH64_K, R2, 0, 0, 4);
    a.jump(JNE_K, R2, 4, Queue); // not version 4
    a.op(AND64_K, R1, 0, 0, 0x0f);
    a.jump(JLT_K, R1, 5, Queue); // header length under 20 bytes
    a.op(LSH64_K, R1, 0, 0, 2);
    a.op(ADD64_X, R9, R1, 0, 0); // r9 = the transport header's offset
    a.op(LDX_H, R2, R10, V4_HEADER_AT + 6, 0);
    a.op(AND64_K, R2, 0, 0, wire16([0x3f, 0xff])); // more fragments, fragment offset
    a.jump(JNE_K, R2, 0, V4Two);
    a.op(LDX_B, R2, R10, V4_HEADER_AT + 9, 0);
    a.jump(JEQ_K, R2, 6, V4Ports);
    a.jump(JEQ_K, R2, 17, V4Ports);
    a.jump(JA, 0, 0, V4Two);
    a.label(V4Ports);
    load(&mut a, 0, V4_PORTS_AT, 4);
    a.jump(JNE_K, R0, 0, V4Two);
    let v4 = |ports| Site {
        family: Family::V4,
        src: V4_INPUT,
        dst: V4_INPUT + 4,
        ports,
        proto: (LDX_B, V4_HEADER_AT + 9),
    };
    rules_then_hash(&mut a, 0, &v4(Some(V4_PORTS_AT)), rules);
    a.label(V4Two);
    rules_then_hash(&mut a, 1, &v4(None), rules);

    a.label(Ipv6);
    load(&mut a, 0, V6_HEADER_AT, 40);
    a.jump(JNE_K, R0, 0, Queue);
    a.op(LDX_B, R1, R10, V6_HEADER_AT, 0);
    a.op(RSH64_K, R1, 0, 0, 4);
    a.jump(JNE_K, R1, 6, Queue); // not version 6
    a.op(LDX_B, R1, R10, V6_HEADER_AT + 6, 0);
    a.op(STX_W, R10, R1, V6_NEXT_AT, 0);
    a.op(ADD64_K, R9, 0, 0, 40);
    for k in 0..V6_WALK {
        a.label(V6Step(k));
        a.op(LDX_W, R1, R10, V6_NEXT_AT, 0);
        a.jump(JEQ_K, R1, 6, V6Ports);
        a.jump(JEQ_K, R1, 17, V6Ports);
        a.jump(JEQ_K, R1, 0, V6Ext(k)); // hop-by-hop options
        a.jump(JEQ_K, R1, 43, V6Ext(k)); // routing
        a.jump(JEQ_K, R1, 60, V6Ext(k)); // destination options
        a.jump(JEQ_K, R1, 51, V6Ah(k)); // authentication header
        a.jump(JA, 0, 0, V6Two); // fragment header, or any other protocol
        let next = if k + 1 < V6_WALK { V6Step(k + 1) } else { V6Two };
        // Length in 8-byte units, not counting the first 8.
        skip_extension(&mut a, V6Ext(k), 1, 3, next);
        // Length in 4-byte units, not counting the first 8.
        skip_extension(&mut a, V6Ah(k), 2, 2, next);
    }
    a.label(V6Ports);
    load(&mut a, 0, V6_PORTS_AT, 4);
    a.jump(JNE_K, R0, 0, V6Two);
    let v6 = |ports| Site {
        family: Family::V6,
        src: V6_INPUT,
        dst: V6_INPUT + 16,
        ports,
        proto: (LDX_W, V6_NEXT_AT),
    };
    rules_then_hash(&mut a, 2, &v6(Some(V6_PORTS_AT)), rules);
    a.label(V6Two);
    rules_then_hash(&mut a, 3, &v6(None), rules);

    // The queue: the indirection table's entry for the hash's low 7 bits.
    a.label(Queue);
    a.op(AND64_K, R8, 0, 0, (RETA_SIZE - 1) as i32);
    a.op(LSH64_K, R8, 0, 0, 2);
    a.op(ADD64_K, R8, 0, 0, TABLES_BYTES as i32);
    a.op(ADD64_X, R8, R7, 0, 0);
    a.op(LDX_W, R0, R8, 0, 0);
    a.op(EXIT, 0, 0, 0, 0);

    a.label(Zero);
    a.op(MOV64_K, R0, 0, 0, 0);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// The map's value for `settings`: the key's tables, then the indirection table.
fn map_value(settings: &RssSettings) -> Vec<u8> {
    let mut value = Vec::with_capacity(VALUE_BYTES);
    for table in settings.toeplitz().tables() {
        for entry in table {
            value.extend_from_slice(&entry.to_ne_bytes());
        }
    }
    for &queue in settings.reta.entries() {
        value.extend_from_slice(&u32::from(queue).to_ne_bytes());
    }
    debug_assert_eq!(value.len(), VALUE_BYTES);
    value
}

/// Loads a steering program for `settings`; the program keeps its map alive.
pub fn load_program(settings: &RssSettings) -> Result<OwnedFd, String> {
    let map = bpf::map_create(BPF_MAP_TYPE_ARRAY, 4, VALUE_BYTES as u32, 1, "brt_rss")
        .map_err(|e| format!("create the RSS map: {}", e))?;
    let value = map_value(settings);
    // SAFETY: the map's key is 4 bytes (a u32) and its value VALUE_BYTES bytes, the
    // length of `value`'s buffer, which `map_update_bytes` passes.
    unsafe { bpf::map_update_bytes(&map, &0u32, &value) }.map_err(|e| format!("fill the RSS map: {}", e))?;
    let insns = instructions(map.as_raw_fd(), &settings.rules);
    bpf::prog_load_socket_filter(&insns, PROGRAM_NAME).map_err(|e| {
        if e.log.is_empty() {
            format!("load the RSS program: {}", e.error)
        } else {
            format!("load the RSS program: {}; verifier log:\n{}", e.error, e.log)
        }
    })
}

/// What running a steering program costs in the kernel, per frame (see
/// [`rss_program_cost`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProgramCost {
    /// The queue the program chose.
    pub queue: u32,
    /// Mean nanoseconds a run, as the kernel timed `repeat` runs.
    pub ns: u32,
}

/// Runs the steering program for `settings` on `frame` (an Ethernet frame) `repeat`
/// times through the kernel's test runner; with `settings` `None`, a program that only
/// returns 0, the baseline of the cost of running a program at all. Needs root.
pub fn rss_program_cost(
    settings: Option<&RssSettings>,
    frame: &[u8],
    repeat: u32,
) -> Result<ProgramCost, String> {
    let program = match settings {
        Some(s) => load_program(s)?,
        None => {
            let insns = [insn(MOV64_K, R0, 0, 0, 0), insn(EXIT, 0, 0, 0, 0)];
            bpf::prog_load_socket_filter(&insns, "brickroute_nop")
                .map_err(|e| format!("load the empty program: {}", e.error))?
        }
    };
    let (queue, ns) =
        bpf::prog_test_run(&program, frame, repeat).map_err(|e| format!("run the program: {}", e))?;
    Ok(ProgramCost { queue, ns })
}

/// How long building the steering program for `settings` takes: its map made and
/// filled, the program assembled and loaded (the kernel's verifier runs then), what
/// each change of a port's settings does before handing the program to the group.
pub fn rss_program_build_time(settings: &RssSettings) -> Result<std::time::Duration, String> {
    let start = std::time::Instant::now();
    let program = load_program(settings)?;
    let took = start.elapsed();
    drop(program);
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        use crate::bpf::asm::exits_of_forward_program;
        assert_eq!(exits_of_forward_program(&instructions(7, &[])).len(), 2);
        let rules =
            classify::rss::parse_rules("tcp dport 80 queue 1; ip6 queue 2; src 10.0.0.0/8 queue 3").unwrap();
        // Each rule exits where it can match: rule 1 at the IPv4 and IPv6 sites with
        // ports, rule 2 at both IPv6 sites, rule 3 at both IPv4 sites.
        assert_eq!(exits_of_forward_program(&instructions(7, &rules)).len(), 2 + 6);
    }

    #[test]
    fn the_value_holds_the_tables_then_the_table() {
        let mut s = RssSettings::new(3);
        s.reta.set(127, 2).unwrap();
        let v = map_value(&s);
        assert_eq!(v.len(), VALUE_BYTES);
        let word = |at: usize| u32::from_ne_bytes(v[at..at + 4].try_into().unwrap());
        let t = s.toeplitz();
        // Byte 1 of the input with value 0x80: table 1, entry 0x80.
        assert_eq!(word((256 + 0x80) * 4), t.tables()[1][0x80]);
        assert_eq!(word(TABLES_BYTES), 0);
        assert_eq!(word(TABLES_BYTES + 4), 1);
        assert_eq!(word(VALUE_BYTES - 4), 2);
    }
}

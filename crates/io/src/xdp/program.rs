//! brickroute's XDP program, assembled here as eBPF instructions (no compiler, no
//! object file, nothing fetched at build time).
//!
//! What it does with each received frame:
//! - ARP (EtherType 0x0806): `XDP_PASS`, the kernel answers for the host's addresses;
//!   but when the router takes ARP itself (flag 0 of the flags map set, see
//!   [`FLAG_ROUTER_ARP`]), ARP whose target address is not one of the interface's
//!   own goes to the sockets like other traffic: a request for an address the
//!   router answers, a reply to the router's own request. ARP for the interface's
//!   own addresses still goes to the kernel, whose traffic needs it;
//! - IPv6 neighbour discovery (ICMPv6 types 133-137 right after the IPv6 header):
//!   `XDP_PASS`; but when the router takes neighbour discovery itself
//!   ([`FLAG_ROUTER_ND`]), a neighbour solicitation whose target, or a neighbour
//!   advertisement whose destination, is not one of the interface's own IPv6
//!   addresses (a key of the IPv6 address map) goes to the sockets: a solicitation
//!   for an address the router answers for, an advertisement answering the router's
//!   solicitation. Router solicitations and advertisements and redirects still go to
//!   the kernel;
//! - IPv4 whose destination is one of the interface's own addresses (a key of the
//!   address map): `XDP_PASS`, so ping, SSH, BGP sessions to the router still work;
//! - everything else: `bpf_redirect_map(xsk_map, rx_queue_index, XDP_PASS)`, to the
//!   AF_XDP socket of the frame's receive queue, or to the kernel if that queue has
//!   no socket.
//!
//! Frames too short for the header they claim go to the sockets, where the router's
//! own checks count and drop them. VLAN-tagged frames go to the sockets too.

/// The name the program is loaded under; a program of this name attached to an
/// interface is taken to be a leftover of an earlier brickroute run.
pub const PROGRAM_NAME: &str = "brickroute_xdp";

/// The value of the flags map's entry 0 when the router answers and sends ARP itself
/// (its configuration has ARP elements): ARP for addresses other than the interface's
/// own then goes to the sockets. 0 (the map's initial value): all ARP to the kernel.
pub const FLAG_ROUTER_ARP: u32 = 1;
/// The bit of the flags map's entry 0 set when the router does IPv6 neighbour
/// discovery itself (its configuration has neighbour discovery elements).
pub const FLAG_ROUTER_ND: u32 = 2;

const XDP_PASS: i32 = 2;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate of a `ld_imm64` is a map's descriptor.
const PSEUDO_MAP_FD: u8 = 1;

// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

// Registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R10: u8 = 10;

// Opcodes (class | size/op | source).
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const STX_W: u8 = 0x63;
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x57;
const JA: u8 = 0x05;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JGT_K: u8 = 0x25;
const JLT_K: u8 = 0xa5;
const JGT_X: u8 = 0x2d;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;

/// Encodes one instruction as the kernel reads `struct bpf_insn` (code, dst:4 | src:4,
/// off, imm) in host byte order.
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = if cfg!(target_endian = "little") {
        (src << 4) | (dst & 0xf)
    } else {
        (dst << 4) | (src & 0xf)
    };
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// Jump targets of the program.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Arp,
    Ipv4,
    Ipv6,
    Solicitation,
    Advertisement,
    NdLookup,
    Pass,
    Redirect,
}

/// A jump instruction at `at` whose offset is not known yet.
struct Jump {
    at: usize,
    code: u8,
    dst: u8,
    src: u8,
    imm: i32,
    to: Label,
}

/// A tiny assembler: instructions with jumps to labels, resolved at the end.
struct Asm {
    code: Vec<u64>,
    /// Jumps whose offsets are filled in by [`Asm::finish`].
    jumps: Vec<Jump>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            code: Vec::new(),
            jumps: Vec::new(),
            labels: Vec::new(),
        }
    }
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.code.push(insn(code, dst, src, off, imm));
    }
    /// A jump comparing `dst` with the immediate `imm`.
    fn jump(&mut self, code: u8, dst: u8, imm: i32, to: Label) {
        self.jump_any(code, dst, 0, imm, to);
    }
    /// A jump comparing `dst` with register `src`.
    fn jump_x(&mut self, code: u8, dst: u8, src: u8, to: Label) {
        self.jump_any(code, dst, src, 0, to);
    }
    fn jump_any(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        let at = self.code.len();
        self.jumps.push(Jump {
            at,
            code,
            dst,
            src,
            imm,
            to,
        });
        self.code.push(0);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }
    fn ld_map_fd(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }
    fn finish(mut self) -> Vec<u64> {
        for j in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == j.to)
                .map(|&(_, i)| i)
                .expect("every jump target is defined");
            let off = (target as i64 - j.at as i64 - 1) as i16;
            self.code[j.at] = insn(j.code, j.dst, j.src, off, j.imm);
        }
        self.code
    }
}

/// A 16-bit field of the frame as the program's `ldxh` reads it (bytes in wire order,
/// register in host order).
fn wire16(b: [u8; 2]) -> i32 {
    i32::from(u16::from_ne_bytes(b))
}

/// The descriptors of the maps the program reads.
#[derive(Clone, Copy, Debug)]
pub struct Maps {
    /// `XSKMAP`, key: receive queue.
    pub xsks: i32,
    /// `HASH`, key: an IPv4 address of the interface, in network order.
    pub v4: i32,
    /// `HASH`, key: an IPv6 address of the interface, in network order.
    pub v6: i32,
    /// `ARRAY` of one `u32`: [`FLAG_ROUTER_ARP`] and [`FLAG_ROUTER_ND`].
    pub flags: i32,
}

/// Loads the flags map's entry 0 and goes to `Pass` unless it has `flag`. (The call
/// leaves r1-r5 undefined.)
fn pass_unless_flag(a: &mut Asm, flags_map_fd: i32, flag: u32) {
    a.op(MOV64_K, R5, 0, 0, 0);
    a.op(STX_W, R10, R5, -24, 0); // key 0
    a.ld_map_fd(R1, flags_map_fd);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, -24);
    a.op(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM);
    a.jump(JEQ_K, R0, 0, Label::Pass); // (an array map always has entry 0)
    a.op(LDX_W, R5, R0, 0, 0);
    a.op(AND64_K, R5, 0, 0, flag as i32);
    a.jump(JEQ_K, R5, 0, Label::Pass);
}

/// Looks the key at `r10 + key_at` up in the address map `map_fd`: found (one of the
/// interface's own addresses), to `Pass`; else to `Redirect`.
fn pass_if_own(a: &mut Asm, map_fd: i32, key_at: i32) {
    a.ld_map_fd(R1, map_fd);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, key_at);
    a.op(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM);
    a.jump(JNE_K, R0, 0, Label::Pass);
    a.jump(JA, 0, 0, Label::Redirect);
}

/// Copies the 16 bytes at `r2 + from` (an IPv6 address of the frame, inside the bounds
/// checked before) to `r10 - 16`.
fn stack_address16(a: &mut Asm, from: i16) {
    for w in 0..4 {
        a.op(LDX_W, R5, R2, from + 4 * w, 0);
        a.op(STX_W, R10, R5, -16 + 4 * w, 0);
    }
}

/// The program's instructions, with the maps' descriptors built in.
pub fn instructions(maps: Maps) -> Vec<u64> {
    use Label::*;
    let mut a = Asm::new();
    a.op(MOV64_X, R6, R1, 0, 0); // r6 = ctx (kept across calls)
    a.op(LDX_W, R2, R1, MD_DATA, 0); // r2 = data
    a.op(LDX_W, R3, R1, MD_DATA_END, 0); // r3 = data_end
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 14);
    a.jump_x(JGT_X, R4, R3, Redirect); // shorter than an Ethernet header
    a.op(LDX_H, R5, R2, 12, 0); // r5 = EtherType
    a.jump(JEQ_K, R5, wire16([0x08, 0x06]), Arp);
    a.jump(JEQ_K, R5, wire16([0x08, 0x00]), Ipv4);
    a.jump(JEQ_K, R5, wire16([0x86, 0xdd]), Ipv6);
    a.jump(JA, 0, 0, Redirect);

    a.label(Arp);
    // An ARP packet too short to hold a target address goes to the kernel, as all ARP
    // did before the flag.
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 14 + 28);
    a.jump_x(JGT_X, R4, R3, Pass);
    a.op(LDX_W, R5, R2, 14 + 24, 0); // target protocol address
    a.op(STX_W, R10, R5, -4, 0); // key of the address-map lookup below
    pass_unless_flag(&mut a, maps.flags, FLAG_ROUTER_ARP);
    pass_if_own(&mut a, maps.v4, -4);

    a.label(Ipv4);
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 14 + 20);
    a.jump_x(JGT_X, R4, R3, Redirect);
    a.op(LDX_W, R5, R2, 14 + 16, 0); // destination address
    a.op(STX_W, R10, R5, -4, 0); // key on the stack
    pass_if_own(&mut a, maps.v4, -4);

    a.label(Ipv6);
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 14 + 40 + 1);
    a.jump_x(JGT_X, R4, R3, Redirect);
    a.op(LDX_B, R5, R2, 14 + 6, 0); // next header
    a.jump(JNE_K, R5, 58, Redirect); // not ICMPv6
    a.op(LDX_B, R5, R2, 14 + 40, 0); // ICMPv6 type
    a.jump(JLT_K, R5, 133, Redirect);
    a.jump(JGT_K, R5, 137, Redirect);
    a.jump(JEQ_K, R5, 135, Solicitation);
    a.jump(JEQ_K, R5, 136, Advertisement);
    a.jump(JA, 0, 0, Pass); // router solicitation or advertisement, redirect

    // A neighbour solicitation is keyed by its target (ICMPv6 bytes 8..24), an
    // advertisement by its destination (the solicitor, or all nodes when unsolicited):
    // the 16 bytes go to r10-16..r10 for the IPv6 address-map lookup. One too short
    // for its target goes to the kernel, as all neighbour discovery did before the flag.
    a.label(Solicitation);
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 14 + 40 + 24);
    a.jump_x(JGT_X, R4, R3, Pass);
    stack_address16(&mut a, 14 + 48);
    a.jump(JA, 0, 0, NdLookup);
    a.label(Advertisement);
    stack_address16(&mut a, 14 + 24);
    a.label(NdLookup);
    pass_unless_flag(&mut a, maps.flags, FLAG_ROUTER_ND);
    pass_if_own(&mut a, maps.v6, -16);

    a.label(Redirect);
    a.op(LDX_W, R2, R6, MD_RX_QUEUE_INDEX, 0);
    a.ld_map_fd(R1, maps.xsks);
    a.op(MOV64_K, R3, 0, 0, XDP_PASS); // the action if the queue has no socket
    a.op(CALL, 0, 0, 0, HELPER_REDIRECT_MAP);
    a.op(EXIT, 0, 0, 0, 0);

    a.label(Pass);
    a.op(MOV64_K, R0, 0, 0, XDP_PASS);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(i: u64) -> [u8; 8] {
        i.to_ne_bytes()
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn encodes_as_the_kernel_reads_bpf_insn() {
        // r0 = 2 ; exit ; r6 = r1 ; r2 = *(u32 *)(r1 + 4) ; if r4 > r3 goto +7
        assert_eq!(bytes(insn(0xb7, 0, 0, 0, 2)), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        assert_eq!(bytes(insn(0x95, 0, 0, 0, 0)), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(insn(0xbf, 6, 1, 0, 0)), [0xbf, 0x16, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(insn(0x61, 2, 1, 4, 0)), [0x61, 0x12, 4, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(insn(0x2d, 4, 3, 7, 0)), [0x2d, 0x34, 7, 0, 0, 0, 0, 0]);
        // r2 += -4
        assert_eq!(
            bytes(insn(0x07, 2, 0, 0, -4)),
            [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let p = instructions(Maps {
            xsks: 7,
            v4: 9,
            v6: 13,
            flags: 11,
        });
        // Decode (code, off) and follow every jump: it must land inside the program,
        // and the two exits must be preceded by the redirect call and `r0 = XDP_PASS`.
        let decode = |i: u64| {
            let b = i.to_ne_bytes();
            (
                b[0],
                i16::from_ne_bytes([b[2], b[3]]),
                i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            )
        };
        let mut exits = Vec::new();
        for (at, &i) in p.iter().enumerate() {
            let (code, off, imm) = decode(i);
            if code & 0x07 == 0x05 && code != CALL && code != EXIT {
                let to = at as i64 + 1 + i64::from(off);
                assert!(
                    to > at as i64 && (to as usize) < p.len(),
                    "jump at {} to {}",
                    at,
                    to
                );
            }
            if code == EXIT {
                exits.push(at);
            }
            if code == LD_IMM64 {
                assert!([7, 9, 11, 13].contains(&imm));
            }
        }
        assert_eq!(exits.len(), 2);
        assert_eq!(decode(p[exits[0] - 1]), (CALL, 0, HELPER_REDIRECT_MAP));
        assert_eq!(decode(p[exits[1] - 1]), (MOV64_K, 0, XDP_PASS));
        assert_eq!(exits[1], p.len() - 1);
    }

    #[test]
    fn ethertype_constants_are_in_wire_order() {
        // `ldxh` of bytes 08 06 gives this register value on the build host.
        assert_eq!(wire16([0x08, 0x06]) as u16, u16::from_be(0x0806));
    }
}

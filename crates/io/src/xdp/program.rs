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
//!   no socket. Where the driver took the frame's outer VLAN tag out of it (VLAN
//!   stripping, or a veth peer that sent the tag as metadata), the variant built with
//!   the kernel's `bpf_xdp_metadata_rx_vlan_tag` (a device-bound program, native mode
//!   only, kernel 6.8 on) puts the tag back after the MAC addresses first, so the
//!   router sees the frame as it was on the wire.
//!
//! Frames too short for the header they claim go to the sockets, where the router's
//! own checks count and drop them. VLAN-tagged frames go to the sockets too; in the
//! variant that reads stripped tags, so do frames whose tag the driver took out (ARP
//! or IPv4 for the interface's own address included), as they were tagged on the
//! wire.

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

use crate::bpf::asm::*;

const XDP_PASS: i32 = 2;
const HELPER_XDP_ADJUST_HEAD: i32 = 44;
/// `BPF_PSEUDO_KFUNC_CALL`: a call's immediate is a kernel function's BTF type id.
const PSEUDO_KFUNC_CALL: u8 = 2;
/// The kernel function that reads a received frame's stripped VLAN tag.
pub const VLAN_TAG_KFUNC: &str = "bpf_xdp_metadata_rx_vlan_tag";
// Where the kfunc writes the tag's protocol (`__be16`) and TCI (`u16`, host order).
const TAG_PROTO_AT: i16 = -40;
const TAG_TCI_AT: i16 = -36;
/// The key of the XSKMAP lookup that tells whether the frame's queue has a socket.
const SOCKET_KEY_AT: i16 = -44;

// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

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
    Send,
}

type Asm = crate::bpf::asm::Asm<Label>;

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

/// `r0 = bpf_xdp_metadata_rx_vlan_tag(ctx, ...)` (BTF type id `kfunc`): 0 when the
/// driver took an outer VLAN tag out of the frame, which it writes to the stack.
/// (The call leaves r1-r5 undefined.)
fn ask_vlan_tag(a: &mut Asm, kfunc: u32) {
    a.op(ST_W, R10, 0, TAG_PROTO_AT, 0);
    a.op(ST_W, R10, 0, TAG_TCI_AT, 0);
    a.op(MOV64_X, R1, R6, 0, 0);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, i32::from(TAG_PROTO_AT));
    a.op(MOV64_X, R3, R10, 0, 0);
    a.op(ADD64_K, R3, 0, 0, i32::from(TAG_TCI_AT));
    a.op(CALL, 0, PSEUDO_KFUNC_CALL, 0, kfunc as i32);
}

/// Puts back the outer VLAN tag the driver took out of the frame, if it took one and
/// the frame's queue has a socket (a frame that goes to the kernel instead is left as
/// it is, its tag beside it): makes 4 bytes of room in front, moves the MAC addresses
/// there and writes the tag behind them. A frame with no tag, or no room, is left as
/// it is. (The calls leave r1-r5 undefined.)
fn restore_vlan_tag(a: &mut Asm, kfunc: u32, xsks_map_fd: i32) {
    a.op(LDX_W, R2, R6, MD_RX_QUEUE_INDEX, 0);
    a.op(STX_W, R10, R2, SOCKET_KEY_AT, 0);
    a.ld_map_fd(R1, xsks_map_fd);
    a.op(MOV64_X, R2, R10, 0, 0);
    a.op(ADD64_K, R2, 0, 0, i32::from(SOCKET_KEY_AT));
    a.op(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM);
    a.jump(JEQ_K, R0, 0, Label::Send); // no socket: the frame goes to the kernel
    ask_vlan_tag(a, kfunc);
    a.jump(JNE_K, R0, 0, Label::Send); // no tag (or the driver cannot tell)
    a.op(MOV64_X, R1, R6, 0, 0);
    a.op(MOV64_K, R2, 0, 0, -4);
    a.op(CALL, 0, 0, 0, HELPER_XDP_ADJUST_HEAD);
    a.jump(JNE_K, R0, 0, Label::Send);
    a.op(LDX_W, R2, R6, MD_DATA, 0);
    a.op(LDX_W, R3, R6, MD_DATA_END, 0);
    a.op(MOV64_X, R4, R2, 0, 0);
    a.op(ADD64_K, R4, 0, 0, 16);
    a.jump_x(JGT_X, R4, R3, Label::Send);
    for w in 0..3 {
        a.op(LDX_W, R5, R2, 4 + 4 * w, 0);
        a.op(STX_W, R2, R5, 4 * w, 0);
    }
    a.op(LDX_H, R5, R10, TAG_PROTO_AT, 0);
    a.op(STX_H, R2, R5, 12, 0);
    a.op(LDX_H, R5, R10, TAG_TCI_AT, 0);
    a.op(END_TO_BE, R5, 0, 0, 16);
    a.op(STX_H, R2, R5, 14, 0);
}

/// The program's instructions, with the maps' descriptors built in; with `vlan_kfunc`
/// (the BTF type id of [`VLAN_TAG_KFUNC`]), the variant that puts stripped VLAN tags
/// back, which must be loaded bound to the interface.
pub fn instructions(maps: Maps, vlan_kfunc: Option<u32>) -> Vec<u64> {
    use Label::*;
    let mut a = Asm::new();
    a.op(MOV64_X, R6, R1, 0, 0); // r6 = ctx (kept across calls)
    if let Some(kfunc) = vlan_kfunc {
        // A frame whose tag the driver took out is a tagged frame: to the sockets, as
        // one whose tag is in its bytes.
        ask_vlan_tag(&mut a, kfunc);
        a.jump(JEQ_K, R0, 0, Redirect);
    }
    a.op(LDX_W, R2, R6, MD_DATA, 0); // r2 = data
    a.op(LDX_W, R3, R6, MD_DATA_END, 0); // r3 = data_end
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
    if let Some(kfunc) = vlan_kfunc {
        restore_vlan_tag(&mut a, kfunc, maps.xsks);
    }
    a.label(Send);
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

    const MAPS: Maps = Maps {
        xsks: 7,
        v4: 9,
        v6: 13,
        flags: 11,
    };

    #[test]
    fn the_vlan_variant_calls_the_kfunc_before_the_redirect() {
        let p = instructions(MAPS, Some(4242));
        let plain = instructions(MAPS, None);
        let decode = |i: u64| {
            let b = i.to_ne_bytes();
            (b[0], b[1] >> 4, i32::from_ne_bytes([b[4], b[5], b[6], b[7]]))
        };
        let kfunc_calls: Vec<usize> = (0..p.len())
            .filter(|&at| decode(p[at]) == (CALL, PSEUDO_KFUNC_CALL, 4242))
            .collect();
        // Asked first, so a frame whose tag the driver took out goes to the sockets
        // like a tagged one; asked again just before the redirect, to put it back.
        assert_eq!(kfunc_calls.len(), 2);
        assert_eq!(kfunc_calls[0], 1 + 7);
        assert!(kfunc_calls[1] < plain.len() + 60 && kfunc_calls[1] > plain.len() - 8);
        // The redirect and the pass (the plain program's last eight instructions) end
        // both; the exits are the same two.
        assert_eq!(crate::bpf::asm::exits_of_forward_program(&p).len(), 2);
        assert_eq!(p[p.len() - 8..], plain[plain.len() - 8..]);
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let p = instructions(MAPS, None);
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
        let exits = crate::bpf::asm::exits_of_forward_program(&p);
        for &i in &p {
            let (code, _, imm) = decode(i);
            if code == LD_IMM64 {
                assert!([7, 9, 11, 13].contains(&imm));
            }
        }
        assert_eq!(exits.len(), 2);
        assert_eq!(decode(p[exits[0] - 1]), (CALL, 0, HELPER_REDIRECT_MAP));
        assert_eq!(decode(p[exits[1] - 1]), (MOV64_K, 0, XDP_PASS));
        assert_eq!(exits[1], p.len() - 1);
    }
}

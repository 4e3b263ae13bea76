//! A tiny eBPF assembler: instruction encoding, the opcodes brickroute's programs use,
//! and jumps to labels resolved at the end. The XDP program (`xdp::program`) and the
//! AF_PACKET fanout program (`afpacket::rss`) are written with it: no compiler, no
//! object file, nothing fetched at build time.

/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate of a `ld_imm64` is a map's descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;

// Helper function ids (linux/bpf.h, `enum bpf_func_id`).
pub const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
pub const HELPER_REDIRECT_MAP: i32 = 51;
pub const HELPER_SKB_LOAD_BYTES: i32 = 26;

// Registers.
pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const R10: u8 = 10;

// Opcodes (class | size/op | source).
pub const LDX_W: u8 = 0x61;
pub const LDX_H: u8 = 0x69;
pub const LDX_B: u8 = 0x71;
pub const STX_W: u8 = 0x63;
pub const STX_H: u8 = 0x6b;
pub const ST_W: u8 = 0x62;
pub const MOV64_X: u8 = 0xbf;
pub const MOV64_K: u8 = 0xb7;
pub const ADD64_X: u8 = 0x0f;
pub const ADD64_K: u8 = 0x07;
pub const AND64_K: u8 = 0x57;
/// `BPF_ALU | BPF_AND | BPF_K`: on the low 32 bits, the upper cleared.
pub const AND32_K: u8 = 0x54;
pub const LSH64_K: u8 = 0x67;
pub const RSH64_K: u8 = 0x77;
pub const XOR64_X: u8 = 0xaf;
/// Byte swap to big-endian (`BPF_ALU | BPF_END | BPF_TO_BE`); the immediate is the
/// width in bits.
pub const END_TO_BE: u8 = 0xdc;
pub const JA: u8 = 0x05;
pub const JEQ_K: u8 = 0x15;
pub const JNE_K: u8 = 0x55;
/// `BPF_JMP32 | BPF_JNE | BPF_K`: compares the low 32 bits.
pub const JNE32_K: u8 = 0x56;
pub const JGT_K: u8 = 0x25;
pub const JLT_K: u8 = 0xa5;
pub const JGT_X: u8 = 0x2d;
pub const CALL: u8 = 0x85;
pub const EXIT: u8 = 0x95;
pub const LD_IMM64: u8 = 0x18;

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

/// A 16-bit field of a frame as `ldxh` reads it, or as the kernel keeps a `__be16` such
/// as `__sk_buff.protocol` (bytes in wire order, register in host order).
pub fn wire16(b: [u8; 2]) -> i32 {
    i32::from(u16::from_ne_bytes(b))
}

/// A jump instruction at `at` whose offset is not known yet.
struct Jump<L> {
    at: usize,
    code: u8,
    dst: u8,
    src: u8,
    imm: i32,
    to: L,
}

/// Instructions with jumps to labels of type `L`, resolved by [`Asm::finish`].
pub struct Asm<L> {
    code: Vec<u64>,
    jumps: Vec<Jump<L>>,
    labels: Vec<(L, usize)>,
}

impl<L: Copy + PartialEq + std::fmt::Debug> Asm<L> {
    pub fn new() -> Asm<L> {
        Asm {
            code: Vec::new(),
            jumps: Vec::new(),
            labels: Vec::new(),
        }
    }
    pub fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.code.push(insn(code, dst, src, off, imm));
    }
    /// A jump comparing `dst` with the immediate `imm`.
    pub fn jump(&mut self, code: u8, dst: u8, imm: i32, to: L) {
        self.jump_any(code, dst, 0, imm, to);
    }
    /// A jump comparing `dst` with register `src`.
    pub fn jump_x(&mut self, code: u8, dst: u8, src: u8, to: L) {
        self.jump_any(code, dst, src, 0, to);
    }
    fn jump_any(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: L) {
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
    /// Instructions so far.
    pub fn len(&self) -> usize {
        self.code.len()
    }

    /// Places label `l` at the next instruction. Each label is placed once.
    pub fn label(&mut self, l: L) {
        debug_assert!(
            self.labels.iter().all(|(x, _)| *x != l),
            "label {:?} placed twice",
            l
        );
        self.labels.push((l, self.code.len()));
    }
    /// `dst = map fd` (a two-slot `ld_imm64`).
    pub fn ld_map_fd(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }
    /// The encoded program.
    ///
    /// # Panics
    /// If a jump names a label that was never placed, or lands further than a jump's
    /// 16-bit offset reaches: both are mistakes in the program's generator.
    pub fn finish(mut self) -> Vec<u64> {
        for j in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == j.to)
                .map(|&(_, i)| i)
                .unwrap_or_else(|| panic!("jump to label {:?}, never placed", j.to));
            let off = i16::try_from(target as i64 - j.at as i64 - 1).expect("jump within 32767 instructions");
            self.code[j.at] = insn(j.code, j.dst, j.src, off, j.imm);
        }
        self.code
    }
}

impl<L: Copy + PartialEq + std::fmt::Debug> Default for Asm<L> {
    fn default() -> Self {
        Asm::new()
    }
}

/// Checks that every jump of `program` goes forward and lands inside it (so the
/// program has no loop and cannot run off its end); returns where its exits are.
#[cfg(test)]
pub fn exits_of_forward_program(program: &[u64]) -> Vec<usize> {
    let mut exits = Vec::new();
    for (at, &i) in program.iter().enumerate() {
        let b = i.to_ne_bytes();
        let (code, off) = (b[0], i16::from_ne_bytes([b[2], b[3]]));
        if code & 0x07 == 0x05 && code != CALL && code != EXIT {
            let to = at as i64 + 1 + i64::from(off);
            assert!(
                to > at as i64 && (to as usize) < program.len(),
                "jump at {} to {}",
                at,
                to
            );
        }
        if code == EXIT {
            exits.push(at);
        }
    }
    exits
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
    fn ethertype_constants_are_in_wire_order() {
        // `ldxh` of bytes 08 06 gives this register value on the build host.
        assert_eq!(wire16([0x08, 0x06]) as u16, u16::from_be(0x0806));
    }

    #[test]
    fn backward_and_forward_jumps_resolve() {
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum L {
            Top,
            End,
        }
        let mut a = Asm::new();
        a.label(L::Top);
        a.jump(JEQ_K, R1, 0, L::End); // 0: to 3, offset +2
        a.op(MOV64_K, R0, 0, 0, 1); // 1
        a.jump(JA, 0, 0, L::Top); // 2: to 0, offset -3
        a.label(L::End);
        a.op(EXIT, 0, 0, 0, 0); // 3
        let p = a.finish();
        let off = |i: u64| i16::from_ne_bytes([i.to_ne_bytes()[2], i.to_ne_bytes()[3]]);
        assert_eq!(off(p[0]), 2);
        assert_eq!(off(p[2]), -3);
    }
}

//! An encoder for the few eBPF instructions the device program needs (the kernel's
//! `struct bpf_insn`: opcode, dst/src registers, 16-bit offset, 32-bit immediate).

/// eBPF registers used here: R0 is the return value, R1 the context on entry.
pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;

// Opcode pieces from linux/bpf_common.h and linux/bpf.h.
const CLASS_LDX: u8 = 0x01;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const SIZE_W: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
const ALU_AND: u8 = 0x50;
const ALU_RSH: u8 = 0x70;
const ALU_MOV: u8 = 0xb0;
const JMP_JEQ: u8 = 0x10;
const JMP_JNE: u8 = 0x50;
const JMP_EXIT: u8 = 0x90;

/// `r = *(u32 *)(src + off)`
pub const OP_LDX_W: u8 = CLASS_LDX | MODE_MEM | SIZE_W;
/// `dst = src` (64 bit)
pub const OP_MOV_X: u8 = CLASS_ALU64 | ALU_MOV | SRC_X;
/// `dst = imm`
pub const OP_MOV_K: u8 = CLASS_ALU64 | ALU_MOV | SRC_K;
/// `dst &= imm`
pub const OP_AND_K: u8 = CLASS_ALU64 | ALU_AND | SRC_K;
/// `dst >>= imm`
pub const OP_RSH_K: u8 = CLASS_ALU64 | ALU_RSH | SRC_K;
/// `if dst == imm goto pc + 1 + off`
pub const OP_JEQ_K: u8 = CLASS_JMP | JMP_JEQ | SRC_K;
/// `if dst != imm goto pc + 1 + off`
pub const OP_JNE_K: u8 = CLASS_JMP | JMP_JNE | SRC_K;
/// `return r0`
pub const OP_EXIT: u8 = CLASS_JMP | JMP_EXIT;

/// One instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    pub const fn load_u32(dst: u8, src: u8, off: i16) -> Self {
        Self::new(OP_LDX_W, dst, src, off, 0)
    }

    pub const fn mov_reg(dst: u8, src: u8) -> Self {
        Self::new(OP_MOV_X, dst, src, 0, 0)
    }

    pub const fn mov_imm(dst: u8, imm: i32) -> Self {
        Self::new(OP_MOV_K, dst, 0, 0, imm)
    }

    pub const fn and_imm(dst: u8, imm: i32) -> Self {
        Self::new(OP_AND_K, dst, 0, 0, imm)
    }

    pub const fn rsh_imm(dst: u8, imm: i32) -> Self {
        Self::new(OP_RSH_K, dst, 0, 0, imm)
    }

    pub const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(OP_JEQ_K, dst, 0, off, imm)
    }

    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(OP_JNE_K, dst, 0, off, imm)
    }

    pub const fn exit() -> Self {
        Self::new(OP_EXIT, 0, 0, 0, 0)
    }

    pub fn is_jump(&self) -> bool {
        matches!(self.code, OP_JEQ_K | OP_JNE_K)
    }

    /// The 8 bytes of `struct bpf_insn` in this machine's byte order (the register
    /// nibbles are bitfields, whose order follows the byte order).
    pub fn encode(&self) -> [u8; 8] {
        let regs = if cfg!(target_endian = "little") {
            (self.src << 4) | (self.dst & 0x0f)
        } else {
            (self.dst << 4) | (self.src & 0x0f)
        };
        let off = self.off.to_ne_bytes();
        let imm = self.imm.to_ne_bytes();
        [
            self.code, regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
        ]
    }
}

/// A whole program as the bytes `BPF_PROG_LOAD` reads.
pub fn encode_program(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(Insn::encode).collect()
}

#[cfg(test)]
pub(crate) mod interp {
    //! A tiny interpreter of exactly the instructions above, for tests: runs a program
    //! on a device cgroup context (`access_type`, `major`, `minor`).
    use super::*;

    pub fn run(prog: &[Insn], ctx: [u32; 3]) -> u64 {
        let mut regs = [None::<u64>; 11];
        let mut pc = 0usize;
        let get = |regs: &[Option<u64>; 11], r: u8| {
            regs[r as usize].unwrap_or_else(|| panic!("r{r} read before written"))
        };
        for _ in 0..prog.len() {
            let i = prog
                .get(pc)
                .unwrap_or_else(|| panic!("pc {pc} out of the program"));
            // The kernel sign-extends the immediate to 64 bits: the same bits, reinterpreted.
            let imm = u64::from_ne_bytes(i64::from(i.imm).to_ne_bytes());
            let mut next = pc + 1;
            match i.code {
                OP_LDX_W => {
                    assert_eq!(i.src, R1, "loads only from the context");
                    assert!(
                        i.off >= 0 && i.off % 4 == 0 && i.off < 12,
                        "ctx offset {}",
                        i.off
                    );
                    regs[i.dst as usize] =
                        Some(u64::from(ctx[usize::try_from(i.off).unwrap() / 4]));
                }
                OP_MOV_X => regs[i.dst as usize] = Some(get(&regs, i.src)),
                OP_MOV_K => regs[i.dst as usize] = Some(imm),
                OP_AND_K => regs[i.dst as usize] = Some(get(&regs, i.dst) & imm),
                OP_RSH_K => regs[i.dst as usize] = Some(get(&regs, i.dst) >> imm),
                OP_JEQ_K | OP_JNE_K => {
                    let eq = get(&regs, i.dst) == imm;
                    if eq == (i.code == OP_JEQ_K) {
                        next = pc + 1 + usize::try_from(i.off).expect("only forward jumps");
                    }
                }
                OP_EXIT => return get(&regs, R0),
                other => panic!("unknown opcode {other:#x}"),
            }
            pc = next;
        }
        panic!("the program did not exit");
    }

    #[test]
    fn encodes_as_the_kernel_reads_it() {
        // r2 = *(u32 *)(r1 + 4) is 61 12 04 00 00 00 00 00 on x86-64.
        if cfg!(target_endian = "little") {
            assert_eq!(
                Insn::load_u32(R2, R1, 4).encode(),
                [0x61, 0x12, 4, 0, 0, 0, 0, 0]
            );
            assert_eq!(
                Insn::jne_imm(R4, 136, 3).encode(),
                [0x55, 0x04, 3, 0, 136, 0, 0, 0]
            );
        }
        assert_eq!(Insn::exit().encode()[0], 0x95);
        assert_eq!(
            encode_program(&[Insn::mov_imm(R0, 1), Insn::exit()]).len(),
            16
        );
    }
}

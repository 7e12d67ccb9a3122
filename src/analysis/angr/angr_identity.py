"""Function identity for angr_db.py: what a function is, whatever its address.

Each recovered function gets a GUID computed from its code with addresses
neutralised, the way Binary Ninja's WARP defines one (github.com/Vector35/warp):

* a basic block's GUID is UUIDv5(BLOCK_NS, bytes) over the block's instruction
  bytes in execution order, where every *relocatable* instruction is replaced
  by as many zero bytes, NOPs are left out, and so are moves of a register to
  itself that change nothing (on x86-64 only full-width ones: `mov edi, edi`
  zero-extends and stays);
* an instruction is relocatable when one of its operands is an address: an
  immediate inside the loaded image (call, jmp and jcc targets, absolute
  pointers), a memory operand relative to the program counter (x86-64
  `[rip + d]`, ARM `[pc, #d]`), or an absolute memory operand inside the image;
* a function's GUID is UUIDv5(FUNCTION_NS, block GUIDs concatenated, blocks
  sorted from the highest start address to the lowest), as WARP specifies;
* a PLT stub is the import it jumps to: UUIDv5(FUNCTION_NS, "import:" + name),
  since every stub's code is the same once its GOT slot is zeroed.

Beside the GUID each function gets its call-graph neighbourhood (UUIDv5 of the
sorted GUIDs of its callees, then of its callers, under WARP's constraint
namespace) to tell apart functions with the same code, and the facts a diff
compares when code differs: the first 12 hex digits of each block GUID, the
instruction and CFG edge counts, and up to 32 distinctive constants
(immediates that are no address and lie outside -255..255).

Blocks are angr's normalised CFG blocks; a changed block boundary (a callee
angr now believes does not return) changes the GUID like a changed byte.
"""
import ctypes
import hashlib
import uuid

import capstone

FUNCTION_NS = uuid.UUID("0192a179-61ac-7cef-88ed-012296e9492f")
BLOCK_NS = uuid.UUID("0192a178-7a5f-7936-8653-3cbaa7d6afe7")
CONSTRAINT_NS = uuid.UUID("019701f3-e89c-7afa-9181-371a5e98a576")
IMM, MEM = 2, 3  # capstone's operand types, the same numbers on every architecture
MAX_CONSTANTS = 32
PC_REGISTERS = {"rip", "eip", "pc"}


def uuid5(namespace, data):
    """UUIDv5 over bytes (uuid.uuid5 takes text): SHA-1 of namespace and data, version and variant set."""
    return uuid.UUID(bytes=hashlib.sha1(namespace.bytes + data).digest()[:16], version=5)


class Hasher:
    def __init__(self, proj):
        self.mem = proj.loader.memory
        self.lo, self.hi = proj.loader.min_addr, proj.loader.max_addr
        self.mask = (1 << proj.arch.bits) - 1
        self.x86_64 = proj.arch.name == "AMD64"
        self.cs = proj.arch.capstone  # archinfo's instance, with operand details on
        # Where capstone keeps an instruction's operands, on the architectures read without its
        # Python objects (which it builds, with copies of every operand, per instruction).
        self.raw = {capstone.CS_ARCH_X86: "x86", capstone.CS_ARCH_ARM64: "arm64",
                    capstone.CS_ARCH_ARM: "arm"}.get(self.cs.arch)
        names = {}
        for reg in range(1, 4096):
            name = self.cs.reg_name(reg)
            if name:
                names[reg] = name
        self.pc_regs = {r for r, n in names.items() if n in PC_REGISTERS}
        self.wide_regs = {r for r, n in names.items() if n.startswith("r")}

    def mapped(self, value):
        return self.lo <= (value & self.mask) <= self.hi

    def decoded(self, code, addr):
        """(offset, size, mnemonic, operands) of each instruction capstone decodes from `code`. On
        x86, ARM and AArch64 read off capstone's own records; elsewhere through its Python objects,
        which copy every instruction and its operands (the same operand types either way)."""
        if self.raw is None:
            for insn in self.cs.disasm(code, addr):
                yield insn.address - addr, insn.size, insn.mnemonic, insn.operands
            return
        insns = ctypes.POINTER(capstone._cs_insn)()
        n = capstone._cs.cs_disasm(self.cs.csh, code, len(code), addr, 0, ctypes.byref(insns))
        try:
            for i in range(n):
                insn = insns[i]
                detail = getattr(insn.detail.contents.arch, self.raw)
                yield insn.address - addr, insn.size, insn.mnemonic.decode(), detail.operands[: detail.op_count]
        finally:
            if n:
                capstone._cs.cs_free(insns, n)

    def relocatable(self, ops):
        for op in ops:
            kind = op.type
            if kind == IMM:
                if self.mapped(op.imm):
                    return True
            elif kind == MEM:
                mem = op.mem
                base = getattr(mem, "base", 0)
                if base and base in self.pc_regs:
                    return True
                if not base and not getattr(mem, "index", 0) and self.mapped(getattr(mem, "disp", 0)):
                    return True
        return False

    def is_nop(self, mnemonic, ops):
        if mnemonic.startswith("nop"):
            return True
        if mnemonic not in ("mov", "lea") or len(ops) != 2 or ops[0].type != 1:
            return False
        reg = ops[0].reg
        if self.x86_64 and reg not in self.wide_regs:
            return False  # mov edi, edi zero-extends rdi: not a NOP on x86-64
        if mnemonic == "mov":
            return ops[1].type == 1 and ops[1].reg == reg
        mem = ops[1].mem  # lea esi, [esi + 0], the 32-bit padding idiom
        return ops[1].type == MEM and mem.base == reg and not mem.index and not mem.disp

    def block(self, addr, size, constants):
        """(GUID, instruction count) of the block at addr; constants gains its distinctive immediates."""
        code = self.mem.load(addr, size)
        out = bytearray()
        count = 0
        end = 0
        for start, length, mnemonic, ops in self.decoded(code, addr):
            end = start + length
            count += 1
            if self.is_nop(mnemonic, ops):
                continue
            if self.relocatable(ops):
                out += bytes(length)
                continue
            out += code[start:end]
            for op in ops:
                if op.type == IMM:
                    v = op.imm
                    if not -255 <= v <= 255:
                        constants.add(v & self.mask)
        out += code[end:]  # what capstone could not decode counts as it is
        return uuid5(BLOCK_NS, bytes(out)), count


def function_identities(proj, funcs, edges):
    """Rows (address, identity, neighbourhood, block_hashes, instructions, edges, constants) per function.

    funcs: (start, name, is_import_stub, {block address: size}, CFG edge count) per listed function.
    """
    hasher = Hasher(proj)
    facts = {}
    for start, name, is_import, block_sizes, cfg_edges in funcs:
        if is_import:
            guid = uuid5(FUNCTION_NS, b"import:" + name.encode())
            facts[start] = (guid, "", 0, 0, "")
            continue
        constants = set()
        blocks = []
        instructions = 0
        for b in sorted(block_sizes, reverse=True):
            size = block_sizes[b]
            if not size:
                continue
            guid, count = hasher.block(b, size, constants)
            blocks.append(guid)
            instructions += count
        guid = uuid5(FUNCTION_NS, b"".join(g.bytes for g in blocks))
        shown = " ".join(g.hex[:12] for g in blocks)
        kept = sorted(constants)[:MAX_CONSTANTS]
        facts[start] = (guid, shown, instructions, cfg_edges, " ".join(f"{c:x}" for c in kept))
    callees, callers = {}, {}
    for src, dst, _ in edges:
        if src in facts and dst in facts:
            callees.setdefault(src, set()).add(facts[dst][0].bytes)
            callers.setdefault(dst, set()).add(facts[src][0].bytes)
    rows = []
    for addr in sorted(facts):
        guid, shown, instructions, cfg_edges, constants = facts[addr]
        around = b"callees" + b"".join(sorted(callees.get(addr, ()))) + b"callers" + b"".join(
            sorted(callers.get(addr, ())))
        rows.append((addr, str(guid), str(uuid5(CONSTRAINT_NS, around)), shown, instructions, cfg_edges,
                     constants))
    return rows

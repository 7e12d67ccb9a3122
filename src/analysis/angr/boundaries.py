"""Function boundaries: call-frame records and symbols first, angr's CFG for the rest.

Used by angr_db.py (the analysis database) and angr_decompile.py (so both see the
same functions).  On ELF the compiler writes one call-frame record (FDE, in
.eh_frame or .debug_frame) per function it emits, with the function's exact
start and end; symbols, where present, say the same.  angr's CFGFast alone
splits functions after calls it wrongly believes return, at jump-table targets
and in padding, and misses small functions reached only through pointers.  So:

1. seed CFGFast with every FDE that starts a function, as it treats symbols
   (each is a function start, a fall-through into it starts a new function);
2. list functions from those records and symbols, each with its extent;
3. merge every function angr made inside a recorded extent into the function
   of that extent (its blocks count there, its calls are that function's);
4. an FDE whose first row is not a function's entry state (the CFA already
   moved, registers already saved: gcc's `.cold` parts) is a part of the
   function that jumps into it, and is listed with `part_of` naming it;
5. keep angr's other functions (code no record covers), found_by "cfg",
   except padding (nothing but no-op instructions or zero bytes).

Addresses are angr's load addresses; on 32-bit ARM a Thumb function's address
has bit 0 set, as angr and the symbol table write it.
"""
import bisect
import re
from dataclasses import dataclass, field

# DW_CFA opcodes that leave the CFA and the saved registers as the CIE set them.
_NEUTRAL_CFA = {
    0x00,  # nop
    0x07,  # undefined (the outermost frame's return address, as _start's record says)
    0x2E,  # GNU_args_size
}
_ADVANCE = {0x40, 0x02, 0x03, 0x04}  # advance_loc, advance_loc1/2/4



@dataclass
class Function:
    start: int  # as angr writes it (bit 0 set for Thumb code)
    end: int  # exclusive, even
    found_by: str  # "symbol" | "eh_frame" | "cfg" | "plt"
    name: str | None = None
    entry: bool = True  # False: an FDE whose first row is no entry state (a split-off part)
    part_of: int | None = None
    members: set = field(default_factory=set)  # angr functions merged into this one


def _is_entry(fde):
    """Whether the FDE's first row is a function's entry state: no CFA move, no register saved yet."""
    for ins in fde.instructions:
        op = int(ins.opcode)
        if op in _ADVANCE:
            return True
        if op not in _NEUTRAL_CFA:
            return False
    return True


def read_frames(elf, base_delta, arm):
    """{even start: (end, entry)} for each FDE of .eh_frame and .debug_frame, at load addresses."""
    if elf is None or not elf.has_dwarf_info():
        return {}
    try:
        dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False, follow_links=False)
    except Exception:  # noqa: BLE001 - malformed DWARF: no records, angr's CFG alone
        return {}
    from elftools.dwarf.callframe import FDE

    out = {}
    readers = []
    if dwarf.has_EH_CFI():
        readers.append(dwarf.EH_CFI_entries)
    if dwarf.has_CFI():
        readers.append(dwarf.CFI_entries)
    for read in readers:
        try:
            for e in read():
                size = e.header.get("address_range", 0) if isinstance(e, FDE) else 0
                if not size or e.header["initial_location"] == 0:  # none, or for discarded code
                    continue
                start = (e.header["initial_location"] & (~1 if arm else ~0)) + base_delta
                out.setdefault(start, (start + size, _is_entry(e)))
        except Exception:  # noqa: BLE001 - a damaged section: keep what parsed
            continue
    return out


class Modes:
    """Thumb or ARM for a 32-bit ARM code range; the identity elsewhere."""

    def __init__(self, proj, symbol_addrs):
        self.arm = proj.arch.name.startswith("ARM") and proj.arch.bits == 32
        self.mem = proj.loader.memory
        self.known = {a & ~1: a for a in symbol_addrs} if self.arm else {}
        # Tables of code labels (a computed goto's, see code_pointers and _label_table): sorted even targets.
        self.label_tables = []
        self.label_tables_examined = 0

    def addr(self, start, end):
        if not self.arm:
            return start
        if start in self.known:
            return self.known[start]
        if start % 4:
            return start | 1
        # ARM-mode words nearly all carry the "always" condition (top nibble 0xE); Thumb read as ARM does not.
        try:
            data = self.mem.load(start, min(end - start, 256) & ~3)
        except Exception:  # noqa: BLE001 - unmapped: let angr decide
            return start
        words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
        always = sum(1 for w in words if w >> 28 == 0xE)
        return start if words and always * 2 >= len(words) else start | 1


def seeded_cfg_class(base, extra_starts, modes=None):
    """CFGFast that treats `extra_starts` as it treats function symbols.

    On 32-bit ARM, the code angr scans for in gaps (no call or jump reached it) is decoded in the
    mode its bytes read as (see Modes): angr guesses Thumb from its neighbours, and one wrong guess
    in ARM-mode code turns a function into a run of Thumb fragments.  Also on 32-bit ARM: clang's
    offset tables are resolved (offset_table_resolver), undecodable bytes after a call drop only
    themselves, no window is skipped after undecodable runs, an ARM-mode jump over another function's
    start is a tail call, and a conditional return in a Thumb IT block keeps its fall-through.
    """

    class Seeded(base):
        def _load_func_addrs_from_symbols(self):
            return super()._load_func_addrs_from_symbols() | set(extra_starts)

        if modes is not None and modes.arm:

            def __init__(self, *args, **kwargs):
                if not kwargs.get("indirect_jump_resolvers"):
                    from angr.analyses.cfg.indirect_jump_resolvers.default_resolvers import (
                        default_indirect_jump_resolvers,
                    )
                    from angr.analyses.cfg.indirect_jump_resolvers.resolver import IndirectJumpResolver

                    obj = self.project.loader.main_object
                    kwargs["indirect_jump_resolvers"] = [
                        offset_table_resolver(IndirectJumpResolver)(self.project),
                        *([label_table_resolver(IndirectJumpResolver, modes.label_tables)(self.project)]
                          if modes.label_tables else []),
                        *default_indirect_jump_resolvers(obj, self.project),
                    ]
                super().__init__(*args, **kwargs)

            def _insert_job(self, job):
                if getattr(getattr(job, "job_type", None), "name", None) == "COMPLETE_SCANNING":
                    even = job.addr & ~1
                    if even % 4 == 0:
                        job.addr = job.func_addr = modes.addr(even, even + 64)
                    elif modes.addr(even - 2, even + 62) == even - 2 and not self._seg_list.is_occupied(even - 2):
                        job.addr = job.func_addr = even - 2  # half an ARM word: the word is code
                return super()._insert_job(job)

            def _scan_for_repeating_bytes(self, start_addr, repeating_byte, threshold=2):
                # Zero bytes that begin an ARM word (`cmp r2, #0` is 00 00 52 e3) are code, not padding:
                # angr would skip them and decode the rest of the word as Thumb.
                n = super()._scan_for_repeating_bytes(start_addr, repeating_byte, threshold=threshold)
                end = start_addr + n
                if n and repeating_byte == 0 and end % 4 and (end & ~3) >= start_addr:
                    word = end & ~3
                    if modes.addr(word, word + 16) == word:
                        n = word - start_addr
                        return n if n >= threshold else 0
                return n

            def _indirect_jump_resolved(self, jump, jump_addr, resolved_by, targets):
                if type(resolved_by).__name__ in ("OffsetTable", "LabelTable"):
                    jump.jumpkind = "Ijk_Boring"  # `add lr, pc, #4` before it is no call
                return super()._indirect_jump_resolved(jump, jump_addr, resolved_by, targets)

            def _is_branching_to_outside(self, src_node, target_addr, current_function_addr, jumpkind, all_successors):
                out = super()._is_branching_to_outside(src_node, target_addr, current_function_addr, jumpkind,
                                                       all_successors)
                if out[0] or jumpkind != "Ijk_Boring" or (src_node.addr ^ target_addr) & 1:
                    return out
                # A jump over another function's start is a tail call: the target starts a function.  In Thumb
                # code only an unconditional one to code not decoded yet: gcc's shrink-wrapped Thumb-2 functions
                # test their arguments (`cbz r0, fail`) before the `push` angr takes for a prologue, and jump over
                # it; and their loops jump back over the fragments angr wrongly lists inside them.
                if src_node.addr & 1 and (all_successors is None or len(all_successors) != 1
                                          or self._seg_list.is_occupied(target_addr & ~1)):
                    return out
                lo, hi = sorted((src_node.addr & ~1, target_addr & ~1))
                between = self.functions.ceiling_func(lo + 2)
                if between is not None and (between.addr & ~1) < hi and between.addr != current_function_addr:
                    return True, target_addr
                return out

            def _arm_thumb_filter_jump_successors(self, irsb, successors, get_ins_addr, get_exit_stmt_idx,
                                                  get_jumpkind):
                # angr keeps the exits of Thumb branches and of what it reads as an IT block; it drops the
                # fall-through of a conditional return in an IT block (libgcc's `it eq; bxeq lr`), so the
                # rest of the function is scanned as a function of its own.
                kept = super()._arm_thumb_filter_jump_successors(irsb, successors, get_ins_addr,
                                                                 get_exit_stmt_idx, get_jumpkind)
                if len(kept) == len(successors):
                    return kept
                try:
                    insns = self._lift(irsb.addr, size=irsb.size, thumb=True).capstone.insns
                except Exception:  # noqa: BLE001
                    return kept
                ret = {i.address & ~1 for i in insns if i.mnemonic[:2] == "bx" and len(i.mnemonic) == 4}
                return [s for s in successors if s in kept or (get_ins_addr(s) or 0) & ~1 in ret]

            def _nodecode_bytes_ratio(self, cutoff_addr, window_size):
                # angr skips a window of bytes after many that did not decode; on ARM those are mostly a
                # jump table's words, and the skip lands past the start of the function after them.
                return 0.0

            def _generate_cfgnode(self, cfg_job, current_function_addr):
                self._after_call = cfg_job if cfg_job.jumpkind == "Ijk_FakeRet" and cfg_job.src_node else None
                try:
                    return super()._generate_cfgnode(cfg_job, current_function_addr)
                finally:
                    self._after_call = None

            def _cascading_remove_lifted_blocks(self, addr):
                # Bytes after a call that do not decode say the call does not return there (a jump table
                # after clang's `add lr, pc, #4; ... add pc, lr, r3`, data after a noreturn call), not that
                # the code before the call was decoded in the wrong mode: angr would drop the caller's blocks
                # and rescan them in the other mode.  Cut the link, so only the undecodable block goes.
                job = getattr(self, "_after_call", None)
                rel = self._decoding_assumption_relations
                src = job.src_node.addr & ~1 if job is not None else None
                if src is not None and addr == job.addr & ~1 and rel is not None and rel.has_edge(src, addr):
                    rel.remove_edge(src, addr)
                return super()._cascading_remove_lifted_blocks(addr)

            def _register_analysis_job(self, func_addr, job):
                if getattr(getattr(job, "job_type", None), "name", None) == "COMPLETE_SCANNING":
                    func_addr = job.func_addr
                return super()._register_analysis_job(func_addr, job)

    return Seeded


# Switch tables larger than any compiler emits for C are not read further (clang's largest in the
# measured builds: a few hundred entries); a table with no bound is read while its entries land in
# the section, up to the smaller count.
MAX_TABLE_ENTRIES = 4096
UNBOUNDED_TABLE_ENTRIES = 1024
# A computed goto's first dispatch may sit this far before the first label of its table.
LABEL_TABLE_REACH = 32
# Fewer consecutive labels than this are no dispatch table (in ARM code, where a label's pointer looks
# like a function's, the larger bound: a short table of functions may span a `bx rN` or two).
MIN_LABEL_TABLE = 4
MIN_ARM_LABEL_TABLE = 8
# A computed goto's labels lie in one function: a run of pointers spread wider is no table of labels.
MAX_LABEL_SPAN = 256 * 1024
# Runs examined as label tables at most (a program has a handful of interpreters; a hostile file could
# hold a run of code pointers every few words, and each run costs a read of the code it spans and a
# look at every indirect jump): the rest are tables of functions, as before label tables.
MAX_LABEL_TABLES = 64


def _arm_table_bound(insns, index):
    """Entries of an offset table indexed by register `index`, from the instructions that bound it, or None."""
    for ins in reversed(insns):
        ops = [o.strip() for o in ins.op_str.split(",")]
        if ins.mnemonic == "cmp" and ops[0] == index and ops[-1].startswith("#"):
            return int(ops[-1][1:], 0) + 1
        if ops and ops[0] == index:
            if ins.mnemonic == "ubfx" and len(ops) == 4:
                return 1 << int(ops[3][1:], 0)
            if ins.mnemonic == "and" and ops[-1].startswith("#"):
                return int(ops[-1][1:], 0) + 1
            return None  # the index is written by something that bounds nothing we read
    return None


def offset_table_resolver(base):
    """An angr indirect-jump resolver for ARM-mode offset tables (clang's switch lowering, no symbols needed).

        add rA, pc, #k            ; rA = the table, right after the jump
        ldr rB, [rA, rI, lsl #2]  ; an offset from the table
        add pc, rA, rB            ; jump

    angr resolves none of them: their targets are then scanned as functions of their own, and when rA is
    lr angr takes the jump for a call and decodes the table as code after it.  The bound is the `cmp rI, #n`
    (or `ubfx`/`and`) before the jump; without one, entries are read while each lands in the section.
    """

    class OffsetTable(base):
        def __init__(self, project):
            super().__init__(project, timeless=False)  # resolved later, as jump tables are: targets stay in the function

        def filter(self, cfg, addr, func_addr, block, jumpkind):
            return addr % 4 == 0 and jumpkind in ("Ijk_Boring", "Ijk_Call")

        def resolve(self, cfg, addr, func_addr, block, jumpkind, func_graph_complete=True, **kwargs):
            table = _offset_table(self.project, cfg, block)
            if table is None:
                return False, []
            start, targets = table
            cfg._seg_list.occupy(start, 4 * len(targets), "pointer-array")
            return True, targets

    return OffsetTable


def label_table_resolver(base, tables):
    """An angr indirect-jump resolver for a computed goto (`goto *table[op]`) on 32-bit ARM.

    An interpreter's dispatch (Lua's luaV_execute, built with labels as values) keeps a table of its
    handlers' labels in a data section, relocated, each label's address even (in Thumb code the code
    sets bit 0 before `bx`), and ends every handler with a `bx rN`.  angr resolves none of them, and
    scans each handler as a function of its own.  An indirect jump that lies among a table's targets
    (or just before the first) jumps to that table's labels, in the jump's own mode.
    """

    class LabelTable(base):
        def __init__(self, project):
            super().__init__(project, timeless=False)

        def _table(self, addr):
            even = addr & ~1
            near = [t for t in tables if t[0] - LABEL_TABLE_REACH <= even <= t[-1]]
            return near[0] if len(near) == 1 else None

        @staticmethod
        def _jump(addr, block):
            """The jump instruction's address (the block's last), not the block's."""
            ins = getattr(block, "instruction_addrs", None)
            return ins[-1] if ins else addr

        def filter(self, cfg, addr, func_addr, block, jumpkind):
            return jumpkind == "Ijk_Boring" and self._table(self._jump(addr, block)) is not None

        def resolve(self, cfg, addr, func_addr, block, jumpkind, func_graph_complete=True, **kwargs):
            table = self._table(self._jump(addr, block))
            return (True, [t | (addr & 1) for t in table]) if table else (False, [])

    return LabelTable


def _offset_table(project, cfg, block):
    """(table address, targets) when `block` (an IRSB) ends in an ARM offset-table jump, else None."""
    try:
        insns = project.factory.block(block.addr, block.size).capstone.insns
    except Exception:  # noqa: BLE001 - undecodable: not ours
        return None
    if len(insns) < 3:
        return None
    ops = [[o.strip() for o in i.op_str.split(",")] for i in insns]
    last = ops[-1]
    if insns[-1].mnemonic != "add" or len(last) != 3 or last[0] != "pc":
        return None
    base_reg, off_reg = last[1], last[2]
    start = index = None
    for ins, o in zip(insns[:-1], ops[:-1]):
        if ins.mnemonic == "add" and len(o) == 3 and o[0] == base_reg and o[1] == "pc" and o[2].startswith("#"):
            start = ins.address + 8 + int(o[2][1:], 0)
        elif ins.mnemonic == "ldr" and o[0] == off_reg and len(o) == 4 and o[1] == f"[{base_reg}" and o[3] == "lsl #2]":
            index = o[2]
    if start is None or index is None or start != insns[-1].address + 4:
        return None
    before = []
    try:  # the bound is in this block or the one that falls or branches into it, a few words up
        before = project.factory.block(max(block.addr - 32, 0), 32 + block.size).capstone.insns
    except Exception:  # noqa: BLE001
        pass
    count = _arm_table_bound([i for i in before if i.address < insns[-1].address], index)
    # A hostile file's bound (cmp rI, #0xffffffff) may claim a table as large as its section: read at
    # most MAX_TABLE_ENTRIES per jump, so many such jumps cannot make the build quadratic in the file.
    count = min(count, MAX_TABLE_ENTRIES) if count else None
    sec = project.loader.main_object.find_section_containing(start)
    if sec is None:
        return None
    lo, hi = sec.vaddr, sec.vaddr + sec.memsize
    targets = []
    for i in range(count or UNBOUNDED_TABLE_ENTRIES):
        if start + 4 * i + 4 > hi:
            break
        v = int.from_bytes(project.loader.memory.load(start + 4 * i, 4), "little")
        t = (start + v - (1 << 32 if v >> 31 else 0)) & 0xFFFFFFFF
        if not lo <= t < hi or t % 4 or start <= t < start + 4 * (i + 1):
            if count:
                return None
            break
        targets.append(t)
    return (start, targets) if targets else None


def known_functions(frames, symbols, modes, plt_ranges):
    """Functions the binary itself records, by even start: symbols with a size win over FDEs.

    `symbols`: (address, size, name) of defined function symbols.
    """
    known = {}
    for lo, (end, entry) in frames.items():
        if any(a <= lo < b for a, b in plt_ranges):
            continue  # the PLT's records cover stubs angr already lists one by one
        known[lo] = Function(modes.addr(lo, end), end, "eh_frame", entry=entry)
    for addr, size, name in symbols:
        lo = addr & ~1 if modes.arm else addr
        f = known.get(lo)
        if f is not None:
            f.found_by, f.name, f.start = "symbol", f.name or name, addr
            if size:
                f.end = lo + size
        elif size and not any(a <= lo < b for a, b in plt_ranges):
            known[lo] = Function(addr, lo + size, "symbol", name=name)
    return known


def _even(a, arm):
    return a & ~1 if arm else a


def partition(known, angr_funcs, arm, is_padding, predecessors, plt_ranges=(), data_size=None, padding_size=None):
    """The function list: `known` (from known_functions) plus angr's functions outside every known extent.

    `angr_funcs`: [(address, block spans [(addr, size)], is_plt, name)] for angr's functions in the
    binary (not SimProcedures, not alignment); `is_padding(addr, spans)`; `predecessors(addr)`:
    addresses of the blocks that jump or fall into `addr`; `data_size(addr)`: the size of the data
    angr found referenced at `addr` (32-bit ARM literal pools, which belong to the function before
    them), or None; `padding_size(addr)`: bytes of no-op instructions at `addr` (the padding that aligns
    such a pool), or None.  Returns (functions by even start, owner: angr function address -> even start
    of the listed function it belongs to).
    """
    funcs = dict(known)
    los = sorted(funcs)
    owner = {}

    def containing(lo):
        i = bisect.bisect_right(los, lo) - 1
        if i >= 0 and lo < funcs[los[i]].end:
            return los[i]
        return None

    extra, pending = {}, {}
    for orig, spans, is_plt, name in angr_funcs:
        addr, lo = orig, _even(orig, arm)
        at = containing(lo)
        if at is not None and not is_plt:
            funcs[at].members.add(orig)
            owner[orig] = at
            if at == lo and funcs[at].name is None:
                funcs[at].name = name
            continue
        if is_plt or any(a <= lo < b for a, b in plt_ranges):
            f = Function(addr, max((_even(b, arm) + s for b, s in spans), default=lo + 1), "plt", name=name)
            f.members.add(orig)
            extra[lo] = f
            owner[orig] = lo
            continue
        if is_padding(addr, spans):
            continue
        # padding angr decoded into the code after it: the function starts after the padding
        first = dict(spans).get(addr)
        if first and (addr + first) in dict(spans) and is_padding(addr, [(addr, first)]):
            spans = [(b, n) for b, n in spans if b != addr]
            addr, lo = addr + first, _even(addr + first, arm)
            if name and name.startswith("sub_"):
                name = None  # angr's name said where the padding began
            if lo in funcs or containing(lo) is not None:
                continue
        if lo in pending:
            pending[lo][1].append(orig)
        else:
            pending[lo] = (addr, [orig], spans, name)

    # extents of the rest: their own blocks up to the next function, then the literal pool after them
    starts = sorted(set(los) | set(pending) | set(extra))
    for lo, (addr, origs, spans, name) in pending.items():
        i = bisect.bisect_right(starts, lo)
        limit = starts[i] if i < len(starts) else float("inf")
        end = max((_even(b, arm) + n for b, n in spans if lo <= _even(b, arm) < limit), default=lo)
        while data_size is not None and end < limit:
            at = (end + 3) & ~3  # pools are word-aligned
            size = data_size(at)
            pad = padding_size(at | (addr & 1)) if size is None and padding_size is not None else 0
            if pad and at + pad < limit:
                at, size = at + pad, data_size(at + pad)  # the padding that aligns a pool of doubles
            if size is None:
                break
            size = max(size, 4)  # a literal is a word, whatever angr made of its bytes
            if at + size > limit:
                break
            end = min(limit, (at + size + 3) & ~3)
        f = Function(addr, max(end, lo + 1), "cfg", name=name)
        f.members.update(origs)
        extra[lo] = f
        owner.update((o, lo) for o in origs)
    funcs.update(extra)

    # split parts: the function whose code jumps into the part is its parent
    los = sorted(funcs)
    for lo, f in funcs.items():
        if f.entry or f.found_by == "plt":
            continue
        parents = set()
        for src in predecessors(f.start):
            p = containing(_even(src, arm))
            if p is not None and p != lo:
                parents.add(p)
        if parents:
            f.part_of = funcs[min(parents)].start
    return funcs, owner


def prepare(proj, elf):
    """(frames, function symbols, modes, seeds) for a loaded project: what both provider scripts seed CFGFast with."""
    obj = proj.loader.main_object
    symbols = [(s.rebased_addr, s.size, s.name) for s in obj.symbols
               if s.is_function and not s.is_import and s.rebased_addr and obj.contains_addr(s.rebased_addr)]
    modes = Modes(proj, [a for a, _, _ in symbols])
    frames = read_frames(elf, obj.mapped_base - obj.linked_base, modes.arm)
    plt = [(s.vaddr, s.vaddr + s.memsize) for s in obj.sections if s.name.startswith(".plt")]
    seeds = {modes.addr(lo, end) for lo, (end, entry) in frames.items()
             if entry and obj.contains_addr(lo) and not any(a <= lo < b for a, b in plt)}
    if modes.arm and not frames:
        seeds |= code_pointers(proj, obj, modes)
        seeds |= thumb_pc_relative_pointers(proj, obj, modes)
    return frames, symbols, modes, seeds


def code_pointers(proj, obj, modes):
    """Words in the loaded non-executable sections that point into code (32-bit ARM, no call-frame records).

    Tables of function pointers (.init_array, .data.rel.ro) name functions nothing calls directly;
    the pointer's bit 0 says Thumb.  cle's memory has the relocations applied.  A run of even pointers
    into code that does not read as ARM is a table of labels in Thumb code (a computed goto's), not of
    functions: it is kept in `modes.label_tables` for the dispatch's resolver.
    """
    code = [(s.vaddr, s.vaddr + s.memsize) for s in obj.sections
            if s.is_executable and s.memsize and not s.name.startswith(".plt")]
    # In a position-independent file a pointer is relocated: a word without a relocation is a constant
    # (a CRC table's) that only looks like an address at this load base.
    relocated = {r.rebased_addr for r in obj.relocs} if obj.pic else None
    out = set()
    for s in obj.sections:
        if s.is_executable or not s.memsize or s.only_contains_uninitialized_data or not s.occupies_memory:
            continue
        first = (s.vaddr + 3) & ~3
        data = proj.loader.memory.load(first, (s.vaddr + s.memsize - first) & ~3)
        labels = []
        for i in range(0, len(data) - 3, 4):
            v = int.from_bytes(data[i:i + 4], "little")
            pointer = any(a <= v < b for a, b in code) and (relocated is None or first + i in relocated)
            label = pointer and not v & 1
            if label:
                labels.append(v)
            elif pointer:
                out.add(v)
            if not label or i + 4 >= len(data) - 3:
                out.update(_label_table(proj, modes, labels))
                labels = []
    return out


def _arm_slot(w, store):
    """(base, signed offset, Rt) of an ARM `ldr`/`str` Rt, [sp|fp, #±imm] word, else None."""
    if w >> 28 != 0xE or (w & 0x0F700000) != (0x05000000 if store else 0x05100000):
        return None
    base = (w >> 16) & 0xF
    if base not in (11, 13):
        return None
    return base, (w & 0xFFF) * (1 if w & 0x00800000 else -1), (w >> 12) & 0xF


def _arm_dispatches(proj, lo, hi):
    """ARM-mode dispatches through a table between lo and hi: `bx rN` or `mov pc, rN` (N not lr) whose rN
    was loaded, within four instructions, from a table entry a register picks (`ldr rN, [rT, rI, lsl
    #2]`), or from a stack slot that such an entry is stored to (clang -O0: `ldr r0, [r0]; str r0,
    [sp, #108]` in each handler, then `ldr r0, [sp, #108]; bx r0` at the one dispatch)."""
    lo &= ~3
    data = proj.loader.memory.load(lo, max(0, hi - lo) & ~3)
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data) - 3, 4)]
    loaded = {r: (w >> 12) & 0xF for r, w in enumerate(words)
              if w >> 28 == 0xE and (w & 0x0FF00FFF) == 0x05900000}  # ldr rX, [rY]
    spilled = set()
    for k, w in enumerate(words):
        slot = _arm_slot(w, store=True)
        if slot and any(loaded.get(m) == slot[2] for m in range(max(0, k - 2), k)):
            spilled.add(slot[:2])
    n = 0
    for k, w in enumerate(words):
        if w >> 28 != 0xE or not ((w & 0x0FFFFFF0) == 0x012FFF10 or (w & 0x0FFFFFF0) == 0x01A0F000):
            continue
        reg = w & 0xF
        if reg == 14:
            continue
        for p in words[max(0, k - 4):k]:
            indexed = p >> 28 == 0xE and (p & 0x0FF00FF0) == 0x07900100 and (p >> 12) & 0xF == reg
            slot = _arm_slot(p, store=False)
            if indexed or (slot and slot[2] == reg and slot[:2] in spilled):
                n += 1
                break
    return n


def _label_table(proj, modes, run):
    """A run of even pointers into code: kept in `modes.label_tables` when it is a computed goto's labels,
    else returned, the functions of a table (those that can be: not half an ARM word).

    Labels in Thumb code are even (the code sets bit 0 before `bx`), where a Thumb function's pointer is
    odd: even pointers to code that reads as Thumb are labels.  In ARM code both are even: the run is a
    table of labels when it is long and the code among its targets jumps through a table entry that a
    register picks (`ldr r0, [r1, r0, lsl #2]; bx r0`, or that entry spilled to the stack and loaded
    back: the dispatch; a tail call through a function pointer loads it from a fixed offset).
    """
    labels = sorted(set(run))
    if (len(labels) >= MIN_LABEL_TABLE and labels[-1] - labels[0] <= MAX_LABEL_SPAN
            and modes.label_tables_examined < MAX_LABEL_TABLES):
        modes.label_tables_examined += 1
        thumb = sum(1 for v in labels if v & 2 or modes.addr(v, v + 64) != v)
        arm = len(labels) - thumb
        if thumb == len(labels) or (arm == len(labels) >= MIN_ARM_LABEL_TABLE
                                    and _arm_dispatches(proj, labels[0] - LABEL_TABLE_REACH, labels[-1])):
            modes.label_tables.append(labels)
            return []
    # too few for a table, or mixed: functions (a short ARM function may read as Thumb: the words after
    # it are not code)
    return [v for v in labels if not v & 2]


# Thumb `add rN, pc` (16-bit ADD Rdn, PC: 0100 0100 D111 1nnn, little-endian), at a halfword.
_ADD_PC = re.compile(rb"(?=([\x78-\x7f\xf8-\xff])\x44)")
# How far before the `add` the literal load that feeds it may be (gcc keeps them a few instructions apart).
_LOOKBACK = 64


def _literal_load(data, base, at, reg):
    """Where a Thumb `ldr reg, [pc, #imm]` at data offset `at` loads from (an offset in `data`, which is
    loaded at address `base`), or None."""
    lo, hi = data[at], data[at + 1]
    pc = (base + at + 4) & ~3  # Align(PC, 4)
    if hi == 0x48 | reg and reg < 8:  # 16-bit LDR (literal): 01001 ttt iiiiiiii
        return pc + lo * 4 - base
    if at + 4 <= len(data) and (lo, hi) == (0xDF, 0xF8) and data[at + 3] >> 4 == reg:  # LDR.W (literal), U=1
        return pc + (data[at + 2] | (data[at + 3] & 0xF) << 8) - base
    return None


def thumb_pc_relative_pointers(proj, obj, modes):
    """Thumb functions whose address the code computes PC-relative (32-bit ARM, no call-frame records).

    A position-independent Thumb-2 file takes a static function's address, to pass it as a callback
    or store it in a table, as gcc writes it:

        ldr  rN, .Lk        ; .Lk: .word func - (.LPIC + 4)
        .LPIC: add rN, pc

    Nothing calls such a function directly, so angr finds it only by scanning the gap it sits in, and
    often a few bytes late (after the literal pool before it).  The pair is read only where the code
    reads as Thumb (see Modes: in ARM code these bytes are pieces of other instructions), and the
    target is kept when it is a Thumb address (bit 0 set) in an executable section outside the PLT,
    at code that reads as Thumb.
    """

    def thumb(a):
        word = a & ~3
        return modes.addr(word, word + 64) != word

    code = [(s.vaddr, s.vaddr + s.memsize) for s in obj.sections
            if s.is_executable and s.memsize and not s.name.startswith(".plt")]
    out = set()
    for lo, hi in code:
        data = proj.loader.memory.load(lo, hi - lo)
        for m in _ADD_PC.finditer(data):
            add = m.start()
            if add % 2 or not thumb(lo + add):
                continue
            reg = (data[add] & 7) | (data[add] & 0x80) >> 4
            for back in range(2, min(_LOOKBACK, add) + 1, 2):
                literal = _literal_load(data, lo, add - back, reg)
                if literal is None:
                    continue
                if 0 <= literal and literal + 4 <= len(data):
                    value = int.from_bytes(data[literal:literal + 4], "little")
                    target = (value + lo + add + 4) & 0xFFFFFFFF
                    if target & 1 and any(a <= target < b for a, b in code) and thumb(target):
                        out.add(target)
                break
    return out

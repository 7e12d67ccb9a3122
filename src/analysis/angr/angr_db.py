#!/usr/bin/env python3
"""Recover one binary's static facts with angr, as JSON lines on stdout.

    python angr_db.py --binary PATH [--profile default|thorough]
        [--time-budget-s N] [--max-functions N] [--max-strings N] [--max-xrefs N]

dossier runs this in its sandbox, with the binary read-only and nothing
writable but a private /tmp, and builds the analysis database itself from what
comes out: one JSON object per line, each either progress
({"phase": ..., "elapsed_s": ...}, with "running": true heartbeats during CFG
recovery), a batch of rows ({"table": NAME, "rows": [[...], ...]}) or, last,
{"meta": {...}} then {"phase": "done", ...}.  Exit codes: 0 everything was
written (possibly truncated), 2 the input is not a binary cle can load, 1 other
failures.  Every fact comes from angr, cle or pyelftools; addresses are angr's
load addresses (a PIE is mapped at 0x400000; see meta.binary.load_base).
"""
import argparse
import bisect
import json
import logging
import math
import os
import re
import signal
import sys
import time
from array import array
from collections import Counter

import boundaries
from angr_identity import function_identities

T0 = time.monotonic()
SCHEMA_VERSION = 2  # 2: functions gained end_address, found_by and part_of
MIN_STRING = 4
HEARTBEAT_S = 15.0
NO_SPILL_MAX_BYTES = 16 << 20
# After the soft budget, CFGFast still builds functions from what it found; SIGALRM ends
# even that this long after the budget.
HARD_GRACE_S = 120
# Printable ASCII plus tab, as GNU strings counts it.
ASCII_RE = re.compile(rb"[\t\x20-\x7e]{%d,}" % MIN_STRING)
UTF16_RE = re.compile(rb"(?:[\t\x20-\x7e]\x00){%d,}" % MIN_STRING)

# Rows go out in batches of this many, so no single line is large.
BATCH = 2_000
# The two profiles: angr's cross-reference pass (Propagator + XRefs per function) costs
# most of the time on big binaries and finds few references beyond the rest.
PROFILES = {
    "default": {"normalize": True, "data_references": True, "cross_references": False},
    "thorough": {"normalize": True, "data_references": True, "cross_references": True},
}


class NotABinary(Exception):
    """The input cannot be loaded as a binary (exit code 2)."""


class HardDeadline(BaseException):
    """Raised by SIGALRM. A BaseException so angr's `except Exception` blocks cannot swallow it."""


def emit(phase, **fields):
    print(json.dumps({"phase": phase, "elapsed_s": round(time.monotonic() - T0, 3), **fields}), flush=True)


def emit_rows(table, rows):
    for i in range(0, len(rows), BATCH):
        print(json.dumps({"table": table, "rows": rows[i:i + BATCH]}), flush=True)


def quiet_logging():
    # Must run before `import angr`: the unicorn warning is logged at import time.
    # Unicorn is only used for concrete execution, which this provider never does.
    logging.getLogger("angr.state_plugins.unicorn_engine").setLevel(logging.CRITICAL)
    # Propagator logs "Unsupported Dirty amd64g_dirtyhelper_..." at ERROR for x87 code; such a
    # function just gets fewer references, which the DB cannot express per function anyway.
    for name in ("angr", "cle", "pyvex", "claripy", "archinfo"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def make_budgeted_cfg_class(CFGFast):
    """CFGFast that stops at a wall-clock deadline instead of running to completion.

    Stage 1 (block discovery) checks the deadline before each job and calls abort(); the
    post-analysis still runs, so functions are built from what was found.  The
    cross-reference pass (Propagator + XRefs per function, the expensive part) is the
    upstream loop of CFGFast.do_full_xrefs with the same deadline check.
    """

    class BudgetedCFGFast(CFGFast):
        deadline = math.inf
        stopped = []  # names of the stages the deadline cut short
        xref_progress = [0, 0]  # functions analysed, functions total
        _next_beat = 0.0

        def _beat(self, now, stage, **extra):
            type(self)._next_beat = now + HEARTBEAT_S
            emit("cfg", running=True, stage=stage, functions=len(self.functions), **extra)

        def _pre_job_handling(self, job):
            # called once per job (tens of thousands): keep it to one clock read
            now = time.monotonic()
            if now >= self._next_beat:
                self._beat(now, "blocks", blocks=len(self.graph))
            if now >= self.deadline and not self.should_abort:
                self.stopped.append("cfg")
                self.abort()
            return super()._pre_job_handling(job)

        def do_full_xrefs(self, overlay_state=None):
            state = self.project.factory.blank_state() if overlay_state is None else overlay_state
            addrs = list(self.functions)
            self.xref_progress[1] = len(addrs)
            for i, f_addr in enumerate(addrs):
                if time.monotonic() >= self.deadline:
                    self.stopped.append("xrefs")
                    break
                self.xref_progress[0] = i + 1
                if time.monotonic() >= self._next_beat:
                    self._beat(time.monotonic(), "xrefs", done=i, total=len(addrs))
                f = self.functions[f_addr]
                if f.is_simprocedure:
                    continue
                try:
                    prop = self.project.analyses.Propagator(func=f, base_state=state)
                    self.project.analyses.XRefs(func=f, replacements=prop.replacements)
                except Exception:  # same tolerance as upstream: one bad function is not fatal
                    logging.getLogger("angr_db").debug("xrefs failed for %#x", f_addr, exc_info=True)

    return BudgetedCFGFast


# --------------------------------------------------------------------------- loader facts

def entropy(data):
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


ELF_FLAG_LETTERS = ((0x1, "W"), (0x2, "A"), (0x4, "X"), (0x10, "M"), (0x20, "S"), (0x40, "I"),
                    (0x80, "L"), (0x200, "G"), (0x400, "T"), (0x800, "C"), (0x80000000, "E"))


def open_elftools(path):
    """pyelftools view of the file, for what cle does not keep (verneed files, PT_INTERP, unloaded sections)."""
    try:
        from elftools.elf.elffile import ELFFile
        return ELFFile(open(path, "rb"))  # noqa: SIM115 - closed at exit
    except Exception:  # not ELF or unreadable headers: the callers fall back to cle alone
        return None


def is_mapped(region):
    # occupies_memory is ELF-only; other formats (untested here) map every sized section
    return getattr(region, "occupies_memory", region.memsize > 0)


def loaded_regions(obj):
    """(name, region) for every region cle mapped: sections if the file has them, else segments."""
    if obj.sections:
        return [(s.name, s) for s in obj.sections if is_mapped(s)]
    return [(f"segment{i}", s) for i, s in enumerate(obj.segments) if s.memsize]


def binary_facts(proj, obj, elf):
    arch = proj.arch
    interp = None
    verneed = {}  # version name -> needed file ("GLIBC_2.34" -> "libc.so.6")
    if elf is not None:
        for seg in elf.iter_segments():
            if seg.header.p_type == "PT_INTERP":
                interp = seg.get_interp_name()
        sec = elf.get_section_by_name(".gnu.version_r")
        if sec is not None:
            for need, auxes in sec.iter_versions():
                for aux in auxes:
                    verneed[aux.name] = need.name
    stripped = None
    if obj.sections:
        stripped = not any(s.name == ".symtab" for s in obj.sections)
    return {
        "path": os.path.abspath(obj.binary) if obj.binary else None,
        "format": type(obj).__name__.lower(),
        "arch": arch.name,
        "bits": arch.bits,
        "endianness": "big" if arch.memory_endness == "Iend_BE" else "little",
        "entry": obj.entry,
        "load_base": obj.mapped_base,
        "link_base": obj.linked_base,
        "build_id": getattr(obj, "build_id", None),
        "stripped": stripped,
        "pie": bool(obj.pic),
        "interpreter": interp,
        "libraries": list(getattr(obj, "deps", [])),
    }, verneed


def section_rows(proj, obj, elf):
    rows = []
    raw = {}
    if elf is not None:  # sections cle does not map still have file content (.symtab, .comment, ...)
        raw = {i: s for i, s in enumerate(elf.iter_sections())}
    for idx, s in enumerate(obj.sections):
        if getattr(s, "type", None) == "SHT_NULL":
            continue
        if elf is not None:  # readelf's letters
            letters = "".join(ch for bit, ch in ELF_FLAG_LETTERS if s.flags & bit)
        else:
            letters = "A" * is_mapped(s) + "W" * s.is_writable + "X" * s.is_executable
        if s.only_contains_uninitialized_data:
            ent, addr = 0.0, s.vaddr
        elif is_mapped(s):
            addr = s.vaddr
            ent = entropy(proj.loader.memory.load(s.vaddr, s.memsize))
        else:
            addr = None  # not mapped: cle reports the load base here, which would be misleading
            ent = entropy(raw[idx].data()) if idx in raw else None
        rows.append((idx, s.name, addr, s.memsize, letters, ent, getattr(s, "type", None)))
    return rows


def symbol_rows(obj, verneed):
    sec_names = {i: s.name for i, s in enumerate(obj.sections)}
    symbols, exports, func_names = [], [], {}
    for idx, s in enumerate(obj.symbols):
        if not s.name:
            continue
        stype = s.type.name.removeprefix("TYPE_").lower()
        binding = getattr(s, "binding", None)
        binding = binding.removeprefix("STB_").lower() if isinstance(binding, str) else None
        version = getattr(s, "version", None)
        library = verneed.get(version) if s.is_import else None
        addr = None if s.is_import else s.rebased_addr
        symbols.append((idx, s.name, addr, s.size, stype, binding, sec_names.get(s.section),
                        int(s.is_import), int(s.is_export), library, version))
        if s.is_export:
            exports.append((s.name, addr, stype))
        if not s.is_import and stype in ("function", "none", "other"):
            func_names.setdefault(addr, set()).add(s.name)
    return symbols, exports, func_names


def import_rows(obj, verneed):
    rows = []
    plt = getattr(obj, "plt", {}) or {}
    for name, reloc in getattr(obj, "imports", {}).items():
        version = getattr(getattr(reloc, "symbol", None), "version", None)
        rows.append((name, verneed.get(version), reloc.rebased_addr, plt.get(name), version))
    return rows


# --------------------------------------------------------------------------- strings and data pointers

def scan_strings(proj, obj):
    """Every printable run of >= 4 chars in the non-executable loaded regions (like `strings -d`).

    Reads cle's memory (relocated image), not the file.  Executable regions are skipped:
    instruction bytes produce noise such as "AWAVAUATUSH" and pointers to code would
    then count as string references.
    """
    out = []
    mem = proj.loader.memory
    for name, r in loaded_regions(obj):
        if r.is_executable or getattr(r, "only_contains_uninitialized_data", False):
            continue
        data = mem.load(r.vaddr, r.memsize)
        for m in ASCII_RE.finditer(data):
            out.append((r.vaddr + m.start(), name, "ascii", m.group().decode("ascii"), m.end() - m.start()))
        for m in UTF16_RE.finditer(data):
            text = m.group().decode("utf-16-le")
            out.append((r.vaddr + m.start(), name, "utf-16le", text, len(text)))
    out.sort()
    return out


def scan_data_pointers(proj, obj, starts, ends):
    """(address, value, string index) for each aligned pointer-sized word that points into a string.

    Words are read from cle's memory, so R_*_RELATIVE targets in PIE .data.rel.ro are
    already applied.  Only aligned words are considered (compilers align pointers).
    """
    if not starts:
        return []
    size = proj.arch.bytes
    code = {8: "Q", 4: "I", 2: "H"}.get(size)
    if code is None:
        return []
    swap = (proj.arch.memory_endness == "Iend_BE") != (sys.byteorder == "big")
    lo, hi = starts[0], max(ends)
    mem = proj.loader.memory
    hits = []
    for _, r in loaded_regions(obj):
        if r.is_executable or getattr(r, "only_contains_uninitialized_data", False):
            continue
        first = (r.vaddr + size - 1) // size * size
        last = (r.vaddr + r.memsize) // size * size
        if last <= first:
            continue
        words = array(code, mem.load(first, last - first))
        if swap:
            words.byteswap()
        # The range test discards almost every word in C-speed comprehension; bisect the rest.
        for i in [i for i, v in enumerate(words) if lo <= v < hi]:
            v = words[i]
            j = bisect.bisect_right(starts, v) - 1
            if j >= 0 and v < ends[j]:
                hits.append((first + i * size, v, j))
    return hits


# --------------------------------------------------------------------------- CFG-derived facts

class Owners:
    """Maps an instruction address to the listed function that contains it.

    Inside an extent the binary records (FDE or sized symbol) that function owns it, or the
    parent of a split part; elsewhere the angr block that contains it, through the merge.
    """

    def __init__(self, funcs, listed, owner, arm):
        self.arm = arm
        self.extents = sorted((f.start & ~1 if arm else f.start, f.end, f) for f in listed.values()
                              if f.found_by in ("eh_frame", "symbol"))
        self.lows = [e[0] for e in self.extents]
        self.by_lo = listed
        spans = []
        for f in funcs:
            for b, size in f._block_sizes.items():  # no public accessor that avoids re-lifting
                if size and b in f.block_addrs_set and f.addr in owner:
                    spans.append((b, b + size, owner[f.addr]))
        spans.sort()
        self.starts = [s[0] for s in spans]
        self.spans = spans

    def _listed(self, lo):
        f = self.by_lo[lo]
        return f.part_of if f.part_of is not None else f.start

    def find(self, addr):
        i = bisect.bisect_right(self.lows, addr) - 1
        if i >= 0 and addr < self.extents[i][1]:
            f = self.extents[i][2]
            return f.part_of if f.part_of is not None else f.start
        i = bisect.bisect_right(self.starts, addr) - 1
        # normalized blocks do not overlap, but a block may be shared by functions: look back a little
        for j in range(i, max(i - 4, -1), -1):
            start, end, lo = self.spans[j]
            if start <= addr < end:
                return self._listed(lo)
        return None


def _no_op(ins):
    ops = [o.strip() for o in ins.op_str.split(",")]
    same = len(ops) == 2 and (ops[0] == ops[1] or ops[1] == f"[{ops[0]}]")
    return ins.mnemonic in ("nop", "nop.w", "int3", "hlt") or (ins.mnemonic in ("xchg", "mov", "lea") and same)


def is_padding(proj, addr, spans):
    """Nothing but no-op instructions (nop, int3, `xchg ax,ax`, `mov r,r`, `lea r,[r]`) or zero bytes."""
    for b, size in spans:
        if not size:
            continue
        data = proj.loader.memory.load(b & ~1 if b & 1 and proj.arch.name.startswith("ARM") else b, size)
        if not data.strip(b"\0"):
            continue
        try:
            insns = proj.factory.block(b, size).capstone.insns
        except Exception:  # noqa: BLE001 - undecodable: not something to drop
            return False
        if not all(_no_op(ins) for ins in insns):
            return False
    return True


def padding_size(proj, addr):
    """Bytes of no-op instructions at `addr` (as angr writes it: bit 0 set for Thumb), 0 when none."""
    try:
        insns = proj.factory.block(addr, 64).capstone.insns
    except Exception:  # noqa: BLE001 - undecodable: no padding
        return 0
    n = 0
    for ins in insns:
        if not _no_op(ins):
            break
        n += ins.size
    return n


# The edges angr's Function.graph keeps of a function's transition graph (those that stay inside it).
LOCAL_EDGES = ("transition", "exception", "fake_return")


def function_facts(proj, obj, cfg, func_names, frames, symbols, modes):
    # angr's functions outside the binary (the SimProcedure stand-ins for imports in cle's
    # extern object) and alignment padding are not rows; PLT stubs are, under import names.
    skipped = Counter()
    funcs = []
    for f in cfg.kb.functions.values():
        if not obj.contains_addr(f.addr) or f.is_simprocedure:
            skipped["outside_binary"] += 1
        elif f.is_alignment:
            skipped["alignment"] += 1
        else:
            funcs.append(f)
    arm = modes.arm
    plt = [(s.vaddr, s.vaddr + s.memsize) for s in obj.sections if s.name.startswith(".plt")]
    known = boundaries.known_functions(frames, symbols, modes, plt)
    angr_funcs = [(f.addr, [(b, n) for b, n in f._block_sizes.items() if b in f.block_addrs_set],
                   f.is_plt, f.name) for f in funcs]
    graph = cfg.model.graph

    def predecessors(addr):
        node = cfg.model.get_any_node(addr)
        return [p.addr for p in graph.predecessors(node)] if node is not None else []

    padding = []
    data_size = (lambda a: getattr(cfg.model.memory_data.get(a), "size", None)) if arm else None

    def dropped(a, spans):
        # padding, or padding before a literal pool angr decoded as code (gcc's nop.w before 8-aligned doubles)
        pool = arm and (n := padding_size(proj, a)) and data_size((a & ~1) + n) is not None
        return (pool or is_padding(proj, a, spans)) and not padding.append(a)

    listed, owner = boundaries.partition(
        known, angr_funcs, arm, dropped, predecessors, plt, data_size=data_size,
        padding_size=(lambda a: padding_size(proj, a)) if arm else None)
    named_starts = {a for a, _, _ in symbols}
    for f in listed.values():
        if f.found_by == "cfg" and f.start in named_starts:
            f.found_by = "symbol"  # a symbol without a size: its start is certain, its end is angr's
    skipped["padding"] += len(padding)
    skipped["merged"] += sum(1 for a, lo in owner.items() if (a & ~1 if arm else a) != lo)
    by_addr = {f.addr: f for f in funcs}
    start_of = {lo: f.start for lo, f in listed.items()}
    edges = set()
    local_edges = Counter()  # what f.graph.number_of_edges() counts, without building f.graph
    for f in funcs:
        if f.addr not in owner:
            continue
        for src, dst, data in f.transition_graph.edges(data=True):
            kind = data.get("type")
            if kind in LOCAL_EDGES and ("outside" not in data or data["outside"] is False):
                local_edges[f.addr] += 1
            if kind != "call":
                continue
            d = dst.addr & ~1 if arm else dst.addr
            if d in start_of:
                edges.add((start_of[owner[f.addr]], start_of[d], data.get("ins_addr")))
            elif dst.addr in owner:
                edges.add((start_of[owner[f.addr]], start_of[owner[dst.addr]], data.get("ins_addr")))
    callers, callees = {}, {}
    for s, d, _ in edges:
        callees.setdefault(s, set()).add(d)
        callers.setdefault(d, set()).add(s)
    blocks = {}
    cfg_edges = Counter()
    for a, lo in owner.items():
        f = by_addr[a]
        blocks.setdefault(lo, {}).update((b, n) for b, n in f._block_sizes.items() if b in f.block_addrs_set)
        cfg_edges[lo] += local_edges[a]
    rows = []
    shapes = []  # what angr_identity.py hashes, per listed function
    for lo in sorted(listed):
        f = listed[lo]
        mine = blocks.get(lo, {})
        name = f.name or f"sub_{f.start:x}"
        # named: the name is a symbol (or PLT import) at this address, not angr's sub_xxx or a heuristic
        named = int(name in func_names.get(f.start, ()) or (f.found_by == "plt" and not name.startswith("sub_")))
        rows.append((f.start, name, named, sum(mine.values()), len(mine), int(f.found_by == "plt"),
                     len(callers.get(f.start, ())), len(callees.get(f.start, ())),
                     f.end, f.found_by, f.part_of))
        shapes.append((f.start, name, bool(named) and f.found_by == "plt", mine, cfg_edges[lo]))
    owners = Owners(funcs, listed, owner, arm)
    return owners, rows, sorted(edges), dict(skipped), shapes


def code_xrefs(cfg):
    for ins_addr, refs in cfg.kb.xrefs.xrefs_by_ins_addr.items():
        for x in refs:
            if x.dst is not None:
                yield ins_addr, x.dst, "code_" + x.type_string


# --------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--profile", default="default", choices=sorted(PROFILES),
                   help="default: CFGFast(normalize, data_references); thorough: also cross_references")
    p.add_argument("--time-budget-s", type=float, default=600.0,
                   help="wall-clock budget for CFG recovery (default 600)")
    p.add_argument("--max-functions", type=int, default=200_000)
    p.add_argument("--max-strings", type=int, default=500_000)
    p.add_argument("--max-xrefs", type=int, default=1_000_000)
    return p.parse_args(argv)


def cap(rows, limit, what, limitations):
    if len(rows) > limit:
        limitations.append(f"{what} capped at {limit} of {len(rows)} rows (--max-{what.split()[0]})")
        return rows[:limit], True
    return rows, False


def run(args):
    timings, limitations, truncated = {}, [], False
    phase_start = time.monotonic()

    def lap(name):
        nonlocal phase_start
        now = time.monotonic()
        timings[name] = round(now - phase_start, 3)
        phase_start = now

    if not os.path.isfile(args.binary) or not os.access(args.binary, os.R_OK):
        raise NotABinary(f"cannot read {args.binary!r}: not a readable file")

    quiet_logging()
    import angr
    import cle

    # angr spills functions and CFG nodes to LMDB above ~256 KiB of image (a few hundred
    # to a few thousand objects in memory).  Up to NO_SPILL_MAX_BYTES keeping them in
    # memory is ~25 % faster (tar: 183 s vs 246 s) for ~20 % more RSS; see README.
    no_spill = os.path.getsize(args.binary) <= NO_SPILL_MAX_BYTES
    limits = {"functions": None, "cfg_nodes": None, "cfg_edges": None} if no_spill else None
    try:
        proj = angr.Project(args.binary, auto_load_libs=False, load_debug_info=False, cache_limits=limits)
    except (cle.errors.CLEError, angr.errors.AngrError) as e:
        raise NotABinary(f"{args.binary!r} is not a binary angr can load: {e}") from e
    obj = proj.loader.main_object
    elf = open_elftools(args.binary)
    binary, verneed = binary_facts(proj, obj, elf)
    frames, fsymbols, modes, seeds = boundaries.prepare(proj, elf)
    lap("load")
    emit("load", format=binary["format"], arch=binary["arch"])

    # ---- CFG, bounded by a soft deadline (abort) and a hard one (SIGALRM) in case the
    # post-analysis itself overruns; after the hard one only loader facts are written.
    Budgeted = make_budgeted_cfg_class(boundaries.seeded_cfg_class(angr.analyses.CFGFast, seeds, modes))
    Budgeted.deadline = time.monotonic() + args.time_budget_s
    hard_s = max(1, int(args.time_budget_s + HARD_GRACE_S))

    def on_alarm(signum, frame):
        raise HardDeadline()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(hard_s)
    cfg = None
    try:
        cfg = proj.analyses[Budgeted](**PROFILES[args.profile], show_progressbar=False)
    except HardDeadline:
        truncated = True
        limitations.append(f"CFG recovery did not finish by the hard deadline ({hard_s} s): no functions, "
                           "call edges or code references; sections, symbols, strings and data pointers are complete")
    finally:
        signal.alarm(0)
    if "cfg" in Budgeted.stopped:
        truncated = True
        limitations.append(f"CFG recovery stopped at the {args.time_budget_s:g} s time budget: "
                           "functions, call edges and references are incomplete")
    if "xrefs" in Budgeted.stopped:
        truncated = True
        done, total = Budgeted.xref_progress
        limitations.append(f"cross-reference recovery stopped at the {args.time_budget_s:g} s time budget after "
                           f"{done} of {total} functions: code references are incomplete")
    lap("cfg")
    emit("cfg", functions=len(cfg.kb.functions) if cfg else 0)

    # ---- functions and call edges
    symbols, exports, func_names = symbol_rows(obj, verneed)
    imports = import_rows(obj, verneed)
    owners, func_rows, edges, skipped, shapes = (
        function_facts(proj, obj, cfg, func_names, frames, fsymbols, modes) if cfg else (None, [], [], {}, []))
    names = {r[0]: r[1] for r in func_rows}
    identities = function_identities(proj, shapes, edges)  # angr_identity.py says what is hashed
    lap("functions")
    emit("functions", functions=len(func_rows), call_edges=len(edges), skipped=skipped)

    # ---- strings
    strings = scan_strings(proj, obj)
    strings, cut = cap(strings, args.max_strings, "strings", limitations)
    if cut:
        limitations[-1] += "; data pointers to the dropped strings are not reported"
    truncated |= cut
    lap("strings")
    emit("strings", strings=len(strings))

    # ---- xrefs: code references (kb.xrefs), calls (call graph), data-to-string pointers (memory scan)
    starts = [s[0] for s in strings]
    ends = [s[0] + s[4] * (2 if s[2] == "utf-16le" else 1) for s in strings]
    exec_regions = [(r.vaddr, r.vaddr + r.memsize) for _, r in loaded_regions(obj) if r.is_executable]

    def string_of(addr):
        j = bisect.bisect_right(starts, addr) - 1
        return j + 1 if j >= 0 and addr < ends[j] else None  # strings.id is 1-based

    def owner(src):
        f = owners.find(src) if owners else None
        if f is not None:
            return "found", f, names.get(f)
        if any(a <= src < b for a, b in exec_regions):
            return "not_found", None, None
        return "unavailable", None, None

    # Only references into the binary's own image are kept: angr's extern object holds
    # synthetic addresses for imports (a PLT stub "reading" its GOT target), and constants
    # such as -1 or 0xffffffffffffffe0 that Propagator reports are not addresses at all.
    xrefs = set()
    if cfg is not None:
        xrefs.update(x for x in code_xrefs(cfg) if obj.min_addr <= x[1] <= obj.max_addr)
        xrefs.update((site, dst, "call") for _, dst, site in edges if site is not None)
    xref_rows = [(src, dst, kind, *owner(src), string_of(dst)) for src, dst, kind in xrefs]
    xref_rows += [(src, dst, "data_pointer", "unavailable", None, None, j + 1)
                  for src, dst, j in scan_data_pointers(proj, obj, starts, ends)]
    # Under a cap, references to strings are kept first: they are what callers look up.
    xref_rows.sort(key=lambda r: (r[6] is None, r[1], r[0]))
    xref_rows, cut = cap(xref_rows, args.max_xrefs, "xrefs", limitations)
    truncated |= cut
    func_rows, cut = cap(func_rows, args.max_functions, "functions", limitations)
    if cut:
        limitations[-1] += "; call_edges and xrefs still name the dropped functions"
    truncated |= cut
    lap("xrefs")
    emit("xrefs", xrefs=len(xref_rows))

    limitations += [
        "strings: only non-executable loaded sections are scanned (printable ASCII/UTF-16LE runs >= 4 chars)",
        "data_pointer xrefs: only aligned pointer-sized words in non-executable sections that point into a "
        "recorded string; other data-to-data pointers are not reported",
        "call_edges: direct and resolved indirect calls only; tail jumps are not edges",
    ]
    if any(r[1] is None for r in imports):
        limitations.append("imports.library is NULL for imports without a symbol version (no library is named)")
    found_by = Counter(r[9] for r in func_rows)
    sources = {"symbol": found_by["symbol"], "eh_frame": found_by["eh_frame"], "plt": found_by["plt"],
               "cfg": found_by["cfg"], "parts": sum(1 for r in func_rows if r[10] is not None),
               "call_frame_records": len(frames), "merged_into_recorded": skipped.get("merged", 0),
               "padding_dropped": skipped.get("padding", 0)}
    limitations.append(
        f"functions: {sources['symbol']} from symbols and {sources['eh_frame']} from the compiler's call-frame "
        f"records (.eh_frame), with exact starts and ends; {sources['plt']} PLT stubs; {sources['cfg']} recovered "
        "by angr's CFG alone (code no record covers: the least certain, see each function's found_by); "
        f"{sources['parts']} split-off parts (.cold) name their function in part_of; "
        f"{sources['merged_into_recorded']} of angr's splits were merged into the recorded function around them")

    # ---- write everything to stdout; dossier builds the database from it
    tables = {
        "sections": section_rows(proj, obj, elf), "symbols": symbols, "imports": imports,
        "exports": exports, "functions": func_rows, "call_edges": edges, "function_identities": identities,
        "strings": [(i + 1, *s) for i, s in enumerate(strings)],
        "xrefs": [(i + 1, *r) for i, r in enumerate(xref_rows)],
    }
    for name, rows in tables.items():
        emit_rows(name, [list(r) for r in rows])
    lap("write")
    timings["total"] = round(time.monotonic() - T0, 3)
    counts = {name: len(rows) for name, rows in tables.items()}
    meta = {
        "schema_version": SCHEMA_VERSION,
        "provider": "angr",
        "provider_version": angr.__version__,
        "python_version": sys.version.split()[0],
        "profile": args.profile,
        "parameters": {"time_budget_s": args.time_budget_s, "max_functions": args.max_functions,
                       "max_strings": args.max_strings, "max_xrefs": args.max_xrefs,
                       "min_string_length": MIN_STRING, "angr_spilling": not no_spill,
                       "cfg": PROFILES[args.profile], "function_sources": sources},
        "binary": binary,
        "truncated": truncated,
        "limitations": limitations,
        "counts": counts,
        "cfg_functions_skipped": skipped,
        "timings": timings,
    }
    print(json.dumps({"meta": meta}), flush=True)
    emit("done", truncated=truncated, **counts)


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
        return 0
    except NotABinary as e:
        print(f"angr_db: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - report anything else as a plain failure
        logging.getLogger("angr_db").error("failed", exc_info=True)
        print(f"angr_db: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

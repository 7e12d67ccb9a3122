#!/usr/bin/env python3
"""Decompile one function with angr, as one JSON object on stdout.

    python angr_decompile.py --binary PATH --address 0x401136 [--profile default|thorough]

dossier runs this in its sandbox (binary read-only, a private /tmp, a time
limit it enforces) and retains the text itself.  The function's address comes
from dossier's analysis database, where it uses angr's load addresses too.
Output: {"address": ..., "name": ..., "text": "...", "limitations": [...]}.
Exit codes: 0 text written, 2 the input is not a binary cle can load,
3 no function at that address, 1 other failures.
"""
import argparse
import json
import logging
import sys

import boundaries

MAX_TEXT = 1 << 20  # characters of pseudo-C kept


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--profile", default="default", choices=["default", "thorough"])
    args = p.parse_args(argv)
    for name in ("angr", "cle", "pyvex", "claripy", "archinfo"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import angr
    import cle

    addr = int(args.address, 16)
    try:
        proj = angr.Project(args.binary, auto_load_libs=False, load_debug_info=False)
    except (cle.errors.CLEError, angr.errors.AngrError) as e:
        print(f"angr_decompile: not a binary angr can load: {e}", file=sys.stderr)
        return 2
    # The whole-program CFG names callees and finds the function's extent as the database did:
    # seeded with the same call-frame records.
    try:
        from elftools.elf.elffile import ELFFile
        elf = ELFFile(open(args.binary, "rb"))  # noqa: SIM115 - closed at exit
    except Exception:  # noqa: BLE001 - not ELF: angr's CFG alone, as for the database
        elf = None
    _, _, modes, seeds = boundaries.prepare(proj, elf)
    cfg = proj.analyses[boundaries.seeded_cfg_class(angr.analyses.CFGFast, seeds, modes)](
        normalize=True, data_references=True, cross_references=args.profile == "thorough", show_progressbar=False)
    func = cfg.kb.functions.function(addr=addr)
    if func is None:
        print(f"angr_decompile: no function at {args.address}", file=sys.stderr)
        return 3
    limitations = ["angr's decompiler output is an approximation: types, names and control flow may "
                   "differ from the source"]
    dec = proj.analyses.Decompiler(func, cfg=cfg.model)
    if dec.codegen is None:
        print(json.dumps({"address": args.address, "name": func.name, "text": "",
                          "limitations": limitations + ["the decompiler produced no output for this function"]}))
        return 0
    text = dec.codegen.text
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
        limitations.append(f"the text was cut at {MAX_TEXT} characters")
    print(json.dumps({"address": args.address, "name": func.name, "text": text, "limitations": limitations}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

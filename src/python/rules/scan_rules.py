"""Compiles a rule bundle with YARA-X, and scans files with it.

Usage: scan_rules.py compile BUNDLE
       scan_rules.py scan BUNDLE LIST TIMEOUT_S MAX_MATCHES MAX_MATCH_BYTES

Runs in dossier's sandbox: the bundle (JSON {"sources": [{"name", "text"}]},
each source compiled in its own namespace) and the files are mounted
read-only. LIST names the files to scan, one JSON object a line
({"path", "file"}: the name to report and where it is mounted).

compile prints one JSON object: {"ok": true, "rules": [...]} or
{"ok": false, "source": name, "error": the compiler's message}.
scan prints one JSON object a line: {"match": {...}} per pattern match,
{"file": {...}} per file scanned (with the SHA-256 of the bytes scanned, for
the caller to check against what it expects), then {"done": {...}}. The time limit is the
whole scan's: each file gets what is left, and a file whose scan runs out of
it ends the scan ({"file": {..., "status": "timeout"}}). The files are shared among processes
forked after the compile (one a CPU, at most SHARES); what they report is written in LIST's order,
the same lines one process would write.
"""

import fcntl
import hashlib
import json
import os
import signal
import sys
import time

import yara_x

# Files up to this size are read once, hashed and scanned from memory; larger ones are hashed, then
# scanned from the file (YARA-X maps it).
IN_MEMORY = 64 * 1024 * 1024
# Scanning processes at most (the files are shared among them).
SHARES = 2
F_SETPIPE_SZ = 1031


def build(bundle_path):
    with open(bundle_path) as f:
        bundle = json.load(f)
    compiler = yara_x.Compiler()
    for source in bundle["sources"]:
        compiler.new_namespace(source["name"])
        try:
            compiler.add_source(source["text"], origin=source["name"])
        except yara_x.CompileError as err:
            return None, {"ok": False, "source": source["name"], "error": str(err)[:4000]}
    return compiler.build(), None


def out(obj):
    sys.stdout.write(json.dumps(obj, default=str) + "\n")


def read_and_hash(path):
    """The file's bytes (when small enough to hold) and its SHA-256, from one read."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= IN_MEMORY:
            data = f.read()
            digest.update(data)
            return data, digest.hexdigest()
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return None, digest.hexdigest()


def scan_file(scanner, target, deadline, max_matches, max_bytes):
    """One file: its match rows (at most max_matches) and its file row; status "timeout" ends the scan."""
    scanner.set_timeout(max(1, int(deadline - time.monotonic())))
    started = time.monotonic()
    record = {"path": target["path"]}
    try:
        # The digest is of the bytes scanned (a small file is scanned from this very read).
        data, record["sha256"] = read_and_hash(target["file"])
        result = scanner.scan(data) if data is not None else scanner.scan_file(target["file"])
    except yara_x.TimeoutError:
        return [], {**record, "status": "timeout", "matches": 0, "seconds": round(time.monotonic() - started, 3)}
    except (yara_x.ScanError, OSError) as err:
        return [], {**record, "status": "error", "matches": 0, "reason": str(err)[:500]}
    found = []
    source = open(target["file"], "rb") if data is None else None
    try:
        for rule in result.matching_rules:
            rows = [(p.identifier, m) for p in rule.patterns for m in p.matches] or [(None, None)]
            for pattern, m in rows:
                # One beyond the cap, so that the reader knows there was more.
                if len(found) > max_matches:
                    break
                taken = b""
                if m is not None:
                    if data is not None:
                        taken = data[m.offset : m.offset + min(m.length, max_bytes)]
                    else:
                        source.seek(m.offset)
                        taken = source.read(min(m.length, max_bytes))
                found.append(
                    {
                        "path": target["path"],
                        "rule": rule.identifier,
                        "namespace": rule.namespace,
                        "tags": list(rule.tags),
                        "metadata": {k: v for k, v in rule.metadata},
                        "pattern": pattern,
                        "offset": None if m is None else m.offset,
                        "length": None if m is None else m.length,
                        "data_hex": taken.hex(),
                        "data_truncated": m is not None and m.length > max_bytes,
                    }
                )
    finally:
        if source is not None:
            source.close()
    seconds = round(time.monotonic() - started, 3)
    return found, {**record, "status": "scanned", "matches": min(len(found), max_matches), "seconds": seconds}


def scan_share(rules, targets, indices, deadline, max_matches, max_bytes, write):
    """Scans targets[i] for i in indices, in order, writing one line a file ({"i", "matches", "file"}),
    then {"end": "complete" | "timeout"}. Stops at a timeout, or once its own matches reach the cap (the
    reader's count, in list order, reaches it no later)."""
    scanner = yara_x.Scanner(rules)
    total = 0
    for i in indices:
        if deadline - time.monotonic() <= 0:
            write({"end": "timeout"})
            return
        found, record = scan_file(scanner, targets[i], deadline, max_matches, max_bytes)
        write({"i": i, "matches": found, "file": record})
        total += len(found)
        if record["status"] == "timeout" or total > max_matches:
            break
    write({"end": "complete"})


def start_share(rules, targets, indices, deadline, max_matches, max_bytes):
    """A forked scanner over its share of the files (the compiled rules are inherited, not rebuilt)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        with os.fdopen(write_end, "w") as pipe:
            try:
                scan_share(
                    rules, targets, indices, deadline, max_matches, max_bytes,
                    lambda obj: pipe.write(json.dumps(obj, default=str) + "\n"),
                )
                pipe.flush()
            finally:
                os._exit(0)
    os.close(write_end)
    try:
        fcntl.fcntl(read_end, F_SETPIPE_SZ, 1 << 20)  # a share rarely waits for the reader
    except OSError:
        pass
    return pid, os.fdopen(read_end)


def scan(rules, listing, timeout_s, max_matches, max_bytes):
    deadline = time.monotonic() + timeout_s
    with open(listing) as f:
        targets = [json.loads(line) for line in f if line.strip()]
    # The files are shared among processes, one a CPU (two at most), each with the compiled rules;
    # what they found is written in the listing's order, as one scanner would have.
    shares = max(1, min(SHARES, len(targets), len(os.sched_getaffinity(0))))
    children = [start_share(rules, targets, range(k, len(targets), shares), deadline, max_matches, max_bytes) for k in range(shares)]
    status, matches, files = merge(children, len(targets), max_matches)
    for pid, pipe in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        pipe.close()
    out({"done": {"status": status, "files": files, "matches": matches}})


def merge(children, count, max_matches):
    """Writes each file's rows in the listing's order as its share's process reports them."""
    shares = len(children)
    pending, ended = {}, [None] * shares
    matches = files = 0
    for i in range(count):
        k = i % shares
        while i not in pending and ended[k] is None:
            line = children[k][1].readline()
            if not line:
                ended[k] = "error"
                break
            msg = json.loads(line)
            if "end" in msg:
                ended[k] = msg["end"]
            else:
                pending[msg["i"]] = msg
        if i not in pending:
            return ("timeout" if ended[k] == "timeout" else "error"), matches, files
        msg = pending.pop(i)
        record = msg["file"]
        taken = msg["matches"][: max_matches - matches]
        # A match beyond the cap stops the scan after this file, as a lone scanner stops.
        capped = len(taken) < len(msg["matches"])
        for row in taken:
            out({"match": row})
        matches += len(taken)
        if record["status"] == "scanned":
            files += 1
            record = {**record, "matches": len(taken)}
        out({"file": record})
        if record["status"] == "timeout":
            return "timeout", matches, files
        if capped:
            return "capped", matches, files
    return "complete", matches, files


def main():
    mode, bundle = sys.argv[1], sys.argv[2]
    rules, error = build(bundle)
    if mode == "compile":
        out(error or {"ok": True, "rules": [{"name": r.identifier, "namespace": r.namespace, "tags": list(r.tags)} for r in rules]})
        return
    if error:
        out({"done": {"status": "error", "error": error}})
        sys.exit(2)
    scan(rules, sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))


main()

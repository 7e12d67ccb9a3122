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
it ends the scan ({"file": {..., "status": "timeout"}}).
"""

import hashlib
import json
import os
import sys
import time

import yara_x

# Files up to this size are read once, hashed and scanned from memory; larger ones are hashed, then
# scanned from the file (YARA-X maps it).
IN_MEMORY = 64 * 1024 * 1024


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


def scan(rules, listing, timeout_s, max_matches, max_bytes):
    scanner = yara_x.Scanner(rules)
    deadline = time.monotonic() + timeout_s
    matches = files = 0
    status = "complete"
    with open(listing) as f:
        targets = [json.loads(line) for line in f if line.strip()]
    for target in targets:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        scanner.set_timeout(max(1, int(left)))
        started = time.monotonic()
        record = {"path": target["path"]}
        try:
            # The digest is of the bytes scanned (a small file is scanned from this very read).
            data, record["sha256"] = read_and_hash(target["file"])
            result = scanner.scan(data) if data is not None else scanner.scan_file(target["file"])
        except yara_x.TimeoutError:
            out({"file": {**record, "status": "timeout", "matches": 0, "seconds": round(time.monotonic() - started, 3)}})
            status = "timeout"
            break
        except (yara_x.ScanError, OSError) as err:
            out({"file": {**record, "status": "error", "matches": 0, "reason": str(err)[:500]}})
            continue
        files += 1
        found = 0
        source = open(target["file"], "rb") if data is None else None
        try:
            for rule in result.matching_rules:
                rows = [(p.identifier, m) for p in rule.patterns for m in p.matches] or [(None, None)]
                for pattern, m in rows:
                    if matches >= max_matches:
                        status = "capped"
                        break
                    taken = b""
                    if m is not None:
                        if data is not None:
                            taken = data[m.offset : m.offset + min(m.length, max_bytes)]
                        else:
                            source.seek(m.offset)
                            taken = source.read(min(m.length, max_bytes))
                    out(
                        {
                            "match": {
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
                        }
                    )
                    matches += 1
                    found += 1
        finally:
            if source is not None:
                source.close()
        out({"file": {**record, "status": "scanned", "matches": found, "seconds": round(time.monotonic() - started, 3)}})
        if status == "capped":
            break
    out({"done": {"status": status, "files": files, "matches": matches}})


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

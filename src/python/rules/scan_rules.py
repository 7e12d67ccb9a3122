"""Compiles a rule bundle with YARA-X, and scans files with it.

Usage: scan_rules.py compile BUNDLE
       scan_rules.py scan BUNDLE LIST TIMEOUT_S MAX_MATCHES MAX_MATCH_BYTES

Runs in dossier's sandbox: the bundle (JSON {"sources": [{"name", "text"}]},
each source compiled in its own namespace) and the files are mounted
read-only. LIST names the files to scan, one JSON object a line
({"path", "file"}: the name to report and where it is mounted); LIST "-" is stdin, read after the
compile (the caller writes the whole listing at the start: the wait for it is part of the scan's time).

compile prints one JSON object: {"ok": true, "count": N, "rules": [the first 64]} or
{"ok": false, "source": name, "error": the compiler's message}.
scan prints one JSON object a line: {"match": {...}} per pattern match,
{"file": {...}} per file scanned (with the SHA-256 of the bytes scanned, for
the caller to check against what it expects), then {"done": {...}}. The time limit is the
whole scan's: each file gets what is left, and a file whose scan runs out of
it ends the scan ({"file": {..., "status": "timeout"}}). So does a listed file that is not there, or
not a regular file ({"file": {..., "status": "missing"}}). The files are shared among processes
forked after the compile (one a CPU, at most SHARES); what they report is written in LIST's order,
the same lines one process would write. The time limit holds whatever the rules do: the clock starts
before the compile, and this process stops the scanners at it even when a scan does not return (a
rule matching everywhere). What a rule's author wrote into a row is bounded (MAX_NAME, MAX_TAGS,
MAX_META, MAX_META_TEXT), and so are all the rows together (MAX_OUTPUT_BYTES: past it the scan stops,
"capped"). `include` is refused: a bundle is the whole of its rules.
"""

import errno
import fcntl
import hashlib
import json
import os
import select
import signal
import stat
import sys
import time

import yara_x

# Files up to this size are read once, hashed and scanned from memory; larger ones are hashed, then
# scanned from the file (YARA-X maps it).
IN_MEMORY = 64 * 1024 * 1024
# Scanning processes at most (the files are shared among them).
SHARES = 2
F_SETPIPE_SZ = 1031
# What one row keeps of its rule: the name, tags and metadata its author wrote, each bounded.
MAX_NAME, MAX_TAGS, MAX_META, MAX_META_TEXT = 128, 16, 16, 256
# Match rows a scan writes at most, in bytes of JSON: past it the scan stops as capped.
MAX_OUTPUT_BYTES = 128 * 1024 * 1024
# After the deadline, the scanners get this long to report before they are stopped.
GRACE_S = 1.0


def build(bundle_path):
    try:
        with open(bundle_path, encoding="utf-8") as f:
            bundle = json.load(f)
    except ValueError:  # not JSON, or not UTF-8
        bundle = None
    compiler = yara_x.Compiler()
    compiler.enable_includes(False)  # nothing outside the bundle: a file of the worker, say
    sources = bundle.get("sources") if isinstance(bundle, dict) else None
    if not isinstance(sources, list) or not all(
        isinstance(x, dict) and isinstance(x.get("name"), str) and isinstance(x.get("text"), str) for x in sources
    ):
        return None, {"ok": False, "source": "(bundle)", "error": "not a rule bundle: register it with register_rules"}
    for source in sources:
        try:
            compiler.new_namespace(source["name"])
            compiler.add_source(source["text"], origin=source["name"])
        except Exception as err:  # noqa: BLE001 - CompileError, or a name YARA-X refuses
            return None, {"ok": False, "source": source["name"][:MAX_NAME], "error": str(err)[:4000]}
    return compiler.build(), None


def clip(text, limit):
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rule_facts(rule):
    """What every row of a rule's matches says of it, bounded whatever its author wrote."""
    return {
        "rule": clip(rule.identifier, MAX_NAME),
        "namespace": clip(rule.namespace, MAX_NAME),
        "tags": [clip(t, MAX_NAME) for t in list(rule.tags)[:MAX_TAGS]],
        "metadata": {
            clip(k, MAX_NAME): (v if isinstance(v, (int, float, bool)) else clip(v, MAX_META_TEXT))
            for k, v in list(rule.metadata)[:MAX_META]
        },
    }


def out(obj):
    sys.stdout.write(json.dumps(obj, default=str) + "\n")


class Missing(Exception):
    """A listed file that is not there, or not a regular file: the scan's answer would not be about
    the listing, so it ends there."""


def open_target(path):
    """A listed file, opened without blocking, so that what is not a regular file (a FIFO put in its
    place) is refused, not waited on, and not through a link: a written file is never one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as err:
        raise Missing("not found") from err
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.ENXIO):  # a link; a socket
            raise
        raise Missing("not a regular file") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Missing("not a regular file")
    return fd


def read_and_hash(fd):
    """The file's bytes (when small enough to hold) and its SHA-256, from one read of `fd`."""
    digest = hashlib.sha256()
    size = os.fstat(fd).st_size
    with open(fd, "rb", closefd=False) as f:
        if size <= IN_MEMORY:
            data = f.read()
            digest.update(data)
            return data, digest.hexdigest()
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return None, digest.hexdigest()


def match_rows(rule):
    """(pattern, match) for each match of a rule, as they are read; (None, None) for a rule that
    matched by its condition alone."""
    matched = False
    for p in rule.patterns:
        for m in p.matches:
            matched = True
            yield p.identifier, m
    if not matched:
        yield None, None


def scan_file(scanner, target, deadline, max_matches, max_bytes, budget):
    """One file: its match rows (at most max_matches + 1: one more says there were more) and its file
    row, and whether rows were left out for the byte budget (budget[0], what may still be written,
    spent here); status "timeout" or "missing" ends the scan."""
    scanner.set_timeout(max(1, int(deadline - time.monotonic())))
    started = time.monotonic()
    record = {"path": target["path"]}
    try:
        fd = open_target(target["file"])
    except Missing as err:
        return [], {**record, "status": "missing", "matches": 0, "reason": str(err)}, False
    except OSError as err:
        return [], {**record, "status": "error", "matches": 0, "reason": clip(err, 500)}, False
    try:
        return scan_opened(scanner, fd, record, started, max_matches, max_bytes, budget)
    finally:
        os.close(fd)


def scan_opened(scanner, fd, record, started, max_matches, max_bytes, budget):
    """scan_file's work on the file it opened: every byte hashed, scanned and quoted is read through
    `fd` (a large file is scanned through /proc/self/fd, the same open file, not its name again)."""
    try:
        # The digest is of the bytes scanned (a small file is scanned from this very read).
        data, record["sha256"] = read_and_hash(fd)
        result = scanner.scan(data) if data is not None else scanner.scan_file(f"/proc/self/fd/{fd}")
    except yara_x.TimeoutError:
        return [], {**record, "status": "timeout", "matches": 0, "seconds": round(time.monotonic() - started, 3)}, False
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - ScanError, OSError, or a panic in a module on this file
        return [], {**record, "status": "error", "matches": 0, "reason": clip(err, 500)}, False
    found = []
    # Rows past the byte budget are not made: `over` says there were more.
    over = False
    for rule in result.matching_rules:
        facts = rule_facts(rule)
        row_bytes = len(json.dumps(facts)) + len(record["path"]) + 160
        for pattern, m in match_rows(rule):
            # One beyond the cap, so that the reader knows there was more.
            if len(found) > max_matches:
                break
            budget[0] -= row_bytes + 2 * min(m.length if m is not None else 0, max_bytes)
            if budget[0] < 0:
                over = True
                break
            taken = b""
            if m is not None:
                length = min(m.length, max_bytes)
                taken = data[m.offset : m.offset + length] if data is not None else os.pread(fd, length, m.offset)
            found.append(
                {
                    "path": record["path"],
                    **facts,
                    "pattern": pattern,
                    "offset": None if m is None else m.offset,
                    "length": None if m is None else m.length,
                    "data_hex": taken.hex(),
                    "data_truncated": m is not None and m.length > max_bytes,
                }
            )
        if over or len(found) > max_matches:
            break
    seconds = round(time.monotonic() - started, 3)
    record = {**record, "status": "scanned", "matches": min(len(found), max_matches), "seconds": seconds}
    return found, record, over


def scan_share(rules, targets, indices, deadline, max_matches, max_bytes, write):
    """Scans targets[i] for i in indices, in order, writing one line a file ({"i", "matches", "file",
    "over"}), then {"end": "complete" | "timeout"}. Stops at a timeout, or once its own matches reach
    the cap or its rows the byte budget (the reader's count, in list order, reaches them no later)."""
    scanner = yara_x.Scanner(rules)
    # A pattern matching everywhere stops being searched for past what could be kept.
    scanner.max_matches_per_pattern(max_matches + 1)
    total = 0
    budget = [MAX_OUTPUT_BYTES]
    for i in indices:
        if deadline - time.monotonic() <= 0:
            write({"end": "timeout"})
            return
        found, record, over = scan_file(scanner, targets[i], deadline, max_matches, max_bytes, budget)
        write({"i": i, "matches": found, "file": record, "over": over})
        total += len(found)
        if record["status"] in ("timeout", "missing") or over or total > max_matches:
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
    return pid, Lines(read_end)


class Lines:
    """A share's lines, each read by a deadline: a scanner that does not report in time is given up."""

    def __init__(self, fd):
        self.fd, self.buffer, self.eof = fd, b"", False

    def readline(self, deadline):
        """The next line, b"" at the end, None when the deadline passed first."""
        while b"\n" not in self.buffer:
            if self.eof:
                line, self.buffer = self.buffer, b""
                return line
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.eof = True
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line + b"\n"

    def close(self):
        os.close(self.fd)


def scan(rules, listing, deadline, max_matches, max_bytes):
    with open(0 if listing == "-" else listing, encoding="utf-8", closefd=listing != "-") as f:
        targets = [json.loads(line) for line in f if line.strip()]
    # The files are shared among processes, one a CPU (two at most), each with the compiled rules;
    # what they found is written in the listing's order, as one scanner would have.
    shares = max(1, min(SHARES, len(targets), len(os.sched_getaffinity(0))))
    children = [start_share(rules, targets, range(k, len(targets), shares), deadline, max_matches, max_bytes) for k in range(shares)]
    status, matches, files = merge(children, len(targets), max_matches, deadline + GRACE_S)
    for pid, pipe in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        pipe.close()
    out({"done": {"status": status, "files": files, "matches": matches}})


def merge(children, count, max_matches, deadline):
    """Writes each file's rows in the listing's order as its share's process reports them, until
    `deadline` (then the scan ran out of time, whatever the scanners are doing)."""
    shares = len(children)
    pending, ended = {}, [None] * shares
    matches = files = 0
    written = 0
    for i in range(count):
        k = i % shares
        while i not in pending and ended[k] is None:
            line = children[k][1].readline(deadline)
            if line is None:
                return "timeout", matches, files
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
        # A match beyond the cap (or the byte budget) stops the scan after this file, as a lone scanner stops.
        capped = msg.get("over") or len(taken) < len(msg["matches"])
        kept = 0
        for row in taken:
            line = json.dumps({"match": row}, default=str)
            written += len(line)
            if written > MAX_OUTPUT_BYTES:
                capped = True
                break
            sys.stdout.write(line + "\n")
            kept += 1
        matches += kept
        if record["status"] == "scanned":
            files += 1
            record = {**record, "matches": kept}
        out({"file": record})
        if record["status"] in ("timeout", "missing"):
            return record["status"], matches, files
        if capped:
            return "capped", matches, files
    return "complete", matches, files


def main():
    mode, bundle = sys.argv[1], sys.argv[2]
    # The scan's clock starts before the compile: the rules' compile is part of the time it gets.
    deadline = time.monotonic() + float(sys.argv[4]) if mode == "scan" else None
    rules, error = build(bundle)
    if mode == "compile":
        listed = [] if error else list(rules)
        shown = [{"name": clip(r.identifier, MAX_NAME), "namespace": clip(r.namespace, MAX_NAME)} for r in listed[:64]]
        out(error or {"ok": True, "count": len(listed), "rules": shown})
        return
    if error:
        out({"done": {"status": "error", "error": error}})
        sys.exit(2)
    scan(rules, sys.argv[3], deadline, int(sys.argv[5]), int(sys.argv[6]))


main()

"""Runs unblob on one file and writes what it unpacked to stdout as one pax tar.

Usage: unpack_unblob.py artifact|firmware DEPTH MAX_ENTRIES IMAGE
       (unpack_unblob.py unblob FD UNBLOB-ARGS...: how this script runs unblob, below)

Runs in dossier's sandbox: IMAGE is mounted read-only and the only writable
place is the private, size-bounded /tmp, where unblob carves and extracts. The
tar on stdout is all dossier takes from here; its own checked writer decides
what reaches the disk (names, links, special files, every bound). While unblob
runs, a watchdog counts what it created and stops it past MAX_ENTRIES.

artifact: the tree as unblob names it (`<start>-<end>.<handler>` chunks,
`…_extract/` folders), rooted at what the file itself unpacked to.
firmware: the top level renamed to extract_firmware's layout: every chunk of
the image as `carved/0x<offset>.<kind>` (unknown chunks included) and what a
chunk unpacked to as `<kind>-0x<offset>/`; deeper levels keep unblob's names.

unblob runs in a process of its own, this script in its `unblob` mode: unblob's command line with
two hooks that tell a pipe what it finds while it works. The image's own chunks, once found, are
handed on at once as a stderr line `dossier-top {json}` (known and unknown, as the facts will list
them), so that the caller can start on the unknown ones (binwalk's listing) while unblob extracts;
each unknown chunk's entropy is computed as it is carved, in unblob's processes. Before the tar, a
stderr line `dossier-facts {json}`: chunks (known and unknown, with the entropy of unknown ones),
handlers met, the recursion tree, errors; after it, the last line `dossier-counts {json}`: what the
tar holds.
Exit codes: 0 done, 2 unblob failed, 3 the scratch space is full, 4 more
entries than MAX_ENTRIES.
"""

import fcntl
import io
import json
import math
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
from collections import Counter

UNREADABLE, SCRATCH_FULL, TOO_MANY = 2, 3, 4
MAX_ROWS = 10_000
# The facts line at most (the caller keeps the last 8 MiB of this wrapper's stderr).
MAX_FACTS_BYTES = 4 * 1024 * 1024
ENTROPY_SAMPLE = 4 * 1024 * 1024
ENTROPY_WINDOWS = 64

TAR_FD = os.dup(1)
ERR_FD = os.dup(2)


def write_all(fd, data):
    """Writes all of `data`: a write to a pipe or socket may take only part of it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def say(text):
    """One line of this wrapper's own on stderr, whole."""
    write_all(ERR_FD, text.encode("utf-8", "replace"))


def fail(code, message):
    say(f"\nunpack_unblob: {message}\n")
    os._exit(code)


def scratch_left():
    st = os.statvfs("/tmp")
    return st.f_bavail * st.f_frsize


def kind_of(handler):
    """A handler's family: squashfs_v4_le → squashfs, trx_v1 → trx, lz4_default → lz4."""
    name = re.sub(r"_v\d.*$", "", handler)
    return re.sub(r"_(le|be|new|old|legacy|default|skippable|ddwrt|broadcom|nonstandard)$", "", name)


def entropy(path):
    """Shannon entropy of a file in bits per byte, and whether it was sampled: a file larger than
    ENTROPY_SAMPLE is read in ENTROPY_WINDOWS windows spread evenly over it, ENTROPY_SAMPLE bytes in all."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size <= ENTROPY_SAMPLE:
            data, sampled = f.read(), False
        else:
            step, window = size // ENTROPY_WINDOWS, ENTROPY_SAMPLE // ENTROPY_WINDOWS
            parts = []
            for k in range(ENTROPY_WINDOWS):
                f.seek(k * step)
                parts.append(f.read(window))
            data, sampled = b"".join(parts), True
    if not data:
        return 0.0, False
    return round(shannon(data), 4), sampled


def shannon(data):
    """Shannon entropy of bytes in bits per byte: unblob's own, in Rust (a few ms for 4 MiB), where
    it imports; else counted here (Counter counts in C, but is about a hundred times slower)."""
    native = native_shannon()
    if native is not None:
        return native(data)
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


_NATIVE = []


def native_shannon():
    """unblob's Rust shannon_entropy (an attribute of its math_tools, not a module of its own), once
    looked up per process; None where unblob does not have it."""
    if not _NATIVE:
        try:
            from unblob import math_tools

            _NATIVE.append(math_tools.shannon_entropy)
        except (ImportError, AttributeError):
            _NATIVE.append(None)
    return _NATIVE[0]


def walk(root):
    """os.walk's top-down order, sorted, without recursion: a tree a thousand folders deep is input
    like any other. A folder that cannot be read raises (fails the run), never drops out of it."""
    if not os.path.isdir(root):
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        dirs, files = [], []
        with os.scandir(folder) as entries:
            for entry in entries:
                (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
        dirs.sort()
        files.sort()
        yield folder, dirs, files
        stack.extend(os.path.join(folder, d) for d in reversed(dirs))


def count_entries(root, limit):
    seen = 0
    for _folder, dirs, files in walk(root):
        seen += len(dirs) + len(files)
        if seen > limit:
            break
    return seen


def python_shims(venv_bin, shims):
    """The venv's console scripts name the interpreter by the path the venv was made at, which the
    sandbox does not show: each gets a shim that runs it with this interpreter (unblob calls
    jefferson and ubireader_extract_images by name)."""
    os.makedirs(shims, exist_ok=True)
    for name in os.listdir(venv_bin):
        script = os.path.join(venv_bin, name)
        try:
            with open(script, "rb") as f:
                head = f.readline()
        except OSError:
            continue
        if not head.startswith(b"#!") or b"python" not in head:
            continue
        shim = os.path.join(shims, name)
        with open(shim, "w") as f:
            f.write(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
        os.chmod(shim, 0o755)
    return shims


def top_chunks_row(size, outer, unknown, unknown_type):
    """The image's own chunks as the facts will list them (`chunks` rows of depth 0, sorted, at most
    MAX_ROWS; padding is a known chunk there, as in unblob's report), each with its kind (the name of
    its carved/ file), and, as the facts' `whole_file`, the kind of the one known chunk that is the
    whole image."""
    rows = []
    for c in sorted([*outer, *unknown], key=lambda c: c.start_offset)[:MAX_ROWS]:
        known = not isinstance(c, unknown_type)
        # A padding chunk is known, with no handler: unblob's report names it "padding".
        handler = getattr(getattr(c, "handler", None), "NAME", None) or "padding"
        rows.append(
            {
                "path": "",
                "depth": 0,
                "start": c.start_offset,
                "end": c.end_offset,
                "size": c.end_offset - c.start_offset,
                "unknown": not known,
                "kind": kind_of(handler) if known else "unknown",
            }
        )
    whole = outer[0] if len(outer) == 1 and not unknown and (outer[0].start_offset, outer[0].end_offset) == (0, size) else None
    return {"chunks": rows, "whole_file": kind_of(whole.handler.NAME) if whole else None}


def unblob_telling(fd, argv):
    """unblob's own command line, in this process, telling `fd` what it finds while it works, one JSON
    line each: the image's own chunks as soon as it has found them (before it carves and extracts
    them), `{"top": {...}}`; and each unknown chunk's entropy as it is carved, `{"entropy": [path,
    bits, sampled]}`, computed in unblob's processes while others extract."""
    from unblob import processing
    from unblob.cli import main as unblob_main
    from unblob.models import UnknownChunk

    def tell(obj, whole=False):
        line = (json.dumps(obj) + "\n").encode()
        # unblob's processes share the pipe: a line of at most PIPE_BUF bytes is written at once. The
        # image's chunks are told before any other process has work, and may be longer.
        if len(line) > select.PIPE_BUF and not whole:
            return
        try:
            write_all(fd, line)
        except OSError:
            pass  # the wrapper stopped listening: it works these out from unblob's report

    process_chunks = processing._FileTask._process_chunks
    carve_unknown = processing.carve_unknown_chunk

    # What is told is a help, never a change to what unblob does: a hook that fails tells nothing
    # (the wrapper then works it out from unblob's report), and unblob goes on as it would.
    def telling_process_chunks(self, file, outer_chunks, unknown_chunks):
        if self.task.depth == 0:
            try:
                top = top_chunks_row(self.size, outer_chunks, unknown_chunks, UnknownChunk)
            except Exception:  # noqa: BLE001
                top = None
            if top is not None:
                tell({"top": top}, whole=True)
        return process_chunks(self, file, outer_chunks, unknown_chunks)

    def telling_carve_unknown(carve_dir, file, chunk):
        carved = carve_unknown(carve_dir, file, chunk)
        if isinstance(chunk, UnknownChunk):
            try:
                told = [str(carved), *entropy(carved)]
            except Exception:  # noqa: BLE001
                told = None
            if told is not None:
                tell({"entropy": told})
        return carved

    processing._FileTask._process_chunks = telling_process_chunks
    processing.carve_unknown_chunk = telling_carve_unknown
    sys.argv = ["unblob", *argv]
    unblob_main()


class Told(threading.Thread):
    """What unblob tells while it works (unblob_telling): the image's chunks are handed on to the caller
    at once as the `dossier-top` line, never once `close` has been called (the facts line follows,
    alone on stderr), and only the first time: whatever else a process of unblob's writes, stderr
    carries one such line; the entropies are kept, MAX_ROWS at most, for the facts."""

    def __init__(self, read_fd):
        super().__init__(daemon=True)
        self.read_fd = read_fd
        self.lock = threading.Lock()
        self.closed = False
        self.top_sent = False
        self.top = None
        self.entropies = {}

    def run(self):
        # Read to the end whatever is told (a writer must never wait on a full pipe); a line longer
        # than any told is dropped.
        data = b""
        with os.fdopen(self.read_fd, "rb", buffering=0) as told:
            while chunk := told.read(1 << 16):
                data += chunk
                *lines, data = data.split(b"\n")
                for line in lines:
                    try:
                        self.heard(line)
                    except Exception:  # noqa: BLE001 - a line not understood is not used, and reading goes on
                        pass
                if len(data) > MAX_FACTS_BYTES:
                    data = b""

    def heard(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if isinstance(msg.get("top"), dict):
            with self.lock:
                if not self.closed and not self.top_sent:
                    self.top_sent = True
                    self.top = msg["top"]
                    say(f"\ndossier-top {json.dumps(msg['top'])}\n")
        elif isinstance(msg.get("entropy"), list) and len(msg["entropy"]) == 3 and len(self.entropies) < MAX_ROWS:
            path, bits, sampled = msg["entropy"]
            if isinstance(path, str) and isinstance(bits, (int, float)) and isinstance(sampled, bool):
                self.entropies[path] = (bits, sampled)

    def close(self):
        """After unblob's end: what it told is read (or given up after a moment: a process of its pool
        that outlives it keeps the pipe open), and nothing more goes to stderr. The entropies, and the
        image's chunks as the `dossier-top` line handed them on (None if it did not)."""
        self.join(timeout=2)
        with self.lock:
            self.closed = True
        return dict(self.entropies), self.top


def run_unblob(image, out, depth, max_entries, keep_chunks):
    work = os.path.dirname(out)
    venv_bin = os.path.dirname(sys.executable)
    shims = python_shims(venv_bin, os.path.join(work, "bin"))
    env = dict(os.environ, PATH=f"{shims}:{venv_bin}:/usr/bin:/bin")
    argv = ["-e", out]
    argv += ["--report", os.path.join(work, "report.json")]
    argv += ["--log", os.path.join(work, "unblob.log"), "-d", str(depth), "-n", "0"]
    if keep_chunks:
        argv.append("-k")
    argv.append(image)
    # unblob runs as this script's `unblob` mode, which tells a pipe what it finds while it works.
    read_fd, write_fd = os.pipe()
    told = Told(read_fd)
    told.start()
    command = [sys.executable, os.path.abspath(__file__), "unblob", str(write_fd), *argv]
    # unblob and its extractors print what the input names (paths, headers): none of it may reach this
    # wrapper's stderr, whose `dossier-facts` line the caller acts on before the run ends. What unblob
    # says is in its --log file, whose last line a failure reports.
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    over = {"entries": False, "error": None}

    def watch():
        # A file system of a million empty files fits any scratch space: count what unblob made, often.
        # Whatever stops the count stops unblob too: the bound holds or the run fails.
        try:
            while proc.poll() is None:
                if count_entries(out, max_entries) > max_entries:
                    over["entries"] = True
                    break
                time.sleep(0.5)
            else:
                return
        except BaseException as err:  # noqa: BLE001
            over["error"] = err
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    threading.Thread(target=watch, daemon=True).start()
    code = proc.wait()
    entropies, top = told.close()
    try:
        too_many = over["entries"] or count_entries(out, max_entries) > max_entries
    except OSError as err:
        over["error"] = err
        too_many = False
    if too_many:
        fail(TOO_MANY, f"unblob unpacked more than max_entries={max_entries} entries")
    if over["error"] is not None:
        fail(UNREADABLE, f"what unblob unpacked could not be listed: {type(over['error']).__name__}")
    if scratch_left() < 64 * 1024:
        fail(SCRATCH_FULL, "what unblob unpacked does not fit in the scratch space")
    # unblob exits 1 when any chunk had an error (a missing extractor, say): its report says which.
    if code != 0 and not os.path.exists(os.path.join(work, "report.json")):
        try:
            with open(os.path.join(work, "unblob.log"), "rb") as log:
                log.seek(max(0, os.path.getsize(log.name) - 2000))
                tail = log.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            tail = []
        fail(UNREADABLE, f"unblob exited {code}: {tail[-1] if tail else 'no message'}")
    with open(os.path.join(work, "report.json")) as f:
        text = f.read()
    # An extractor that ran out of room fails its chunk, and unblob may remove what it wrote: its report says so.
    if "No space left on device" in text or "[Errno 28]" in text:
        fail(SCRATCH_FULL, "what unblob unpacked does not fit in the scratch space")
    return json.loads(text), entropies, top


def reports_of(node, kind):
    """Every report of `kind` anywhere in one task's report (a chunk's extraction reports included)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("__typename__") == kind:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class Facts:
    """What unblob's report says, by output path (relative to what the tar holds)."""

    def __init__(self, rel, extract_dir, entropies):
        self.rel = rel
        self.extract_dir = extract_dir
        # Unknown chunks' entropies by carved path, as unblob's processes told them (unblob_telling).
        self.entropies = entropies
        self.chunks, self.tree, self.errors, self.handlers = [], [], [], {}
        # Folders unblob found already there and so did not extract into: the input's own, named like
        # unblob's (`fw.zip_extract/` beside `fw.zip`). What they hold is not what unblob unpacked.
        self.existing, self.existing_overflow = set(), False

    def take(self, report, image_size):
        for task in report:
            for found in reports_of(task, "OutputDirectoryExistsReport"):
                if len(self.existing) < MAX_ROWS:
                    self.existing.add(found.get("path"))
                else:
                    self.existing_overflow = True
        for task in report:
            path, depth = task["task"]["path"], task["task"]["depth"]
            file = self.rel(path)
            reps = task["reports"]
            chunks = [r for r in reps if r["__typename__"] in ("ChunkReport", "UnknownChunkReport")]
            carve = next((r["carve_dir"] for r in reps if r["__typename__"] == "CarveDirectoryReport"), None)
            for r in reps:
                if r.get("severity") in ("ERROR", "WARNING"):
                    self.error(file, r)
            for c in sorted(chunks, key=lambda c: c["start_offset"]):
                self.chunk(file, path, depth, c, carve)
            if chunks and len(self.tree) < MAX_ROWS:
                known = [c["handler_name"] for c in chunks if c["__typename__"] == "ChunkReport"]
                self.tree.append({"path": file, "depth": depth, "handlers": sorted(set(known)), "chunks": len(chunks)})
        self.image_size = image_size

    def error(self, file, r):
        if len(self.errors) >= MAX_ROWS:
            return
        detail = {k: v for k, v in r.items() if k not in ("__typename__", "severity")}
        text = json.dumps(detail, default=str)[:500]
        self.errors.append(
            {"path": file, "severity": r.get("severity", "ERROR"), "kind": r.get("__typename__", "Report"), "detail": text}
        )

    def chunk(self, file, source, depth, c, carve):
        start, end = c["start_offset"], c["end_offset"]
        unknown = c["__typename__"] == "UnknownChunkReport"
        handler = "unknown" if unknown else c["handler_name"]
        carved = os.path.join(carve, f"{start}-{end}.{handler}") if carve else None
        row = {
            "path": file,
            "depth": depth,
            "start": start,
            "end": end,
            "size": end - start,
            "handler": handler,
            "kind": kind_of(handler),
            "unknown": unknown,
            "carved_to": self.rel(carved) if carved and os.path.exists(carved) else None,
            "entropy": None,
            "entropy_sampled": False,
            "encrypted": bool(c.get("is_encrypted")),
            "extracted": False,
        }
        for r in c.get("extraction_reports", []):
            self.error(file, r)
        if not unknown:
            self.handlers[handler] = self.handlers.get(handler, 0) + 1
            # A carved chunk unpacks beside its carved file; a chunk that is the whole file, beside that
            # file (the input itself: into the output's root).
            target = f"{carved}_extract" if carve else self.extract_dir(source)
            row["extracted"] = target not in self.existing and os.path.isdir(target) and bool(os.listdir(target))
        elif carved and os.path.exists(carved):
            row["entropy"], row["entropy_sampled"] = self.entropies.get(carved) or entropy(carved)
        if len(self.chunks) < MAX_ROWS:
            self.chunks.append(row)


KIND = re.compile(r"[a-z0-9_]{1,64}")


def carved_name(start, kind):
    """extract_firmware's name for one of the image's own chunks (carveFirmware.ts and imageChunks.ts
    make the same)."""
    return f"carved/0x{start:x}.{kind}"


def carved_by_reader(top, size):
    """The image's own chunks as the `dossier-top` line told them, each as its carved/ name and range:
    the reader carves these from the image as soon as it hears them, so the tar leaves them out. The
    same rows, checked the same way, as the reader takes from that line (carveFirmware.ts)."""
    rows = top.get("chunks") if isinstance(top, dict) else None
    out = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or row.get("depth") != 0 or row.get("path") != "":
            continue
        start, end, kind = row.get("start"), row.get("end"), row.get("kind")
        if (
            type(start) is int
            and type(end) is int
            and 0 <= start < end <= size
            and isinstance(kind, str)
            and KIND.fullmatch(kind)
        ):
            out.append({"name": carved_name(start, kind), "start": start, "end": end})
    return out[:MAX_ROWS]


def firmware_names(out_root, image, report):
    """extract_firmware's names for the top level: chunk files to carved/, their folders to <kind>-0x<offset>/."""
    top = next((t for t in report if t["task"]["depth"] == 0), None)
    renames, whole = {}, None
    if top:
        for r in top["reports"]:
            if r["__typename__"] not in ("ChunkReport", "UnknownChunkReport"):
                continue
            start, end = r["start_offset"], r["end_offset"]
            handler = r.get("handler_name", "unknown")
            kind = kind_of(handler)
            name = f"{start}-{end}.{handler}"
            renames[name] = carved_name(start, kind)
            renames[f"{name}_extract"] = f"{kind}-0x{start:x}"
            if start == 0 and end == os.path.getsize(image) and r["__typename__"] == "ChunkReport":
                whole = kind
    return renames, whole


def bounded_facts(result):
    """The facts as one JSON line of at most MAX_FACTS_BYTES: past it the longest lists lose their
    tails (errors first) and `trimmed` says so; the folders unblob did not make are then not listed
    (null: the caller trusts none)."""
    text = json.dumps(result)
    while len(text) > MAX_FACTS_BYTES:
        result["trimmed"] = True
        if result.get("existing_dirs"):
            result["existing_dirs"] = None
        else:
            longest = max(("errors", "tree", "chunks"), key=lambda k: len(result[k]))
            if not result[longest]:
                break
            result[longest] = result[longest][: len(result[longest]) // 2]
        text = json.dumps(result)
    return text


# What the tar's descriptor may hold before its reader takes it: the reader takes 64 KiB at a time,
# and a writer that blocks at every few of them costs a tree of 140 MB about a tenth of its time.
TAR_BUFFER = 4 * 1024 * 1024
F_SETPIPE_SZ = 1031


def widen(fd):
    """Lets the tar's descriptor hold TAR_BUFFER bytes (a socket, as the caller's is: at most what the
    host allows) or 1 MiB (a pipe); left as it is where neither can be widened."""
    copy = os.dup(fd)
    try:
        sock = socket.socket(fileno=copy)
    except OSError:  # not a socket
        os.close(copy)
        try:
            fcntl.fcntl(fd, F_SETPIPE_SZ, 1024 * 1024)
        except OSError:
            pass
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TAR_BUFFER)
    except OSError:
        pass
    finally:
        sock.close()


class TarStream:
    """A pax tar written straight to a descriptor: each header made by tarfile, each file's bytes
    copied by the kernel (sendfile) from the scratch space to the pipe, never through Python."""

    def __init__(self, fd):
        self.fd = fd
        widen(fd)

    def write(self, data):
        write_all(self.fd, data)

    def add(self, info, source=None):
        self.write(info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape"))
        if not info.isreg():
            return
        # The file its header was made from, not what a link or a fifo put in its place since: a swap
        # fails the run instead of reading elsewhere, or waiting on a fifo with no writer.
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{source} is no longer a regular file")
            # Exactly the size its header states, as tarfile writes it: a file that shrank since fails.
            sent = 0
            while sent < info.size:
                n = os.sendfile(self.fd, fd, sent, info.size - sent)
                if n == 0:
                    raise OSError(f"{source} ended after {sent} of its {info.size} bytes")
                sent += n
        finally:
            os.close(fd)
        self.write(b"\0" * (-info.size % tarfile.BLOCKSIZE))

    def close(self):
        self.write(b"\0" * (2 * tarfile.BLOCKSIZE))


def write_tar(out_root, rename, extra, left_out=frozenset()):
    """The tree as a tar on TAR_FD, names as `rename` makes them, `extra` (name, file) first; the
    image's own carved chunks named in `left_out` are not in it (the reader carves them itself)."""
    counts = {"files": 0, "dirs": 0, "links": 0, "special": 0}
    tar = TarStream(TAR_FD)
    # The root first: a tar with no entry at all is no tar to a strict reader.
    root = tarfile.TarInfo("./")
    root.type, root.mode = tarfile.DIRTYPE, 0o755
    tar.add(root)
    # tarfile's own headers (gettarinfo), from one archive object that remembers the inodes it has
    # named, so a second link to a file is a hard link entry, as tarfile writes it; it writes nothing.
    namer = tarfile.open(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT)
    for arcname, source in extra:
        info = tar_info(namer, source, arcname)
        info.mode = 0o644
        tar.add(info, source)
        counts["files"] += 1
    for folder, dirs, files in walk(out_root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            arcname = rename(os.path.relpath(full, out_root))
            if folder == out_root and arcname in left_out and name in files:
                continue
            info = tar_info(namer, full, arcname)
            if info is None:  # a socket: tar has no entry for one
                counts["special"] += 1
                continue
            if info.isreg():
                counts["files"] += 1
            elif info.isdir() or info.issym() or info.islnk():
                counts["dirs" if info.isdir() else "links"] += 1
            else:
                counts["special"] += 1
            tar.add(info, full)
    tar.close()
    return counts


def tar_info(namer, path, arcname):
    """tarfile's header of a file in the tree, owned by no one (uid 0, no names); None for a socket."""
    info = namer.gettarinfo(path, arcname=arcname)
    if info is None:
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "unblob":
        unblob_telling(int(sys.argv[2]), sys.argv[3:])
        return
    if len(sys.argv) != 5 or sys.argv[1] not in ("artifact", "firmware"):
        fail(UNREADABLE, "usage: unpack_unblob.py artifact|firmware DEPTH MAX_ENTRIES IMAGE")
    mode, depth, max_entries, image = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    work = "/tmp/unblob"
    os.makedirs(work)
    out = os.path.join(work, "out")
    started = time.time()
    report, entropies, top = run_unblob(image, out, depth, max_entries, keep_chunks=mode == "firmware")
    out_root = os.path.join(out, f"{os.path.basename(image)}_extract")
    renames, whole = firmware_names(out_root, image, report) if mode == "firmware" else ({}, None)

    def rename(rel):
        first, _, rest = rel.partition("/")
        if whole:
            return f"{whole}-0x0/{rel}"
        mapped = renames.get(first, first)
        return f"{mapped}/{rest}" if rest else mapped

    def rel(path):
        if path is None:
            return None
        if path == image:
            return ""
        return rename(os.path.relpath(path, out_root)) if path.startswith(out_root) else path

    by_reader = carved_by_reader(top, os.path.getsize(image)) if mode == "firmware" else []
    facts = Facts(rel, lambda source: out_root if source == image else f"{source}_extract", entropies)
    facts.take(report, os.path.getsize(image))
    result = {
        "unblob": True,
        "seconds": round(time.time() - started, 3),
        "depth": depth,
        "chunks": facts.chunks,
        "chunk_count": len(facts.chunks),
        "handlers": facts.handlers,
        "tree": facts.tree,
        "errors": facts.errors,
        "whole_file": whole,
        # The image's own chunks the reader carves from the image (told it early): not in the tar.
        "carved_by_reader": by_reader,
        # The tree's folders named like unblob's that unblob did not make (null: too many to list).
        "existing_dirs": None if facts.existing_overflow else sorted(
            r for r in (rel(p) for p in facts.existing if isinstance(p, str)) if r is not None
        ),
    }
    # The facts before the tree (a caller may act on them while the tree streams).
    say(f"\ndossier-facts {bounded_facts(result)}\n")
    left_out = {c["name"] for c in by_reader}
    extra = [(carved_name(0, whole), image)] if whole and carved_name(0, whole) not in left_out else []
    counts = write_tar(out_root, rename, extra, left_out)
    say(f"\ndossier-counts {json.dumps(counts)}\n")


main()

"""Unpacks a JFFS2, UBI or UBIFS image and writes its tree to stdout as one pax tar.

Usage: unpack_flash.py jffs2|ubi|ubifs IMAGE

Runs in dossier's sandbox: IMAGE is mounted read-only and the only writable
place is the private, size-bounded /tmp, where jefferson or ubi_reader unpack
the tree. The tar on stdout is all dossier takes from here; its own checked
writer decides what reaches the disk (names, links, special files, bounds).

Device nodes, FIFOs and sockets are never created: they become tar entries of
their type, which dossier records and refuses like any other special file.
A UBI volume that holds UBIFS becomes a folder named after the volume; any
other volume (a raw squashfs or kernel, say) becomes the file <volume>.img.

The last stderr line is `dossier-facts {json}`: volumes, warnings, counts.
Exit codes: 0 done, 2 the image is not readable, 3 the scratch space is full.
"""

import json
import os
import re
import stat
import sys
import tarfile
import tempfile

SCRATCH_FULL = 3
UNREADABLE = 2
MAX_WARNINGS = 50

# The tar goes to the real stdout; every message of the unpackers goes to stderr.
TAR_OUT = os.fdopen(os.dup(1), "wb")
ERR_FD = os.dup(2)
os.dup2(2, 1)

warnings = []
warning_count = 0
# JFFS2 inodes with a node that did not decompress (jefferson writes zeros in its place).
undecodable_inodes = set()
# What the unpackers say when data is damaged or unread (jefferson prints, ubi_reader logs "X Warn: ...").
WARNING = re.compile(
    r"(\w+ (Warn|Error|Fatal):|OS error|Path traversal|unhandled|skipping|Decompression error|"
    r"(node_crc|hdr_crc|data_crc) does not match|data length mismatch|compression not implemented|Unknown node type)"
)


class Messages:
    """sys.stdout and sys.stderr for the unpackers: copied to stderr, warnings kept, line by line."""

    def __init__(self):
        self.partial = ""

    def write(self, text):
        os.write(ERR_FD, text.encode("utf-8", "replace"))
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()[-4096:]
        for line in lines:
            self.take(line)
        return len(text)

    def take(self, line):
        global warning_count
        undecodable = re.match(r"Decompression error on inode (\d+):", line)
        if undecodable:
            undecodable_inodes.add(int(undecodable.group(1)))
        if WARNING.match(line):
            warning_count += 1
            if len(warnings) < MAX_WARNINGS:
                warnings.append(line.strip()[:300])

    def flush(self):
        pass


sys.stdout = Messages()
sys.stderr = Messages()


def scratch_left():
    """Bytes still free in the scratch space (/tmp): near zero means the unpacker ran out of it."""
    st = os.statvfs("/tmp")
    return st.f_bavail * st.f_frsize


specials = {}


def record_special(path, mode, device=0):
    """
    Stands in for os.mknod and os.mkfifo: remembers the node and leaves an
    empty placeholder (the unpackers set its times next), which write_tar
    replaces with an entry of the node's type.
    """
    path = os.path.abspath(path)
    with open(path, "xb"):
        pass
    specials[path] = (mode, device)


os.mknod = record_special
os.mkfifo = lambda path, mode=0o666, *args, **kwargs: record_special(path, stat.S_IFIFO | (mode & 0o7777))


def fail(code, message):
    os.write(ERR_FD, f"\nunpack_flash: {message}\n".encode("utf-8", "replace"))
    os._exit(code)


def safe_name(name, fallback):
    """A volume name as one path component."""
    name = name if isinstance(name, str) else name.decode("utf-8", "replace")
    return name if name and "/" not in name and name not in (".", "..") else fallback


def live_dirents(seen, inodes, facts):
    """
    The directory entries a mounted JFFS2 would show. jefferson keys entries by
    inode number, so a file replaced by rename keeps its old content, a deleted
    name comes back, and a child of a symlink lands where the link points. Here:
    per (parent, name) only the newest entry counts; an entry for inode 0 is a
    deletion; a directory has one name; and only what is reachable from the root
    through directories is kept (no orphans, no children of links, no cycles).
    """
    newest = {}
    for d in seen:
        if not (d.node_crc_match and d.name_crc_match):
            facts["dropped_bad_crc"] += 1
            continue
        key = (d.pino, bytes(d.name))
        if key not in newest or d.version > newest[key].version:
            newest[key] = d
    live = [d for d in newest.values() if d.ino != 0]
    facts["dropped_deleted"] = len(newest) - len(live)

    def is_dir(ino):
        nodes = inodes.get(ino)
        return bool(nodes) and stat.S_ISDIR(max(nodes, key=lambda i: i.version).mode)

    children = {}
    for d in live:
        children.setdefault(d.pino, []).append(d)
    kept, visited, queue = {}, {1}, [1]
    while queue:
        parent = queue.pop()
        for d in sorted(children.get(parent, []), key=lambda e: -e.version):
            if is_dir(d.ino):
                if d.ino in visited:
                    continue  # a second name for a directory, or a cycle
                visited.add(d.ino)
                queue.append(d.ino)
            kept[(d.pino, bytes(d.name))] = d
    facts["dropped_unreachable"] = len(live) - len(kept)
    return kept


def missing_data(fs):
    """
    JFFS2 files whose data nodes do not cover their size (nodes lost, the
    image cut short, data that did not decompress to its stated length):
    jefferson writes what it has and says nothing. Holes are nodes too in
    JFFS2, so a whole file is covered from 0 to its size.
    """
    from jefferson.jffs2 import JFFS2_NODETYPE_DIRENT

    dirents = {d.ino: d for d in fs[JFFS2_NODETYPE_DIRENT].values() if d.ino != 0}
    incomplete = []
    for dirent in fs[JFFS2_NODETYPE_DIRENT].values():
        nodes = getattr(dirent, "inodes", [])
        if not nodes or not stat.S_ISREG(nodes[-1].mode):
            continue
        size = nodes[-1].isize
        covered = 0
        damaged = dirent.ino in undecodable_inodes or any(
            not n.data_crc_match or len(n.data) != n.dsize for n in nodes
        )
        for node in sorted(nodes, key=lambda i: i.offset):
            if node.offset > covered:
                break
            covered = max(covered, node.offset + min(len(node.data), node.dsize))
        if covered >= size and not damaged:
            continue
        names, parent = [dirent.name.decode("utf-8", "replace")], dirent.pino
        for _ in range(100):
            if parent not in dirents:
                break
            names.insert(0, dirents[parent].name.decode("utf-8", "replace"))
            parent = dirents[parent].pino
        incomplete.append(
            {"path": "/".join(names)[:512], "covered": min(covered, size), "size": size, "damaged_nodes": damaged}
        )
    return incomplete


def unpack_jffs2(image, root):
    from pathlib import Path

    from jefferson import jffs2

    facts = {"dropped_bad_crc": 0}
    seen = []
    parse_dirent, scan_fs, dump_fs = jffs2.parse_dirent, jffs2.scan_fs, jffs2.dump_fs

    def parse_and_keep(data, offset):
        dirent = parse_dirent(data, offset)
        seen.append(dirent)
        return dirent

    def scan_and_resolve(content, endianness, verbose=False):
        fs = scan_fs(content, endianness, verbose)
        fs[jffs2.JFFS2_NODETYPE_DIRENT] = live_dirents(seen, fs[jffs2.JFFS2_NODETYPE_INODE], facts)
        return fs

    def dump_and_check(fs, target):
        dump_fs(fs, target)
        incomplete = missing_data(fs)
        facts["incomplete_count"] = len(incomplete)
        facts["incomplete"] = incomplete[:200]

    jffs2.parse_dirent, jffs2.scan_fs, jffs2.dump_fs = parse_and_keep, scan_and_resolve, dump_and_check
    os.mkdir(root)
    if jffs2.extract_jffs2(Path(image), Path(root), 0) != 0:
        fail(UNREADABLE, "the JFFS2 image is empty")
    return facts


def unpack_ubifs_volume(ubifs_file, out):
    from ubireader.ubifs import ubifs
    from ubireader.ubifs.output import extract_files

    os.makedirs(out, exist_ok=True)
    extract_files(ubifs(ubifs_file), out)


def unpack_ubi(image, root, bare_ubifs):
    from ubireader import settings
    from ubireader.ubi import ubi
    from ubireader.ubi_io import leb_virtual_file, ubi_file
    from ubireader.utils import guess_leb_size, guess_peb_size, guess_start_offset

    start = guess_start_offset(image)
    block = guess_leb_size(image) if bare_ubifs else guess_peb_size(image)
    if not block:
        fail(UNREADABLE, "the block size of the image could not be determined")
    source = ubi_file(image, block, start, None)
    os.mkdir(root)
    if bare_ubifs:
        unpack_ubifs_volume(source, root)
        return {"start_offset": start, "leb_size": block}

    ubi_image = ubi(source)
    volumes = []
    several = len(ubi_image.images) > 1
    for image_index, ubi_img in enumerate(ubi_image.images):
        base = os.path.join(root, f"image-{ubi_img.image_seq}") if several else root
        os.makedirs(base, exist_ok=True)
        taken = set()
        for number, name in enumerate(sorted(ubi_img.volumes)):
            volume = ubi_img.volumes[name]
            blocks = volume.get_blocks(ubi_image.blocks)
            out_name = safe_name(name, f"volume-{number}")
            while out_name in taken:
                out_name = f"{out_name}~"
            taken.add(out_name)
            facts = {"name": out_name, "blocks": len(blocks)}
            if several:
                facts["image_seq"] = ubi_img.image_seq
            if blocks:
                data = leb_virtual_file(ubi_image, blocks)
                data.seek(0)
                magic = data.read(4)
                data.seek(0)
                if magic == b"\x31\x18\x10\x06":
                    facts["content"] = "ubifs"
                    unpack_ubifs_volume(data, os.path.join(base, out_name))
                else:
                    facts["content"] = "raw"
                    facts["path"] = f"{out_name}.img"
                    with open(os.path.join(base, f"{out_name}.img"), "wb") as raw:
                        for piece in volume.reader(ubi_image):
                            raw.write(piece)
            else:
                facts["content"] = "empty"
            volumes.append(facts)
    return {"start_offset": start, "peb_size": block, "images": len(ubi_image.images), "volumes": volumes}


def write_tar(root):
    """The tree under root, then the recorded special files, as one pax tar on stdout."""
    counts = {"files": 0, "dirs": 0, "links": 0, "special": 0}
    with tarfile.open(fileobj=TAR_OUT, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(folder, name)
                if full in specials:
                    continue
                info = tar.gettarinfo(full, arcname=os.path.relpath(full, root))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isreg():
                    counts["files"] += 1
                    with open(full, "rb") as content:
                        tar.addfile(info, content)
                    continue
                counts["dirs" if info.isdir() else "links"] += 1
                tar.addfile(info)
        for path, (mode, device) in specials.items():
            info = tarfile.TarInfo(os.path.relpath(path, root))
            info.mode = stat.S_IMODE(mode)
            if stat.S_ISCHR(mode):
                info.type = tarfile.CHRTYPE
            elif stat.S_ISBLK(mode):
                info.type = tarfile.BLKTYPE
            else:
                info.type = tarfile.FIFOTYPE
            info.devmajor, info.devminor = os.major(device or 0), os.minor(device or 0)
            counts["special"] += 1
            tar.addfile(info)
    TAR_OUT.flush()
    return counts


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("jffs2", "ubi", "ubifs"):
        fail(UNREADABLE, "usage: unpack_flash.py jffs2|ubi|ubifs IMAGE")
    kind, image = sys.argv[1], sys.argv[2]
    root = os.path.join(tempfile.mkdtemp(dir="/tmp"), "root")
    try:
        if kind == "jffs2":
            facts = unpack_jffs2(image, root)
        else:
            facts = unpack_ubi(image, root, kind == "ubifs")
    except SystemExit:
        fail(UNREADABLE, warnings[-1] if warnings else "the unpacker gave up")
    except OSError as err:
        if err.errno == 28:
            fail(SCRATCH_FULL, "the unpacked file system does not fit in the scratch space")
        fail(UNREADABLE, f"{type(err).__name__}: {err}")
    except Exception as err:  # the unpackers raise plain exceptions on malformed input
        fail(UNREADABLE, f"{type(err).__name__}: {err}")
    # The unpackers report a full disk as a warning and go on: the free space says it, not a message.
    if scratch_left() < 64 * 1024:
        fail(SCRATCH_FULL, "the unpacked file system does not fit in the scratch space")
    facts["counts"] = write_tar(root)
    facts["warning_count"] = warning_count
    facts["warnings"] = warnings
    os.write(ERR_FD, f"\ndossier-facts {json.dumps(facts)}\n".encode())


main()

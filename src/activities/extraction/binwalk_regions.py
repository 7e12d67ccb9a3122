"""Lists binwalk's signatures in regions of one file, in one pass of binwalk's modules.

Usage: binwalk_regions.py IMAGE START:LENGTH...

Runs in dossier's sandbox with Debian's binwalk (2.3.4), IMAGE mounted
read-only. binwalk opens all its targets at one offset and length; here each
region is a link to IMAGE in the private /tmp, opened at its own offset and
length, so that binwalk loads its modules, plugins and signatures once for all
of them (once per region costs about 0.2-0.4 s of CPU). Its literal signatures
are searched in one pass over each block (`Literals`, with numpy where it is
installed), not once each.

Writes, for each region in order, `region START END` and then binwalk's
`DECIMAL 0xHEX DESCRIPTION` lines of the signatures that begin in it, with
offsets in IMAGE.
"""

import os
import re
import sys
import tempfile
import types

import binwalk
import binwalk.core.common
import binwalk.core.magic as magic
import binwalk.core.plugin as plugin
import binwalk.modules.general as general

# numpy's BLAS (OpenBLAS on Debian) starts a thread a core at import, each spinning a while; nothing
# here uses it. One thread, however many cores the worker has.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
try:
    import numpy
except ImportError:  # binwalk searches each signature itself, as it would without this script
    numpy = None

# Two of binwalk's signatures are a whole group repeated, `(X)+`, which keeps Python's regex engine
# from searching for their first character: over bytes that hold neither, each costs as much as 80
# other signatures (24 ms a MiB against 0.3). Written `X(?:X)*` they find the same matches at the
# same offsets, and binwalk only takes a match's offset from them (its own analysis of the
# signature at that offset is unchanged).
FASTER = {
    r"(\:([0-9A-F]{2}){5,}\n)+": r"\:(?:[0-9A-F]{2}){5,}\n(?:\:(?:[0-9A-F]{2}){5,}\n)*",
    r"(S[0-35-9]([0-9A-F]{4})([0-9A-F]{2})+\n)+": (
        r"S[0-35-9][0-9A-F]{4}(?:[0-9A-F]{2})+\n(?:S[0-35-9][0-9A-F]{4}(?:[0-9A-F]{2})+\n)*"
    ),
}


def executed_once(load_source):
    """imp.load_source that does not execute a file again into the module it already holds.
    load_source executes a file into sys.modules[name], the same module object each time: when two
    files share a name (a user's plugin and a system one), the module holds the code of the one
    loaded last, so loading the other executes it again, as binwalk expects."""
    held = {}  # module name -> (path whose code the module holds, the module)

    def load(name, path):
        last = held.get(name)
        if last is not None and last[0] == path and sys.modules.get(name) is last[1]:
            return last[1]
        module = load_source(name, path)
        held[name] = (path, module)
        return module

    return load


class Literals:
    """Where each literal signature begins in a block, found in one pass over it.

    408 of binwalk's 411 signatures are a literal string (`re.escape` of the magic bytes), and binwalk
    searches a block once per signature: 408 passes of `finditer`, 0.44 s of CPU over 4 MiB. Here
    every two bytes of the block are looked up at once in a table of the literals' first two bytes;
    only the positions it names are compared further, literal by literal. Each literal signature's
    regex is then a `Literal` whose `finditer` gives what `re` would: left to right, each match
    after the last one's end."""

    def __init__(self):
        self.index = {}  # each literal's bytes -> its place (in the order added)
        self.table = None  # first two bytes (little-endian) -> whether a literal begins with them
        self.by_pair = {}  # first two bytes -> [(place, bytes, whether they overlap themselves)]
        self.data = None  # the block the starts are of (held, so that its identity stays its own)
        self.starts = []

    def add(self, key):
        if key not in self.index:
            self.index[key] = len(self.index)
            self.table, self.data = None, None  # a block searched before has no starts for it
        return self.index[key]

    def of(self, data, place):
        if data is not self.data:
            self.data, self.starts = data, self.search(data.encode("latin-1"))
        return self.starts[place]

    def indexed(self):
        if self.table is None:
            self.table = numpy.zeros(1 << 16, dtype=bool)
            self.by_pair = {}
            for key, place in self.index.items():
                pair = key[0] | key[1] << 8
                self.table[pair] = True
                array = numpy.frombuffer(key, dtype=numpy.uint8)
                self.by_pair.setdefault(pair, []).append((place, array, overlaps_itself(key)))

    def search(self, block):
        self.indexed()
        found = [[] for _ in self.index]
        data = numpy.frombuffer(block, dtype=numpy.uint8)
        if data.size < 2:
            return found
        pairs = data[:-1].astype(numpy.uint16) | data[1:].astype(numpy.uint16) << 8
        at = numpy.flatnonzero(self.table[pairs])
        at = at[numpy.argsort(pairs[at], kind="stable")]  # grouped by pair, each group in order
        grouped = pairs[at]
        firsts = numpy.flatnonzero(numpy.diff(grouped, prepend=-1) != 0) if at.size else at
        for lo, hi in zip(firsts.tolist(), firsts[1:].tolist() + [at.size]):
            positions = at[lo:hi]
            for place, key, overlapping in self.by_pair[int(grouped[lo])]:
                p = positions[positions <= data.size - key.size]
                for k in range(2, key.size):
                    if not p.size:
                        break
                    p = p[data[p + k] == key[k]]
                found[place] = apart(p.tolist(), key.size) if overlapping else p.tolist()
        return found


def overlaps_itself(key):
    """Whether two occurrences of `key` can overlap (b"AA", b"ABAB"): it ends with its own start."""
    return any(key[i:] == key[: len(key) - i] for i in range(1, len(key)))


def apart(starts, length):
    """The starts `finditer` keeps of a literal's occurrences: each at or after the last one's end."""
    kept, end = [], 0
    for s in starts:
        if s >= end:
            kept.append(s)
            end = s + length
    return kept


class Start:
    """A match as binwalk's scan reads one: its start."""

    __slots__ = ("at",)

    def __init__(self, at):
        self.at = at

    def start(self):
        return self.at


class Literal:
    """A literal signature's regex whose matches come from the block's one pass (`Literals`)."""

    def __init__(self, literals, key):
        self.literals, self.place = literals, literals.add(key)

    def finditer(self, data):
        return map(Start, self.literals.of(data, self.place))


def literal_bytes(regex):
    """The bytes a compiled regex over latin-1 text matches exactly, if it is `re.escape` of a string
    of two or more of them (and nothing else: no flags but the default)."""
    pattern = getattr(regex, "pattern", None)
    if not isinstance(pattern, str) or regex.flags & ~re.UNICODE:
        return None
    text = re.sub(r"\\(.)", r"\1", pattern, flags=re.S)
    if len(text) < 2 or re.escape(text) != pattern:
        return None
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: binwalk_regions.py IMAGE START:LENGTH...\n")
        sys.exit(2)
    image, specs = sys.argv[1], sys.argv[2:]
    links = tempfile.mkdtemp(prefix="regions-")
    regions = {}
    for i, spec in enumerate(specs):
        start, length = (int(x) for x in spec.split(":"))
        link = os.path.join(links, str(i))
        os.symlink(image, link)
        regions[link] = (start, length)

    opened = general.General.open_file

    def open_file(self, fname, length=None, offset=None, **kwargs):
        if fname in regions and length is None and offset is None:
            offset, length = regions[fname]
        return opened(self, fname, length=length, offset=offset, **kwargs)

    general.General.open_file = open_file
    generate = magic.Signature._generate_regex

    literals = Literals()

    def faster_regex(self, line):
        regex = generate(self, line)
        pattern = getattr(regex, "pattern", None)
        if pattern in FASTER:
            return re.compile(FASTER[pattern], regex.flags)
        key = literal_bytes(regex) if numpy is not None else None
        return regex if key is None else Literal(literals, key)

    magic.Signature._generate_regex = faster_regex
    # Each of binwalk's modules loads every plugin's source twice (to list it, then to load it):
    # about 570 executions of 15 files, a sixth of the listing's CPU on 4 MiB. Each file is executed
    # once here; every module still makes its own instances of the plugin classes.
    plugin.imp = types.SimpleNamespace(load_source=executed_once(plugin.imp.load_source))
    # With more than one target binwalk heads each one's listing with the MD5 of the whole file (quiet
    # or not): the image's size in hashing per region, and nothing here reads it.
    binwalk.core.common.file_md5 = lambda _name: ""
    found = {link: [] for link in regions}
    for module in binwalk.scan(*regions, signature=True, quiet=True):
        for r in module.results:
            if r.display and r.file is not None and r.file.path in found:
                found[r.file.path].append(r)
    out = sys.stdout
    for link, (start, length) in regions.items():
        out.write(f"region {start} {start + length}\n")
        for r in sorted(found[link], key=lambda r: r.offset):
            if start <= r.offset < start + length:
                description = " ".join(r.description.split())
                out.write(f"{r.offset} 0x{r.offset:X} {description}\n")
    out.flush()


if __name__ == "__main__":
    main()

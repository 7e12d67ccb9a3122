"""Lists binwalk's signatures in regions of one file, in one pass of binwalk's modules.

Usage: binwalk_regions.py IMAGE START:LENGTH...

Runs in dossier's sandbox with Debian's binwalk (2.3.4), IMAGE mounted
read-only. binwalk opens all its targets at one offset and length; here each
region is a link to IMAGE in the private /tmp, opened at its own offset and
length, so that binwalk loads its modules, plugins and signatures once for all
of them (once per region costs about 0.2-0.4 s of CPU).

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

    def faster_regex(self, line):
        regex = generate(self, line)
        pattern = getattr(regex, "pattern", None)
        return re.compile(FASTER[pattern], regex.flags) if pattern in FASTER else regex

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


main()

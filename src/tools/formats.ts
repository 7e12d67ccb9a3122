// The formats an extraction reads, and who reads each: dossier's own readers
// (src/activities: faster, or safer, or both) and unblob for everything else
// (its handlers, generated from the provisioned unblob into unblobHandlers.ts).
// The tool descriptions, docs/tools.md and the README's format table are all
// made from this one list.
import { UNBLOB_HANDLERS, UNBLOB_VERSION } from './unblobHandlers.ts';

export interface DossierReader {
  /** The `format` value of extract_artifact. */
  format: string;
  title: string;
  /** unblob's kinds (handler families) this reader takes over at dossier's own levels. */
  unblobKinds: string[];
  how: string;
}

export const DOSSIER_READERS = [
  { format: 'zip', title: 'ZIP', unblobKinds: ['zip'], how: 'yauzl, in-process' },
  { format: 'apk', title: 'APK (signing block listed)', unblobKinds: [], how: 'yauzl, in-process' },
  { format: 'tar', title: 'tar', unblobKinds: ['tar'], how: 'node-tar, in-process' },
  { format: 'tar.gz', title: 'tar + gzip', unblobKinds: [], how: 'node-tar and zlib, in-process' },
  { format: 'tar.bz2', title: 'tar + bzip2', unblobKinds: [], how: 'bzip2 in the sandbox' },
  { format: 'tar.xz', title: 'tar + xz', unblobKinds: [], how: 'xz in the sandbox' },
  { format: 'gzip', title: 'gzip', unblobKinds: ['gzip'], how: 'zlib, in-process' },
  { format: 'bzip2', title: 'bzip2', unblobKinds: ['bzip2'], how: 'bzip2 in the sandbox' },
  { format: 'xz', title: 'xz', unblobKinds: ['xz'], how: 'xz in the sandbox' },
  { format: '7z', title: '7-Zip', unblobKinds: ['sevenzip'], how: '7-Zip in the sandbox, CRC-checked' },
  { format: 'ar', title: 'ar', unblobKinds: ['ar'], how: 'bsdtar in the sandbox' },
  { format: 'deb', title: 'Debian package', unblobKinds: [], how: 'bsdtar in the sandbox' },
  {
    format: 'cpio',
    title: 'cpio (newc, odc, binary)',
    unblobKinds: ['cpio_portable_ascii', 'cpio_portable_ascii_crc', 'cpio_portable_old_ascii', 'cpio_binary'],
    how: 'bsdtar in the sandbox',
  },
  { format: 'rpm', title: 'RPM', unblobKinds: [], how: 'bsdtar in the sandbox' },
  { format: 'iso9660', title: 'ISO 9660', unblobKinds: ['iso9660'], how: 'bsdtar in the sandbox' },
  { format: 'squashfs', title: 'SquashFS', unblobKinds: ['squashfs'], how: 'sqfs2tar in the sandbox' },
  { format: 'cramfs', title: 'CramFS', unblobKinds: ['cramfs'], how: '7-Zip in the sandbox' },
  { format: 'ext', title: 'ext2/3/4', unblobKinds: ['extfs'], how: '7-Zip in the sandbox' },
  { format: 'jffs2', title: 'JFFS2', unblobKinds: ['jffs2'], how: 'jefferson in the sandbox' },
  { format: 'ubi', title: 'UBI', unblobKinds: ['ubi'], how: 'ubi_reader in the sandbox' },
  { format: 'ubifs', title: 'UBIFS', unblobKinds: ['ubifs'], how: 'ubi_reader in the sandbox' },
  {
    format: 'android-sparse',
    title: 'Android sparse image',
    unblobKinds: ['sparse'],
    how: 'dossier, in-process',
  },
  { format: 'uimage', title: 'U-Boot uImage', unblobKinds: [], how: 'dossier, in-process' },
] as const satisfies readonly DossierReader[];

/** The formats extract_artifact accepts by name: dossier's own, and `unblob` (unblob identifies it). */
export const ARCHIVE_FORMATS = [...DOSSIER_READERS.map((r) => r.format), 'unblob' as const];

export interface UnblobFamily {
  kind: string;
  titles: string[];
  type: string;
  vendor: string | null;
  /** The program its extractor runs (Debian's, or unblob's own Python); null: carved, not unpacked. */
  tools: string[];
  handlers: string[];
}

const TAKEN = new Set<string>(DOSSIER_READERS.flatMap((r) => r.unblobKinds));

/** unblob's handler families dossier has no reader of its own for. */
export function unblobFamilies(): UnblobFamily[] {
  const families = new Map<string, UnblobFamily>();
  for (const h of UNBLOB_HANDLERS) {
    if (TAKEN.has(h.kind)) continue;
    const f = families.get(h.kind) ?? {
      kind: h.kind,
      titles: [],
      type: h.type,
      vendor: h.vendor,
      tools: [],
      handlers: [],
    };
    if (!f.titles.includes(h.title)) f.titles.push(h.title);
    if (h.tool && !f.tools.includes(h.tool)) f.tools.push(h.tool);
    f.handlers.push(h.handler);
    families.set(h.kind, f);
  }
  return [...families.values()];
}

/** One sentence for a tool description: every format, by reader. */
export function formatsSentence(): string {
  const own = DOSSIER_READERS.map((r) => r.title).join(', ');
  // Each name once: two families may read the same way once their versions are left out (ELF).
  const unblob = [
    ...new Set(unblobFamilies().map((f) => f.titles[0]!.replace(/ \((v?\d|new|legacy|LE)[^)]*\)$/, ''))),
  ].join(', ');
  return `dossier's own readers: ${own}; unblob ${UNBLOB_VERSION} (in the sandbox, its output through the same checked writer): ${unblob}, and inside what it unpacks every format it knows`;
}

/** Figures for the docs: formats by reader. */
export function formatCounts() {
  const families = unblobFamilies();
  return {
    dossier: DOSSIER_READERS.length,
    unblob_families: families.length,
    unblob_handlers: UNBLOB_HANDLERS.length,
    total: DOSSIER_READERS.length + families.length,
  };
}

/** The Markdown table of formats by reader (README and docs/tools.md). */
export function renderFormatsTable(): string {
  const rows = [
    '| format | family | read by | how |',
    '| --- | --- | --- | --- |',
    ...DOSSIER_READERS.map((r) => `| ${r.title} | \`${r.format}\` | dossier | ${r.how} |`),
    ...unblobFamilies().map(
      (f) =>
        `| ${f.titles.join(', ')}${f.vendor ? ` (${f.vendor})` : ''} | \`${f.kind}\` (${f.type}) | unblob ${UNBLOB_VERSION} | ${f.tools.length ? f.tools.map((t) => (t === 'python' ? "unblob's Python" : t)).join(', ') : 'carved, not unpacked'} |`,
    ),
  ];
  const c = formatCounts();
  return `${c.total} format families: ${c.dossier} read by dossier's own readers, ${c.unblob_families} by unblob ${UNBLOB_VERSION} (${c.unblob_handlers} handlers; inside what unblob unpacks, unblob reads every format it knows, dossier's included).\n\n${rows.join('\n')}\n`;
}

// The kinds sniff() names, by who reads them: dossier's own readers
// (OPENABLE) or unblob (UNBLOB_KINDS); and how much of an entry's start is
// kept to name its kind.
/** What sniff() names that extract_artifact can open (with recursive: true, it does). */
export const OPENABLE = new Set([
  'zip',
  'gzip',
  'bzip2',
  'xz',
  '7z',
  'tar',
  'squashfs',
  'deb',
  'ar',
  'cpio',
  'rpm',
  'iso9660',
  'android-sparse',
  'uimage',
  'cramfs',
  'ext',
  'jffs2',
  'ubi',
  'ubifs',
]);
/** What sniff() names that dossier has no reader of its own for: unblob reads them (unblob.ts). */
export const UNBLOB_KINDS = new Set([
  'zstd',
  'lz4',
  'lzip',
  'lzop',
  'lzma',
  'compress',
  'erofs',
  'fat',
  'ntfs',
  'romfs',
  'trx',
  'chk',
  'cab',
  'rar',
]);
/** Bytes of an entry's start kept for naming its format (ISO 9660's magic is at 32,769). */
export const HEAD_BYTES = 36 * 1024;

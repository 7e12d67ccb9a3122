// JFFS2, UBI and UBIFS images: jefferson and ubi_reader unpack them in the
// sandbox, into its private in-memory /tmp sized for this extraction, and
// dossier's wrapper streams the tree back as one tar, which goes through the
// same tar reader and checked writer as every other format.
import { DossierError } from '../../domain/errors.ts';
import { flashUnpackers } from '../../python/flash.ts';
import { sandboxedEnv } from '../../python/venv.ts';
import { checkedOutput, stderrTail, streamHelper } from '../../sandbox/helpers.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import { corrupt, type OnEntry } from './archives.ts';
import { readTar } from './tar.ts';

export type FlashFormat = 'jffs2' | 'ubi' | 'ubifs';

const NAMES: Record<FlashFormat, string> = { jffs2: 'JFFS2', ubi: 'UBI', ubifs: 'UBIFS' };

/** The largest scratch space an unpacker gets (it is memory): flash file systems are far smaller. */
export const FLASH_SCRATCH_MAX = 2 * 1024 ** 3;
const SCRATCH_FULL = 3;

export interface FlashRead {
  sandbox: Sandbox;
  /** The interpreter the unpackers' venv is made with. */
  python: string;
  file: string;
  format: FlashFormat;
  /** Bytes the unpacker may write to its scratch space (what the extraction may still write, at most FLASH_SCRATCH_MAX). */
  scratchBytes: number;
  timeoutMs: number;
  progress?: (facts: Record<string, unknown>) => void;
}

/** Reads a flash image into the writer; returns what the unpacker reports (UBI volumes, warnings, counts). */
export async function readFlash(read: FlashRead, onEntry: OnEntry): Promise<Record<string, unknown>> {
  const { format } = read;
  read.progress?.({ phase: 'preparing the flash unpackers' });
  const env = sandboxedEnv(await flashUnpackers(read.python));
  const scratch = Math.max(1024 * 1024, Math.min(read.scratchBytes, FLASH_SCRATCH_MAX));
  const helper = streamHelper(read.sandbox, {
    program: env.python,
    pkg: 'python3 (the flash unpackers venv)',
    args: [env.script('unpack_flash.py'), format, '/input/image'],
    mounts: [...env.mounts, { host: read.file, inside: '/input/image' }],
    tmpBytes: scratch,
    timeoutMs: read.timeoutMs,
    // jefferson holds the whole file system in memory while it writes it out.
    limits: { addressSpaceBytes: 4 * 1024 ** 3 },
    env: { PYTHONDONTWRITEBYTECODE: '1' },
  });
  // The wrapper's last stderr line carries its facts (at most a few hundred KB); its last message says why it stopped.
  const { ended: stderrEnded, lastLine } = stderrTail(helper, 1024 * 1024);
  const done = helper.done.catch(async (err: Error) => {
    // A timeout or a failure to start keeps its own code; only the wrapper's own exits are mapped.
    if (err instanceof DossierError) throw err;
    await stderrEnded;
    const why = lastLine('unpack_flash: ') ?? err.message;
    if (err.message.startsWith(`${env.python} failed (exit ${SCRATCH_FULL})`)) {
      throw new DossierError(
        'resource_constraint',
        `The unpacked ${NAMES[format]} file system does not fit in the ${scratch}-byte scratch space it was given.`,
        `The scratch space is what the extraction may still write (limits.max_total_bytes, and limits.max_ratio times the artifact's size), at most ${FLASH_SCRATCH_MAX} bytes: raise those limits if this image is expected to unpack this large.`,
        { format, scratch_bytes: scratch },
      );
    }
    throw corrupt(NAMES[format], new Error(why), 'file system');
  });
  await readTar(checkedOutput({ ...helper, done }), NAMES[format], onEntry);
  await stderrEnded;
  const facts = lastLine('dossier-facts ');
  return facts ? (JSON.parse(facts) as Record<string, unknown>) : {};
}

/** What a flash unpacker's facts leave the reader to know: damaged files, entries not extracted, its warnings. */
export function flashLimitations(facts: Record<string, unknown>, where: string): string[] {
  const out: string[] = [];
  const incomplete = Number(facts.incomplete_count ?? 0);
  if (incomplete)
    out.push(
      `${incomplete} files in ${where} lack data for part of their size or hold data that did not decode, and were written as far as they go (see flash.incomplete; the image is cut short or damaged)`,
    );
  const dropped = ['dropped_deleted', 'dropped_unreachable', 'dropped_bad_crc'].reduce(
    (n, key) => n + Number(facts[key] ?? 0),
    0,
  );
  if (dropped)
    out.push(
      `${dropped} JFFS2 directory entries were not extracted: deleted, unreachable from the root through directories (children of a link, orphans, cycles, a directory's second name), or failing their CRC (see flash.dropped_*)`,
    );
  const warnings = (facts.warnings as string[] | undefined) ?? [];
  if (warnings.length)
    out.push(
      `the unpacker of ${where} warned ${Number(facts.warning_count ?? warnings.length)} times (see flash.warnings), e.g. ${warnings[0]}`,
    );
  return out;
}

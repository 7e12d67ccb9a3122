// JFFS2, UBI and UBIFS images: jefferson and ubi_reader unpack them in the
// sandbox, into its private in-memory /tmp sized for this extraction, and
// dossier's wrapper streams the tree back as one tar, which goes through the
// same tar reader and checked writer as every other format.
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';
import { flashUnpackers } from '../python/flash.ts';
import { checkedOutput, streamHelper } from '../sandbox/helpers.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { corrupt, readTar, type OnEntry } from './archives.ts';

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
  /** Bytes the unpacker may write to its scratch space (the extraction's bytes left, at most FLASH_SCRATCH_MAX). */
  scratchBytes: number;
  timeoutMs: number;
  progress?: (facts: Record<string, unknown>) => void;
}

/** Reads a flash image into the writer; returns what the unpacker reports (UBI volumes, warnings, counts). */
export async function readFlash(read: FlashRead, onEntry: OnEntry): Promise<Record<string, unknown>> {
  const { format } = read;
  read.progress?.({ phase: 'preparing the flash unpackers' });
  const env = await flashUnpackers(read.python);
  const scratch = Math.max(1024 * 1024, Math.min(read.scratchBytes, FLASH_SCRATCH_MAX));
  const helper = streamHelper(read.sandbox, {
    program: env.python,
    pkg: 'python3 (the flash unpackers venv)',
    args: [path.join(env.scripts, 'unpack_flash.py'), format, '/input/image'],
    mounts: [{ host: env.venv }, { host: env.scripts }, { host: read.file, inside: '/input/image' }],
    tmpBytes: scratch,
    timeoutMs: read.timeoutMs,
    // jefferson holds the whole file system in memory while it writes it out.
    limits: { addressSpaceBytes: 4 * 1024 ** 3 },
    env: { PYTHONDONTWRITEBYTECODE: '1' },
  });
  // The wrapper's last stderr line carries its facts; its last message says why it stopped.
  let tail = '';
  helper.stderr.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-128 * 1024)));
  const lastLine = (prefix: string) =>
    tail
      .split('\n')
      .reverse()
      .find((line) => line.startsWith(prefix))
      ?.slice(prefix.length);
  const done = helper.done.catch((err: Error) => {
    const why = lastLine('unpack_flash: ') ?? err.message;
    if (/\(exit 3\)/.test(err.message) || why.includes('scratch space')) {
      throw new DossierError(
        'resource_constraint',
        `The unpacked ${NAMES[format]} file system does not fit in the ${scratch}-byte scratch space it was given.`,
        `Raise limits.max_total_bytes (the scratch space is the bytes left to the extraction, at most ${FLASH_SCRATCH_MAX}).`,
        { format, scratch_bytes: scratch, exit: SCRATCH_FULL },
      );
    }
    throw corrupt(NAMES[format], new Error(why), 'file system');
  });
  await readTar(checkedOutput({ ...helper, done }), NAMES[format], onEntry);
  const facts = lastLine('dossier-facts ');
  return facts ? (JSON.parse(facts) as Record<string, unknown>) : {};
}

/** What a flash unpacker's facts leave the reader to know: files with data missing, its warnings. */
export function flashLimitations(facts: Record<string, unknown>, where: string): string[] {
  const out: string[] = [];
  const incomplete =
    (facts.incomplete as { path: string; covered: number; size: number }[] | undefined) ?? [];
  if (incomplete.length)
    out.push(
      `${incomplete.length} files in ${where} lack data nodes for part of their size and were written as far as they go (see flash.incomplete; the image is cut short or damaged)`,
    );
  const warnings = (facts.warnings as string[] | undefined) ?? [];
  if (warnings.length)
    out.push(
      `the unpacker of ${where} warned ${warnings.length} times (see flash.warnings), e.g. ${warnings[0]}`,
    );
  return out;
}

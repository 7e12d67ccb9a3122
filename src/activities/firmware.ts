// The extract_firmware effect: binwalk finds signatures in the sandbox (it
// never extracts: its own extractors have written outside their folder
// before), dossier carves each region itself, and squashfs regions become a
// tar stream (sqfs2tar, in the sandbox) that feeds the checked writer, so
// links are recorded, never created, and every bound holds while writing.
import { outputName, publishOutputs } from '../evidence/artifacts.ts';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { DossierError, toToolError } from '../domain/errors.ts';
import { runHelper } from '../sandbox/helpers.ts';
import type { FirmwareInput } from '../tools/firmware.ts';
import type { Effect } from './effect.ts';
import { deadline, startExtraction } from './writer.ts';
import { readSquashfs } from './formats.ts';
import { verifiedArtifact } from './policy.ts';

export interface Signature {
  offset: number;
  description: string;
  kind: string;
  length: number;
}

/** Parses binwalk's signature table; lengths run to the stated size, or to the next signature. */
export function parseSignatures(table: string, fileBytes: number, max: number): Signature[] {
  const found: { offset: number; description: string }[] = [];
  for (const line of table.split('\n')) {
    const m = /^(\d+)\s+0x[0-9A-Fa-f]+\s+(.+)$/.exec(line.trim());
    if (m && found.length < max) found.push({ offset: Number(m[1]), description: m[2]!.trim() });
  }
  return found.map((f, i) => {
    const next = found[i + 1]?.offset ?? fileBytes;
    // A uImage states its payload's size after its header's ("header size: 64 bytes, … image size: N bytes"):
    // the region is the header and that payload. Others state the size of the whole region.
    const image = /^uImage header.*\bimage size: (\d+) bytes/.exec(f.description);
    const stated = image
      ? [image[0], String(64 + Number(image[1]))]
      : /(?<!header )size: (\d+) bytes/.exec(f.description);
    const length = Math.max(0, Math.min(stated ? Number(stated[1]) : next - f.offset, fileBytes - f.offset));
    const kind = (/^[A-Za-z0-9]+/.exec(f.description)?.[0] ?? 'data').toLowerCase();
    return { ...f, kind, length };
  });
}

export const extractFirmware: Effect<FirmwareInput> = async (input, ctx) => {
  const { artifact: image, file } = await verifiedArtifact(ctx, input.artifact);
  const imageBytes = (await stat(file)).size;
  const left = deadline(input.timeout_ms);
  const table = await runHelper(ctx.sandbox, {
    program: 'binwalk',
    pkg: 'binwalk',
    args: ['--signature', '/input/image'],
    mounts: [{ host: file, inside: '/input/image' }],
    timeoutMs: left(),
  }).catch((err) => {
    throw new DossierError(
      'provider_unavailable',
      `binwalk could not scan the image: ${(err as Error).message}`,
      'Check that binwalk runs on the worker host.',
    );
  });
  const signatures = parseSignatures(table, imageBytes, input.max_signatures);

  await ctx.begin();
  const out = await startExtraction(ctx, input.limits, imageBytes, input.timeout_ms);
  const filesystems: string[] = [];
  let failure: unknown;
  try {
    for (const sig of signatures) {
      const name = `carved/0x${sig.offset.toString(16)}.${sig.kind}`;
      const content =
        sig.length > 0
          ? createReadStream(file, { start: sig.offset, end: sig.offset + sig.length - 1 })
          : null;
      await out.onEntry({
        name,
        type: 'file',
        linkTarget: null,
        content: content ?? createReadStream('/dev/null'),
      });
      if (sig.kind !== 'squashfs' || sig.length === 0) continue;

      // sqfs2tar turns the filesystem into a tar stream in the sandbox; every byte then goes
      // through the checked writer, so the bounds hold on what is written, as it is written.
      const carved = path.join(ctx.workspace, 'out', name);
      const prefix = `squashfs-0x${sig.offset.toString(16)}`;
      await readSquashfs(ctx.sandbox, carved, left(), (entry) =>
        out.onEntry({ ...entry, name: `${prefix}/${entry.name.replace(/^\.?\/+/, '')}` }),
      );
      filesystems.push(`squashfs-0x${sig.offset.toString(16)}`);
    }
  } catch (err) {
    failure = err;
  }
  const cleanup = await out.settle(failure);
  const published =
    !failure && cleanup.output
      ? await publishOutputs(ctx.store.blobs, ctx.caller.team, cleanup.output, out.rows, ctx.signal)
      : { unpublished: 0 };
  const { total, written } = out.stats();
  const refused = out.rows.filter((r) => r.status === 'refused').length;
  const shownOutput = cleanup.output && outputName(ctx.config.home, cleanup.output);
  const summary = {
    output: shownOutput,
    signatures: signatures.length,
    carved: signatures.length,
    filesystems,
    entries: out.rows.length,
    written,
    refused,
    links_recorded: out.rows.filter((r) => r.status === 'recorded').length,
    bytes_written: failure ? 0 : total,
    image_bytes: imageBytes,
    cleanup: { ...cleanup, output: shownOutput },
  };
  const limitations: string[] = [];
  if (published.unpublished)
    limitations.push(
      `${published.unpublished} written files stay on the extracting host only (register them from there): ${published.reason}`,
    );
  if (signatures.length >= input.max_signatures)
    limitations.push(`signatures were capped at max_signatures=${input.max_signatures}`);
  if (refused) limitations.push(`${refused} entries were refused (see status "refused" in entries)`);
  if (failure)
    limitations.push(
      'the extraction failed and was rolled back; entries lists what was read before the failure',
    );
  const opened = new Set(filesystems.map((f) => f.replace('squashfs-', '')));
  return {
    status: !failure
      ? 'succeeded'
      : failure instanceof DossierError && failure.code === 'cancelled'
        ? 'cancelled'
        : 'failed',
    document: { artifact: input.artifact, limits: input.limits, ...summary },
    collections: {
      entries: out.rows,
      signatures: signatures.map((s, i) => ({ index: i, ...s, offset_hex: `0x${s.offset.toString(16)}` })),
    },
    summary,
    truncated: Boolean(failure) || signatures.length >= input.max_signatures,
    limitations,
    target: { digest: input.artifact, path: image.name ?? undefined },
    error: failure ? toToolError(failure) : undefined,
    unknowns: signatures
      .filter((s) => s.kind !== 'squashfs' || !opened.has(`0x${s.offset.toString(16)}`))
      .map((s) => ({
        question: `What does the ${s.kind} region at 0x${s.offset.toString(16)} contain?`,
        scope: `${input.artifact} 0x${s.offset.toString(16)}`,
      })),
  };
};

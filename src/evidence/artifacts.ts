// The content-addressed artifact directory: targets are stored once by
// SHA-256 under DOSSIER_HOME/artifacts and referenced by digest.
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { DossierError } from '../domain/errors.ts';

export const ARTIFACT_DIGEST = /^sha256:[0-9a-f]{64}$/;
export const UPLOAD_LIMIT = { default: 256 * 1024 * 1024, max: 4 * 1024 * 1024 * 1024, unit: 'bytes' };

export function artifactPath(home: string, digest: string): string {
  const hex = digest.replace(/^sha256:/, '');
  return path.join(home, 'artifacts', 'sha256', hex.slice(0, 2), hex);
}

/** What `file` says the content is: a MIME type and a one-line description. */
export async function detectType(file: string): Promise<{ mime_type: string; description: string }> {
  const run = promisify(execFile);
  try {
    const [mime, description] = await Promise.all([
      run('file', ['--brief', '--mime-type', file]),
      run('file', ['--brief', file]),
    ]);
    return { mime_type: mime.stdout.trim(), description: description.stdout.trim().slice(0, 512) };
  } catch {
    return {
      mime_type: 'application/octet-stream',
      description: 'unknown (the file command is not installed)',
    };
  }
}

/** Streams content into the artifact directory, hashing as it goes; refuses more than `limit` bytes. */
export async function storeArtifact(home: string, source: Readable, limit: number) {
  const tmpDir = path.join(home, 'artifacts', 'tmp');
  await mkdir(tmpDir, { recursive: true });
  const tmp = path.join(tmpDir, randomUUID());
  const hash = createHash('sha256');
  let size = 0;
  try {
    await pipeline(
      source,
      async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          size += chunk.length;
          if (size > limit) {
            throw new DossierError(
              'resource_constraint',
              `The artifact is larger than ${limit} bytes.`,
              'Register a smaller file, or ask an admin to raise DOSSIER_MAX_UPLOAD_BYTES.',
              { limit },
            );
          }
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(tmp, { flags: 'wx', mode: 0o600 }),
    );
    const digest = `sha256:${hash.digest('hex')}`;
    const final = artifactPath(home, digest);
    if (existsSync(final)) {
      await rm(tmp, { force: true });
    } else {
      await mkdir(path.dirname(final), { recursive: true });
      await chmod(tmp, 0o444);
      await rename(tmp, final);
    }
    return { digest, size, ...(await detectType(final)) };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export function storeArtifactFile(home: string, file: string, limit: number) {
  return storeArtifact(home, createReadStream(file), limit);
}

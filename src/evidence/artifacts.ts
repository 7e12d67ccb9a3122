// The content-addressed artifact directory: targets are stored once by
// SHA-256 under DOSSIER_HOME/artifacts and referenced by digest. The folder is
// the worker's alone (0700; files 0444) and no sandboxed program ever sees it;
// still, every use proves the bytes again against the digest, so a changed
// file is refused with integrity_error instead of being run or unpacked.
//
// In a cluster whose store is shared (PostgreSQL), the folder is each host's
// cache of the store's blobs: what one host stores is published there, and a
// host that lacks an artifact fetches it, proving the digest as it writes.
import { createHash, randomUUID } from 'node:crypto';
import { constants, createReadStream, createWriteStream, existsSync, read as readFd } from 'node:fs';
import { chmod, mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { DossierError } from '../domain/errors.ts';
import { runHelper } from '../sandbox/helpers.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { BlobStore } from '../store/blobs.ts';

/** The store's shared bytes, when hosts share a store; undefined for a folder of one's own. */
export type SharedBytes = Pick<BlobStore, 'put' | 'copyTo' | 'ownedBy' | 'discard' | 'sizeOf'> | undefined;

export function artifactPath(home: string, digest: string): string {
  const hex = digest.replace(/^sha256:/, '');
  return path.join(home, 'artifacts', 'sha256', hex.slice(0, 2), hex);
}

/** What `file` (run in the sandbox: libmagic parses untrusted bytes) says the content is. */
export async function detectType(
  sandbox: Sandbox,
  file: string,
): Promise<{ mime_type: string; description: string }> {
  const run = (args: string[]) =>
    runHelper(sandbox, {
      program: 'file',
      pkg: 'file',
      args: [...args, '--', '/input/artifact'],
      mounts: [{ host: file, inside: '/input/artifact' }],
      timeoutMs: 30_000,
    });
  try {
    const [mime, description] = await Promise.all([run(['--brief', '--mime-type']), run(['--brief'])]);
    // file reports its own failures on stdout, exit status 0.
    if (/^cannot open/.test(mime) || !/^[\w.+-]+\/[\w.+-]+$/.test(mime.trim())) throw new Error(mime);
    return { mime_type: mime.trim(), description: description.trim().slice(0, 512) };
  } catch {
    return { mime_type: 'application/octet-stream', description: 'unknown (file could not tell)' };
  }
}

function integrityError(digest: string, actual: string): DossierError {
  return new DossierError(
    'integrity_error',
    `The stored bytes of artifact ${digest} no longer match their digest (they hash to sha256:${actual}); nothing was run.`,
    'Report this to an admin: the artifact store was changed outside dossier. Register the artifact again from a trusted copy.',
    { artifact: digest, actual: `sha256:${actual}` },
  );
}

/**
 * Proves an artifact's bytes before use. With `copyTo`, the verified bytes are
 * also written there (0555) in the same pass, so what runs is what was checked.
 */
export async function verifyArtifact(
  home: string,
  digest: string,
  copyTo?: string,
  shared?: SharedBytes,
): Promise<string> {
  const file = artifactPath(home, digest);
  if (shared && !existsSync(file)) await fetchShared(home, digest, shared);
  const source = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => {
    throw new DossierError(
      'integrity_error',
      `Artifact ${digest} is registered but its bytes are missing from the store.`,
      'Register the artifact again (register_artifact or POST /artifacts).',
      { artifact: digest },
    );
  });
  const hash = createHash('sha256');
  try {
    const out = copyTo
      ? await open(
          copyTo,
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o700,
        )
      : undefined;
    try {
      // One buffer for the whole file: a launch verifies hundreds of MB, and fresh buffers would
      // make the garbage collector pause the gateway and workers over and over.
      const buf = Buffer.allocUnsafe(1024 * 1024);
      for (;;) {
        const { bytesRead } = await source.read(buf, 0, buf.length, null);
        if (bytesRead === 0) break;
        hash.update(buf.subarray(0, bytesRead));
        if (out) await out.write(buf, 0, bytesRead);
      }
    } finally {
      await out?.close();
    }
  } finally {
    await source.close();
  }
  const actual = hash.digest('hex');
  if (`sha256:${actual}` !== digest) {
    if (copyTo) await rm(copyTo, { force: true });
    throw integrityError(digest, actual);
  }
  if (copyTo) await chmod(copyTo, 0o555);
  return file;
}

/** A fresh temp file's path in the artifact directory (made 0700 if missing). */
async function tempFile(home: string): Promise<string> {
  const tmpDir = path.join(home, 'artifacts', 'tmp');
  await mkdir(tmpDir, { recursive: true, mode: 0o700 });
  await chmod(path.join(home, 'artifacts'), 0o700);
  return path.join(tmpDir, randomUUID());
}

/** Brings a shared artifact into this host's folder, proving its digest on the way; nothing if the store has none. */
async function fetchShared(home: string, digest: string, shared: NonNullable<SharedBytes>) {
  const tmp = await tempFile(home);
  try {
    const actual = await shared.copyTo(digest, tmp);
    if (actual === undefined) return;
    if (`sha256:${actual}` !== digest) {
      // Damaged in the store: forgotten there, so the next host that stores these bytes heals it.
      await shared.discard(digest);
      throw integrityError(digest, actual);
    }
    const final = artifactPath(home, digest);
    await mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
    await chmod(tmp, 0o444);
    await rename(tmp, final);
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * Streams content into the artifact directory, hashing as it goes; refuses
 * more than `limit` bytes. With `shared`, the stored bytes are published to
 * every host.
 */
export async function storeArtifact(
  home: string,
  source: Readable,
  limit: number,
  shared?: SharedBytes,
  team?: string,
) {
  const tmp = await tempFile(home);
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
    const healthy =
      existsSync(final) &&
      (await verifyArtifact(home, digest).then(
        () => true,
        () => false,
      ));
    if (healthy) {
      await rm(tmp, { force: true });
    } else {
      // New, or a stored copy that no longer matches its digest: these verified bytes replace it.
      await mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
      await chmod(tmp, 0o444);
      await rename(tmp, final);
    }
    await shared?.put(digest, final, team);
    return { digest, size, file: final };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export async function storeArtifactFile(
  home: string,
  file: string | number,
  limit: number,
  shared?: SharedBytes,
  team?: string,
) {
  if (typeof file !== 'number') return storeArtifact(home, createReadStream(file), limit, shared, team);
  const source = Readable.from(readOpened(file));
  try {
    return await storeArtifact(home, source, limit, shared, team);
  } finally {
    // A refused one is destroyed while a read may still be under way: its caller closes the
    // descriptor only once that read has ended (else it could move another file's offset).
    if (!source.closed) await new Promise((resolve) => source.once('close', resolve));
  }
}

/**
 * The bytes of a descriptor the caller opened and will close, from where it stands. Not a file
 * stream: a failed pipeline destroys its source, and a file stream's destroy closes its descriptor
 * (whatever autoClose says), so the caller's close would then close that number again, by then
 * perhaps another request's file.
 */
async function* readOpened(fd: number): AsyncGenerator<Buffer> {
  const read = promisify(readFd);
  for (;;) {
    const buf = Buffer.allocUnsafe(1024 * 1024);
    const { bytesRead } = await read(fd, buf, 0, buf.length, null);
    if (bytesRead === 0) return;
    yield buf.subarray(0, bytesRead);
  }
}

/**
 * An extraction's output folder as its Evidence names it: relative to DOSSIER_HOME
 * (`extractions/<team>/…`), so no reply names the host's folders.
 */
export const outputName = (home: string, output: string): string => path.relative(home, output);

/** The folder an extraction's Evidence names, on this host (Evidence made before named it absolutely). */
export const outputFolder = (home: string, named: string): string => path.resolve(home, named);

/**
 * Publishes the files an extraction of `team` wrote (rows of its manifest) to
 * the shared store, so that the team can register any of them from any host.
 * Past the team's quota the rest stays here (counted in the answer); a cancel
 * or a store failure removes the output and throws.
 */
export async function publishOutputs(
  shared: SharedBytes,
  team: string,
  output: string,
  rows: readonly { path: string; type: string; status: string; sha256?: string | null }[],
  signal?: AbortSignal,
): Promise<{ unpublished: number; reason?: string }> {
  if (!shared) return { unpublished: 0 };
  const files = rows.filter((r) => r.type === 'file' && r.status === 'written' && r.sha256);
  const done = new Set<string>();
  try {
    for (const [i, r] of files.entries()) {
      if (done.has(r.sha256!)) continue;
      if (signal?.aborted)
        throw new DossierError(
          'cancelled',
          'The extraction was cancelled while its files were being published.',
          'Extract again with a new idempotency_key.',
        );
      done.add(r.sha256!);
      const parts = r.path.split('/').filter((p) => p !== '' && p !== '.');
      try {
        await shared.put(`sha256:${r.sha256}`, path.join(output, ...parts), team);
      } catch (err) {
        // Over the team's quota: the rest stays on this host only, and the Evidence says so.
        if (err instanceof DossierError && err.code === 'resource_constraint')
          return { unpublished: files.length - i, reason: err.message };
        throw err;
      }
    }
  } catch (err) {
    // The launch ends without a result (cancelled, or the store failed): its output goes with it.
    await rm(output, { recursive: true, force: true });
    throw err;
  }
  return { unpublished: 0 };
}

/**
 * Brings the bytes of `digest` into this host's artifact folder from the
 * shared store, for `team` only if it owns them; the path, or undefined.
 */
export async function fetchOwned(
  home: string,
  digest: string,
  team: string,
  shared: SharedBytes,
  limit: number,
): Promise<string | undefined> {
  if (!shared || !(await shared.ownedBy(digest, team))) return undefined;
  const size = await shared.sizeOf(digest);
  if (size !== undefined && size > limit)
    throw new DossierError(
      'resource_constraint',
      `The artifact is larger than ${limit} bytes.`,
      'Register a smaller file, or ask an admin to raise DOSSIER_MAX_UPLOAD_BYTES.',
      { limit },
    );
  return verifyArtifact(home, digest, undefined, shared);
}

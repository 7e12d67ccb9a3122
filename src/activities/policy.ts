// Execution policy checks shared by the effects that launch programs.
import { constants } from 'node:fs';
import { access, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';
import { artifactPath } from '../evidence/artifacts.ts';
import type { EffectContext } from './effect.ts';

/** Resolves the executable through links and refuses it unless it lies under an allowed root. */
export async function allowedExecutable(executable: string, allowedRoots: string[]): Promise<string> {
  if (!path.isAbsolute(executable)) {
    throw new DossierError(
      'invalid_params',
      `executable ${executable} is not an absolute path`,
      'Pass an absolute path.',
    );
  }
  let resolved: string;
  try {
    resolved = await realpath(executable);
  } catch {
    throw new DossierError(
      'not_found',
      `executable ${executable} does not exist on the worker host`,
      'Check the path on the worker host (list_artifacts shows registered targets), then use a new idempotency_key.',
      { executable },
    );
  }
  const roots = await Promise.all(allowedRoots.map((r) => realpath(r).catch(() => r)));
  const inside = roots.some(
    (root) => resolved === root || resolved.startsWith(root.endsWith('/') ? root : `${root}/`),
  );
  if (!inside) {
    throw new DossierError(
      'policy_denied',
      `executable ${executable} (resolved to ${resolved}) is outside the allowed roots`,
      'Use a program under one of the allowed roots, or ask an admin to add its folder to DOSSIER_ALLOWED_ROOTS.',
      { executable, resolved, allowed_roots: allowedRoots },
    );
  }
  const info = await stat(resolved);
  if (!info.isFile()) {
    throw new DossierError(
      'unsupported_target',
      `executable ${resolved} is not a regular file`,
      'Pass a program file.',
      {
        resolved,
      },
    );
  }
  try {
    await access(resolved, constants.X_OK);
  } catch {
    throw new DossierError(
      'unsupported_target',
      `${resolved} is not executable`,
      'Pass a file with execute permission.',
      {
        resolved,
      },
    );
  }
  return resolved;
}

/** A registered artifact of the caller's team and its file in the artifact directory, or not_found. */
export async function registeredArtifact(ctx: EffectContext, digest: string) {
  const artifact = await ctx.store.getArtifact(ctx.caller.team, digest);
  if (!artifact) {
    throw new DossierError(
      'not_found',
      `No artifact ${digest} is registered for your team.`,
      'register_artifact (or POST /artifacts) first, then pass the digest it returns.',
      { artifact: digest },
    );
  }
  return { artifact, file: artifactPath(ctx.config.home, digest) };
}

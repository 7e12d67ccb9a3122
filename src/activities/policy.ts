// The artifacts effects work on: the caller's team's, and proven byte for byte.
import { artifactNotFound } from '../domain/errors.ts';
import { verifyArtifact } from '../evidence/artifacts.ts';
import type { EffectContext } from './effect.ts';

/** A registered artifact of the caller's team, or not_found. */
export async function registeredArtifact(ctx: EffectContext, digest: string) {
  const artifact = await ctx.store.artifacts.get(ctx.caller.team, digest);
  if (!artifact) {
    throw artifactNotFound(digest);
  }
  return artifact;
}

/** A registered artifact whose stored bytes were just proven against its digest (integrity_error otherwise). */
export async function verifiedArtifact(ctx: EffectContext, digest: string) {
  const artifact = await registeredArtifact(ctx, digest);
  return { artifact, file: await verifyArtifact(ctx.config.home, digest, undefined, ctx.store.blobs) };
}

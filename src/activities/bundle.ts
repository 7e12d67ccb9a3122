// The export_evidence_bundle effect: write a verified bundle file of the
// team's Evidence into the exports folder, named by its digest.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildBundle } from '../evidence/bundles.ts';
import type { Effect } from './effect.ts';

export const exportEvidenceBundle: Effect<{ evidence_ids: string[] }> = async (input, ctx) => {
  const bundle = await buildBundle(ctx.store.evidence, ctx.caller.team, input.evidence_ids);
  const dir = path.join(ctx.config.home, 'exports', ctx.caller.team);
  const file = path.join(dir, `bundle-${bundle.digest}.json`);
  await ctx.begin();
  await mkdir(dir, { recursive: true });
  // Write beside, then rename: a reader never sees half a bundle.
  const staging = path.join(ctx.workspace, 'bundle.json');
  await writeFile(staging, bundle.text, { flag: 'wx' });
  await rename(staging, file);
  // On a store hosts share, the bundle is published under its name, so any gateway lists and serves it.
  const shared = ctx.store.blobs;
  if (shared) {
    await shared.put(`sha256:${bundle.digest}`, file, ctx.caller.team);
    await shared.name(
      ctx.caller.team,
      'bundle',
      path.basename(file),
      `sha256:${bundle.digest}`,
      bundle.bytes,
    );
  }
  const entries = input.evidence_ids.map((id, i) => ({ index: i, evidence_id: id }));
  return {
    status: 'succeeded',
    document: { path: file, bytes: bundle.bytes, sha256: bundle.digest, format: 'dossier.evidence-bundle/1' },
    collections: { entries },
    summary: { path: file, bytes: bundle.bytes, sha256: bundle.digest, evidence: bundle.count },
    truncated: false,
    limitations: [],
    target: { path: file, digest: `sha256:${bundle.digest}` },
  };
};

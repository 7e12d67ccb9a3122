// The export_evidence_bundle effect: write a verified bundle file of the
// team's Evidence (named, or a whole investigation), its unknowns and the
// team's annotations on what it is about into the exports folder, named by
// its digest.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BUNDLE_FORMAT, buildBundle } from '../../evidence/bundles.ts';
import type { Effect } from '../effect.ts';

export const exportEvidenceBundle: Effect<{ evidence_ids?: string[]; investigation?: string }> = async (
  input,
  ctx,
) => {
  const bundle = await buildBundle(ctx.store, ctx.caller.team, {
    evidenceIds: input.evidence_ids,
    investigation: input.investigation,
  });
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
  const entries = bundle.evidenceIds.map((id, i) => ({ index: i, evidence_id: id }));
  const summary = {
    path: file,
    bytes: bundle.bytes,
    sha256: bundle.digest,
    evidence: bundle.count,
    unknowns: bundle.unknowns,
    annotations: bundle.annotations,
    ...(bundle.investigation ? { investigation: bundle.investigation } : {}),
  };
  return {
    status: 'succeeded',
    document: { ...summary, format: BUNDLE_FORMAT },
    collections: { entries },
    summary,
    truncated: false,
    limitations: [],
    target: { path: file, digest: `sha256:${bundle.digest}` },
  };
};

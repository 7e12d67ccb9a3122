// Tenancy and roles across the catalog: every id-taking tool answers another
// team's id with not_found (no existence leak), every effectful tool refuses
// a viewer with forbidden, and neither changes anything.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG } from '../../src/tools/catalog.ts';
import { isLaunchTool } from '../../src/tools/contract.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const dir = scratchDir('tenancy');
let t: TestStack;
let owner: Client;
let ids: { key: string; evidence: string; unknown: string; artifact: string };

beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${dir}` } });
  owner = await t.connect(await t.tokenFor('olivia', 'owners'));
  const launched = await call(owner, 'capture_process_scenario', {
    executable: '/usr/bin/true',
    idempotency_key: 'own-1',
  });
  const unknown = await call(owner, 'record_unknown', {
    question: 'Q?',
    scope: 's',
    evidence_ids: [launched.evidence_id],
  });
  writeFileSync(path.join(dir, 'target.bin'), 'target');
  const artifact = await call(owner, 'register_artifact', { path: path.join(dir, 'target.bin') });
  ids = {
    key: 'own-1',
    evidence: launched.evidence_id,
    unknown: unknown.unknown.unknown_id,
    artifact: artifact.artifact.digest,
  };
});
afterAll(async () => {
  await t?.stop(true);
});

async function snapshot() {
  const store = t.stack.store;
  return {
    launches: (await store.launches.list('owners', { limit: 200 })).items.map((l) => [l.key, l.status]),
    evidence: (await store.evidence.list('owners', { limit: 200 })).items.map((e) => e.evidence_id),
    unknowns: (await store.unknowns.list('owners', { limit: 200 })).items.map((u) => [
      u.unknown_id,
      u.revision,
      u.status,
    ]),
    artifacts: (await store.artifacts.list('owners', { limit: 200 })).items.map((a) => a.digest),
    otherLaunches: (await store.launches.list('intruders', { limit: 200 })).items.map((l) => [
      l.key,
      l.status,
    ]),
  };
}

describe('another team’s ids', () => {
  it('answer not_found from every id-taking tool, and change nothing', async () => {
    const intruder = await t.connect(await t.tokenFor('ivan', 'intruders', 'admin'));
    const before = await snapshot();
    const calls: [string, Record<string, unknown>][] = [
      ['get_launch', { idempotency_key: ids.key }],
      ['await_launch', { idempotency_key: ids.key, wait_ms: 0 }],
      ['cancel_launch', { idempotency_key: ids.key }],
      ['inspect_analysis_view', { evidence_id: ids.evidence, view: { kind: 'summary' } }],
      ['get_evidence', { evidence_id: ids.evidence }],
      [
        'update_unknown',
        { unknown_id: ids.unknown, expected_revision: 1, status: 'refuted', settled_by: [ids.evidence] },
      ],
      ['record_unknown', { question: 'Q2?', scope: 's', evidence_ids: [ids.evidence] }],
      ['export_evidence_bundle', { evidence_ids: [ids.evidence], idempotency_key: 'steal-bundle' }],
      ['extract_artifact', { artifact: ids.artifact, idempotency_key: 'steal-extract' }],
      ['extract_firmware', { artifact: ids.artifact, idempotency_key: 'steal-firmware' }],
      ['capture_process_scenario', { executable: ids.artifact, idempotency_key: 'steal-run' }],
    ];
    for (const [tool, args] of calls) {
      const reply: Reply = await call(intruder, tool, args);
      expect(reply.error?.code, `${tool}: ${JSON.stringify(reply)}`).toBe('not_found');
      expect(JSON.stringify(reply)).not.toContain('olivia');
    }
    const after = await snapshot();
    expect(after.launches).toEqual(before.launches);
    expect(after.evidence).toEqual(before.evidence);
    expect(after.unknowns).toEqual(before.unknowns);
    expect(after.artifacts).toEqual(before.artifacts);
    // The intruder's own failed launches are theirs alone, and ran nothing.
    expect(after.otherLaunches.every(([, status]) => status === 'failed')).toBe(true);
  });
});

describe('roles', () => {
  it('a viewer gets forbidden from every tool that changes something, and nothing changes', async () => {
    const viewer = await t.connect(await t.tokenFor('vic', 'owners', 'viewer'));
    const before = await snapshot();
    const changing = CATALOG.filter((c) => isLaunchTool(c) || !c.effect.readOnly);
    expect(changing.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'capture_process_scenario',
        'extract_artifact',
        'cancel_launch',
        'record_unknown',
      ]),
    );
    for (const contract of changing) {
      const reply = await call(viewer, contract.name, {});
      // Input is checked first, so send something valid enough to reach authorization.
      const code = reply.error?.code;
      expect(['forbidden', 'invalid_params'], contract.name).toContain(code);
    }
    const minimal: Record<string, Record<string, unknown>> = {
      capture_process_scenario: { executable: '/usr/bin/true', idempotency_key: 'v1' },
      cancel_launch: { idempotency_key: ids.key },
      record_unknown: { question: 'Q3?', scope: 's' },
      update_unknown: { unknown_id: ids.unknown, expected_revision: 1, status: 'open' },
      register_artifact: { path: path.join(dir, 'target.bin') },
      import_evidence_bundle: { path: path.join(dir, 'target.bin') },
      export_evidence_bundle: { evidence_ids: [ids.evidence], idempotency_key: 'v2' },
      extract_artifact: { artifact: ids.artifact, idempotency_key: 'v3' },
    };
    for (const [tool, args] of Object.entries(minimal)) {
      expect((await call(viewer, tool, args)).error?.code, tool).toBe('forbidden');
    }
    expect(await snapshot()).toEqual(before);
    expect((await call(viewer, 'get_evidence', { evidence_id: ids.evidence })).evidence.evidence_id).toBe(
      ids.evidence,
    );
  });
});

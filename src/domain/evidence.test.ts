import { describe, expect, it } from 'vitest';
import { buildEvidence, RESIDUAL_UNKNOWNS } from './evidence.ts';
import type { NewEvidence } from './types.ts';

const evidence = (over: Partial<NewEvidence> = {}): NewEvidence => ({
  record: {
    tool: 'capture_process_scenario',
    provider: { name: 'dossier', version: '0.1.0' },
    parameters: { executable: '/usr/bin/true' },
    parameters_digest: 'abc',
    target: null,
    principal: 'alice',
    team: 't',
    investigation: null,
    launch: null,
    created_at: '2026-11-30T00:00:00.000Z',
    summary: { exit_code: 0 },
    truncated: false,
    limitations: [],
  },
  document: { exit: 0 },
  collections: {
    stdout: [
      { line: 1, text: 'a' },
      { line: 2, text: 'b' },
    ],
  },
  filterable: { stdout: ['line'] },
  ...over,
});

describe('buildEvidence', () => {
  it('names Evidence by its content: equal content, equal id; one changed row, another id', () => {
    const a = buildEvidence(evidence());
    expect(a.record.evidence_id).toMatch(/^ev_[0-9a-f]{64}$/);
    expect(buildEvidence(evidence()).record.evidence_id).toBe(a.record.evidence_id);
    const changed = buildEvidence(
      evidence({
        collections: {
          stdout: [
            { line: 1, text: 'a' },
            { line: 2, text: 'c' },
          ],
        },
      }),
    );
    expect(changed.record.evidence_id).not.toBe(a.record.evidence_id);
  });

  it('stores each row with its source_index and each filterable value as an ordered key with a count', () => {
    const built = buildEvidence(
      evidence({ collections: { stdout: [{ line: 7 }, { line: 7 }, { line: 9 }] } }),
    );
    expect(built.rows.map((r) => r.sourceIndex)).toEqual([0, 1, 2]);
    expect(built.keys.filter((k) => k.value === '7').map((k) => [k.ordinal, k.sourceIndex])).toEqual([
      [0, 0],
      [1, 1],
    ]);
    expect(built.counts.find((c) => c.value === '7')?.rows).toBe(2);
    expect(built.record.collections.stdout).toMatchObject({ rows: 3, filterable: ['line'] });
  });

  it('gives every unresolved item a residual unknown with an identity of its own, listed in its collection', () => {
    const built = buildEvidence(
      evidence({
        unknowns: [
          { question: 'q?', scope: 's1' },
          { question: 'q?', scope: 's2' },
        ],
      }),
    );
    const ids = built.unknowns.map((u) => u.unknown_id);
    expect(new Set(ids).size).toBe(2);
    expect(built.record.collections[RESIDUAL_UNKNOWNS]?.rows).toBe(2);
  });
});

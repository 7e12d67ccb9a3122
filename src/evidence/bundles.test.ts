import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../domain/canonical.ts';
import { buildEvidence, unknownId } from '../domain/evidence.ts';
import { BUNDLE_FORMAT, readBundle, verifyBundle } from './bundles.ts';
import { unknownsDigest } from './bundleUnknowns.ts';

const built = buildEvidence({
  record: {
    tool: 'capture_process_scenario',
    provider: { name: 'dossier', version: '0.1.0' },
    parameters: {},
    parameters_digest: 'p',
    target: null,
    principal: 'alice',
    team: 't',
    investigation: null,
    launch: null,
    created_at: '2026-11-30T00:00:00.000Z',
    summary: {},
    truncated: false,
    limitations: [],
  },
  document: { ok: true },
  collections: { stdout: [{ line: 1, text: 'secret' }] },
  filterable: { stdout: ['line'] },
});
const bundle = (entries: unknown[]) =>
  canonicalJson({ format: 'dossier.evidence-bundle/1', evidence: entries });
const entry = {
  record: built.record,
  document: { ok: true },
  collections: { stdout: [{ line: 1, text: 'secret' }] },
};

describe('verifyBundle', () => {
  it('rebuilds every entry and accepts one whose digests match', () => {
    expect(verifyBundle(bundle([entry])).map((b) => b.record.evidence_id)).toEqual([
      built.record.evidence_id,
    ]);
  });

  it('refuses the whole bundle when one row changed, when it is not JSON, or not a bundle', () => {
    const tampered = { ...entry, collections: { stdout: [{ line: 1, text: 'changed' }] } };
    expect(() => verifyBundle(bundle([entry, tampered]))).toThrow(/refused whole.*entry 1/);
    // A changed row is an integrity error; a file that is no bundle at all is a bad input.
    expect(() => verifyBundle(bundle([entry, tampered]))).toThrow(
      expect.objectContaining({ code: 'integrity_error' }),
    );
    expect(() => verifyBundle(bundle([entry, { nonsense: true }]))).toThrow(
      expect.objectContaining({ code: 'invalid_params' }),
    );
    expect(() => verifyBundle('{')).toThrow(/not JSON/);
    expect(() => verifyBundle(canonicalJson({ format: 'other', evidence: [] }))).toThrow(/not a dossier/);
  });
});

describe('a bundle’s unknowns', () => {
  const question = { question: 'What does the secret mean?', scope: 'stdout line 1' };
  const settled = {
    unknown_id: unknownId(question),
    ...question,
    status: 'resolved',
    revision: 2,
    investigation: null,
    evidence_ids: [built.record.evidence_id],
    settled_by: [built.record.evidence_id],
    note: 'a greeting',
    created_by: 'alice',
    created_at: '2026-11-30T00:00:00.000Z',
    updated_at: '2026-11-30T01:00:00.000Z',
    updated_by: 'bob',
    revisions: [
      {
        revision: 1,
        status: 'open',
        note: null,
        settled_by: null,
        evidence_ids: [built.record.evidence_id],
        changed_by: 'alice',
        changed_at: '2026-11-30T00:00:00.000Z',
      },
    ],
  };
  const v2 = (unknowns: unknown[], over: Record<string, unknown> = {}) =>
    canonicalJson({
      format: BUNDLE_FORMAT,
      team: 't',
      investigation: null,
      evidence: [entry],
      unknowns,
      unknowns_digest: unknownsDigest(unknowns),
      ...over,
    });

  it('come back as they were, with their revisions, when every digest holds', () => {
    const read = readBundle(v2([settled]));
    expect(read.team).toBe('t');
    expect(read.unknowns).toEqual([settled]);
  });

  it('refuse the whole bundle when a note changed, an id is forged, one names no Evidence of it, or the team differs', () => {
    const digest = unknownsDigest([settled]);
    const edited = canonicalJson({
      format: BUNDLE_FORMAT,
      team: 't',
      investigation: null,
      evidence: [entry],
      unknowns: [{ ...settled, note: 'changed' }],
      unknowns_digest: digest,
    });
    expect(() => readBundle(edited)).toThrow(expect.objectContaining({ code: 'integrity_error' }));
    expect(() => readBundle(v2([{ ...settled, question: 'Another question?' }]))).toThrow(
      /does not match its question and scope/,
    );
    expect(() => readBundle(v2([{ ...settled, evidence_ids: ['ev_elsewhere'] }]))).toThrow(
      /names none of the bundle's Evidence/,
    );
    expect(() => readBundle(v2([settled], { team: 'other' }))).toThrow(/not of the bundle's team/);
  });

  it('reads a bundle of the first format, which carried Evidence only', () => {
    const v1 = canonicalJson({ format: 'dossier.evidence-bundle/1', evidence: [entry] });
    expect(readBundle(v1)).toMatchObject({ unknowns: [], team: null });
  });
});

import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../domain/canonical.ts';
import { buildEvidence } from '../domain/evidence.ts';
import { BUNDLE_FORMAT, verifyBundle } from './bundles.ts';

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
const bundle = (entries: unknown[]) => canonicalJson({ format: BUNDLE_FORMAT, evidence: entries });
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

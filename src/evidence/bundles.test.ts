import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../domain/canonical.ts';
import { buildEvidence, unknownId } from '../domain/evidence.ts';
import { BUNDLE_FORMAT, readBundle, verifyBundle } from './bundles.ts';
import { unknownsDigest } from './bundleUnknowns.ts';
import { sealed } from './bundleAnnotations.ts';
import { annotationId } from '../domain/annotations.ts';

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

describe("a bundle's carried annotations and diff links", () => {
  const artifact = `sha256:${'ab'.repeat(32)}`;
  const elsewhere = `sha256:${'cd'.repeat(32)}`;
  const { evidence_id: _id, collections: _c, document: _d, ...raw } = built.record;
  const about = buildEvidence({
    record: { ...raw, tool: 'list_functions', target: { kind: 'artifact', digest: artifact } },
    document: { ok: true },
    collections: {},
    filterable: {},
  } as never);
  const aboutEntry = { record: about.record, document: { ok: true }, collections: {} };
  const revision = (over: Record<string, unknown> = {}, on = artifact) => {
    const key = { artifact: on, kind: 'function' as const, item: '0x401136' };
    const id = annotationId(key);
    return {
      annotation_id: id,
      ...key,
      revision: 1,
      event_id: `${id}@1`,
      name: 'parse_licence',
      comment: null,
      type: null,
      tags: ['crypto'],
      note: null,
      variables: null,
      changed: ['name', 'tags'],
      origin: 'write',
      reverted_to: null,
      source: null,
      changed_by: 'alice',
      changed_at: '2026-11-30T00:00:00.000Z',
      imported: null,
      ...over,
    };
  };
  const carried = (r: Record<string, unknown>) =>
    sealed({
      annotation_id: r.annotation_id,
      artifact: r.artifact,
      kind: r.kind,
      item: r.item,
      revisions: [r],
    } as never);
  const withAnnotations = (annotations: unknown[]) =>
    canonicalJson({ format: 'dossier.evidence-bundle/1', evidence: [aboutEntry], annotations });

  it('come back when each is what set_annotation accepts, on an artifact its Evidence is about', () => {
    expect(readBundle(withAnnotations([carried(revision())])).annotations).toHaveLength(1);
  });

  it('refuse the whole bundle over a field set_annotation refuses, even with its digest right', () => {
    for (const [over, field] of [
      [{ name: { evil: 1 } }, 'name'],
      [{ name: 'x'.repeat(200_000) }, 'name'],
      [{ name: '../etc' }, 'name'],
      [{ comment: 'c'.repeat(4_097) }, 'comment'],
      [{ tags: ['not a valid tag!!'] }, 'tags'],
      [{ tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }, 'tags'],
      [{ variables: { v1: 'ok', 'bad name': 'x' } }, 'variables'],
      [{ origin: 'forged' }, 'origin'],
      [{ changed_by: 'p'.repeat(257) }, 'changed_by'],
      [{ extra: true }, ''],
    ] as const) {
      expect(() => readBundle(withAnnotations([carried(revision(over))])), field).toThrow(
        expect.objectContaining({
          code: 'invalid_params',
          message: expect.stringMatching(new RegExp(`annotation 0 is not an annotation history: .*${field}`)),
        }),
      );
    }
  });

  it('refuse the whole bundle over a revision whose fields together are more than an annotation may hold', () => {
    const variables = Object.fromEntries(
      Array.from({ length: 64 }, (_, i) => [`v${i}_${'a'.repeat(240)}`, `n${i}_${'b'.repeat(240)}`]),
    );
    expect(() =>
      readBundle(withAnnotations([carried(revision({ note: 'x'.repeat(16_000), variables }))])),
    ).toThrow(/annotation 0 \(ann_[0-9a-f]+\) is not an annotation history/);
  });

  it('refuse the whole bundle over a NUL character, which the store cannot keep as text', () => {
    expect(() => readBundle(withAnnotations([carried(revision({ comment: 'a\u0000b' }))]))).toThrow(
      /annotation 0 holds a NUL character/,
    );
  });

  it('refuse the whole bundle over an annotation on an artifact none of its Evidence is about', () => {
    expect(() => readBundle(withAnnotations([carried(revision({}, elsewhere))]))).toThrow(
      /which none of its Evidence is about/,
    );
  });

  it("refuse the whole bundle over a diff's match no analysis makes", () => {
    const diff = (match: Record<string, unknown>) => {
      const b = buildEvidence({
        record: {
          ...raw,
          tool: 'diff_binaries',
          target: { kind: 'artifact', digest: artifact },
          parameters: { base: elsewhere },
        },
        document: { ok: true },
        collections: { matches: [match] },
        filterable: { matches: [] },
      } as never);
      return canonicalJson({
        format: 'dossier.evidence-bundle/1',
        evidence: [{ record: b.record, document: { ok: true }, collections: { matches: [match] } }],
      });
    };
    const good = {
      address: '0x401136',
      base_address: '0x401100',
      class: 'changed',
      similarity: 0.5,
      confidence: 0.9,
    };
    expect(readBundle(diff(good)).links).toEqual([
      expect.objectContaining({ artifact, base: elsewhere, address: '0x401136', similarity: 0.5 }),
    ]);
    for (const bad of [
      { address: 'main' },
      { base_address: '0x00401100' },
      { similarity: -0.1 },
      { confidence: 7 },
      { similarity: '0.5' },
    ])
      expect(() => readBundle(diff({ ...good, ...bad }))).toThrow(/is not a match/);
  });

  it('refuse the whole bundle over an Evidence with more rows in a collection than the gateway keeps', () => {
    const rows = Array.from({ length: 3 }, (_, i) => ({ line: i + 1, text: 'x' }));
    const long = buildEvidence({
      record: raw,
      document: { ok: true },
      collections: { stdout: rows },
      filterable: { stdout: ['line'] },
    } as never);
    const text = bundle([{ record: long.record, document: { ok: true }, collections: { stdout: rows } }]);
    expect(readBundle(text, { maxRows: 3 }).evidence).toHaveLength(1);
    expect(() => readBundle(text, { maxRows: 2 })).toThrow(
      expect.objectContaining({
        code: 'resource_constraint',
        message: expect.stringMatching(/3 rows in stdout, more than an imported collection may hold \(2\)/),
      }),
    );
  });
});

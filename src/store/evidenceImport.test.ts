// A bundle's import retains all of its Evidence or none, and one large
// Evidence does not hold the store (a real SQLite file) for every other call
// while its rows go in.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { scratchStore } from '../../tests/helpers/scratchStore.ts';
import { buildEvidence } from '../domain/evidence.ts';

const scratch = scratchStore('import');
const store = () => scratch.store;

const evidence = (rows: number, text: string) =>
  buildEvidence({
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
      created_at: '2026-12-05T00:00:00.000Z',
      summary: {},
      truncated: false,
      limitations: [],
    },
    document: { ok: true },
    collections: { stdout: Array.from({ length: rows }, (_, i) => ({ line: i + 1, text })) },
    filterable: { stdout: ['line'] },
  });

const staging = () => {
  const db = new Database(scratch.file, { readonly: true });
  try {
    return db.prepare('SELECT evidence_id FROM evidence_staging').all();
  } finally {
    db.close();
  }
};

describe('importing Evidence', () => {
  it('lets a call made meanwhile write while a large Evidence goes in, and keeps every row', async () => {
    const big = evidence(25_000, 'large');
    const order: string[] = [];
    const importing = store()
      .evidence.importAll('t', [big])
      .then((r) => {
        order.push('import');
        return r;
      });
    // Another team's call, made once the import's rows are going in.
    while (staging().length === 0) await new Promise((r) => setImmediate(r));
    await store().tokens.create({ principal: 'bob', team: 'u', role: 'operator' });
    order.push('other write');
    expect(await importing).toMatchObject({ imported: 1, present: 0 });
    expect(order).toEqual(['other write', 'import']);
    expect(await store().evidence.allRows(big.record.evidence_id, 'stdout')).toHaveLength(25_000);
    expect(staging()).toEqual([]);
  }, 60_000);

  it('retains none of it when the same transaction fails, and leaves staged rows for the sweep', async () => {
    const small = evidence(3, 'small');
    const big = evidence(25_000, 'also large');
    await expect(
      store().evidence.importAll('t', [small, big], async () => {
        throw new Error('the annotations could not be written');
      }),
    ).rejects.toThrow(/annotations/);
    expect(await store().evidence.get('t', small.record.evidence_id)).toBeUndefined();
    expect(await store().evidence.get('t', big.record.evidence_id)).toBeUndefined();
    expect(staging()).toEqual([{ evidence_id: big.record.evidence_id }]);
    expect(await store().evidence.sweepStaged(0)).toBe(1);
    expect(await store().evidence.allRows(big.record.evidence_id, 'stdout')).toEqual([]);
    // Imported again, it is whole.
    expect(await store().evidence.importAll('t', [small, big])).toMatchObject({ imported: 2 });
    expect(await store().evidence.allRows(big.record.evidence_id, 'stdout')).toHaveLength(25_000);
    expect(staging()).toEqual([]);
  }, 60_000);
});

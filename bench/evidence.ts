// Evidence figures (issue 4): reply sizes of the 8,000-reference case, view
// latency at 1,000 / 100,000 / 1,000,000 rows, and retention time, on SQLite
// and on a durable PostgreSQL cluster started for the run.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Ledger, replyBytes } from '../src/gateway/ledger.ts';
import { openStore } from '../src/store/store.ts';
import type { Store } from '../src/store/store.ts';
import type { Principal } from '../src/domain/types.ts';
import { startPostgres } from '../tests/helpers/postgres.ts';
import { syntheticTrace } from '../tests/helpers/synthetic.ts';
import { freePort, median, ms, timed } from './lib.ts';

const alice: Principal = { principal: 'alice', team: 't', role: 'operator' };
const SIZES = [1_000, 100_000, 1_000_000];
const RUNS = 20;

async function measure(store: Store, label: string, lines: string[]) {
  const ledger = new Ledger(store, { replyBudgetBytes: 40_000 });
  const pageMs: Record<number, number> = {};
  for (const n of SIZES) {
    const input = syntheticTrace(n, 't', 'alice');
    const [retainMs, record] = await timed(() => store.evidence.put(input));
    const id = record.evidence_id;
    const summary: number[] = [];
    const page: number[] = [];
    const filtered: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      summary.push((await timed(() => ledger.inspect(alice, id, { kind: 'summary' })))[0]);
      const offset = Math.floor((n / RUNS) * i);
      page.push(
        (
          await timed(() =>
            ledger.inspect(alice, id, { kind: 'page', collection: 'references', offset, limit: 64 }),
          )
        )[0],
      );
      filtered.push(
        (
          await timed(() =>
            ledger.inspect(alice, id, {
              kind: 'page',
              collection: 'references',
              where: { owner: ['sub_7'] },
              offset: 0,
              limit: 64,
            }),
          )
        )[0],
      );
    }
    pageMs[n] = median(page);
    lines.push(
      `| ${label} | ${n.toLocaleString('en')} | ${ms(retainMs)} (${ms((retainMs * 100_000) / n)} per 100k rows) | ${ms(median(summary))} | ${ms(median(page))} | ${ms(median(filtered))} |`,
    );
  }
  lines.push(
    `| ${label} | 1,000,000 ÷ 1,000 page latency (target ≤ 2×) | | | ${(pageMs[1_000_000]! / pageMs[1_000]!).toFixed(2)}× | |`,
  );
}

export async function benchEvidence(): Promise<string[]> {
  const lines: string[] = [];

  // Reply sizes for the seed's case: 8,000 references, all owners unavailable.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-bench-store-'));
  const sqlite = await openStore(path.join(dir, 'sizes.db'));
  const ledger = new Ledger(sqlite, { replyBudgetBytes: 40_000 });
  const trace = await sqlite.evidence.put(syntheticTrace(8_000));
  const summary = await ledger.inspect(alice, trace.evidence_id, { kind: 'summary' });
  const page = await ledger.inspect(alice, trace.evidence_id, {
    kind: 'page',
    collection: 'references',
    offset: 0,
    limit: 64,
  });
  const delivered = await ledger.deliver(
    alice,
    { status: 'succeeded', evidence_id: trace.evidence_id },
    'complete',
  );
  lines.push('| figure | value |', '|---|---|');
  lines.push(
    `| 8,000 references: summary view reply (target ≤ 4 KB) | ${replyBytes(summary).toLocaleString('en')} B |`,
  );
  lines.push(
    `| 8,000 references: 64-row page reply (target ≤ 20 KB) | ${replyBytes(page).toLocaleString('en')} B |`,
  );
  lines.push(
    `| 8,000 references: launch reply with detail complete → summary + continuation | ${replyBytes(delivered).toLocaleString('en')} B (the complete result would be ${Number(delivered.complete_bytes).toLocaleString('en')} B) |`,
  );
  await sqlite.close();

  lines.push(
    '',
    '| backend | rows | retention | summary p50 | 64-row page p50 (offsets across the collection) | filtered page p50 (one owner) |',
  );
  lines.push('|---|---|---|---|---|---|');
  const sqliteStore = await openStore(path.join(dir, 'latency.db'));
  await measure(sqliteStore, 'SQLite', lines);
  await sqliteStore.close();
  rmSync(dir, { recursive: true, force: true });

  const postgres = await startPostgres(await freePort(), true);
  try {
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query('CREATE DATABASE bench');
    await admin.end();
    const pgStore = await openStore(postgres.url.replace(/\/postgres$/, '/bench'));
    await measure(pgStore, 'PostgreSQL', lines);
    await pgStore.close();
  } finally {
    await postgres.stop();
  }
  return lines;
}

// What the team knows of functions across its artifacts: each analysed
// function's identity (written when an artifact's analysis database is
// built), and the links a diff made from the functions of one build to those
// of another, through which annotations are offered forward.
import type { FunctionLink } from '../domain/types.ts';
import { CHUNK, insertMany, now, type Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';

export interface IndexedFunction {
  artifact: string;
  profile: string;
  address: string;
  identity: string;
  neighbourhood: string | null;
  name: string;
}

const toIndexed = (r: Row): IndexedFunction => ({
  artifact: r.artifact as string,
  profile: r.profile as string,
  address: r.address as string,
  identity: r.identity as string,
  neighbourhood: (r.neighbourhood as string | null) ?? null,
  name: r.name as string,
});

const toLink = (r: Row): FunctionLink & { created_at: string } => ({
  artifact: r.artifact as string,
  address: r.address as string,
  base: r.base as string,
  base_address: r.base_address as string,
  match_class: r.match_class as FunctionLink['match_class'],
  similarity: Number(r.similarity),
  confidence: Number(r.confidence),
  created_at: r.created_at as string,
});

export class FunctionIndexStore {
  constructor(private readonly db: SqlDriver) {}

  /** The identities of one artifact's functions under a profile, replacing what was recorded before. */
  async recordIdentities(
    team: string,
    artifact: string,
    profile: string,
    rows: Omit<IndexedFunction, 'artifact' | 'profile'>[],
  ) {
    const chunk = CHUNK[this.db.dialect];
    await this.db.transaction(async (tx) => {
      await tx.run('DELETE FROM function_identities WHERE team = ? AND artifact = ? AND profile = ?', [
        team,
        artifact,
        profile,
      ]);
      await insertMany(
        tx,
        'INSERT INTO function_identities (team, artifact, profile, address, identity, neighbourhood, name)',
        7,
        rows.map((r) => [team, artifact, profile, r.address, r.identity, r.neighbourhood, r.name]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
    });
  }

  /** The addresses of an artifact's functions the provider named `name` (any profile, each once). */
  async addressesNamed(team: string, artifact: string, name: string): Promise<string[]> {
    const rows = await this.db.all<{ address: string }>(
      'SELECT DISTINCT address FROM function_identities WHERE team = ? AND artifact = ? AND name = ? ORDER BY address LIMIT 16',
      [team, artifact, name],
    );
    return rows.map((r) => r.address);
  }

  /** The indexed function at an address of an artifact (any profile), if it was analysed. */
  async at(team: string, artifact: string, address: string): Promise<IndexedFunction | undefined> {
    const row = await this.db.get<Row>(
      'SELECT * FROM function_identities WHERE team = ? AND artifact = ? AND address = ? ORDER BY profile LIMIT 1',
      [team, artifact, address],
    );
    return row ? toIndexed(row) : undefined;
  }

  /** The team's functions with this identity, in any artifact (at most `limit`, and whether there are more). */
  async withIdentity(team: string, identity: string, limit: number) {
    const rows = await this.db.all<Row>(
      `SELECT * FROM function_identities WHERE team = ? AND identity = ?
        ORDER BY artifact, address, profile LIMIT ?`,
      [team, identity, limit + 1],
    );
    return { functions: rows.slice(0, limit).map(toIndexed), more: rows.length > limit };
  }

  /** Records a diff's matches (a later diff of the same pair replaces them). */
  recordLinks(team: string, links: FunctionLink[]) {
    return this.db.transaction((tx) => this.recordLinksIn(tx, team, links));
  }

  /** recordLinks within the caller's transaction (a bundle's import). */
  async recordLinksIn(tx: SqlExecutor, team: string, links: FunctionLink[]) {
    const at = now();
    await insertMany(
      tx,
      'INSERT INTO function_links (team, artifact, address, base, base_address, match_class, similarity, confidence, created_at)',
      9,
      links.map((l) => [
        team,
        l.artifact,
        l.address,
        l.base,
        l.base_address,
        l.match_class,
        l.similarity,
        l.confidence,
        at,
      ]),
      CHUNK[this.db.dialect],
      `ON CONFLICT (team, artifact, address, base) DO UPDATE SET base_address = excluded.base_address,
         match_class = excluded.match_class, similarity = excluded.similarity,
         confidence = excluded.confidence, created_at = excluded.created_at`,
    );
  }

  /** A page of an artifact's linked functions, in address order (as text), after `after`. */
  async linksPage(team: string, artifact: string, after: string, limit: number) {
    const rows = await this.db.all<Row>(
      `SELECT * FROM function_links WHERE team = ? AND artifact = ? AND address > ?
        ORDER BY address, base LIMIT ?`,
      [team, artifact, after, limit + 1],
    );
    // A page ends after a whole address: its links to every base are on the same page.
    const items = rows.slice(0, limit).map(toLink);
    const cut = rows.length > limit ? items.filter((l) => l.address !== rows[limit]!.address) : items;
    return { items: cut.length ? cut : items, more: rows.length > limit };
  }

  /** The links from these functions of an artifact to their matches in earlier builds, newest diff first. */
  async linksOf(team: string, artifact: string, addresses: string[]) {
    const out: (FunctionLink & { created_at: string })[] = [];
    const unique = [...new Set(addresses)];
    for (let i = 0; i < unique.length; i += 500) {
      const slice = unique.slice(i, i + 500);
      const rows = await this.db.all<Row>(
        `SELECT * FROM function_links WHERE team = ? AND artifact = ? AND address IN (${slice.map(() => '?').join(', ')})
          ORDER BY created_at DESC, base`,
        [team, artifact, ...slice],
      );
      out.push(...rows.map(toLink));
    }
    return out;
  }
}

// The analysis database of one artifact: the facts the provider recovered
// (sections, symbols, imports, exports, functions, call edges, strings and
// cross-references with their owning function), in a small indexed SQLite
// file that dossier writes itself from the provider's JSON lines and every
// later query reads in milliseconds. The provider never writes this file: it
// only answers on stdout, so nothing it parsed can reach dossier as a file.
import Database from 'better-sqlite3';

// 2: functions gained end_address, found_by and part_of (issue 36).
export const SCHEMA_VERSION = 2;

/** Columns of each table, in the order the provider sends them. */
export const TABLES = {
  sections: ['idx', 'name', 'address', 'size', 'flags', 'entropy', 'type'],
  symbols: [
    'idx',
    'name',
    'address',
    'size',
    'type',
    'binding',
    'section',
    'is_import',
    'is_export',
    'library',
    'version',
  ],
  imports: ['name', 'library', 'address', 'plt_address', 'version'],
  exports: ['name', 'address', 'type'],
  functions: [
    'address',
    'name',
    'named',
    'size',
    'blocks',
    'is_plt',
    'callers',
    'callees',
    'end_address',
    'found_by',
    'part_of',
  ],
  call_edges: ['src', 'dst', 'call_site'],
  strings: ['id', 'address', 'section', 'encoding', 'text', 'length'],
  xrefs: ['id', 'src', 'dst', 'kind', 'owner_outcome', 'owner_address', 'owner_name', 'string_id'],
  // What each function is, whatever its address (angr_identity.py says exactly what is hashed).
  function_identities: [
    'address',
    'identity',
    'neighbourhood',
    'block_hashes',
    'instructions',
    'edges',
    'constants',
  ],
} as const;
export type Table = keyof typeof TABLES;

const SCHEMA = `
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE sections(idx INTEGER, name TEXT, address INTEGER, size INTEGER, flags TEXT, entropy REAL, type TEXT);
CREATE TABLE symbols(idx INTEGER, name TEXT, address INTEGER, size INTEGER, type TEXT, binding TEXT,
                     section TEXT, is_import INTEGER, is_export INTEGER, library TEXT, version TEXT);
CREATE TABLE imports(name TEXT, library TEXT, address INTEGER, plt_address INTEGER, version TEXT);
CREATE TABLE exports(name TEXT, address INTEGER, type TEXT);
CREATE TABLE functions(address INTEGER PRIMARY KEY, name TEXT, named INTEGER, size INTEGER, blocks INTEGER,
                       is_plt INTEGER, callers INTEGER, callees INTEGER, end_address INTEGER, found_by TEXT,
                       part_of INTEGER);
CREATE TABLE call_edges(src INTEGER, dst INTEGER, call_site INTEGER);
CREATE TABLE strings(id INTEGER PRIMARY KEY, address INTEGER, section TEXT, encoding TEXT, text TEXT, length INTEGER);
CREATE TABLE xrefs(id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, kind TEXT, owner_outcome TEXT,
                   owner_address INTEGER, owner_name TEXT, string_id INTEGER);
CREATE TABLE function_identities(address INTEGER PRIMARY KEY, identity TEXT, neighbourhood TEXT, block_hashes TEXT,
                                 instructions INTEGER, edges INTEGER, constants TEXT);
`;
const INDEXES = `
CREATE INDEX symbols_name ON symbols(name);
CREATE INDEX symbols_address ON symbols(address);
CREATE INDEX functions_name ON functions(name);
CREATE INDEX call_edges_src ON call_edges(src);
CREATE INDEX call_edges_dst ON call_edges(dst);
CREATE INDEX strings_address ON strings(address);
CREATE INDEX xrefs_dst ON xrefs(dst);
CREATE INDEX xrefs_src ON xrefs(src);
CREATE INDEX xrefs_owner ON xrefs(owner_address);
CREATE INDEX xrefs_string ON xrefs(string_id);
CREATE INDEX function_identities_identity ON function_identities(identity);
`;

type Cell = string | number | null;

function isCell(v: unknown): v is Cell {
  return v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

/** Builds a database from the provider's lines; refuses anything that is not a row of a known table. */
export class DatabaseWriter {
  private readonly db: Database.Database;
  private readonly inserts = new Map<Table, Database.Statement>();
  readonly counts: Partial<Record<Table, number>> = {};
  meta: Record<string, unknown> | undefined;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = OFF');
    this.db.pragma('synchronous = OFF');
    this.db.exec(SCHEMA);
    for (const [table, columns] of Object.entries(TABLES) as [Table, readonly string[]][]) {
      this.inserts.set(
        table,
        this.db.prepare(
          `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
        ),
      );
    }
  }

  /** One batch of rows for `table`, in one transaction. */
  rows(table: string, rows: unknown): void {
    const insert = this.inserts.get(table as Table);
    const width = TABLES[table as Table]?.length;
    if (!insert || !Array.isArray(rows))
      throw new Error(`the provider sent rows for an unknown table "${table}"`);
    this.db.transaction(() => {
      for (const row of rows) {
        if (!Array.isArray(row) || row.length !== width || !row.every(isCell)) {
          throw new Error(`the provider sent a malformed ${table} row`);
        }
        insert.run(...row);
      }
    })();
    this.counts[table as Table] = (this.counts[table as Table] ?? 0) + rows.length;
  }

  /** The provider's closing facts, then the indexes; the file is complete after this. */
  finish(meta: Record<string, unknown>): void {
    this.meta = meta;
    const put = this.db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)');
    this.db.transaction(() => {
      for (const [key, value] of Object.entries(meta)) put.run(key, JSON.stringify(value));
      put.run('dossier_schema_version', JSON.stringify(SCHEMA_VERSION));
    })();
    this.db.exec(INDEXES);
  }

  close(): void {
    this.db.close();
  }
}

export interface FunctionRow {
  address: number;
  name: string;
  named: boolean;
  size: number;
  blocks: number;
  is_plt: boolean;
  callers: number;
  callees: number;
  /** Where the function's code ends (exclusive): its call-frame record's or symbol's extent, else its blocks'. */
  end_address: number;
  /** How it was found: the binary's symbols, its call-frame records (.eh_frame), the PLT, or angr's CFG alone. */
  found_by: 'symbol' | 'eh_frame' | 'plt' | 'cfg';
  /** For a split-off part (gcc's `.cold`), the function it belongs to. */
  part_of: number | null;
}

export interface IdentityRow {
  address: number;
  /** The WARP-style function GUID. */
  identity: string;
  /** UUIDv5 of its callees' and callers' identities. */
  neighbourhood: string;
  /** The first 12 hex digits of each block's GUID, space-separated (highest address first). */
  block_hashes: string;
  instructions: number;
  edges: number;
  /** Distinctive immediates, hex, space-separated. */
  constants: string;
}

export interface XrefRow {
  id: number;
  src: number;
  dst: number;
  kind: string;
  owner_outcome: 'found' | 'not_found' | 'unavailable';
  owner_address: number | null;
  owner_name: string | null;
  string_id: number | null;
}

export interface StringRow {
  id: number;
  address: number;
  section: string;
  encoding: string;
  text: string;
  length: number;
}

/** The columns SQLite keeps as 0/1 that rows carry as true/false (a `where` filter asks for booleans). */
const FLAGS = ['named', 'is_plt', 'is_import', 'is_export'];

function withFlags<T>(row: T): T {
  const out = { ...(row as Record<string, unknown>) };
  for (const flag of FLAGS) if (typeof out[flag] === 'number') out[flag] = out[flag] !== 0;
  return out as T;
}

/** Read-only queries over one analysis database. */
export class AnalysisDatabase {
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(file: string) {
    this.db = new Database(file, { readonly: true, fileMustExist: true });
  }

  private all<T>(sql: string, ...params: unknown[]): T[] {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    const rows = s.all(...params) as T[];
    // Only tables with a flag column pay for the copy.
    return rows.length && FLAGS.some((f) => f in (rows[0] as object)) ? rows.map(withFlags) : rows;
  }

  meta(): Record<string, unknown> {
    return Object.fromEntries(
      this.all<{ key: string; value: string }>('SELECT key, value FROM meta').map((r) => [
        r.key,
        JSON.parse(r.value),
      ]),
    );
  }

  table<T = Record<string, unknown>>(table: 'sections' | 'symbols' | 'imports' | 'exports'): T[] {
    return this.all<T>(`SELECT * FROM ${table} ORDER BY rowid`);
  }

  functions(): FunctionRow[] {
    return this.all<FunctionRow>('SELECT * FROM functions ORDER BY address');
  }

  /** One page of functions in address order (completion reads them a bounded page at a time). */
  functionsPage(offset: number, limit: number): { address: number; name: string }[] {
    return this.all('SELECT address, name FROM functions ORDER BY address LIMIT ? OFFSET ?', limit, offset);
  }

  functionAt(address: number): FunctionRow | undefined {
    return this.all<FunctionRow>('SELECT * FROM functions WHERE address = ?', address)[0];
  }

  functionsNamed(name: string): FunctionRow[] {
    return this.all<FunctionRow>('SELECT * FROM functions WHERE name = ? ORDER BY address', name);
  }

  /** Strings with how many references point into each. */
  strings(): (StringRow & { references: number })[] {
    return this.all(
      `SELECT s.*, (SELECT COUNT(*) FROM xrefs x WHERE x.string_id = s.id) AS references_count
         FROM strings s ORDER BY s.id`,
    ).map((r) => {
      const { references_count, ...row } = r as StringRow & { references_count: number };
      return { ...row, references: references_count };
    });
  }

  stringAt(address: number): StringRow | undefined {
    return this.all<StringRow>(
      'SELECT * FROM strings WHERE address <= ? ORDER BY address DESC LIMIT 1',
      address,
    ).find((s) => address < s.address + s.length * (s.encoding === 'utf-16le' ? 2 : 1));
  }

  symbolsNamed(name: string): { name: string; address: number | null; type: string; is_import: boolean }[] {
    return this.all('SELECT name, address, type, is_import FROM symbols WHERE name = ? ORDER BY idx', name);
  }

  /** References into a string (any address inside it), in source order. */
  referencesToString(stringId: number): XrefRow[] {
    return this.all<XrefRow>('SELECT * FROM xrefs WHERE string_id = ? ORDER BY src, id', stringId);
  }

  /** References to an exact address (calls to a function, data reads of a symbol). */
  referencesTo(address: number): XrefRow[] {
    return this.all<XrefRow>('SELECT * FROM xrefs WHERE dst = ? ORDER BY src, id', address);
  }

  /** Every function's identity and the facts a diff compares (none from a database built before them). */
  identities(): IdentityRow[] {
    if (!this.hasTable('function_identities')) return [];
    return this.all<IdentityRow>('SELECT * FROM function_identities ORDER BY address');
  }

  /** Functions that own references to each string: (string, owner) pairs, in string then owner order. */
  stringOwners(): { string_id: number; address: number; name: string | null }[] {
    return this.all(
      `SELECT string_id, owner_address AS address, MIN(owner_name) AS name FROM xrefs
        WHERE string_id IS NOT NULL AND owner_address IS NOT NULL
        GROUP BY string_id, owner_address ORDER BY string_id, owner_address`,
    );
  }

  /** The text of every string each function references (owner, text), once each. */
  functionStrings(): { address: number; text: string }[] {
    return this.all(
      `SELECT DISTINCT x.owner_address AS address, s.text FROM xrefs x JOIN strings s ON s.id = x.string_id
        WHERE x.owner_address IS NOT NULL`,
    );
  }

  /** Every call edge (src, dst), once each. */
  callEdges(): { src: number; dst: number }[] {
    return this.all('SELECT DISTINCT src, dst FROM call_edges ORDER BY src, dst');
  }

  private hasTable(name: string): boolean {
    return this.all('SELECT name FROM sqlite_master WHERE type = ? AND name = ?', 'table', name).length > 0;
  }

  callees(address: number): { src: number; dst: number; call_site: number | null }[] {
    return this.all('SELECT * FROM call_edges WHERE src = ? ORDER BY dst, call_site', address);
  }

  callers(address: number): { src: number; dst: number; call_site: number | null }[] {
    return this.all('SELECT * FROM call_edges WHERE dst = ? ORDER BY src, call_site', address);
  }

  close(): void {
    this.db.close();
  }
}

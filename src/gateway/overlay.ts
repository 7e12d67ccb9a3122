// The team's names on the analysis answers it reads. The retained Evidence
// keeps the provider's names (a cached answer stays valid, and every team
// shares none of another's knowledge); each reply that shows a function's
// name shows the team's instead, and says so: the row's `annotated` names
// each field it changed with the annotation's revision, author, the
// provider's name and, for a name carried from an earlier build, its source.
import type { EvidenceRecord } from '../domain/types.ts';
import type { Store } from '../store/store.ts';
import { effectiveAnnotations, suggestedAnnotations, type Effective, type Suggestion } from './carried.ts';

type Row = Record<string, unknown>;
type Stores = Pick<Store, 'annotations' | 'functions' | 'evidence'>;

/** A name field of a row and the address field that says which function it names. */
interface NameRef {
  name: string;
  address: string;
  /** Whose function: the Evidence's artifact (default) or a diff's base. */
  of?: 'base';
  /** The field is inside each element of this list field. */
  list?: string;
  when?: (row: Row) => boolean;
}

const NAMES: Record<string, Record<string, NameRef[]>> = {
  list_functions: { functions: [{ name: 'name', address: 'address' }] },
  get_call_graph: {
    edges: [
      { name: 'src_name', address: 'src' },
      { name: 'dst_name', address: 'dst' },
    ],
    nodes: [{ name: 'name', address: 'address' }],
  },
  trace_feature: {
    references: [{ name: 'owner.procedure_name', address: 'owner.procedure_address' }],
    matches: [{ name: 'name', address: 'address', when: (r) => r.type === 'function' }],
  },
  find_strings: { strings: [{ name: 'name', address: 'address', list: 'referenced_by' }] },
  diff_binaries: {
    matches: [
      { name: 'name', address: 'address' },
      { name: 'base_name', address: 'base_address', of: 'base' },
    ],
    added: [{ name: 'name', address: 'address' }],
    removed: [{ name: 'base_name', address: 'base_address', of: 'base' }],
  },
};

/** The summary and document fields that name a function, per tool. */
const HEADS: Record<string, NameRef[]> = {
  get_call_graph: [{ name: 'function', address: 'address' }],
  decompile_function: [{ name: 'function', address: 'address' }],
};

const get = (row: Row, path: string): unknown =>
  path.split('.').reduce<unknown>((v, k) => (v as Row | null | undefined)?.[k], row);

function set(row: Row, path: string, value: unknown): void {
  const keys = path.split('.');
  const last = keys.pop()!;
  let at = row;
  for (const k of keys) at = at[k] = { ...(at[k] as Row) };
  at[last] = value;
}

export function marker(e: Effective, providerName: unknown) {
  return {
    revision: e.annotation.revision,
    by: e.annotation.updated_by,
    at: e.annotation.updated_at,
    provider_name: providerName ?? null,
    ...(e.propagated_from ? { propagated_from: e.propagated_from } : {}),
  };
}

const isOverlaid = (tool: string) => tool in NAMES || tool in HEADS;

export class Overlay {
  constructor(private readonly stores: Stores) {}

  /** Effective annotations for every address these rows name, per artifact. */
  private async lookup(team: string, record: EvidenceRecord, refs: NameRef[], rows: Row[]) {
    const wanted = new Map<string, Set<string>>();
    for (const ref of refs) {
      const artifact = this.artifactOf(record, ref);
      const set = wanted.get(artifact) ?? wanted.set(artifact, new Set()).get(artifact)!;
      for (const row of rows)
        for (const item of this.items(row, ref)) {
          const address = get(item, ref.address);
          if (typeof address === 'string') set.add(address);
        }
    }
    const found = new Map<string, Map<string, Effective>>();
    for (const [artifact, addresses] of wanted)
      found.set(artifact, await effectiveAnnotations(this.stores, team, artifact, [...addresses]));
    return found;
  }

  private artifactOf(record: EvidenceRecord, ref: NameRef): string {
    return ref.of === 'base' ? String((record.parameters as Row).base) : artifactOf(record);
  }

  private items(row: Row, ref: NameRef): Row[] {
    if (ref.when && !ref.when(row)) return [];
    if (!ref.list) return [row];
    const list = row[ref.list];
    return Array.isArray(list) ? (list as Row[]) : [];
  }

  /** The rows of one collection with the team's names; rows that name nothing annotated come back as they were. */
  async rows(team: string, record: EvidenceRecord, collection: string, rows: Row[]): Promise<Row[]> {
    if (record.tool === 'decompile_function' && collection === 'lines') return this.lines(team, record, rows);
    const byCollection = Object.hasOwn(NAMES, record.tool) ? NAMES[record.tool] : undefined;
    const refs =
      byCollection && Object.hasOwn(byCollection, collection) ? byCollection[collection] : undefined;
    if (!refs || !rows.length || !record.target?.digest) return rows;
    const found = await this.lookup(team, record, refs, rows);
    const suggestions =
      record.tool === 'diff_binaries' && collection === 'matches'
        ? await suggestedAnnotations(
            this.stores,
            team,
            artifactOf(record),
            rows.map((r) => String(r.address)),
          )
        : new Map<string, Suggestion[]>();
    return rows.map((original) => {
      let row = original;
      const annotated: Row = {};
      for (const ref of refs) {
        const byAddress = found.get(this.artifactOf(record, ref));
        const items = this.items(row, ref);
        items.forEach((item, i) => {
          const e = byAddress?.get(String(get(item, ref.address)));
          if (!e?.annotation.name) return;
          const path = ref.list ? `${ref.list}.${i}.${ref.name}` : ref.name;
          if (row === original) row = structuredClone(original);
          annotated[path] = marker(e, get(item, ref.name));
          if (ref.list) (row[ref.list] as Row[])[i]![ref.name] = e.annotation.name;
          else set(row, ref.name, e.annotation.name);
        });
      }
      if (record.tool === 'list_functions') {
        const e = found.get(artifactOf(record))?.get(String(row.address));
        const shown = e ? details(e) : {};
        row = { ...row, ...shown };
        // The comment, prototype and tags are the team's too, at the same revision.
        for (const field of Object.keys(shown)) annotated[field] = marker(e!, null);
      }
      const offered = suggestions.get(String(row.address));
      if (offered?.length)
        row = { ...row, suggested: offered.map((s) => ({ name: s.annotation.name, from: s.from })) };
      return Object.keys(annotated).length ? { ...row, annotated } : row;
    });
  }

  /** Pseudo-C lines with the team's function names and, inside the function, its variable names. */
  private async lines(team: string, record: EvidenceRecord, rows: Row[]): Promise<Row[]> {
    const renames = await this.renames(team, record);
    if (!renames.size) return rows;
    const pattern = new RegExp(`\\b(${[...renames.keys()].map(escape).join('|')})\\b`, 'g');
    return rows.map((row) => {
      const text = String(row.text ?? '');
      const used = new Set<string>();
      const next = text.replace(pattern, (token) => (used.add(token), renames.get(token)!.to));
      if (next === text) return row;
      return {
        ...row,
        text: next,
        annotated: { text: { provider_text: text, renames: [...used].map((t) => renames.get(t)!) } },
      };
    });
  }

  /** Provider name → the team's name, for the functions a decompiled text names and its own variables. */
  private async renames(team: string, record: EvidenceRecord) {
    const doc = (await this.stores.evidence.document(team, record.evidence_id)) ?? {};
    const names = (Array.isArray(doc.names) ? doc.names : []) as { name: string; address: string }[];
    const self = String(doc.address ?? '');
    const found = await effectiveAnnotations(this.stores, team, artifactOf(record), [
      ...names.map((n) => n.address),
      self,
    ]);
    const out = new Map<string, Row & { to: string }>();
    for (const n of names) {
      const e = found.get(n.address);
      if (e?.annotation.name && e.annotation.name !== n.name)
        out.set(n.name, { from: n.name, to: e.annotation.name, address: n.address, ...marker(e, n.name) });
    }
    const own = found.get(self);
    for (const [from, to] of Object.entries(own?.annotation.variables ?? {}))
      out.set(from, { from, to, variable_of: self, ...marker(own!, from) });
    return out;
  }

  /** A summary or document with the team's name for the function it is about. */
  async head(
    team: string,
    record: EvidenceRecord,
    head: Row | undefined,
    documentToo = false,
  ): Promise<Row | undefined> {
    const refs = HEADS[record.tool];
    if (!head || !refs) return head;
    const found = await this.lookup(team, record, refs, [head]);
    const e = found.get(artifactOf(record))?.get(String(head.address));
    if (!e?.annotation.name) return head;
    const renamed: Row = {
      ...head,
      function: e.annotation.name,
      annotated: { function: marker(e, head.function) },
    };
    if (typeof head.head === 'string') {
      const renames = await this.renames(team, record);
      renamed.head = head.head.replace(/[A-Za-z_][A-Za-z0-9_]*/g, (t) => renames.get(t)?.to ?? t);
    }
    return documentToo ? { ...renamed, ...details(e) } : renamed;
  }

  static applies(record: EvidenceRecord): boolean {
    return isOverlaid(record.tool);
  }
}

/** What a function row shows of its annotation besides the name. */
function details(e: Effective): Row {
  const a = e.annotation;
  return {
    ...(a.comment !== null ? { comment: a.comment } : {}),
    ...(a.type !== null ? { prototype: a.type } : {}),
    ...(a.tags.length ? { tags: a.tags } : {}),
  };
}

const artifactOf = (record: EvidenceRecord) => String(record.target?.digest);

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// Matching the functions of two builds (the base, an earlier version, and the
// artifact, a later one) from their analysis databases, as BinDiff does it:
// first what is certain (the same symbol; the same identity, unique on both
// sides, or made unique by its call-graph neighbourhood), then structure from
// what is matched already (the callers' and callees' unmatched neighbours),
// then structure across the rest (shared blocks, strings, constants). What
// stays unmatched was removed (base) or added (artifact). Pure: reads two
// databases, returns rows.
import type { AnalysisDatabase } from './database.ts';

export const DIFF_ALGORITHM = {
  version: 1,
  /** A structural match needs at least this similarity... */
  threshold: 0.5,
  /** ...and a shape at least this close when only call-graph position speaks for it. */
  shapeOnlyCalls: 0.75,
  weights: { blocks: 3, strings: 2, constants: 2, calls: 2, shape: 1 },
  /** Blocks that this many functions share say nothing (epilogues, stubs). */
  commonBlock: 50,
  /** Candidates scored per function in the global pass. */
  candidates: 200,
};

export type MatchMethod = 'symbol' | 'identity' | 'identity+neighbourhood' | 'call_graph' | 'structure';

export interface Fn {
  address: number;
  name: string;
  named: boolean;
  size: number;
  blocks: number;
  identity: string | null;
  neighbourhood: string | null;
  blockHashes: string[];
  instructions: number;
  edges: number;
  constants: Set<string>;
  strings: Set<string>;
  callees: Set<number>;
  callers: Set<number>;
}

export interface Match {
  base: Fn;
  fn: Fn;
  method: MatchMethod;
  similarity: number;
  confidence: number;
}

function load(db: AnalysisDatabase): Map<number, Fn> {
  const identities = new Map(db.identities().map((i) => [i.address, i]));
  const fns = new Map<number, Fn>();
  for (const f of db.functions()) {
    const id = identities.get(f.address);
    fns.set(f.address, {
      address: f.address,
      name: f.name,
      named: f.named && !/^sub_[0-9a-f]+$/.test(f.name),
      size: f.size,
      blocks: f.blocks,
      identity: id?.identity ?? null,
      neighbourhood: id?.neighbourhood ?? null,
      blockHashes: id?.block_hashes ? id.block_hashes.split(' ') : [],
      instructions: id?.instructions ?? 0,
      edges: id?.edges ?? 0,
      constants: new Set(id?.constants ? id.constants.split(' ') : []),
      strings: new Set(),
      callees: new Set(),
      callers: new Set(),
    });
  }
  for (const { address, text } of db.functionStrings()) fns.get(address)?.strings.add(text);
  for (const { src, dst } of db.callEdges()) {
    const from = fns.get(src);
    const to = fns.get(dst);
    if (from && to) {
      from.callees.add(dst);
      to.callers.add(src);
    }
  }
  return fns;
}

const jaccard = (a: Set<string>, b: Set<string>) => {
  let shared = 0;
  for (const x of a) if (b.has(x)) shared++;
  return { shared, value: a.size + b.size ? shared / (a.size + b.size - shared) : 0 };
};

function multisetJaccard(a: string[], b: string[]) {
  const counts = new Map<string, number>();
  for (const h of a) counts.set(h, (counts.get(h) ?? 0) + 1);
  let shared = 0;
  for (const h of b) {
    const n = counts.get(h) ?? 0;
    if (n > 0) {
      shared++;
      counts.set(h, n - 1);
    }
  }
  const union = a.length + b.length - shared;
  return { shared, value: union ? shared / union : 0 };
}

const ratio = (x: number, y: number) => (Math.max(x, y) === 0 ? 1 : Math.min(x, y) / Math.max(x, y));

export class Differ {
  readonly base: Map<number, Fn>;
  readonly target: Map<number, Fn>;
  /** base address → match; target address → base address. */
  readonly byBase = new Map<number, Match>();
  readonly byTarget = new Map<number, number>();

  constructor(base: AnalysisDatabase, target: AnalysisDatabase) {
    this.base = load(base);
    this.target = load(target);
  }

  /** Similarity of a base and an artifact function, and whether anything beyond shape speaks for it. */
  score(a: Fn, b: Fn): { similarity: number; evidence: boolean } {
    const w = DIFF_ALGORITHM.weights;
    if (a.identity && a.identity === b.identity) return { similarity: 1, evidence: true };
    const shape =
      (ratio(a.blocks, b.blocks) + ratio(a.edges, b.edges) + ratio(a.instructions, b.instructions)) / 3;
    let sum = w.shape * shape;
    let weights = w.shape;
    const blocks = multisetJaccard(a.blockHashes, b.blockHashes);
    if (a.blockHashes.length + b.blockHashes.length) {
      sum += w.blocks * blocks.value;
      weights += w.blocks;
    }
    const strings = jaccard(a.strings, b.strings);
    if (a.strings.size + b.strings.size) {
      sum += w.strings * strings.value;
      weights += w.strings;
    }
    const constants = jaccard(a.constants, b.constants);
    if (a.constants.size + b.constants.size) {
      sum += w.constants * constants.value;
      weights += w.constants;
    }
    const neighbours = a.callees.size + a.callers.size + b.callees.size + b.callers.size;
    let agree = 0;
    for (const c of a.callees) if (b.callees.has(this.byBase.get(c)?.fn.address ?? -1)) agree++;
    for (const c of a.callers) if (b.callers.has(this.byBase.get(c)?.fn.address ?? -1)) agree++;
    if (neighbours) {
      sum += w.calls * ((2 * agree) / neighbours);
      weights += w.calls;
    }
    const content = blocks.shared > 0 || strings.shared > 0 || constants.shared > 0;
    const position = agree > 0 && shape >= DIFF_ALGORITHM.shapeOnlyCalls;
    return { similarity: sum / weights, evidence: content || position };
  }

  private assign(a: Fn, b: Fn, method: MatchMethod, similarity: number, confidence: number) {
    const m = { base: a, fn: b, method, similarity, confidence };
    this.byBase.set(a.address, m);
    this.byTarget.set(b.address, a.address);
    return m;
  }

  private unmatched(side: 'base' | 'target'): Fn[] {
    const all = side === 'base' ? this.base : this.target;
    const taken = side === 'base' ? this.byBase : this.byTarget;
    return [...all.values()].filter((f) => !taken.has(f.address));
  }

  /** Pairs whose key is unique on both sides among the unmatched. */
  private uniquePairs(key: (f: Fn) => string | null, method: MatchMethod, confidence: number) {
    const group = (fns: Fn[]) => {
      const by = new Map<string, Fn[]>();
      for (const f of fns) {
        const k = key(f);
        const list = k === null ? undefined : by.get(k);
        if (list) list.push(f);
        else if (k !== null) by.set(k, [f]);
      }
      return by;
    };
    const a = group(this.unmatched('base'));
    const b = group(this.unmatched('target'));
    for (const [k, [x, ...xs]] of a) {
      const ys = b.get(k);
      if (x && !xs.length && ys?.length === 1) {
        const y = ys[0]!;
        this.assign(x, y, method, this.score(x, y).similarity, confidence);
      }
    }
  }

  /** Among candidate pairs, those that are each other's best, above the threshold; returns the new matches. */
  private mutualBest(pairs: [Fn, Fn][], method: MatchMethod): Match[] {
    const bestA = new Map<number, { b: Fn; s: number; second: number }>();
    const bestB = new Map<number, { a: Fn; s: number; second: number }>();
    const scored: [Fn, Fn, number][] = [];
    for (const [a, b] of pairs) {
      const { similarity, evidence } = this.score(a, b);
      if (!evidence) continue;
      scored.push([a, b, similarity]);
      const ca = bestA.get(a.address);
      if (!ca || similarity > ca.s) bestA.set(a.address, { b, s: similarity, second: ca?.s ?? 0 });
      else if (similarity > ca.second) ca.second = similarity;
      const cb = bestB.get(b.address);
      if (!cb || similarity > cb.s) bestB.set(b.address, { a, s: similarity, second: cb?.s ?? 0 });
      else if (similarity > cb.second) cb.second = similarity;
    }
    const made: Match[] = [];
    for (const [a, b, s] of scored) {
      const ba = bestA.get(a.address)!;
      const bb = bestB.get(b.address)!;
      if (s < DIFF_ALGORITHM.threshold || ba.b !== b || bb.a !== a || s === ba.second || s === bb.second)
        continue;
      if (this.byBase.has(a.address) || this.byTarget.has(b.address)) continue;
      const margin = (s - Math.max(ba.second, bb.second)) / s;
      made.push(this.assign(a, b, method, s, s * (0.5 + 0.5 * margin)));
    }
    return made;
  }

  /** From matched pairs outward: the unmatched callees (callers) of a pair are candidates for each other. */
  private propagate(from: Match[]) {
    const queue = [...from];
    while (queue.length) {
      const { base: a, fn: b } = queue.pop()!;
      for (const dir of ['callees', 'callers'] as const) {
        const xs = [...a[dir]].filter((x) => !this.byBase.has(x)).slice(0, 64);
        const ys = [...b[dir]].filter((y) => !this.byTarget.has(y)).slice(0, 64);
        if (!xs.length || !ys.length) continue;
        const pairs: [Fn, Fn][] = [];
        for (const x of xs) for (const y of ys) pairs.push([this.base.get(x)!, this.target.get(y)!]);
        queue.push(...this.mutualBest(pairs, 'call_graph'));
      }
    }
  }

  /** The rest against the rest, through what they share (blocks, strings, constants, identity). */
  private global(): Match[] {
    const index = new Map<string, Fn[]>();
    const features = (f: Fn) => [
      ...(f.identity ? [`i:${f.identity}`] : []),
      ...f.blockHashes.map((h) => `b:${h}`),
      ...[...f.strings].map((s) => `s:${s}`),
      ...[...f.constants].map((c) => `c:${c}`),
    ];
    for (const b of this.unmatched('target'))
      for (const k of new Set(features(b))) {
        const list = index.get(k);
        if (list) list.push(b);
        else index.set(k, [b]);
      }
    const pairs: [Fn, Fn][] = [];
    for (const a of this.unmatched('base')) {
      const candidates = new Set<Fn>();
      for (const k of new Set(features(a))) {
        const hits = index.get(k) ?? [];
        if (hits.length > DIFF_ALGORITHM.commonBlock) continue;
        for (const b of hits) if (candidates.size < DIFF_ALGORITHM.candidates) candidates.add(b);
      }
      for (const b of candidates) pairs.push([a, b]);
    }
    return this.mutualBest(pairs, 'structure');
  }

  run(): { matches: Match[]; added: Fn[]; removed: Fn[] } {
    this.uniquePairs((f) => (f.named ? f.name : null), 'symbol', 1);
    this.uniquePairs((f) => f.identity, 'identity', 1);
    this.uniquePairs(
      (f) => (f.identity ? `${f.identity} ${f.neighbourhood}` : null),
      'identity+neighbourhood',
      0.9,
    );
    this.propagate([...this.byBase.values()]);
    for (let round = 0; round < 4; round++) {
      const made = this.global();
      if (!made.length) break;
      this.propagate(made);
    }
    const matches = [...this.byBase.values()].sort((x, y) => x.fn.address - y.fn.address);
    return { matches, added: this.unmatched('target'), removed: this.unmatched('base') };
  }
}

/** Identical: the same identity on both sides; anything else matched is changed. */
export const matchClass = (m: Match): 'identical' | 'changed' =>
  m.base.identity !== null && m.base.identity === m.fn.identity ? 'identical' : 'changed';

// Function boundaries scored against the compiler's truth (issue 36): the
// unstripped copy's FUNC symbols (readelf) against a function list recovered
// from the stripped copy. Shared by tests/e2e/analysis.test.ts and
// bench/boundaries.ts.
import { execFileSync } from 'node:child_process';
import path from 'node:path';

export interface Truth {
  /** Even start (link address) -> exclusive end and a name, for every defined FUNC symbol with a size. */
  functions: Map<number, { end: number; name: string }>;
  /** Starts of FUNC symbols without a size (crt's _init, frame_dummy...): no truth to score, left out of both sides. */
  sizeless: Set<number>;
  /** The PLT sections, whose stubs are not functions of the program (left out of both sides). */
  plt: [number, number][];
  arm: boolean;
}

const num = (s: string) => (s.startsWith('0x') ? Number.parseInt(s, 16) : Number(s));
/** The address without ARM's Thumb bit (no 32-bit bitwise operators: addresses may exceed 2^31). */
const even = (a: number, arm: boolean) => (arm ? a - (a % 2) : a);

/** The FUNC symbols of an unstripped ELF, deduplicated by address (aliases), as readelf prints them. */
export function groundTruth(unstripped: string): Truth {
  const out = execFileSync('readelf', ['-W', '-h', '-S', '-s', unstripped], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  const arm = /Machine:\s+ARM$/m.test(out);
  const functions = new Map<number, { end: number; name: string }>();
  const sizeless = new Set<number>();
  const plt: [number, number][] = [];
  for (const line of out.split('\n')) {
    const sec = /^\s*\[\s*\d+\]\s+(\.plt\S*)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)/.exec(line);
    if (sec) {
      const start = Number.parseInt(sec[2]!, 16);
      plt.push([start, start + Number.parseInt(sec[3]!, 16)]);
      continue;
    }
    // Num: Value Size Type Bind Vis Ndx Name
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || !/^\d+:$/.test(f[0]!) || f[3] !== 'FUNC' || f[6] === 'UND') continue;
    const start = even(Number.parseInt(f[1]!, 16), arm);
    const size = num(f[2]!);
    if (size === 0) sizeless.add(start);
    else if (!functions.has(start)) functions.set(start, { end: start + size, name: f[7]!.split('@')[0]! });
  }
  for (const a of functions.keys()) sizeless.delete(a);
  return { functions, sizeless, plt, arm };
}

export interface Predicted {
  /** As the provider writes it: load address, Thumb bit set on ARM Thumb code. */
  address: number;
  /** Exclusive end, load address. */
  end: number;
  /** For a split-off part, the load address of the function it belongs to. */
  partOf?: number | null;
}

export interface Figures {
  precision: number;
  recall: number;
  f1: number;
}

export interface Score {
  truth: number;
  predicted: number;
  starts: Figures;
  extents: Figures;
  /** The compiler's split-off parts (`foo.cold`) found, and how many name their function (`foo`) in part_of. */
  parts: { truth: number; attached: number };
  /** Up to 20 of each kind of error, by link address, for reading. */
  missed: string[];
  spurious: string[];
}

function figures(hits: number, predicted: number, truth: number): Figures {
  const precision = predicted ? hits / predicted : 0;
  const recall = truth ? hits / truth : 0;
  return { precision, recall, f1: precision + recall ? (2 * precision * recall) / (precision + recall) : 0 };
}

/**
 * Precision, recall and F1 of function starts, and of extents (start and end both right).
 * `delta` is the load address minus the link address (angr maps a PIE at 0x400000).
 */
export function scoreFunctions(truth: Truth, predicted: Predicted[], delta: number): Score {
  const inPlt = (a: number) => truth.plt.some(([lo, hi]) => lo <= a && a < hi);
  const pred = new Map<number, number>();
  const partOf = new Map<number, number>();
  for (const p of predicted) {
    const start = even(p.address - delta, truth.arm);
    if (truth.sizeless.has(start) || inPlt(start)) continue;
    pred.set(start, even(p.end - delta, truth.arm));
    if (p.partOf != null) partOf.set(start, even(p.partOf - delta, truth.arm));
  }
  const byName = new Map([...truth.functions].map(([a, t]) => [t.name, a]));
  const parts = { truth: 0, attached: 0 };
  for (const [a, t] of truth.functions) {
    const m = /^(.+)\.cold(\.\d+)?$/.exec(t.name);
    if (!m) continue;
    parts.truth++;
    if (partOf.get(a) === byName.get(m[1]!)) parts.attached++;
  }
  let starts = 0;
  let extents = 0;
  const spurious: string[] = [];
  for (const [start, end] of pred) {
    const t = truth.functions.get(start);
    if (!t) {
      if (spurious.length < 20) spurious.push(`0x${start.toString(16)}`);
      continue;
    }
    starts++;
    if (t.end === end) extents++;
  }
  const missed = [...truth.functions]
    .filter(([a]) => !pred.has(a))
    .slice(0, 20)
    .map(([a, t]) => `0x${a.toString(16)} ${t.name}`);
  return {
    truth: truth.functions.size,
    predicted: pred.size,
    starts: figures(starts, pred.size, truth.functions.size),
    extents: figures(extents, pred.size, truth.functions.size),
    parts,
    missed,
    spurious,
  };
}

export const CPU_FEATURES = path.resolve(
  import.meta.dirname,
  '../../node_modules/cpu-features/deps/cpu_features',
);

/** list_cpu_features for one architecture: Google's cpu_features, as the npm package cpu-features ships it. */
export function cpuFeaturesArgs(arch: 'x86-64' | 'aarch64' | 'armhf'): string[] {
  const d = CPU_FEATURES;
  const impl = { 'x86-64': 'x86', aarch64: 'aarch64', armhf: 'arm' }[arch];
  return [
    `-I${d}/include`,
    `-I${d}/include/internal`,
    '-DSTACK_LINE_READER_BUFFER_SIZE=1024',
    '-DNDEBUG',
    '-DHAVE_STRONG_GETAUXVAL',
    ...['utils/list_cpu_features.c', 'filesystem.c', 'stack_line_reader.c', 'string_view.c', 'hwcaps.c'].map(
      (f) => `${d}/src/${f}`,
    ),
    `${d}/src/impl_${impl}_linux_or_android.c`,
  ];
}

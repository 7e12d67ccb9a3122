// scan_with_rules: a registered YARA bundle over a registered artifact or over
// every written file of an extraction, with YARA-X in the sandbox. Every input
// is verified: the bundle and an artifact by their digests before the scan, an
// extraction's files (only inside the team's own extraction folder) against
// its manifest's sha256 by the scanner, which hashes the very bytes it scans
// and refuses a file gone or no longer a regular file, so each file is opened
// and read once and no answer is kept about other bytes. The
// scanner sees them read-only, reads their listing on stdin (listed before it
// starts: waiting for it would spend the scan's timeout_s) and answers on
// stdout, one JSON object a line.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import type { Config } from '../../config.ts';
import { artifactNotFound, DossierError } from '../../domain/errors.ts';
import { outputFolder, verifyArtifact } from '../../evidence/artifacts.ts';
import { rulesEnv } from '../../python/rules.ts';
import { isUnder } from '../../sandbox/paths.ts';
import { sandboxedEnv, type PythonEnv } from '../../python/venv.ts';
import { streamHelper } from '../../sandbox/helpers.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import type { Store } from '../../store/store.ts';
import type { QueryResult } from '../../analysis/queries.ts';
import { RULES_LIMITS } from '../../tools/rules.ts';

export interface ScanInput {
  rules: string;
  artifact?: string;
  evidence_id?: string;
  timeout_s: number;
  max_matches: number;
  max_match_bytes: number;
}

export interface ScanContext {
  team: string;
  store: Store;
  config: Config;
  sandbox: Sandbox;
}

interface Target {
  path: string;
  file: string;
  sha256: string;
  size: number;
}

/** The folder of a team's extraction, which the scanner sees read-only. */
async function extractionRoot(ctx: ScanContext, evidenceId: string): Promise<string> {
  const record = await ctx.store.evidence.get(ctx.team, evidenceId);
  const named = record?.summary?.output;
  if (!record || !['extract_artifact', 'extract_firmware'].includes(record.tool) || typeof named !== 'string')
    throw new DossierError(
      'invalid_params',
      `Evidence ${evidenceId} is not a succeeded extraction of your team.`,
      'Pass the evidence_id of a succeeded extract_artifact or extract_firmware launch, or an artifact.',
      { evidence_id: evidenceId },
    );
  const output = outputFolder(ctx.config.home, named);
  if (!isUnder(output, path.join(ctx.config.home, 'extractions', ctx.team)))
    throw new DossierError(
      'invalid_params',
      `Evidence ${evidenceId} names an output outside your team's extractions.`,
      'Scan an extraction made on this cluster.',
      { evidence_id: evidenceId },
    );
  return output;
}

/**
 * Every written file of a team's extraction. Whether each is still there, and still holds the bytes
 * its manifest names, the scanner finds where it opens and hashes it (checkFiles).
 */
async function extractionTargets(ctx: ScanContext, evidenceId: string, output: string): Promise<Target[]> {
  const isFolder = await stat(output).then(
    (st) => st.isDirectory(),
    () => false,
  );
  if (!isFolder) throw noLongerHere(evidenceId);
  const rows = (await ctx.store.evidence.allRows(evidenceId, 'entries')) as {
    path: string;
    type: string;
    status: string;
    sha256: string | null;
    size: number | null;
  }[];
  const targets: Target[] = [];
  for (const row of rows) {
    if (row.type !== 'file' || row.status !== 'written' || !row.sha256) continue;
    const parts = row.path.split('/').filter((p) => p !== '' && p !== '.');
    if (parts.includes('..')) continue;
    targets.push({
      path: row.path,
      file: path.posix.join('/input/tree', ...parts),
      sha256: row.sha256,
      size: row.size ?? 0,
    });
  }
  return targets;
}

/** An extraction's file (or all of its output) gone from this worker's folder. */
function noLongerHere(evidenceId: string, entry?: string): DossierError {
  return new DossierError(
    'not_found',
    `${entry ?? 'The output'} of ${evidenceId} is no longer on this worker.`,
    'Extract the archive again (with a new idempotency_key) and scan the new Evidence.',
    { evidence_id: evidenceId, ...(entry === undefined ? {} : { entry }) },
  );
}

type Mounts = { host: string; inside: string }[];
type Done = {
  status: string;
  files: number;
  matches: number;
  error?: { ok?: boolean; source?: string; error: string };
};

/**
 * The largest bundle a scan reads, above anything register_rules stores: a rule file of up to
 * 16 MiB (an artifact) or sources in a request of at most a few MiB, as canonical JSON (escapes
 * included). A larger artifact named as rules is refused before it is compiled.
 */
const BUNDLE_MAX_BYTES = RULES_LIMITS.sources.max * RULES_LIMITS.source_bytes.max * 2 + 1024 * 1024;
/**
 * What the scanner may write: its match rows are bounded at 128 MiB (MAX_OUTPUT_BYTES in
 * scan_rules.py), and a file row and the last line come beside them.
 */
const SCANNER_OUTPUT_MAX = 160 * 1024 * 1024;
interface Scanned {
  matches: Record<string, unknown>[];
  files: Map<string, Record<string, unknown>>;
  done: Done | null;
}

/**
 * The team's record of an artifact the scan reads. The gateway checked both digests are the team's
 * before it claimed the scan; the worker reads nothing that is not.
 */
async function teamArtifact(ctx: ScanContext, digest: string) {
  const record = await ctx.store.artifacts.get(ctx.team, digest);
  if (!record) throw artifactNotFound(digest);
  return record;
}

/** What the scan reads: the artifact, verified, or every file of the extraction, checked present; and its mount. */
async function scanTargets(
  input: ScanInput,
  ctx: ScanContext,
): Promise<{ mount: Mounts[number]; targets: Target[] }> {
  if (input.artifact) {
    const meta = await teamArtifact(ctx, input.artifact);
    const file = await verifyArtifact(ctx.config.home, input.artifact, undefined, ctx.store.blobs);
    const target = {
      path: meta.name ?? input.artifact,
      file: '/input/target',
      sha256: input.artifact.slice(7),
      size: meta.size ?? 0,
    };
    return { mount: { host: file, inside: '/input/target' }, targets: [target] };
  }
  const root = await extractionRoot(ctx, input.evidence_id!);
  return {
    mount: { host: root, inside: '/input/tree' },
    targets: await extractionTargets(ctx, input.evidence_id!, root),
  };
}

/** Runs the scanner in the sandbox over `targets` (listed on its stdin); what it reported, line by line. */
async function runScanner(
  input: ScanInput,
  ctx: ScanContext,
  engine: PythonEnv,
  mounts: Mounts,
  targets: Target[],
): Promise<Scanned> {
  const env = sandboxedEnv(engine);
  const listing = targets.map((t) => JSON.stringify({ path: t.path, file: t.file })).join('\n');
  const helper = streamHelper(ctx.sandbox, {
    program: env.python,
    pkg: 'python3 (the rules venv: npm run provision:unpackers)',
    args: [
      env.script('scan_rules.py'),
      'scan',
      '/input/bundle.json',
      '-',
      String(input.timeout_s),
      String(input.max_matches),
      String(input.max_match_bytes),
    ],
    mounts: [...env.mounts, ...mounts],
    // The scanner keeps its own clock per file; this is the hard stop behind it.
    timeoutMs: input.timeout_s * 1000 + 30_000,
    limits: { addressSpaceBytes: 8 * 1024 ** 3 },
    env: { PYTHONDONTWRITEBYTECODE: '1' },
    stdin: Readable.from([Buffer.from(listing)]),
  });
  const out: Scanned = { matches: [], files: new Map(), done: null };
  let bytes = 0;
  for await (const line of createInterface({ input: helper.stdout })) {
    bytes += line.length + 1;
    if (bytes > SCANNER_OUTPUT_MAX) {
      // The scanner bounds what it writes; this is the stop behind it.
      helper.stop();
      throw new DossierError(
        'resource_constraint',
        `The rule scan wrote more than ${SCANNER_OUTPUT_MAX} bytes of results.`,
        'Lower max_matches or max_match_bytes, or scan with fewer, more specific rules.',
        { max_matches: input.max_matches, max_match_bytes: input.max_match_bytes },
      );
    }
    if (!line.trim()) continue;
    const msg = JSON.parse(line) as Record<string, Record<string, unknown>>;
    if (msg.match) out.matches.push(msg.match);
    else if (msg.file) out.files.set(String(msg.file.path), msg.file);
    else if (msg.done) out.done = msg.done as unknown as Done;
  }
  try {
    await helper.done;
  } catch (err) {
    const refused = out.done?.error;
    if (refused && refused.ok === false) throw notABundle(input.rules, refused);
    if (err instanceof DossierError && err.code === 'provider_timeout')
      throw new DossierError(
        'provider_timeout',
        `The rule scan did not end within timeout_s=${input.timeout_s} s (and its grace of 30 s): it was stopped.`,
        'Ask again with a larger timeout_s (at most 1800), or scan with fewer, more specific rules.',
        { timeout_s: input.timeout_s },
      );
    throw err;
  }
  return out;
}

/** A bundle that does not compile here: one never checked by register_rules (an artifact named as rules). */
function notABundle(digest: string, refused: { source?: string; error: string }): DossierError {
  return new DossierError(
    'invalid_params',
    `The rules ${digest} do not compile (${refused.source ?? 'the bundle'}): ${refused.error}`,
    'Pass the digest register_rules returned; it compiles a bundle before storing it.',
    { rules: digest, source: refused.source },
  );
}

/**
 * A file that is gone from the extraction, or whose bytes are not those its manifest names: no
 * answer about it is kept.
 */
function checkFiles(input: ScanInput, targets: Target[], scanned: Scanned): void {
  if (!input.evidence_id) return;
  for (const t of targets) {
    const seen = scanned.files.get(t.path);
    if (seen?.status === 'missing') throw noLongerHere(input.evidence_id, t.path);
    if (seen?.sha256 !== undefined && seen.sha256 !== t.sha256)
      throw new DossierError(
        'not_found',
        `${t.path} of ${input.evidence_id} is no longer the file its manifest names.`,
        'Extract the archive again (with a new idempotency_key) and scan the new Evidence.',
        { evidence_id: input.evidence_id, entry: t.path },
      );
  }
}

/** The scan's Evidence: its summary, the matched rules, a row per match and per file. */
function scanResult(input: ScanInput, targets: Target[], scanned: Scanned, done: Done, version: string) {
  const { matches } = scanned;
  const files = targets.map((t) => ({
    path: t.path,
    sha256: t.sha256,
    size: t.size,
    status: 'not_scanned',
    matches: 0,
    seconds: null,
    reason: null,
    ...(scanned.files.get(t.path) ?? {}),
  }));
  const limitations: string[] = [];
  if (done.status === 'timeout')
    limitations.push(
      `the scan ran past timeout_s=${input.timeout_s}: files after the one that timed out were not scanned (see files with status "timeout" and "not_scanned")`,
    );
  if (done.status === 'capped') limitations.push(`matches were capped at max_matches=${input.max_matches}`);
  const rules = [...new Set(matches.map((m) => `${String(m.namespace)}:${String(m.rule)}`))];
  const summary = {
    status: done.status,
    files: targets.length,
    scanned: done.files,
    matches: matches.length,
    rules_matched: rules.length,
    files_matched: files.filter((f) => f.matches > 0).length,
  };
  return {
    summary,
    document: {
      rules: input.rules,
      target: input.artifact ?? input.evidence_id,
      ...summary,
      matched: rules.slice(0, 1_000),
    },
    collections: { matches, files },
    truncated: done.status !== 'complete',
    limitations,
    provider: { name: 'yara-x', version: version.replace(/^yara-x /, '') },
  };
}

export async function runRuleScan(
  input: ScanInput,
  ctx: ScanContext,
): Promise<QueryResult & { provider: { name: string; version: string } }> {
  await teamArtifact(ctx, input.rules);
  const engine = await rulesEnv(ctx.config.analysis.python);
  const bundle = await verifyArtifact(ctx.config.home, input.rules, undefined, ctx.store.blobs);
  const { size } = await stat(bundle);
  if (size > BUNDLE_MAX_BYTES)
    throw new DossierError(
      'invalid_params',
      `The rules ${input.rules} are ${size} bytes: more than any bundle register_rules stores (${BUNDLE_MAX_BYTES}).`,
      'Pass the digest register_rules returned for your rule files.',
      { rules: input.rules, bytes: size },
    );
  const { mount, targets } = await scanTargets(input, ctx);
  const mounts = [{ host: bundle, inside: '/input/bundle.json' }, mount];
  const scanned = await runScanner(input, ctx, engine, mounts, targets);
  checkFiles(input, targets, scanned);
  const { done } = scanned;
  if (!done || done.status === 'error')
    throw new DossierError(
      'internal',
      `The rule scan ended without a result: ${done?.error?.error ?? 'no message'}.`,
      'Ask again; if it fails again, check the bundle with register_rules.',
    );
  return scanResult(input, targets, scanned, done, engine.version);
}

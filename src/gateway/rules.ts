// register_rules: a bundle of YARA sources is compiled by YARA-X in the
// sandbox before anything is stored (a bad rule is refused with the
// compiler's message), then stored content-addressed as an artifact of the
// team, so scan_with_rules names it by digest and the same bundle is the same
// digest. The bundle is the canonical JSON of its sources.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { canonicalJson } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { rulesEnv } from '../python/rules.ts';
import { sandboxedEnv, type PythonEnv } from '../python/venv.ts';
import { runHelper } from '../sandbox/helpers.ts';
import type { Intake } from './intake.ts';
import { RULES_LIMITS } from '../tools/rules.ts';

interface Compiled {
  ok: boolean;
  /** How many rules the bundle holds; `rules` lists the first 64. */
  count?: number;
  rules?: { name: string; namespace: string }[];
  source?: string;
  error?: string;
}

/** One rule file registered as an artifact, as a source named after the bundle. */
async function fromArtifact(intake: Intake, caller: Principal, name: string, digest: string) {
  const limit = RULES_LIMITS.artifact_bytes.max;
  const bytes = await intake.artifactBytes(caller, digest, limit, 'a rule file');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new DossierError(
      'invalid_params',
      `The artifact ${digest} is not UTF-8 text: not a YARA rule file.`,
      'Pass the digest of a YARA source file (a .yar).',
      { artifact: digest },
    );
  }
  return {
    name: name
      .replace(/[^A-Za-z0-9_.-]/g, '_')
      .replace(/^[^A-Za-z_]/, '_')
      .slice(0, 64),
    text,
  };
}

/**
 * Compiles running on this gateway at once, and whose: each is a sandbox of up to 4 GiB for up to a
 * minute. One per team, so that no team (however many principals it has) holds every slot.
 */
const MAX_CONCURRENT_COMPILES = 2;
const compiling = new Set<string>();
const COMPILE_TIMEOUT_MS = 60_000;

function compileSlot(team: string): void {
  if (!compiling.has(team) && compiling.size < MAX_CONCURRENT_COMPILES) return;
  throw new DossierError(
    'resource_constraint',
    compiling.has(team)
      ? "Your team's previous register_rules is still compiling."
      : `${compiling.size} rule bundles are compiling on this gateway.`,
    compiling.has(team)
      ? 'Register the next bundle when the previous one has answered.'
      : 'Try again in a few seconds.',
    { retry_after_ms: 5_000 },
    true,
  );
}

/** YARA-X compiles the bundle in the sandbox: ok with the rules' count and the first 64 names (cut), or the compiler's refusal. */
async function compileBundle(intake: Intake, engine: PythonEnv, bytes: Buffer): Promise<Compiled> {
  const env = sandboxedEnv(engine);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'dossier-rules-'));
  try {
    const file = path.join(scratch, 'bundle.json');
    await writeFile(file, bytes);
    const out = await runHelper(intake.helpers().sandbox, {
      program: env.python,
      pkg: 'python3 (the rules venv: npm run provision:unpackers)',
      args: [env.script('scan_rules.py'), 'compile', '/input/bundle.json'],
      mounts: [...env.mounts, { host: file, inside: '/input/bundle.json' }],
      timeoutMs: COMPILE_TIMEOUT_MS,
      limits: { addressSpaceBytes: 4 * 1024 ** 3 },
      env: { PYTHONDONTWRITEBYTECODE: '1' },
    }).catch((err: unknown) => {
      if (err instanceof DossierError && err.code === 'provider_timeout')
        throw new DossierError(
          'provider_timeout',
          `The bundle did not compile within ${COMPILE_TIMEOUT_MS / 1000} s; nothing was stored.`,
          'Register fewer rules at a time (several bundles), or simplify the rules with the largest regular expressions.',
          { timeout_ms: COMPILE_TIMEOUT_MS },
        );
      throw err;
    });
    return JSON.parse(out) as Compiled;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

export async function registerRuleBundle(
  intake: Intake,
  caller: Principal,
  input: { name: string; sources?: { name: string; text: string }[]; artifact?: string },
): Promise<Record<string, unknown>> {
  const sources = input.sources ?? [await fromArtifact(intake, caller, input.name, input.artifact!)];
  const names = sources.map((s) => s.name);
  if (new Set(names).size !== names.length)
    throw new DossierError(
      'invalid_params',
      'Two sources of the bundle have the same name.',
      'Give every rule file its own name (it is also its namespace).',
      { sources: names },
    );
  const bytes = Buffer.from(canonicalJson({ sources }));
  const engine = await rulesEnv(intake.helpers().python);
  compileSlot(caller.team);
  compiling.add(caller.team);
  let compiled: Compiled;
  try {
    compiled = await compileBundle(intake, engine, bytes);
  } finally {
    compiling.delete(caller.team);
  }
  if (!compiled.ok)
    throw new DossierError(
      'invalid_params',
      `The rules of ${compiled.source} do not compile: ${compiled.error}`,
      'Fix the rule at the line and column the compiler names, then register the bundle again; nothing was stored.',
      { source: compiled.source, compiler: `YARA-X ${engine.version.replace(/^yara-x /, '')}` },
    );
  const { created, artifact } = await intake.uploadArtifact(
    caller,
    Readable.from([bytes]),
    `rules:${input.name}`,
  );
  return {
    created,
    rules: artifact.digest,
    rule_count: compiled.count!,
    // The first 64, names cut at 128 characters: a reply stays small whatever the bundle holds.
    rule_names: compiled.rules!.map((r) => `${r.namespace}:${r.name}`),
    engine: engine.version,
    artifact,
  };
}

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
import { sandboxedEnv } from '../python/venv.ts';
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

/** Compiles running on this gateway at once, and whose: each is a sandbox of up to 4 GiB for up to a minute. */
const MAX_CONCURRENT_COMPILES = 2;
const compiling = new Set<string>();
const COMPILE_TIMEOUT_MS = 60_000;
/** What a reply shows of a rule's name (YARA-X takes names of any length). */
const NAME_SHOWN = 128;

function compileSlot(who: string): void {
  if (!compiling.has(who) && compiling.size < MAX_CONCURRENT_COMPILES) return;
  throw new DossierError(
    'resource_constraint',
    compiling.has(who)
      ? 'Your previous register_rules is still compiling.'
      : `${compiling.size} rule bundles are compiling on this gateway.`,
    compiling.has(who)
      ? 'Register the next bundle when the previous one has answered.'
      : 'Try again in a few seconds.',
    { retry_after_ms: 5_000 },
    true,
  );
}

const shown = (name: string) => (name.length > NAME_SHOWN ? `${name.slice(0, NAME_SHOWN - 1)}…` : name);

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
  const { sandbox, python } = intake.helpers();
  const engine = await rulesEnv(python);
  const env = sandboxedEnv(engine);
  const who = `${caller.team}/${caller.principal}`;
  compileSlot(who);
  compiling.add(who);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'dossier-rules-')).catch((err: Error) => {
    compiling.delete(who);
    throw err;
  });
  let compiled: Compiled;
  try {
    const file = path.join(scratch, 'bundle.json');
    await writeFile(file, bytes);
    const out = await runHelper(sandbox, {
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
    compiled = JSON.parse(out) as Compiled;
  } finally {
    compiling.delete(who);
    await rm(scratch, { recursive: true, force: true });
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
    rule_count: compiled.count ?? compiled.rules!.length,
    // The first 64: a reply stays small whatever the bundle holds (rule_count says how many).
    rule_names: compiled.rules!.slice(0, 64).map((r) => `${shown(r.namespace)}:${shown(r.name)}`),
    engine: engine.version,
    artifact,
  };
}

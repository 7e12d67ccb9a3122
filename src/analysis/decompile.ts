// decompile_function: the provider run again, in the sandbox, on the
// verified artifact, for one function of its analysis database.
import type { AnalysisDatabase } from './database.ts';
import { functionsNamedIn } from './names.ts';
import { resolveFunction } from './queries.ts';
import type { AnalysisProvider } from './venv.ts';
import { sandboxedEnv } from '../python/venv.ts';
import { runHelper } from '../sandbox/helpers.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

export interface DecompileContext {
  db: AnalysisDatabase;
  /** The verified artifact file, for the queries that run the provider again (decompilation). */
  artifactFile(): Promise<string>;
  provider(): Promise<AnalysisProvider>;
  sandbox: Sandbox;
}

/** decompile_function: angr's decompiler in the sandbox, on the verified artifact, bounded in time. */
export async function decompile(
  input: { function: string; profile: string; timeout_s: number },
  ctx: DecompileContext,
) {
  const fn = resolveFunction(ctx.db, input.function);
  const provider = sandboxedEnv(await ctx.provider());
  const out = await runHelper(ctx.sandbox, {
    program: provider.python,
    pkg: 'python3 (the angr venv: npm run provision:analysis)',
    args: [
      provider.script('angr_decompile.py'),
      '--binary',
      '/input/target',
      '--address',
      `0x${fn.address.toString(16)}`,
      '--profile',
      input.profile,
    ],
    mounts: [...provider.mounts, { host: await ctx.artifactFile(), inside: '/input/target' }],
    timeoutMs: input.timeout_s * 1000,
    limits: { addressSpaceBytes: 8 * 1024 ** 3 },
    env: { PYTHONDONTWRITEBYTECODE: '1' },
  });
  const { text, name, limitations } = JSON.parse(out) as {
    text: string;
    name: string;
    limitations: string[];
  };
  const lines = text.split('\n').map((t, i) => ({ line: i + 1, text: t }));
  if (lines.length && lines[lines.length - 1]!.text === '') lines.pop();
  return {
    summary: {
      function: name,
      address: `0x${fn.address.toString(16)}`,
      lines: lines.length,
      head: text.slice(0, 600),
    },
    // The functions the text names, so a reader's overlay can put the team's names in their place.
    document: {
      function: name,
      address: `0x${fn.address.toString(16)}`,
      names: functionsNamedIn(ctx.db, text),
    },
    collections: { lines },
    limitations,
  };
}

// Every analysis contract bound to the query that answers it from an
// artifact's database (analysisQueries.ts, diffQuery.ts), or, for
// decompilation, to the provider run again in the sandbox; a rule scan to
// its scanner (ruleScan.ts).
import type { z } from 'zod';
import type { AnalysisProvider } from '../analysis/venv.ts';
import { sandboxedEnv } from '../python/venv.ts';
import { runHelper } from '../sandbox/helpers.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import {
  decompileFunction as decompileContract,
  diffBinaries as diffBinariesContract,
  findStrings as findStringsContract,
  getCallGraph as getCallGraphContract,
  inspectBinary as inspectBinaryContract,
  listFunctions as listFunctionsContract,
  traceFeature as traceFeatureContract,
} from '../tools/analysis.ts';
import { scanWithRules as scanWithRulesContract } from '../tools/rules.ts';
import type { ToolContract, ToolInput } from '../tools/contract.ts';
import {
  findStrings,
  getCallGraph,
  inspectBinary,
  listFunctions,
  resolveFunction,
  traceFeature,
  type QueryContext,
  type QueryResult,
} from './analysisQueries.ts';
import { diffBinaries } from './diffQuery.ts';
import { functionsNamedIn } from './names.ts';
import { runRuleScan, type ScanContext } from './ruleScan.ts';

export interface AnalysisContext extends QueryContext, ScanContext {
  /** The verified artifact file, for the queries that run the provider again (decompilation). */
  artifactFile(): Promise<string>;
  provider(): Promise<AnalysisProvider>;
  sandbox: Sandbox;
}

export interface AnalysisBinding {
  contract: ToolContract;
  /** A method: bound by `analysis` below to the query of the contract's own parsed input. */
  run(input: ToolInput, ctx: AnalysisContext): QueryResult | Promise<QueryResult>;
}

function analysis<I extends z.ZodObject>(
  contract: ToolContract<I>,
  run: (input: z.output<I>, ctx: AnalysisContext) => QueryResult | Promise<QueryResult>,
): AnalysisBinding {
  return { contract, run };
}

/** decompile_function: angr's decompiler in the sandbox, on the verified artifact, bounded in time. */
async function decompile(
  input: { function: string; profile: string; timeout_s: number },
  ctx: AnalysisContext,
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

export const ANALYSIS_BINDINGS: readonly AnalysisBinding[] = [
  analysis(inspectBinaryContract, inspectBinary),
  analysis(findStringsContract, findStrings),
  analysis(listFunctionsContract, listFunctions),
  analysis(getCallGraphContract, getCallGraph),
  analysis(decompileContract, decompile),
  analysis(traceFeatureContract, traceFeature),
  analysis(scanWithRulesContract, runRuleScan),
  analysis(diffBinariesContract, diffBinaries),
];

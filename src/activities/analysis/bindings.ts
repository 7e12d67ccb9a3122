// Every analysis contract bound to the query that answers it from an
// artifact's database (src/analysis: queries.ts, trace.ts, diffQuery.ts), or,
// for decompilation, to the provider run again in the sandbox (decompile.ts);
// a rule scan to its scanner (src/activities/ruleScan.ts).
import type { z } from 'zod';
import {
  decompileFunction as decompileContract,
  diffBinaries as diffBinariesContract,
  findStrings as findStringsContract,
  getCallGraph as getCallGraphContract,
  inspectBinary as inspectBinaryContract,
  listFunctions as listFunctionsContract,
  traceFeature as traceFeatureContract,
} from '../../tools/analysis.ts';
import { scanWithRules as scanWithRulesContract } from '../../tools/rules.ts';
import type { ToolContract, ToolInput } from '../../tools/contract.ts';
import {
  findStrings,
  getCallGraph,
  inspectBinary,
  listFunctions,
  type QueryContext,
  type QueryResult,
} from '../../analysis/queries.ts';
import { decompile, type DecompileContext } from '../../analysis/decompile.ts';
import { diffBinaries } from '../../analysis/diffQuery.ts';
import { traceFeature } from '../../analysis/trace.ts';
import { runRuleScan, type ScanContext } from '../ruleScan.ts';

export interface AnalysisContext extends QueryContext, ScanContext, DecompileContext {}

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

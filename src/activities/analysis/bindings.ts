// Every analysis contract bound to the query that answers it from an
// artifact's database (src/analysis: queries.ts, trace.ts, diffQuery.ts), or,
// for decompilation, to the provider run again in the sandbox (decompile.ts);
// a rule scan to its scanner (ruleScan.ts).
import type { z } from 'zod';
import type { AnalysisProvider } from '../../analysis/venv.ts';
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
import { runRuleScan, type ScanContext } from './ruleScan.ts';

/** What every analysis gets; the database is there when the request named one (a rule scan reads none). */
export interface AnalysisContext extends ScanContext {
  artifact: string;
  /** The verified artifact file, for the queries that run the provider again (decompilation). */
  artifactFile(): Promise<string>;
  provider(): Promise<AnalysisProvider>;
  opened: Pick<QueryContext, 'db' | 'database' | 'base'> | null;
}

/** What a query of an analysis database gets. */
type DatabaseContext = QueryContext & DecompileContext & ScanContext;

export interface AnalysisBinding {
  contract: ToolContract;
  /** A method: bound by `query` or `scan` below to the contract's own parsed input. */
  run(input: ToolInput, ctx: AnalysisContext): QueryResult | Promise<QueryResult>;
}

/** Binds a contract to the query that answers it from the artifact's database. */
function query<I extends z.ZodObject>(
  contract: ToolContract<I>,
  run: (input: z.output<I>, ctx: DatabaseContext) => QueryResult | Promise<QueryResult>,
): AnalysisBinding {
  return {
    contract,
    run(input: z.output<I>, ctx: AnalysisContext) {
      if (!ctx.opened) throw new Error(`${contract.name} reads an analysis database, and none was opened`);
      return run(input, { ...ctx, ...ctx.opened });
    },
  };
}

/** Binds a contract to an analysis that reads no database. */
function scan<I extends z.ZodObject>(
  contract: ToolContract<I>,
  run: (input: z.output<I>, ctx: ScanContext) => QueryResult | Promise<QueryResult>,
): AnalysisBinding {
  return { contract, run };
}

export const ANALYSIS_BINDINGS: readonly AnalysisBinding[] = [
  query(inspectBinaryContract, inspectBinary),
  query(findStringsContract, findStrings),
  query(listFunctionsContract, listFunctions),
  query(getCallGraphContract, getCallGraph),
  query(decompileContract, decompile),
  query(traceFeatureContract, traceFeature),
  scan(scanWithRulesContract, runRuleScan),
  query(diffBinariesContract, diffBinaries),
];

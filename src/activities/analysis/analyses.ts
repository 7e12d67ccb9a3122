// The analysis activities: build an artifact's database (the provider in the
// sandbox, buildDatabase.ts), wait on a build whoever started it
// (awaitDatabase.ts), and answer a tool call from a database, retaining the
// answer as Evidence (runAnalysis.ts). Every analysis contract is bound to its
// query in bindings.ts; the worker refuses to load with one unbound.
import type { AnalysisActivities, AnalysisBookkeeping } from '../../launches/protocol.ts';
import { CATALOG } from '../../tools/catalog.ts';
import { isAnalysisTool } from '../../tools/contract.ts';
import { bindAll } from '../../tools/registry.ts';
import { awaitAnalysisDatabase } from './awaitDatabase.ts';
import { ANALYSIS_BINDINGS } from './bindings.ts';
import { buildAnalysisDatabase } from './buildDatabase.ts';
import type { AnalysisDeps } from './context.ts';
import { finishAnalysis, runAnalysis } from './runAnalysis.ts';

export { ANALYSIS_BINDINGS };

export function createAnalysisActivities(deps: AnalysisDeps) {
  const bindings = bindAll('worker', CATALOG, ANALYSIS_BINDINGS, isAnalysisTool);
  const bookkeeping: AnalysisBookkeeping = {
    awaitAnalysisDatabase: (req) => awaitAnalysisDatabase(deps, req),
    finishAnalysis: (workflowId, outcome) => finishAnalysis(deps, workflowId, outcome),
  };
  const work: AnalysisActivities = {
    buildAnalysisDatabase: (req) => buildAnalysisDatabase(deps, req),
    runAnalysis: (req, database, base) => runAnalysis(deps, bindings, req, database, base),
  };
  return { work, bookkeeping };
}

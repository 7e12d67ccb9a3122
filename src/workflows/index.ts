// Every workflow the workers register. Bundled by Temporal's workflow bundler.
export { analysisDatabaseWorkflow, analysisWorkflow } from './analysis.ts';
export { launchWorkflow } from './launch.ts';

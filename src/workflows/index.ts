// Every workflow the workers register. Bundled by Temporal's workflow bundler.
export { launchWorkflow } from './launch.ts';

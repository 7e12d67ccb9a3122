// Every workflow the workers register. Bundled by Temporal's workflow bundler.
export { launchWorkflow, WORKFLOW_TASK_QUEUE } from './launch.ts';

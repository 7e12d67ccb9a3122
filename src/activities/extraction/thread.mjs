// Entry of dossier's worker threads: the module to run is in workerData.module.
// When dossier runs from its TypeScript sources (not the compiled dist/), tsx
// is registered in the thread first, as it is in the process.
import { workerData } from 'node:worker_threads';

if (workerData.module.endsWith('.ts')) (await import('tsx/esm/api')).register();
await import(workerData.module);

// `npm run bench`: runs every benchmark in one process, one after another, and
// prints Markdown rows for docs/benchmarks.md. Medians and ratios only ever
// compare figures measured in the same run.
import { benchAnalysis } from './analysis.ts';
import { benchDevices } from './devices.ts';
import { benchSoak } from './soak.ts';
import { benchEvidence } from './evidence.ts';
import { benchExtract } from './extract.ts';
import { benchGateway } from './gateway.ts';
import { benchLaunches } from './launches.ts';
import { benchOverhead } from './breakdown.ts';
import { benchCalls } from './calls.ts';
import { benchCluster } from './cluster.ts';
import { benchStart } from './start.ts';
import { benchSideBySide } from './sideBySide.ts';
import { benchFloor } from './floor.ts';
import { benchSurface } from './surface.ts';
import { benchBreadth } from './breadth.ts';
import { benchBoundaries } from './boundaries.ts';
import { benchKnowledge } from './knowledge.ts';
import { benchUnitLoop } from './unitLoop.ts';
import { benchProfile } from './profile.ts';

const suites: Record<string, () => Promise<string[]>> = {
  launches: benchLaunches,
  evidence: benchEvidence,
  extract: benchExtract,
  gateway: benchGateway,
  analysis: benchAnalysis,
  devices: benchDevices,
  soak: benchSoak,
  overhead: benchOverhead,
  calls: benchCalls,
  start: benchStart,
  cluster: benchCluster,
  sidebyside: benchSideBySide,
  floor: benchFloor,
  surface: benchSurface,
  breadth: benchBreadth,
  boundaries: benchBoundaries,
  knowledge: benchKnowledge,
  unit: benchUnitLoop,
  profile: benchProfile,
};
const only = process.argv.slice(2);

console.log(
  `# dossier benchmarks, ${new Date().toISOString()} (${process.platform}, node ${process.version})\n`,
);
for (const [name, run] of Object.entries(suites)) {
  if (only.length && !only.includes(name)) continue;
  console.log(`## ${name}\n`);
  if (name === 'launches') console.log('| figure | value |\n|---|---|');
  // Rows appear as each suite finishes.
  for (const line of await run()) console.log(line);
  console.log();
}
process.exit(0);

// Start-up figures (issue 15): `dossier call` and `dossier launches` from
// start to reply, from the compiled build and from the TypeScript sources,
// against `node -e 0`; and `npm start` to ready, both ways. Same run, same machine.
import { spawn } from 'node:child_process';
import { spawnDossier } from '../tests/helpers/processes.ts';
import { startProduct } from './breakdown.ts';
import { benchEnv, median, ms, timed } from './lib.ts';

const RUNS = 7;

function run(args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${args.join(' ')} exited ${code}`)),
    );
  });
}

async function medianOf(fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) times.push((await timed(fn))[0]);
  return median(times);
}

export async function benchStart(): Promise<string[]> {
  const lines = ['| figure | compiled (dist/) | from sources (tsx) |', '|---|---|---|'];
  const product = await startProduct();
  try {
    const env = {
      DOSSIER_URL: product.devJson.mcp_url,
      DOSSIER_TOKEN: product.devJson.token,
    };
    const fromSource = { ...env, DOSSIER_FROM_SOURCE: '1' };
    const floor = await medianOf(() => run(['-e', '0'], {}));
    lines.push(`| \`node -e 0\` (the floor) | ${ms(floor)} | |`);
    for (const [label, args] of [
      ['`dossier call whoami`, start to reply', ['bin/dossier.js', 'call', 'whoami']],
      ['`dossier launches`, start to reply', ['bin/dossier.js', 'launches']],
    ] as const) {
      const built = await medianOf(() => run([...args], env));
      const source = await medianOf(() => run([...args], fromSource));
      lines.push(`| ${label} | ${ms(built)} | ${ms(source)} |`);
    }
  } finally {
    await product.stop();
  }
  for (const [label, extra] of [['`npm start` to ready, fresh DOSSIER_HOME', {}]] as const) {
    const once = async (e: Record<string, string>) => {
      const env = await benchEnv({ ...extra, ...e });
      const [t, p] = await timed(() => spawnDossier('start', env, 'dossier is ready'));
      await p.kill('SIGINT');
      return t;
    };
    const built: number[] = [];
    const source: number[] = [];
    for (let i = 0; i < 5; i++) {
      built.push(await once({}));
      source.push(await once({ DOSSIER_FROM_SOURCE: '1' }));
    }
    lines.push(`| ${label} (5 runs) | ${ms(median(built))} | ${ms(median(source))} |`);
  }
  return lines;
}

// dossier parts as separate OS processes, for tests that kill or restart them.
import { spawn, type ChildProcess } from 'node:child_process';

export interface Proc {
  child: ChildProcess;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs `dossier <command…>` and resolves once its output contains `readyText`;
 * `inherited` descriptors are passed on as its 3, 4, … (as a shell's strays would be);
 * `nodeArgs` go to Node itself (a profiler's flags, say).
 */
export async function spawnDossier(
  command: string | string[],
  env: Record<string, string>,
  readyText: string,
  inherited: number[] = [],
  nodeArgs: string[] = [],
): Promise<Proc> {
  const child = spawn(process.execPath, [...nodeArgs, 'bin/dossier.js', ...[command].flat()], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...inherited],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`dossier ${command} not ready in 60 s:\n${output}`)),
      60_000,
    );
    const onData = (c: Buffer) => {
      output += c.toString();
      if (output.includes(readyText)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`dossier ${command} exited ${code}:\n${output}`)));
  });
  return {
    child,
    output: () => output,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

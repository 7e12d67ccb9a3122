// Extraction and capture figures (issue 5): extract_artifact vs plain tar and
// unzip on the same ~200 MB archives, and capture overhead vs direct spawn.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { benchDir, benchStack, callTool, connect, median, ms, timed } from './lib.ts';

const RUNS = 5;

function runCommand(cmd: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${cmd} exit ${code}`)),
    );
  });
}

export async function benchExtract(): Promise<string[]> {
  const lines = ['| figure | value |', '|---|---|'];
  const dir = benchDir('extract');
  // ~200 MB: 100 files of 1 MiB random bytes and 100 of 1 MiB text, in nested folders.
  const tree = path.join(dir, 'tree');
  for (let i = 0; i < 200; i++) {
    const sub = path.join(tree, `d${i % 10}`, `e${i % 7}`);
    mkdirSync(sub, { recursive: true });
    const data =
      i % 2
        ? randomBytes(1024 * 1024)
        : Buffer.from(`line ${i} of some text\n`.repeat(47_663).slice(0, 1024 * 1024));
    writeFileSync(path.join(sub, `f${i}.bin`), data);
  }
  const tgz = path.join(dir, 'tree.tar.gz');
  const zip = path.join(dir, 'tree.zip');
  execFileSync('tar', ['-czf', tgz, '-C', tree, '.']);
  execFileSync('zip', ['-qr', zip, '.'], { cwd: tree });

  const stack = await benchStack({
    DOSSIER_ALLOWED_ROOTS: `/usr/bin:${dir}`,
    DOSSIER_WORKER_CONCURRENCY: '4',
  });
  try {
    const client = await connect(stack);
    let key = 0;
    for (const [name, file, plain] of [
      ['tar.gz', tgz, (out: string) => runCommand('tar', ['-xzf', tgz, '-C', out])],
      ['zip', zip, (out: string) => runCommand('unzip', ['-q', zip, '-d', out])],
    ] as const) {
      const { artifact } = await callTool(client, 'register_artifact', { path: file });
      const direct: number[] = [];
      const ours: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const out = path.join(dir, `plain-${name}-${i}`);
        mkdirSync(out);
        direct.push(await plain(out));
        rmSync(out, { recursive: true, force: true });
        const [t, r] = await timed(() =>
          callTool(client, 'extract_artifact', {
            artifact: artifact.digest,
            detail: 'summary',
            wait_ms: 110_000,
            idempotency_key: `bench-extract-${++key}`,
          }),
        );
        if (r.status !== 'succeeded')
          throw new Error(`extraction ${name} ended ${r.status}: ${JSON.stringify(r.error)}`);
        ours.push(t);
        rmSync(path.join(stack.config.home, r.summary.output), { recursive: true, force: true });
      }
      const mb = 200;
      lines.push(
        `| ${name}, 200 × 1 MiB files: plain \`${name === 'zip' ? 'unzip' : 'tar -xzf'}\` (${RUNS} runs) | ${ms(median(direct))} (${(mb / (median(direct) / 1000)).toFixed(0)} MB/s) |`,
      );
      lines.push(
        `| ${name}: \`extract_artifact\` through the gateway, with SHA-256 and manifest of every entry | ${ms(median(ours))} (${(mb / (median(ours) / 1000)).toFixed(0)} MB/s) |`,
      );
      lines.push(
        `| ${name}: extract_artifact ÷ plain (time) | ${(median(ours) / median(direct)).toFixed(2)}× |`,
      );
      lines.push(
        `| ${name}: throughput of extract_artifact ÷ plain \`${name === 'zip' ? 'unzip' : 'tar'}\` (target ≥ 0.8) | ${(median(direct) / median(ours)).toFixed(2)} |`,
      );
    }

    // Capture overhead: the same command directly and through the gateway.
    const direct: number[] = [];
    const plainCapture: number[] = [];
    const traced: number[] = [];
    for (let i = 0; i < 10; i++) {
      direct.push(await runCommand('/usr/bin/ls', ['-la', '/usr/bin']));
      plainCapture.push(
        (
          await timed(() =>
            callTool(client, 'capture_process_scenario', {
              executable: '/usr/bin/ls',
              args: ['-la', '/usr/bin'],
              detail: 'summary',
              idempotency_key: `bench-capture-${i}`,
            }),
          )
        )[0],
      );
      traced.push(
        (
          await timed(() =>
            callTool(client, 'capture_process_scenario', {
              executable: '/usr/bin/ls',
              args: ['-la', '/usr/bin'],
              trace_syscalls: true,
              detail: 'summary',
              idempotency_key: `bench-capture-strace-${i}`,
            }),
          )
        )[0],
      );
    }
    lines.push(`| \`ls -la /usr/bin\` spawned directly (10 runs) | ${ms(median(direct))} |`);
    lines.push(
      `| the same as \`capture_process_scenario\` (launch, output rows, workspace listing, Evidence) | ${ms(median(plainCapture))} (overhead ${ms(median(plainCapture) - median(direct))}) |`,
    );
    lines.push(
      `| the same with \`trace_syscalls: true\` (strace -f, events collection) | ${ms(median(traced))} (overhead ${ms(median(traced) - median(direct))}) |`,
    );
    await client.close();
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return lines;
}

// Breadth and rule-scan figures (issue 34): the formats read, by reader;
// extract_firmware of a mixed firmware image against unblob run directly on
// the same image; scan_with_rules over an extraction against the yara CLI
// (Debian's, libyara) on the same tree.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { unblobEnv } from '../src/python/unblob.ts';
import { formatCounts } from '../src/tools/formats.ts';
import { benchDir, benchStack, callTool, connect, median, ms, timed } from './lib.ts';

/** Runs of each side, alternating (DOSSIER_BENCH_RUNS overrides). */
const RUNS = Number(process.env.DOSSIER_BENCH_RUNS ?? 3);
/** DOSSIER_BENCH_BREADTH=firmware or scan runs only that half. */
const PART = process.env.DOSSIER_BENCH_BREADTH ?? 'all';
/** Files of 1 MiB in the image's erofs, and of 512 KiB in the scanned tree (DOSSIER_BENCH_SCAN_FILES). */
const FS_FILES = 30;
const SCAN_FILES = Number(process.env.DOSSIER_BENCH_SCAN_FILES ?? 300);
/**
 * A second, larger scan tree (DOSSIER_BENCH_SCAN_LARGE_FILES, 0 for none): on the first, yara's whole
 * run is about 0.2 s, so the figure is mostly the fixed cost of a scan (gateway, workflow, sandbox,
 * Evidence); on this one it is mostly bytes scanned a second.
 */
const SCAN_LARGE_FILES = Number(process.env.DOSSIER_BENCH_SCAN_LARGE_FILES ?? 2000);

/** Calls a launch or an analysis until it ends: the same arguments attach to the same run. */
async function untilDone(
  client: Awaited<ReturnType<typeof connect>>,
  tool: string,
  args: Record<string, unknown>,
) {
  for (;;) {
    const r = await callTool(client, tool, args);
    if (r.status !== 'running' && r.status !== 'pending' && r.status !== 'queued') return r;
  }
}

/** CPU time (ms) the whole machine has spent, every process: what a run costs the two cores. */
function machineCpu(): number {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) * 10; // USER_HZ 100
}

/** `fn`'s result, and the machine's CPU time (ms) while it ran. */
async function withCpu<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const before = machineCpu();
  const value = await fn();
  return [value, machineCpu() - before];
}

function runCommand(cmd: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: 'ignore' });
    child.once('error', reject);
    // unblob exits 1 when a chunk had an error; the run is still whole.
    child.once('exit', (code) =>
      code === 0 || (cmd.endsWith('unblob') && code === 1)
        ? resolve(performance.now() - t0)
        : reject(new Error(`${cmd} exit ${code}`)),
    );
  });
}

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  const table = Array.from({ length: 256 }, (_, n) => {
    let x = n;
    for (let k = 0; k < 8; k++) x = x & 1 ? (x >>> 1) ^ 0xedb88320 : x >>> 1;
    return x >>> 0;
  });
  for (const b of buf) c = table[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A Netgear TRX v1 image of these partitions (tests/e2e/breadth.test.ts builds the same). */
function trx(parts: Buffer[]): Buffer {
  const offsets: number[] = [];
  let at = 28;
  const body: Buffer[] = [];
  for (const p of parts) {
    const pad = (4 - (at % 4)) % 4;
    body.push(Buffer.alloc(pad), p);
    offsets.push((at += pad));
    at += p.length;
  }
  const tail = Buffer.alloc(16);
  tail.writeUInt16LE(1, 2);
  offsets.slice(0, 3).forEach((o, i) => tail.writeUInt32LE(o, 4 + i * 4));
  const covered = Buffer.concat([tail, ...body]);
  const head = Buffer.alloc(12);
  head.write('HDR0', 0, 'latin1');
  head.writeUInt32LE(12 + covered.length, 4);
  head.writeUInt32LE((crc32(covered) ^ 0xffffffff) >>> 0, 8);
  return Buffer.concat([head, covered]);
}

/** A tree of `files` files, half random, half text, `size` bytes each. */
function makeTree(dir: string, files: number, size: number) {
  for (let i = 0; i < files; i++) {
    const sub = path.join(dir, `d${i % 10}`);
    mkdirSync(sub, { recursive: true });
    const data =
      i % 2
        ? randomBytes(size)
        : Buffer.from(`line ${i} of some configuration text\n`.repeat(size / 16).slice(0, size));
    writeFileSync(path.join(sub, `f${i}.bin`), data);
  }
}

const RULES = `
rule backdoor_string : credentials { meta: family = "bench" strings: $s = "s3cr3t-backdoor" condition: $s }
rule crypto_hex : crypto { strings: $h = { DE AD ?? EF [2-4] CA FE } condition: $h }
rule aes_sbox { strings: $a = { 63 7C 77 7B F2 6B 6F C5 30 01 67 2B FE D7 AB 76 } condition: $a }
rule private_key { strings: $k = "-----BEGIN RSA PRIVATE KEY-----" condition: $k }
rule two_markers { strings: $a = "MARKER-A" $b = "MARKER-B" condition: $a and #b >= 2 }
`;

/** A tree of `files` files of 512 KiB, with the patterns sown in some; and its tar. */
function scanTree(dir: string, files: number) {
  const tree = path.join(dir, 'tree');
  makeTree(tree, files, 512 * 1024);
  for (let i = 0; i < files; i += 7)
    writeFileSync(
      path.join(tree, `d${i % 10}`, `f${i}.bin`),
      Buffer.concat([
        randomBytes(1000),
        Buffer.from('s3cr3t-backdoor MARKER-A MARKER-B MARKER-B'),
        randomBytes(1000),
      ]),
    );
  const tar = path.join(dir, 'tree.tar');
  execFileSync('tar', ['-cf', tar, '-C', tree, '.']);
  return { tree, tar, mb: statSync(tar).size / 1024 / 1024 };
}

/**
 * yara over a tree of `files` files, and scan_with_rules over its extraction, RUNS times each,
 * alternating; the first scan asked again must attach.
 */
async function benchScan(
  client: Awaited<ReturnType<typeof connect>>,
  dir: string,
  files: number,
  rulesFile: string,
  nextKey: () => number,
): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const { tree, tar, mb } = scanTree(dir, files);
  try {
    const registered = await callTool(client, 'register_artifact', { path: tar });
    const extracted = await untilDone(client, 'extract_artifact', {
      artifact: registered.artifact.digest,
      detail: 'summary',
      wait_ms: 110_000,
      idempotency_key: `bench-breadth-${nextKey()}`,
    });
    if (extracted.status !== 'succeeded')
      throw new Error(`extract_artifact ended ${extracted.status}: ${JSON.stringify(extracted.error)}`);
    const yaraDirect: number[] = [];
    const scans: number[] = [];
    const rules = async (i: number) =>
      // A new bundle name each run is the same bytes: so each run scans with a fresh source text.
      (
        await callTool(client, 'register_rules', {
          name: `bench-${files}-${i}`,
          sources: [{ name: 'bench', text: `${RULES}\n// ${files} files, run ${i}\n` }],
        })
      ).rules as string;
    for (let i = 0; i < RUNS; i++) {
      yaraDirect.push(await runCommand('yara', ['-r', '-s', rulesFile, tree]));
      const bundle = await rules(i);
      const [t, r] = await timed(() =>
        untilDone(client, 'scan_with_rules', {
          rules: bundle,
          evidence_id: extracted.evidence_id,
          detail: 'summary',
          wait_ms: 110_000,
        }),
      );
      if (r.status !== 'succeeded') throw new Error(`scan ended ${r.status}: ${JSON.stringify(r.error)}`);
      scans.push(t);
    }
    // The first run's scan, asked again by the same principal: an attach, never a second scan.
    const again = await callTool(client, 'scan_with_rules', {
      rules: await rules(0),
      evidence_id: extracted.evidence_id,
      detail: 'summary',
    });
    if (again.analysis?.attached !== true)
      throw new Error(`the same scan asked again was not attached: ${JSON.stringify(again.analysis)}`);
    return [
      `| scan tree: ${files} × 512 KiB files (${mb.toFixed(0)} MB), 5 rules: \`yara -r -s\` (Debian's 4.2.3, ${RUNS} runs) | ${ms(median(yaraDirect))} (${(mb / (median(yaraDirect) / 1000)).toFixed(0)} MB/s) |`,
      `| the same tree, extracted: \`scan_with_rules\` through the gateway (YARA-X in the sandbox, every file's SHA-256 checked against the manifest) | ${ms(median(scans))} (${(mb / (median(scans) / 1000)).toFixed(0)} MB/s) |`,
      `| throughput of scan_with_rules ÷ yara, ${files} files (target ≥ 0.8) | ${(median(yaraDirect) / median(scans)).toFixed(2)} |`,
      `| the same scan asked again, ${files} files | attached, answered from the store |`,
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchBreadth(): Promise<string[]> {
  const lines = ['| figure | value |', '|---|---|'];
  const c = formatCounts();
  lines.push(
    `| format families read | ${c.total}: ${c.dossier} by dossier's own readers, ${c.unblob_families} by unblob (${c.unblob_handlers} handlers) |`,
  );
  const dir = benchDir('breadth');
  // The mixed image: TRX (gzip kernel + erofs of FS_FILES MiB) + a zstd stream + a FAT image + a random blob.
  const root = path.join(dir, 'rootfs');
  makeTree(root, FS_FILES, 1024 * 1024);
  execFileSync('mkfs.erofs', ['--quiet', path.join(dir, 'fs.erofs'), root]);
  const kernel = execFileSync('gzip', ['-6c'], {
    input: Buffer.alloc(4 * 1024 * 1024, 'kernel code '),
    maxBuffer: 64 * 1024 * 1024,
  });
  const zst = execFileSync('zstd', ['-q', '-c'], {
    input: randomBytes(8 * 1024 * 1024),
    maxBuffer: 64 * 1024 * 1024,
  });
  execFileSync('mkfs.fat', ['-C', path.join(dir, 'fs.fat'), '16384']);
  execFileSync('mcopy', ['-s', '-i', path.join(dir, 'fs.fat'), path.join(root, 'd0'), '::/']);
  const image = path.join(dir, 'mixed.bin');
  writeFileSync(
    image,
    Buffer.concat([
      trx([kernel, readFileSync(path.join(dir, 'fs.erofs'))]),
      zst,
      readFileSync(path.join(dir, 'fs.fat')),
      randomBytes(4 * 1024 * 1024),
    ]),
  );
  const imageMb = readFileSync(image).length / 1024 / 1024;

  const rulesFile = path.join(dir, 'rules.yar');
  writeFileSync(rulesFile, RULES);

  const python = process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3';
  const unblob = path.join((await unblobEnv(python)).venv, 'bin', 'unblob');
  const stack = await benchStack({
    DOSSIER_ALLOWED_ROOTS: `/usr/bin:${dir}`,
    DOSSIER_WORKER_CONCURRENCY: '4',
    // A scan tree's tar may be past the default upload limit.
    DOSSIER_MAX_UPLOAD_BYTES: String(4 * 1024 ** 3),
  });
  try {
    const client = await connect(stack);
    let key = 0;
    const { artifact } = await callTool(client, 'register_artifact', { path: image });
    const direct: number[] = [];
    const ours: number[] = [];
    const directCpu: number[] = [];
    const oursCpu: number[] = [];
    for (let i = 0; i < (PART === 'scan' ? 0 : RUNS); i++) {
      const out = path.join(dir, `unblob-${i}`);
      const work = path.join(os.tmpdir(), `bench-unblob-${i}`);
      mkdirSync(work, { recursive: true });
      const [took, cpu] = await withCpu(() =>
        runCommand(unblob, [
          '-e',
          out,
          '--report',
          path.join(work, 'r.json'),
          '--log',
          path.join(work, 'l'),
          image,
        ]),
      );
      direct.push(took);
      directCpu.push(cpu);
      rmSync(out, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
      const [[t, r], spent] = await withCpu(() =>
        timed(() =>
          untilDone(client, 'extract_firmware', {
            artifact: artifact.digest,
            detail: 'summary',
            wait_ms: 110_000,
            timeout_ms: 900_000,
            limits: { max_ratio: 100 },
            idempotency_key: `bench-breadth-${++key}`,
          }),
        ),
      );
      if (r.status !== 'succeeded')
        throw new Error(`extract_firmware ended ${r.status}: ${JSON.stringify(r.error)}`);
      ours.push(t);
      oursCpu.push(spent);
      rmSync(path.join(stack.config.home, r.summary.output), { recursive: true, force: true });
    }
    if (PART !== 'scan')
      lines.push(
        `| mixed image (TRX: gzip kernel + erofs of ${FS_FILES} × 1 MiB; zstd 8 MiB; FAT 16 MiB; 4 MiB random), ${imageMb.toFixed(0)} MB: \`unblob\` directly (${RUNS} runs) | ${ms(median(direct))} (${(imageMb / (median(direct) / 1000)).toFixed(1)} MB/s) |`,
        `| the same: \`extract_firmware\` through the gateway (sandbox, checked writer, binwalk listing of the unknown chunks, chunks kept) | ${ms(median(ours))} (${(imageMb / (median(ours) / 1000)).toFixed(1)} MB/s) |`,
        `| throughput of extract_firmware ÷ unblob directly (target ≥ 0.8) | ${(median(direct) / median(ours)).toFixed(2)} |`,
        `| CPU time of the whole machine a run, medians: unblob directly / extract_firmware | ${(median(directCpu) / 1000).toFixed(2)} s / ${(median(oursCpu) / 1000).toFixed(2)} s |`,
      );

    if (PART === 'firmware') return lines;
    // Rule scans: the yara CLI (libyara) over each tree, and scan_with_rules over its extraction.
    const trees = [SCAN_FILES, ...(SCAN_LARGE_FILES > 0 ? [SCAN_LARGE_FILES] : [])];
    for (const [n, files] of trees.entries()) {
      const scanned = await benchScan(client, path.join(dir, `scan-${n}`), files, rulesFile, () => ++key);
      lines.push(...scanned);
    }
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return lines;
}

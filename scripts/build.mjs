// `npm run build` (and `npm install`, through `prepare`): compiles src/ to
// dist/ so the CLI and the services start from JavaScript, with no
// transpiling at start-up. Files that are not TypeScript (the analysis
// provider's scripts and locks, the CommonJS failure converter) are copied.
// dist/.built marks a complete build; bin/dossier.js runs dist/ only while
// it is newer than every file under src/.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const dist = path.join(root, 'dist');
const t0 = performance.now();

rmSync(path.join(dist, '.built'), { force: true });
// `npm ci` runs this as `prepare`: where the sources or the compiler are not there (an image's
// dependency layer, `--omit=dev`), there is nothing to build yet and dossier runs from sources.
if (
  !existsSync(path.join(src, 'cli', 'main.ts')) ||
  !existsSync(path.join(root, 'node_modules/typescript'))
) {
  console.error('build: skipped (no sources or no TypeScript compiler here); run `npm run build` later');
  process.exit(0);
}
const tsc = spawnSync(
  process.execPath,
  [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
if (tsc.status !== 0) {
  console.error('build: tsc failed; `dossier` keeps running from the TypeScript sources');
  process.exit(tsc.status ?? 1);
}

function copyAssets(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== '__pycache__') copyAssets(from);
    } else if (!entry.name.endsWith('.ts')) {
      const to = path.join(dist, path.relative(src, from));
      mkdirSync(path.dirname(to), { recursive: true });
      cpSync(from, to);
    }
  }
}
copyAssets(src);
writeFileSync(path.join(dist, '.built'), `${new Date().toISOString()}\n`);
console.error(`build: dist/ ready in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

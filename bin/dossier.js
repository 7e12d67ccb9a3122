#!/usr/bin/env node
// Entry point for `npm start` and `npx dossier …`. Runs the compiled build in
// dist/ (made by `npm install` / `npm run build`) while it is newer than every
// source file; otherwise the TypeScript sources through tsx, so an edit is
// never shadowed by a stale build.
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== '__pycache__') newest = Math.max(newest, newestSource(full));
    } else newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

function builtAt() {
  try {
    return statSync(path.join(root, 'dist', '.built')).mtimeMs;
  } catch {
    return 0;
  }
}

if (process.env.DOSSIER_FROM_SOURCE !== '1' && builtAt() >= newestSource(path.join(root, 'src'))) {
  await import('../dist/cli/main.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}

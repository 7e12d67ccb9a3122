// The programs the boundaries harness (bench/boundaries.ts) scores, built from
// source here: the SQLite amalgamation and Google's cpu_features (both ship in
// node_modules), and Lua 5.4 and zlib from Debian's source packages (`apt-get
// source`, which needs a deb-src line for the configured mirror; without one
// they are skipped and the harness says so). Each program is built by every
// toolchain that works here, at -O0, -O2 and -O3, kept unstripped (the truth)
// and stripped (what dossier analyses).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cpuFeaturesArgs } from '../tests/helpers/boundaries.ts';

type Arch = 'x86-64' | 'aarch64' | 'armhf';
const ROOT = path.resolve(import.meta.dirname, '..');
const SOURCES = path.join(os.homedir(), '.cache', 'dossier', 'bench-sources');

export interface Toolchain {
  arch: Arch;
  compiler: 'gcc' | 'clang';
  cc: string[];
  strip: string;
}

export const TOOLCHAINS: Toolchain[] = [
  { arch: 'x86-64', compiler: 'gcc', cc: ['gcc'], strip: 'strip' },
  { arch: 'x86-64', compiler: 'clang', cc: ['clang'], strip: 'strip' },
  { arch: 'aarch64', compiler: 'gcc', cc: ['aarch64-linux-gnu-gcc'], strip: 'aarch64-linux-gnu-strip' },
  {
    arch: 'aarch64',
    compiler: 'clang',
    cc: ['clang', '--target=aarch64-linux-gnu'],
    strip: 'aarch64-linux-gnu-strip',
  },
  { arch: 'armhf', compiler: 'gcc', cc: ['arm-linux-gnueabihf-gcc'], strip: 'arm-linux-gnueabihf-strip' },
  {
    arch: 'armhf',
    compiler: 'clang',
    cc: ['clang', '--target=arm-linux-gnueabihf'],
    strip: 'arm-linux-gnueabihf-strip',
  },
];
export const LEVELS = ['-O0', '-O2', '-O3'] as const;

export interface Program {
  name: string;
  /** Compiler arguments (sources, include paths, defines, libraries) for an architecture. */
  args(arch: Toolchain['arch']): string[];
}

const SQLITE_MAIN = `#include <stdio.h>
#include "sqlite3.h"
static int row(void *u, int n, char **v, char **c) {
  (void)u;
  for (int i = 0; i < n; i++) printf("%s=%s\\n", c[i], v[i] ? v[i] : "NULL");
  return 0;
}
int main(int argc, char **argv) {
  sqlite3 *db; char *err = 0;
  if (sqlite3_open(":memory:", &db)) return 1;
  int rc = sqlite3_exec(db, argc > 1 ? argv[1] : "select sqlite_version()", row, 0, &err);
  if (rc) fprintf(stderr, "%s\\n", err);
  sqlite3_close(db);
  return rc != 0;
}
`;

/** Unpacks a Debian source package into the sources cache once; undefined when apt cannot fetch it. */
function debianSource(pkg: string, log: (line: string) => void): string | undefined {
  mkdirSync(SOURCES, { recursive: true });
  const have = () =>
    readdirSync(SOURCES).find(
      (d) => d.startsWith(`${pkg}-`) && statSync(path.join(SOURCES, d)).isDirectory(),
    );
  if (!have()) {
    // The newest version first; a security update's source may be missing from the mirror, then the release's.
    let listed = '';
    try {
      listed = execFileSync('apt-cache', ['showsrc', pkg], { encoding: 'utf8', stdio: 'pipe' });
    } catch {
      // no deb-src line: the plain `apt-get source` below says so
    }
    const versions = [
      pkg,
      ...listed
        .split('\n')
        .filter((l) => l.startsWith('Version: '))
        .map((l) => `${pkg}=${l.slice('Version: '.length).trim()}`),
    ];
    const errors: string[] = [];
    for (const v of versions) {
      try {
        execFileSync('apt-get', ['source', '-qq', v], { cwd: SOURCES, stdio: 'pipe' });
        break;
      } catch (err) {
        errors.push((err as Error).message.split('\n')[0]!);
      }
    }
    if (!have()) {
      log(`${pkg}: apt-get source failed (a deb-src line for the mirror is needed): ${errors.join('; ')}`);
      return undefined;
    }
  }
  const dir = have();
  return dir ? path.join(SOURCES, dir) : undefined;
}

export function programs(work: string, log: (line: string) => void): Program[] {
  const sqlite = path.join(ROOT, 'node_modules/better-sqlite3/deps/sqlite3');
  writeFileSync(path.join(work, 'sqlite-main.c'), SQLITE_MAIN);
  const list: Program[] = [
    { name: 'cpu_features', args: cpuFeaturesArgs },
    {
      name: 'sqlite',
      args: () => [
        `-I${sqlite}`,
        '-DSQLITE_THREADSAFE=0',
        '-DSQLITE_OMIT_LOAD_EXTENSION',
        path.join(work, 'sqlite-main.c'),
        path.join(sqlite, 'sqlite3.c'),
        '-lm',
      ],
    },
  ];
  const lua = debianSource('lua5.4', log);
  if (lua) {
    const src = path.join(lua, 'src');
    const files = readdirSync(src).filter((f) => f.endsWith('.c') && f !== 'luac.c');
    // Debian's luaconf.h includes the header its rules write with the host's multiarch triplet.
    const include = path.join(work, 'lua-include');
    mkdirSync(include, { recursive: true });
    writeFileSync(path.join(include, 'lua5.4-deb-multiarch.h'), '#define DEB_HOST_MULTIARCH "dossier"\n');
    list.push({
      name: 'lua',
      args: () => [
        '-DLUA_USE_POSIX',
        `-I${src}`,
        `-I${include}`,
        ...files.map((f) => path.join(src, f)),
        '-lm',
      ],
    });
  }
  const zlib = debianSource('zlib', log);
  if (zlib) {
    const lib = readdirSync(zlib).filter((f) => f.endsWith('.c'));
    list.push({
      name: 'zlib',
      args: () => [
        `-I${zlib}`,
        '-DHAVE_UNISTD_H',
        ...lib.map((f) => path.join(zlib, f)),
        path.join(zlib, 'test', 'minigzip.c'),
      ],
    });
  }
  return list;
}

export interface Build {
  name: string; // "x86-64/gcc/-O2/sqlite"
  toolchain: Toolchain;
  level: string;
  program: string;
  unstripped: string;
  stripped: string;
}

/** Whether a toolchain compiles and links a trivial program here (its reason when not). */
export function toolchainWorks(t: Toolchain, work: string): string | undefined {
  const c = path.join(work, 'probe.c');
  writeFileSync(c, 'int main(void) { return 0; }\n');
  try {
    execFileSync(t.cc[0]!, [...t.cc.slice(1), '-o', path.join(work, 'probe'), c], { stdio: 'pipe' });
    execFileSync(t.strip, ['--version'], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return (err as Error).message.split('\n')[0];
  }
}

/** Compiles (once: an existing output is reused) and strips one build. */
export function build(work: string, t: Toolchain, level: string, p: Program): Build {
  const name = `${t.arch}/${t.compiler}/${level}/${p.name}`;
  const out = path.join(work, name.replaceAll('/', '_').replace('-O', 'O'));
  if (!existsSync(`${out}.stripped`)) {
    execFileSync(t.cc[0]!, [...t.cc.slice(1), level, '-w', '-o', out, ...p.args(t.arch)], {
      stdio: 'pipe',
      maxBuffer: 64 << 20,
    });
    execFileSync(t.strip, ['-o', `${out}.stripped`, out]);
  }
  return { name, toolchain: t, level, program: p.name, unstripped: out, stripped: `${out}.stripped` };
}

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliLine, findStack, liveStacks, recordStack, stacksDir } from './stacks.ts';

const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-stacks-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A DOSSIER_HOME with the dev.json a running `dossier start` writes. */
function stackHome(dir: string, name: string) {
  const home = path.join(dir, name);
  mkdirSync(home, { recursive: true });
  writeFileSync(path.join(home, 'dev.json'), '{}');
  return home;
}

describe('the stack a client command means', () => {
  it('is the live stack started in its folder or the nearest above, said in a sentence; forgotten at stop', () => {
    const dir = scratch();
    const env = { XDG_STATE_HOME: path.join(dir, 'state') };
    const home = stackHome(dir, 'custom-home');
    // A project folder of its own: the checkout running the tests may hold a .dossier/ of its own.
    const here = path.join(dir, 'project');
    mkdirSync(here);
    const forget = recordStack(home, env, here);
    expect(findStack(here, env)).toEqual({
      home,
      how: `using the stack started in ${here} (pid ${process.pid}, DOSSIER_HOME=${home})`,
    });
    expect(findStack(path.join(here, 'src', 'cli'), env)?.home).toBe(home);
    // Not from a folder beside or above the one it was started in.
    expect(findStack(dir, env)).toBeUndefined();
    expect(liveStacks(env).map((s) => s.home)).toEqual([home]);
    forget();
    expect(findStack(here, env)).toBeUndefined();
    expect(readdirSync(stacksDir(env))).toEqual([]);
  });

  it('is never a stack whose process ended (its pid reused or gone), nor one without connection details', () => {
    const dir = scratch();
    const env = { XDG_STATE_HOME: path.join(dir, 'state') };
    const home = stackHome(dir, 'gone');
    const here = path.join(dir, 'project');
    mkdirSync(here);
    recordStack(home, env, here);
    const [file] = readdirSync(stacksDir(env));
    const entry = JSON.parse(readFileSync(path.join(stacksDir(env), file!), 'utf8'));
    writeFileSync(path.join(stacksDir(env), file!), JSON.stringify({ ...entry, pid_start: '1' }));
    expect(findStack(here, env)).toBeUndefined();
    const bare = path.join(dir, 'bare');
    mkdirSync(bare);
    recordStack(bare, env, here);
    expect(liveStacks(env)).toEqual([]);
  });

  it('else the nearest .dossier/ above with connection details', () => {
    const dir = scratch();
    const env = { XDG_STATE_HOME: path.join(dir, 'state') };
    const home = stackHome(dir, '.dossier');
    const deep = path.join(dir, 'a', 'b');
    mkdirSync(deep, { recursive: true });
    expect(findStack(deep, env)).toEqual({
      home,
      how: `using ${path.join(home, 'dev.json')} (found from ${deep})`,
    });
  });
});

describe("the banner's CLI line", () => {
  const script = '/home/ana/dossier/bin/dossier.js';

  it('offers npx dossier inside the checkout, where npx finds its bin', () => {
    for (const here of ['/home/ana/dossier', '/home/ana/dossier/src/cli'])
      expect(cliLine(script, here)).toMatch(/^npx dossier call whoami \(in /);
  });

  it('names the script elsewhere, where npx would fetch a package of that name from the registry', () => {
    for (const here of ['/tmp/work', '/home/ana/dossier-other', '/home/ana']) {
      const line = cliLine(script, here);
      expect(line).toMatch(/^node \/home\/ana\/dossier\/bin\/dossier\.js call whoami \(in /);
      expect(line).not.toMatch(/npx/);
    }
  });
});

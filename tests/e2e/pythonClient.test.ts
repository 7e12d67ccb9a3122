// dossier driven by the Python MCP SDK 2.3.0, a dual-era client nobody here
// wrote, pinned to the revision in force (2026-07-28) and in `auto` mode, which
// probes server/discover and must choose 2026-07-28: the tools of the toolsets
// its URL chose listed, a capture
// approved through input_required (the SDK answers the form and retries), its
// retry attaching without asking again, an Evidence resource read, and with the
// tasks extension, a capture that asks as a task (answered through tasks/update),
// then outlives its wait, followed to its result. The SDK comes
// from its own hash-locked venv (tests/python), made once per host.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisionEnv, type PythonEnv, type PythonEnvSpec } from '../../src/python/venv.ts';
import { CATALOG } from '../../src/tools/catalog.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

const run = promisify(execFile);
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'python');

const PYTHON_SDK: PythonEnvSpec = {
  name: 'mcp-python-sdk',
  cacheFolder: 'python',
  dir,
  installs: [{ lock: 'requirements.lock', flags: ['--only-binary', ':all:'] }],
  scripts: ['modern_client.py', 'stdio_client.py'],
  versionProbe: 'from importlib.metadata import version; print(f"mcp {version(\'mcp\')}")',
  cost: 'a few seconds and 60 MB',
};

let t: TestStack;
let env: PythonEnv;
beforeAll(async () => {
  [t, env] = await Promise.all([startTestStack(), provisionEnv(PYTHON_SDK, '/usr/bin/python3')]);
}, 600_000);
afterAll(async () => {
  await t?.stop(true);
});

async function drive(mode: string, prefix: string) {
  const { stdout } = await run(
    env.python,
    // The endpoint's URL chooses the capture toolset (besides core) for every request of this client.
    [path.join(dir, 'modern_client.py'), `${t.url}?toolsets=capture`, t.token, mode, prefix],
    { timeout: 180_000 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

describe('the Python MCP SDK 2.3.0', () => {
  it.each([
    ['2026-07-28', 'py-pinned'],
    ['auto', 'py-auto'],
  ])(
    'mode %s: speaks 2026-07-28, approves through input_required, follows a task, reads a resource',
    async (mode, prefix) => {
      const out = await drive(mode, prefix);
      expect(out.protocol_version).toBe('2026-07-28');
      expect(out.tools).toEqual(
        CATALOG.filter((c) => c.toolset === 'core' || c.toolset === 'capture').map((c) => c.name),
      );

      // The approval form reached the SDK's elicitation callback once; the call then ran.
      expect(out.asked).toHaveLength(1);
      expect(out.asked[0]).toContain('/usr/bin/uname');
      expect(out.capture).toMatchObject({ status: 'succeeded', launch: { attached: false } });
      // The retry attaches to the approved launch and is never asked again.
      expect(out.retry).toMatchObject({
        status: 'succeeded',
        evidence_id: out.capture.evidence_id,
        launch: { attached: true },
      });
      expect(out.asked_after_retry).toBe(1);

      // With the tasks extension declared, the capture came back as a task that asked (answered
      // through tasks/update), then ran past its 100 ms wait; the SDK followed it to its result.
      expect(out.task.seen).toHaveLength(1);
      expect(out.task.seen[0]).toMatchObject({ status: 'input_required', final: 'completed' });
      expect(out.task.seen[0].statuses).toContain('working');
      expect(out.task.seen[0].task_id).toMatch(/^tsk_/);
      expect(out.task.asked).toBe(2);
      expect(out.task.result).toMatchObject({ status: 'succeeded', summary: { exit_code: 0 } });

      expect(out.resource).toMatchObject({ evidence_id: out.capture.evidence_id });
    },
    300_000,
  );
});

describe('the Python MCP SDK 2.3.0 over stdio (dossier mcp --stdio)', () => {
  it.each([
    ['2026-07-28', '2026-07-28', 'py-stdio-pinned'],
    ['auto', '2026-07-28', 'py-stdio-auto'],
    ['legacy', '2025-11-25', 'py-stdio-legacy'],
  ])(
    'mode %s: speaks %s, lists the same tools, captures once',
    async (mode, spoken, prefix) => {
      const { stdout } = await run(
        env.python,
        [
          path.join(dir, 'stdio_client.py'),
          mode,
          prefix,
          process.execPath,
          path.resolve('bin/dossier.js'),
          'mcp',
          '--stdio',
        ],
        {
          timeout: 180_000,
          env: { ...process.env, ...t.env, DOSSIER_TOKEN: t.token, DOSSIER_TOOLSETS: 'core,capture' },
        },
      );
      const out = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(out.protocol_version).toBe(spoken);
      expect(out.tools).toEqual(
        CATALOG.filter((c) => c.toolset === 'core' || c.toolset === 'capture').map((c) => c.name),
      );
      expect(out.whoami).toMatchObject({ principal: 'local', team: 'local' });
      expect(out.capture).toMatchObject({ status: 'succeeded', launch: { attached: false } });
      expect(out.retry).toMatchObject({ evidence_id: out.capture.evidence_id, launch: { attached: true } });
      // A session grows its list; without one, the reply says how a stdio server lists more (no URL).
      if (spoken === '2025-11-25') expect(out.enable).toMatchObject({ enabled: ['devices'] });
      else {
        expect(out.enable).toMatchObject({ enabled: [], note: expect.stringContaining('DOSSIER_TOOLSETS=') });
        expect(out.enable).not.toHaveProperty('url');
        expect(out.enable.tools.map((tool: { name: string }) => tool.name)).toContain('register_device');
      }
    },
    300_000,
  );
});

// A reverse engineer's first hour, driven as a newcomer drives it: a Debian
// package uploaded with the CLI, extracted recursively, its ELF found through
// the summary's counts and analysed by the digest its row shows, a capture
// followed from its running reply, an unknown settled, and the whole
// investigation carried to another store in a bundle that keeps the unknowns.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type Reply } from '../helpers/mcp.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

const work = scratchDir('first-hour');
const investigation = 'hello-1';
let here: TestStack;
let elsewhere: TestStack;
let client: Client;
let deb: string;

/** A `hello` package as Debian ships one: an ELF in usr/bin, a gzip'd changelog beside it. */
function helloDeb(): string {
  const pkg = path.join(work, 'hello');
  mkdirSync(path.join(pkg, 'DEBIAN'), { recursive: true });
  mkdirSync(path.join(pkg, 'usr/bin'), { recursive: true });
  mkdirSync(path.join(pkg, 'usr/share/doc/hello'), { recursive: true });
  writeFileSync(
    path.join(pkg, 'DEBIAN/control'),
    'Package: hello\nVersion: 2.10\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: hello\n',
  );
  const c = path.join(work, 'hello.c');
  writeFileSync(c, '#include <stdio.h>\nint main(void) { puts("Hello, world!"); return 0; }\n');
  execFileSync('gcc', ['-O0', '-o', path.join(pkg, 'usr/bin/hello'), c]);
  writeFileSync(path.join(pkg, 'usr/share/doc/hello/changelog'), 'hello (2.10) unstable\n'.repeat(40));
  execFileSync('gzip', ['-9n', path.join(pkg, 'usr/share/doc/hello/changelog')]);
  const out = path.join(work, 'hello_2.10_amd64.deb');
  execFileSync('dpkg-deb', ['-Zxz', '--root-owner-group', '--build', pkg, out], { stdio: 'ignore' });
  return out;
}

beforeAll(async () => {
  deb = helloDeb();
  [here, elsewhere] = await Promise.all([startTestStack(), startTestStack()]);
  client = await here.connect();
}, 180_000);
afterAll(async () => {
  await Promise.allSettled([here?.stop(true), elsewhere?.stop(true)]);
});

describe("a reverse engineer's first hour", () => {
  let extraction: Reply;
  let elf: Reply;
  let analysis: Reply;

  it('uploads with the CLI and extracts recursively; the summary counts entries by type and says how to page one', async () => {
    const { stdout } = await promisify(execFile)('node', [path.resolve('bin/dossier.js'), 'upload', deb], {
      env: { ...process.env, DOSSIER_URL: here.url, DOSSIER_TOKEN: here.token },
    });
    const digest = JSON.parse(stdout).artifact.digest as string;
    extraction = await call(client, 'extract_artifact', {
      artifact: digest,
      recursive: true,
      detail: 'summary',
      investigation,
      idempotency_key: 'hello-extract',
    });
    expect(extraction.status, JSON.stringify(extraction.error)).toBe('succeeded');
    const { detected_types: types, view_by_type: view } = extraction.summary;
    expect(types).toMatchObject({ elf: 1 });
    // Every written file is counted under its type.
    const counted = Object.values(types as Record<string, number>).reduce((a, b) => a + b, 0);
    expect(counted).toBe(extraction.summary.written);
    // Files, folders, refusals and links add up to the entries (a folder's row says written too).
    const { entries, written, folders, refused, links_recorded: links } = extraction.summary;
    expect(folders).toBeGreaterThan(0);
    expect(written + folders + refused + links).toBe(entries);
    expect(view).toEqual({ kind: 'page', collection: 'entries', where: { detected_type: ['elf'] } });
    const page = await call(client, 'inspect_analysis_view', { evidence_id: extraction.evidence_id, view });
    expect(page.rows).toHaveLength(1);
    elf = page.rows[0].row;
    expect(elf.path).toMatch(/usr\/bin\/hello$/);
    // The row carries the exact value analysis tools take.
    expect(elf.artifact).toBe(`sha256:${elf.sha256}`);
  });

  it('analyses the extracted ELF by the digest its row shows, registering it for the team that extracted it', async () => {
    analysis = await call(client, 'inspect_binary', {
      artifact: elf.artifact,
      detail: 'summary',
      wait_ms: 110_000,
    });
    for (let i = 0; i < 5 && analysis.status === 'running'; i++)
      analysis = await call(client, 'inspect_binary', {
        artifact: elf.artifact,
        detail: 'summary',
        wait_ms: 110_000,
      });
    expect(analysis.status, JSON.stringify(analysis.error)).toBe('succeeded');
    const artifacts = await call(client, 'list_artifacts', {});
    expect(artifacts.artifacts.find((a: Reply) => a.digest === elf.artifact)).toMatchObject({
      origin: `extracted:${extraction.evidence_id}`,
      provenance: { evidence_id: extraction.evidence_id, path: elf.path },
    });
  }, 300_000);

  it('another team gets not_found for that digest, told how an extracted entry is registered', async () => {
    const rival = await here.connect(await here.tokenFor('trent', 'rival-team'));
    const refused = await call(rival, 'inspect_binary', { artifact: elf.artifact });
    expect(refused.error.code).toBe('not_found');
    expect(refused.error.remediation).toContain('{evidence_id, entry}');
  });

  it('a running reply says how to follow it, and following it as told gets the outcome', async () => {
    const args = { executable: '/usr/bin/sleep', args: ['2'], investigation, idempotency_key: 'hello-nap' };
    const running = await call(client, 'capture_process_scenario', { ...args, wait_ms: 0 });
    expect(running.status).toBe('running');
    expect(running.launch.phase).toBe('started');
    expect(running.next).toMatch(/same idempotency_key/);
    expect(running.next).toMatch(/await_launch/);
    const awaited = await call(client, 'await_launch', { idempotency_key: 'hello-nap', wait_ms: 30_000 });
    expect(awaited.status).toBe('succeeded');
    expect(awaited.next).toBeUndefined();
    expect((await call(client, 'capture_process_scenario', args)).evidence_id).toBe(awaited.evidence_id);
  });

  it('exports the whole investigation with its unknowns; another store imports it and continues from there', async () => {
    const recorded = await call(client, 'record_unknown', {
      question: 'Does hello read its locale from the environment?',
      scope: `${elf.artifact} main`,
      evidence_ids: [analysis.evidence_id],
      investigation,
    });
    const settled = await call(client, 'update_unknown', {
      unknown_id: recorded.unknown.unknown_id,
      expected_revision: 1,
      status: 'resolved',
      note: 'It prints a fixed string; no locale is read.',
      settled_by: [analysis.evidence_id],
    });
    expect(settled.unknown.revision).toBe(2);
    const exported = await call(client, 'export_evidence_bundle', {
      investigation,
      idempotency_key: 'hello-bundle',
    });
    expect(exported.status, JSON.stringify(exported.error)).toBe('succeeded');
    // The extraction and the capture are the investigation's; the analysis comes along because its unknown names it.
    expect(exported.summary).toMatchObject({ evidence: 3, investigation });
    expect(exported.summary.unknowns).toBeGreaterThanOrEqual(1);

    const name = path.basename(exported.summary.path);
    const bundle = Buffer.from(
      await (
        await fetch(new URL(`/bundles/${name}`, here.url), {
          headers: { Authorization: `Bearer ${here.token}` },
        })
      ).arrayBuffer(),
    );
    const post = (body: Buffer | string) =>
      fetch(new URL('/bundles', elsewhere.url), {
        method: 'POST',
        headers: { Authorization: `Bearer ${elsewhere.token}` },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
    // A changed note is a changed byte: the whole bundle is refused.
    const tampered = await post(bundle.toString('utf8').replace('no locale is read', 'no locale is reaD'));
    expect(tampered.status).toBe(422);
    expect(((await tampered.json()) as Reply).error.code).toBe('integrity_error');

    const imported = (await (await post(bundle)).json()) as Reply;
    expect(imported).toMatchObject({ imported: 3, already_present: 0 });
    expect(imported.unknowns).toMatchObject({ imported: 1, conflicts: [] });
    const there = await elsewhere.connect();
    const listed = await call(there, 'list_unknowns', { investigation });
    expect(listed.unknowns.find((u: Reply) => u.unknown_id === recorded.unknown.unknown_id)).toMatchObject({
      status: 'resolved',
      revision: 2,
      note: 'It prints a fixed string; no locale is read.',
      settled_by: [analysis.evidence_id],
      created_by: recorded.unknown.created_by,
    });
    expect((await call(there, 'get_evidence', { evidence_id: analysis.evidence_id })).error).toBeUndefined();

    // The other store moves on; the same bundle again changes nothing and overwrites nothing.
    await call(there, 'update_unknown', {
      unknown_id: recorded.unknown.unknown_id,
      expected_revision: 2,
      status: 'superseded',
    });
    const again = (await (await post(bundle)).json()) as Reply;
    expect(again).toMatchObject({ imported: 0, already_present: 3 });
    expect(again.unknowns).toMatchObject({ imported: 0, updated: 0, conflicts: [] });
    const kept = await call(there, 'list_unknowns', { investigation, status: 'superseded' });
    expect(kept.unknowns.map((u: Reply) => u.unknown_id)).toContain(recorded.unknown.unknown_id);
  });
});

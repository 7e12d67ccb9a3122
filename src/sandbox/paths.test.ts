import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openUnder } from './paths.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-paths-'));
const root = path.join(dir, 'root');
const elsewhere = path.join(dir, 'elsewhere');
mkdirSync(root);
mkdirSync(elsewhere);
writeFileSync(path.join(root, 'mine'), 'mine');
writeFileSync(path.join(elsewhere, 'theirs'), 'theirs');
symlinkSync(path.join(elsewhere, 'theirs'), path.join(root, 'link'));
symlinkSync(elsewhere, path.join(root, 'door')); // a folder link leading out
symlinkSync(path.join(elsewhere, 'nothing'), path.join(root, 'dangling-out'));
symlinkSync(path.join(root, 'nothing'), path.join(root, 'dangling-in'));
symlinkSync(path.join(root, 'mine'), path.join(elsewhere, 'way-in')); // a name outside leading in
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const refusal = (file: string) =>
  openUnder(file, [root], 'DOSSIER_ALLOWED_ROOTS').then(
    async (opened) => {
      await opened.handle.close();
      return undefined;
    },
    (err: { code: string; message: string }) => ({ code: err.code, message: err.message.replace(file, 'F') }),
  );

describe('openUnder', () => {
  it('opens a file under a root', async () => {
    expect(await refusal(path.join(root, 'mine'))).toBeUndefined();
  });

  it('answers a name outside the roots the same whether or not anything is there', async () => {
    const there = await refusal(path.join(elsewhere, 'theirs'));
    expect(there).toMatchObject({ code: 'policy_denied' });
    expect(await refusal(path.join(elsewhere, 'nothing'))).toEqual(there);
    expect(await refusal('/etc/shadow')).toEqual(there);
    expect(await refusal('/etc/no-such-file')).toEqual(there);
    expect(await refusal(path.join(root, '..', 'elsewhere', 'nothing'))).toEqual(there);
  });

  it('says not_found under a root, and refuses a link that leads out of it', async () => {
    expect(await refusal(path.join(root, 'nothing'))).toMatchObject({ code: 'not_found' });
    expect(await refusal(path.join(root, 'dangling-in'))).toMatchObject({ code: 'not_found' });
    expect(await refusal(path.join(root, 'link'))).toMatchObject({ code: 'policy_denied' });
  });

  it('answers the same for what is and what is not there beyond a link that leads out', async () => {
    const there = await refusal(path.join(elsewhere, 'theirs'));
    for (const name of [
      path.join(root, 'door', 'theirs'),
      path.join(root, 'door', 'nothing'),
      path.join(root, 'dangling-out'),
      `${root}/door/../elsewhere/nothing`,
    ])
      expect(await refusal(name), name).toEqual(there);
  });

  it('opens a file under a root by a name outside that leads in', async () => {
    expect(await refusal(path.join(elsewhere, 'way-in'))).toBeUndefined();
  });
});

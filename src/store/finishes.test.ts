// A call waiting on a launch or an analysis hears of its end the moment this
// process writes it to the store (a real SQLite file), and only then.
import { describe, expect, it } from 'vitest';
import { scratchStore } from '../../tests/helpers/scratchStore.ts';
import { Finishes } from './finishes.ts';

const scratch = scratchStore('finishes');
const store = () => scratch.store;

/** Whether `p` has settled by the time pending I/O callbacks and microtasks have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

const launch = (workflowId: string) => ({
  team: 't',
  principal: 'p',
  key: workflowId,
  tool: 'capture_process_scenario',
  bodyDigest: 'd',
  input: {},
  workflowId,
  investigation: null,
});
const failed = (message: string) => ({
  status: 'failed' as const,
  evidenceId: null,
  summary: null,
  error: { code: 'internal', message },
});
const succeeded = { status: 'succeeded' as const, evidenceId: null, summary: null, error: null };

describe('Finishes', () => {
  it('tells every waiter of that run, and no other', async () => {
    const finishes = new Finishes();
    const a1 = finishes.watch('a');
    const a2 = finishes.watch('a');
    const b = finishes.watch('b');
    finishes.announce('a');
    expect(await settled(a1.ended)).toBe(true);
    expect(await settled(a2.ended)).toBe(true);
    expect(await settled(b.ended)).toBe(false);
    b.stop();
    finishes.announce('b');
    expect(await settled(b.ended)).toBe(false);
  });

  it('an end announced before the watch is not heard (the caller read the row first)', async () => {
    const finishes = new Finishes();
    finishes.announce('c');
    expect(await settled(finishes.watch('c').ended)).toBe(false);
  });
});

describe('the store announces what it writes', () => {
  it('a launch finished here ends the wait; a second finish of it announces nothing', async () => {
    await store().launches.claim(launch('wf-1'));
    const first = store().launches.watchEnd('wf-1');
    expect(await settled(first.ended)).toBe(false);
    await store().launches.finish('wf-1', succeeded);
    expect(await settled(first.ended)).toBe(true);
    const again = store().launches.watchEnd('wf-1');
    await store().launches.finish('wf-1', failed('late'));
    expect(await settled(again.ended)).toBe(false);
    again.stop();
    expect((await store().launches.byWorkflowId('wf-1'))?.status).toBe('succeeded');
  });

  it('a finish that holds its announcement tells the waiters only when the caller says', async () => {
    await store().launches.claim(launch('wf-3'));
    const wait = store().launches.watchEnd('wf-3');
    await store().launches.finish('wf-3', succeeded, { announce: false });
    expect(await settled(wait.ended)).toBe(false);
    store().launches.announceEnd('wf-3');
    expect(await settled(wait.ended)).toBe(true);
  });

  it('a launch that never started, recorded as ended, ends the wait', async () => {
    await store().launches.claim(launch('wf-2'));
    const wait = store().launches.watchEnd('wf-2');
    expect(await store().launches.finishUnstarted('wf-2', failed('never started'))).toBe(true);
    expect(await settled(wait.ended)).toBe(true);
  });

  it('an analysis finished here ends the wait', async () => {
    await store().analyses.claim({
      team: 't',
      key: 'k',
      kind: 'query',
      tool: 'scan_with_rules',
      input: {},
      databaseKey: null,
      workflowId: 'an-1',
      requestedBy: 'p',
    });
    const wait = store().analyses.watchEnd('an-1');
    await store().analyses.finish('an-1', {
      status: 'succeeded',
      evidenceId: null,
      result: null,
      error: null,
    });
    expect(await settled(wait.ended)).toBe(true);
  });
});

// Tasks that ask a human before their launch is claimed (the stateless era), on
// both backends: one question per call while it is open, a cap on the open
// questions of a principal, an answer recorded once, and why a refusal ran nothing.
import { afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function open(backend: (typeof BACKENDS)[number]): Promise<Store> {
  const s = await freshStore(backend);
  closers.push(s.close);
  return s.store;
}

const question = (key: string, principal = 'alice') => ({
  team: 'red',
  principal,
  tool: 'capture_process_scenario',
  idempotency_key: key,
  body_digest: `digest-${key}`,
  arguments: { executable: '/usr/bin/true', idempotency_key: key },
  plan: { executable: '/usr/bin/true' },
  ttl_ms: 60_000,
  poll_interval_ms: 1_000,
});

describe.each(BACKENDS)('task approvals on %s', (backend) => {
  it('asks once per call, caps the open questions of a principal, and takes one answer', async () => {
    const store = await open(backend);
    const first = await store.taskApprovals.ask(question('k1'), 2);
    const again = await store.taskApprovals.ask(question('k1'), 2);
    expect(again).toMatchObject({ task_id: (first as { task_id: string }).task_id, answer: null });
    await store.taskApprovals.ask(question('k2'), 2);
    // A third open question of alice is refused; the same call asked again is not a new one.
    expect(await store.taskApprovals.ask(question('k3'), 2)).toBe('full');
    expect(await store.taskApprovals.ask(question('k1'), 2)).not.toBe('full');
    // Bob's questions are his own.
    expect(await store.taskApprovals.ask(question('k3', 'bob'), 2)).not.toBe('full');

    const id = (first as { task_id: string }).task_id;
    expect(await store.taskApprovals.answer(id, 'approved')).toBe(true);
    expect(await store.taskApprovals.answer(id, 'refused')).toBe(false);
    expect((await store.taskApprovals.get('red', 'alice', id))!.answer).toBe('approved');
    expect(await store.taskApprovals.get('red', 'bob', id)).toBeUndefined();
    expect(await store.taskApprovals.get('blue', 'alice', id)).toBeUndefined();
    // Answered, it no longer counts: alice may ask again.
    expect(await store.taskApprovals.ask(question('k3'), 2)).not.toBe('full');
  });

  it('keeps why a refused call ran nothing', async () => {
    const store = await open(backend);
    const asked = (await store.taskApprovals.ask(question('k1'), 10)) as { task_id: string };
    const reply = {
      code: 'policy_denied' as const,
      category: 'policy' as const,
      message: 'The human declined.',
      retryable: false,
      remediation: 'Change the plan.',
      details: {},
    };
    await store.taskApprovals.refuse(asked.task_id, reply);
    expect(await store.taskApprovals.get('red', 'alice', asked.task_id)).toMatchObject({
      answer: 'refused',
      reply,
    });
  });
});

// Which team a payload is sealed to, from the serialization context the SDK gives: pure, no server.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parsePayloadKeys, sealedTeam, TeamPayloadCodec } from './codec.ts';

const codec = new TeamPayloadCodec(parsePayloadKeys(`k1:${randomBytes(32).toString('base64')}`));
const payload = { metadata: { encoding: new TextEncoder().encode('json/plain') }, data: new Uint8Array([1]) };
const sealedFor = async (context: Parameters<TeamPayloadCodec['encode']>[1]) =>
  sealedTeam((await codec.encode([payload], context))[0]!);

describe('the payload codec', () => {
  it('seals to the team a workflow’s ID names, and a standalone activity’s ID when there is no workflow', async () => {
    expect(await sealedFor({ type: 'workflow', namespace: 'n', workflowId: 'launch/blue/ann/k' })).toBe(
      'blue',
    );
    expect(
      await sealedFor({ type: 'activity', namespace: 'n', workflowId: 'launch/blue/ann/k', isLocal: false }),
    ).toBe('blue');
    expect(
      await sealedFor({ type: 'activity', namespace: 'n', activityId: 'launch/red/bob/k', isLocal: false }),
    ).toBe('red');
    // A workflow's activity is its workflow's team, whatever its activity ID says.
    expect(
      await sealedFor({
        type: 'activity',
        namespace: 'n',
        workflowId: 'launch/blue/ann/k',
        activityId: 'launch/red/bob/k',
        isLocal: false,
      }),
    ).toBe('blue');
    expect(await sealedFor({ type: 'activity', namespace: 'n', activityId: '7', isLocal: false })).toBe('');
    expect(await sealedFor(undefined)).toBe('');
  });

  it('opens what it sealed, for any team', async () => {
    const [sealed] = await codec.encode([payload], {
      type: 'activity',
      namespace: 'n',
      activityId: 'launch/red/bob/k',
      isLocal: false,
    });
    const [opened] = await codec.decode([sealed!]);
    expect(new TextDecoder().decode(opened!.metadata!.encoding!)).toBe('json/plain');
    expect([...opened!.data!]).toEqual([1]);
  });
});

// What the audit UI lets a team read: pure decisions on request targets, no server.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { ownExecutions, pageTokens, scopeUiRequest, teamQuery } from './uiScope.ts';

const NS = 'dossier';
const tokens = pageTokens(randomBytes(32));
const scope = (url: string) => scopeUiRequest(url, 'blue', NS, tokens);
const own = encodeURIComponent('launch/blue/ann/k1');
const theirs = encodeURIComponent('launch/red/bob/k1');
const api = `/api/v1/namespaces/${NS}`;

describe('the audit UI scope', () => {
  it('passes pages and assets in canonical form, and nothing that could be read as another path', () => {
    expect(scope('/')).toEqual({ forward: '/' });
    expect(scope('/_app/immutable/a.js')).toEqual({ forward: '/_app/immutable/a.js' });
    expect(scope(`/namespaces/${NS}/workflows/${own}/run1/history`)).toEqual({
      forward: `/namespaces/${NS}/workflows/${own}/run1/history`,
    });
    for (const target of [
      `http://127.0.0.1:8233${api}/workflows`,
      `//x${api}/workflows`,
      `/API/v1/namespaces/${NS}/workflows`,
      `/api%2Fv1%2Fnamespaces%2F${NS}%2Fworkflows`,
      `/x//api/v1`,
      `/a/../api/v1/namespaces/${NS}/workflows`,
      `/a/%2E%2E/b`,
      '/%E0%A4%A',
      // The UI server's page that renders what a link gives it.
      '/render?content=%3Ch1%3Ex%3C%2Fh1%3E',
    ]) {
      expect(scope(target), target).toMatchObject({ refuse: 400 });
    }
  });

  it('passes no standalone activity API: a team sees no launch run as one (DOSSIER_LAUNCH_DISPATCH=standalone)', () => {
    for (const target of [
      `${api}/activities`,
      `${api}/activities?query=DossierTeam%3D%22red%22`,
      `${api}/activities/${theirs}`,
      `${api}/activities/${theirs}/outcome`,
      `${api}/activity-count`,
    ]) {
      expect(scope(target), target).toMatchObject({ refuse: 403 });
    }
  });

  it('passes the UI server’s settings and cluster facts, without the caller’s parameters', () => {
    expect(scope('/api/v1/settings?x=1')).toEqual({ forward: '/api/v1/settings' });
    expect(scope('/api/v1/cluster-info')).toEqual({ forward: '/api/v1/cluster-info' });
    expect(scope(`${api}/search-attributes`)).toEqual({ forward: `${api}/search-attributes` });
  });

  it('narrows every workflow list and count to the team, and filters the list on the way back', () => {
    expect(scope(`${api}/workflows`)).toEqual({
      forward: `${api}/workflows?query=DossierTeam+%3D+%27blue%27`,
      filter: 'executions',
    });
    const listed = scope(
      `${api}/workflows?query=${encodeURIComponent('ExecutionStatus="Running"')}&pageSize=20&namespace=x`,
    );
    expect(listed).toMatchObject({ filter: 'executions' });
    const params = new URL(`http://h${(listed as { forward: string }).forward}`).searchParams;
    expect(params.get('query')).toBe(`DossierTeam = 'blue' AND (ExecutionStatus="Running")`);
    expect(params.get('pageSize')).toBe('20');
    expect(params.has('namespace')).toBe(false);
    const counted = scope(
      `${api}/workflow-count?query=${encodeURIComponent('WorkflowType="x" GROUP BY ExecutionStatus')}`,
    );
    expect(new URL(`http://h${(counted as { forward: string }).forward}`).searchParams.get('query')).toBe(
      `DossierTeam = 'blue' AND (WorkflowType="x") GROUP BY ExecutionStatus`,
    );
  });

  it('refuses a list query that could close the team’s group or comment it away', () => {
    for (const query of [
      `WorkflowId = 'a') OR (WorkflowId != 'b'`,
      `WorkflowId = 'a' OR 1=1 -- `,
      `WorkflowId = 'a' /* x */`,
      // To the parser an @@name may hold a quote, which would open no string.
      `@@' = 1) OR (DossierTeam = "local") OR (@@' = 1`,
      // A line comment hides a quote from a reader that does not know it, and its newline ends it.
      `WorkflowId = "-" //'\n) OR (DossierTeam = "local" //'\nAND WorkflowId != ""`,
      `WorkflowId = "-" // x`,
      `WorkflowId = "a\nb"`,
      `WorkflowId = "a"\r AND x = 1`,
      `WorkflowId = 'a' # x`,
      `WorkflowId = 'a'; SELECT 1`,
      `WorkflowId = 'a\\' OR WorkflowId != '`,
      `WorkflowId = 'open`,
      `(WorkflowId = 'a'`,
      'x'.repeat(2_001),
    ]) {
      expect(teamQuery('blue', query, false), query).toMatchObject({ refuse: 400 });
    }
    // Quotes keep what is in them: doubled quotes, parentheses and dashes inside a string pass.
    expect(teamQuery('blue', `WorkflowId = 'it''s (a) -- b'`, false)).toEqual({
      query: `DossierTeam = 'blue' AND (WorkflowId = 'it''s (a) -- b')`,
    });
  });

  it('shows the team its own workflows only, read with only the parameters a read needs', () => {
    expect(
      scope(`${api}/workflows/${own}?execution.runId=r1&execution.workflowId=launch/red/bob/k1`),
    ).toEqual({
      forward: `${api}/workflows/${own}?execution.runId=r1`,
    });
    const bound = `blue\n${NS}\nlaunch/blue/ann/k1\nhistory`;
    expect(scope(`${api}/workflows/${own}/history?maximumPageSize=5&namespace=other`)).toEqual({
      forward: `${api}/workflows/${own}/history?maximumPageSize=5`,
      filter: 'history',
      bound,
    });
    expect(scope(`${api}/workflows/${own}/history-reverse`)).toMatchObject({
      forward: `${api}/workflows/${own}/history-reverse`,
      filter: 'history',
    });
    expect(scope(`${api}/workflows/${own}/run/r1/history.json`)).toEqual({
      forward: `${api}/workflows/${own}/run/r1/history.json`,
    });
    expect(scope(`${api}/workflows/${encodeURIComponent('analysis-db/blue/ab/p-angr')}`)).not.toHaveProperty(
      'refuse',
    );
    for (const target of [
      `${api}/workflows/${theirs}`,
      `${api}/workflows/${theirs}/history`,
      `${api}/workflows/launch/blue/ann/k1`,
      `${api}/workflows/${encodeURIComponent('launch/blue/../red/bob')}`,
      `${api}/workflows/not-ours`,
      `${api}/workflows/${own}/query/x`,
      `/api/v1/namespaces/temporal-system/workflows`,
      `${api}/schedules`,
      `${api}/batch-operations`,
      `${api}/archived-workflows`,
      `/api/v1/nexus/endpoints`,
      `/api/v2/anything`,
    ]) {
      expect(scope(target), target).toMatchObject({ refuse: 403 });
    }
  });

  it('takes a history page token back only for the team and the workflow it was handed out for', () => {
    const page = (workflow: string, token: string, route = 'history') =>
      scope(`${api}/workflows/${workflow}/${route}?nextPageToken=${encodeURIComponent(token)}`);
    const sealed = tokens.seal('CiQw+/=', `blue\n${NS}\nlaunch/blue/ann/k1\nhistory`);
    expect(page(own, sealed)).toEqual({
      forward: `${api}/workflows/${own}/history?nextPageToken=${encodeURIComponent('CiQw+/=')}`,
      filter: 'history',
      bound: `blue\n${NS}\nlaunch/blue/ann/k1\nhistory`,
    });
    // Temporal's own token, one sealed for another workflow or route, or by another guard: refused.
    const another = encodeURIComponent('launch/blue/ann/k2');
    for (const [workflow, token, route] of [
      [own, 'CiQw+/=', 'history'],
      [another, sealed, 'history'],
      [own, sealed, 'history-reverse'],
      [
        own,
        pageTokens(randomBytes(32)).seal('CiQw+/=', `blue\n${NS}\nlaunch/blue/ann/k1\nhistory`),
        'history',
      ],
      [own, `x${sealed}`, 'history'],
    ] as const) {
      expect(page(workflow, token, route), `${workflow} ${token} ${route}`).toMatchObject({ refuse: 400 });
    }
    expect(
      scopeUiRequest(
        `${api}/workflows/${own}/history?nextPageToken=${encodeURIComponent(sealed)}`,
        'red',
        NS,
        tokens,
      ),
    ).toMatchObject({ refuse: 403 });
  });

  it('keeps only the team’s executions in a list reply, and its page token only when nothing was dropped', () => {
    const page = {
      executions: [{ execution: { workflowId: 'launch/blue/ann/k1' } }],
      nextPageToken: 'n',
      other: 1,
    };
    expect(ownExecutions(page, 'blue')).toEqual({
      executions: [{ execution: { workflowId: 'launch/blue/ann/k1' } }],
      nextPageToken: 'n',
    });
    expect(ownExecutions({}, 'blue')).toEqual({ executions: [] });
    const reply = {
      executions: [
        { execution: { workflowId: 'launch/blue/ann/k1' } },
        { execution: { workflowId: 'launch/red/bob/k1' } },
        { execution: { workflowId: 'forged' } },
        { execution: {} },
        null,
      ],
      nextPageToken: 'n',
    };
    expect(ownExecutions(reply, 'blue')).toEqual({
      executions: [{ execution: { workflowId: 'launch/blue/ann/k1' } }],
    });
  });
});

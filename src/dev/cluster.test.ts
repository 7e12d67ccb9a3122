import { describe, expect, it } from 'vitest';
import { startCluster } from './cluster.ts';

describe('dossier cluster up', () => {
  it('refuses before starting anything when a gateway would get a port fetch() refuses', async () => {
    // Gateways go on DOSSIER_PORT, DOSSIER_PORT+1: the second would be 6000.
    await expect(
      startCluster(
        { DOSSIER_HOME: '/nonexistent/dossier-cluster-ports', DOSSIER_PORT: '5999' },
        { gateways: 2 },
      ),
    ).rejects.toThrow(/port 6000, which browsers and fetch\(\)/);
  });
});

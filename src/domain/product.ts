// What dossier calls itself wherever it introduces itself: the MCP server's
// info, the CLI's client info, every Evidence record's provenance and the
// Views' app info. package.json's version is pinned to this by product.test.ts.
export const PRODUCT = { name: 'dossier', version: '0.1.0' } as const;

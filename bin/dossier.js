#!/usr/bin/env node
// Entry point for `npm start` and `npx dossier …`: runs the TypeScript sources
// through tsx, so there is no build step between a checkout and a running stack.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');

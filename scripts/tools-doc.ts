// `npm run docs:tools` writes docs/tools.md; with --check it fails if the file is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { format } from 'prettier';
import { renderToolsDoc } from '../src/tools/docs.ts';

const file = new URL('../docs/tools.md', import.meta.url);
const rendered = await format(renderToolsDoc(), { parser: 'markdown', singleQuote: true, printWidth: 110 });
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current !== rendered) {
    console.error('docs/tools.md is stale: run `npm run docs:tools` and commit it.');
    process.exit(1);
  }
} else {
  writeFileSync(file, rendered);
  console.log('wrote docs/tools.md');
}

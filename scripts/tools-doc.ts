// `npm run docs:tools` writes docs/tools.md; with --check it fails if the file is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { format } from 'prettier';
import { renderToolsDoc } from '../src/tools/docs.ts';
import { renderFormatsTable } from '../src/tools/formats.ts';

const file = new URL('../docs/tools.md', import.meta.url);
const rendered = await format(renderToolsDoc(), { parser: 'markdown', singleQuote: true, printWidth: 110 });
// The README's format table is generated too, between its markers.
const readmeFile = new URL('../README.md', import.meta.url);
const readme = readFileSync(readmeFile, 'utf8');
const BEGIN = '<!-- formats:begin (npm run docs:tools) -->';
const END = '<!-- formats:end -->';
const table = await format(renderFormatsTable(), { parser: 'markdown', singleQuote: true, printWidth: 110 });
const [at, end] = [readme.indexOf(BEGIN), readme.indexOf(END)];
const fresh =
  at >= 0 && end > at ? `${readme.slice(0, at + BEGIN.length)}\n\n${table}\n${readme.slice(end)}` : readme;
if (process.argv.includes('--check') && fresh !== readme) {
  console.error("README.md's format table is stale: run `npm run docs:tools` and commit it.");
  process.exit(1);
}
if (!process.argv.includes('--check') && fresh !== readme) writeFileSync(readmeFile, fresh);
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

// The extension is type-checked against the API of the oldest VS Code it claims to run on:
// @types/vscode must be pinned to the floor of engines.vscode (^1.85.0 -> 1.85.0).
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const installed = JSON.parse(
  readFileSync(new URL('../node_modules/@types/vscode/package.json', import.meta.url), 'utf8'),
).version;
const floor = /^\^?(\d+\.\d+\.\d+)$/.exec(pkg.engines.vscode)?.[1];
const pinned = pkg.devDependencies['@types/vscode'];
const problems = [];
if (!floor) problems.push(`engines.vscode is ${pkg.engines.vscode}; expected ^X.Y.Z`);
if (pinned !== floor) problems.push(`@types/vscode is "${pinned}" in package.json; pin it to ${floor}`);
if (installed !== floor) problems.push(`@types/vscode ${installed} is installed; run npm ci to get ${floor}`);
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`type-checked against @types/vscode ${installed}, the floor of engines.vscode ${pkg.engines.vscode}`);

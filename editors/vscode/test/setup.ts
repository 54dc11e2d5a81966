/** Makes `require('vscode')` return the stand-in; imported first by every test file. */

import Module = require('module');

const stubPath = require.resolve('./vscode-stub');
const loader = Module as unknown as {
  _resolveFilename(request: string, ...rest: unknown[]): string;
};
const resolve = loader._resolveFilename;
loader._resolveFilename = function (request: string, ...rest: unknown[]): string {
  return request === 'vscode' ? stubPath : resolve.call(this, request, ...rest);
};

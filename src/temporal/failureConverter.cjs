// Failure messages and stack traces can carry paths, arguments and output:
// encode them as payloads too, so the payload codec seals them like the rest.
// CommonJS because Temporal loads it by path, in the worker, the client and
// the workflow bundle alike.
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });

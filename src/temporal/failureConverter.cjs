// Failure messages can carry paths, arguments and output: encode them as
// payloads too, so the payload codec seals them like the rest. Stack traces
// are dropped: they name source files and host folders, which the team that
// reads its failures in the audit UI has no use for (a worker's log keeps the
// whole failure of anything unexpected, under the reference its reply gives).
// CommonJS because Temporal loads it by path, in the worker, the client and
// the workflow bundle alike.
const { DefaultFailureConverter } = require('@temporalio/common');

class WithoutStackTraces extends DefaultFailureConverter {
  errorToFailureInner(err, payloadConverter, context) {
    const failure = super.errorToFailureInner(err, payloadConverter, context);
    // A failure that came from Temporal as it is (err.failure) is passed on untouched.
    return failure === err?.failure ? failure : { ...failure, stackTrace: '' };
  }
}

exports.failureConverter = new WithoutStackTraces({ encodeCommonAttributes: true });

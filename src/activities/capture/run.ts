// A capture as the effects run it (capture.ts, and its result in result.ts).
import type { CaptureInput } from '../../tools/capture.ts';

/** A capture as the effects run it: observe_native_calls sets the tracer to ltrace. */
export type CaptureRun = CaptureInput & { tracer?: 'ltrace'; call_filter?: string };

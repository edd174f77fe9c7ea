export {
  HerdGuardError,
  type HerdGuardErrorCode,
  type HerdGuardErrorOptions,
} from './herd-guard.error.js';
export { ConfigurationError } from './configuration.error.js';
export { InvalidKeyError } from './invalid-key.error.js';
export { LoaderFailedError } from './loader-failed.error.js';
export { LoaderTimeoutError } from './loader-timeout.error.js';
export { UpstreamUnavailableError } from './upstream-unavailable.error.js';
export { WaitAbortedError } from './wait-aborted.error.js';
export { WaitTimeoutError } from './wait-timeout.error.js';
export { SerializationError } from './serialization.error.js';
export { StoreError } from './store.error.js';
export { ClosedError } from './closed.error.js';
export { LoadFencedError } from './load-fenced.error.js';

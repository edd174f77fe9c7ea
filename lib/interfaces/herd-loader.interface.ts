import type { Observable } from 'rxjs';
import type { LoadContext } from '../core/herd-engine.js';

/**
 * Loads the value of a key: a value, a promise or an Observable (its last value is cached; it is
 * unsubscribed when the load is aborted). Return `null` or `undefined` for "not found".
 */
export type HerdLoader<T> = (context: LoadContext<T>) => T | Promise<T> | Observable<T>;

import { ClassSerializerInterceptor } from '@nestjs/common';
import { ConfigurationError } from '../errors/configuration.error.js';
import { isClassOrSubclass } from '../metadata/design-metadata.js';
import { HerdGuardInterceptor } from './herd-guard.interceptor.js';

/**
 * Fails when a route's `ClassSerializerInterceptor` runs outside its `HerdGuardInterceptor`
 * (earlier in `interceptors`: global ones, then the controller's, then the method's, as Nest runs
 * them). The cache then sees the handler's class instances, and stores them as plain copies that no
 * longer carry the `@Exclude()`, `@Expose({ groups })` or `toJSON()` of their class, so the
 * serializer would send a hit every field. The serializer's output cannot be known from inside:
 * the only safe order is the other one.
 */
export function assertSerializerInside(route: string, interceptors: readonly unknown[]): void {
  const cache = interceptors.findIndex((entry) => isKind(entry, HerdGuardInterceptor));
  if (cache === -1) return;
  const serializer = interceptors.findIndex((entry) => isKind(entry, ClassSerializerInterceptor));
  if (serializer === -1 || serializer > cache) return;
  throw new ConfigurationError(
    `@UseInterceptors(${route})`,
    'ClassSerializerInterceptor runs outside HerdGuardInterceptor, so cached answers would skip its @Exclude(), groups and toJSON(): register ClassSerializerInterceptor inside HerdGuardInterceptor (after it in one @UseInterceptors, on the method when the cache is on the controller, or bind HerdGuardInterceptor globally before it)',
  );
}

/** An interceptor bound as an instance or as a class (Nest makes it), a subclass included. */
function isKind(entry: unknown, type: abstract new (...args: never[]) => unknown): boolean {
  return entry instanceof type || isClassOrSubclass(entry, type);
}

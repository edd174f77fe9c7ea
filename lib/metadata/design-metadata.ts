/**
 * The part of reflect-metadata read here (Nest loads it; typed locally to avoid a global import).
 */
interface ReflectWithMetadata {
  getMetadata?(key: string, target: object, propertyKey?: string | symbol): unknown;
}

/** The return type TypeScript recorded for a decorated method (`emitDecoratorMetadata`), if any. */
export function designReturnType(prototype: object, method: string | symbol): unknown {
  return readMetadata('design:returntype', prototype, method);
}

/**
 * Metadata `key` of `target` (a class or a function), or of its member `propertyKey` when given.
 */
export function readMetadata(key: string, target: object, propertyKey?: string | symbol): unknown {
  const reflect = Reflect as unknown as ReflectWithMetadata;
  return propertyKey === undefined
    ? reflect.getMetadata?.(key, target)
    : reflect.getMetadata?.(key, target, propertyKey);
}

/** A class is `type` or extends it. */
export function isClassOrSubclass(
  candidate: unknown,
  type: abstract new (...args: never[]) => unknown,
): boolean {
  return (
    typeof candidate === 'function' && (candidate === type || candidate.prototype instanceof type)
  );
}

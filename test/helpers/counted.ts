/** `impl`, counting its calls in `calls` (a loader's runs). */
export function counted<A extends unknown[], R>(
  impl: (...args: A) => R,
): ((...args: A) => R) & { calls: number } {
  const wrapped = Object.assign(
    (...args: A): R => {
      wrapped.calls += 1;
      return impl(...args);
    },
    { calls: 0 },
  );
  return wrapped;
}

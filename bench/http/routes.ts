/** The trivial routes of S7a, in the order it measures them (`/ping/<route>/:id`). */
export const PING_ROUTES = ['uncached', 'noop-interceptor', 'herd-guard', 'cache-manager'] as const;
export type PingRoute = (typeof PING_ROUTES)[number];

/**
 * The scenarios `npm run bench` knows, in run order. A new scenario is a module exporting a
 * `Scenario` and one line here.
 */
import { s1ColdHerd, s2SoftExpiredHerd, s3HardExpiredHerd } from './herd.js';
import { s4SteadyChurn } from './s4-steady-churn.js';
import { s5HitPath } from './s5-hit-path.js';
import { s6FailingBackend } from './s6-failing-backend.js';
import { s7Http } from './s7-http.js';
import { s8InvalidationSpread } from './s8-invalidation-spread.js';
import { s9RedisFrozen } from './s9-redis-frozen.js';
import { s10StuckOwner } from './s10-stuck-owner.js';
import { type Scenario } from './scenario.js';

export const SCENARIOS: readonly Scenario[] = [
  s1ColdHerd,
  s2SoftExpiredHerd,
  s3HardExpiredHerd,
  s4SteadyChurn,
  s5HitPath,
  s6FailingBackend,
  s7Http,
  s8InvalidationSpread,
  s9RedisFrozen,
  s10StuckOwner,
];

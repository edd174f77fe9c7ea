import { HerdGuardError } from './herd-guard.error.js';

/**
 * An option or policy field has a value herd-guard cannot use. `field` names it (e.g.
 * `policy.hard`).
 */
export class ConfigurationError extends HerdGuardError {
  readonly code = 'HERD_GUARD_CONFIG' as const;

  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`Invalid herd-guard option "${field}": ${problem}`);
  }
}

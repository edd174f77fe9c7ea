import { describe, expect, it } from '@jest/globals';
import {
  HEDGE_MIN,
  HEDGE_REPORT_MS,
  HEDGE_WINDOW_MS,
  HedgeBudget,
  LOADS_PER_HEDGE,
  hedgesAllowed,
} from '../../../lib/core/hedge-budget.js';
import { ManualClock } from '../../helpers/clock.js';

const ask = (process: string, loads: number, ticket: string) => ({
  process,
  loads,
  ticket,
  countsForMs: HEDGE_WINDOW_MS,
});

describe('HedgeBudget: takeovers of stuck holders as hedged requests', () => {
  it('allows one hedge, or one per ten loads running', () => {
    expect(HEDGE_MIN).toBe(1);
    expect(LOADS_PER_HEDGE).toBe(10);
    expect([0, 9, 10, 19, 20, 105].map(hedgesAllowed)).toEqual([1, 1, 1, 1, 2, 10]);
  });

  it('grants hedges while fewer than the budget count, summing every process report', () => {
    const clock = new ManualClock();
    const budget = new HedgeBudget(clock.now);
    expect(budget.take(ask('pod-a', 12, 't1'))).toBe(true);
    // 12 loads: one hedge, already granted.
    expect(budget.take(ask('pod-a', 12, 't2'))).toBe(false);
    // Another pod reports 9 more loads running: 21 in the cluster, two hedges.
    expect(budget.take(ask('pod-b', 9, 't3'))).toBe(true);
    expect(budget.take(ask('pod-b', 9, 't4'))).toBe(false);
    expect(budget.counted).toBe(2);
  });

  it('counts a hedge for its window: a backend that stays slow is hedged once per window', () => {
    const clock = new ManualClock();
    const budget = new HedgeBudget(clock.now);
    expect(budget.take(ask('pod-a', 1, 't1'))).toBe(true);
    clock.advance(HEDGE_WINDOW_MS - 1);
    expect(budget.take(ask('pod-a', 1, 't2'))).toBe(false);
    clock.advance(1);
    expect(budget.counted).toBe(0);
    expect(budget.take(ask('pod-a', 1, 't3'))).toBe(true);
  });

  it("forgets a process's report once it is older than HEDGE_REPORT_MS", () => {
    const clock = new ManualClock();
    const budget = new HedgeBudget(clock.now);
    expect(budget.take(ask('pod-a', 30, 't1'))).toBe(true);
    expect(budget.take(ask('pod-a', 30, 't2'))).toBe(true);
    clock.advance(HEDGE_REPORT_MS);
    // pod-a's 30 loads no longer count: pod-b alone runs 1, and two hedges already count.
    expect(budget.take(ask('pod-b', 1, 't3'))).toBe(false);
    expect(budget.counted).toBe(2);
  });
});

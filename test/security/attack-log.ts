import { afterAll, expect } from 'vitest';

/**
 * The attack suite's ledger. Each attack is recorded once, by name, with its outcome:
 * - refused: the tool said no with a clear message and did nothing;
 * - contained: the tool ran, and the attack's effect was bounded (no program ran, no outside name or byte
 *   shown, a limit or deadline stopped it with a clear result);
 * - escaped: the attack worked. Every test also asserts its own expectation, so this only shows up in
 *   the summary when an assertion was weakened.
 * At the end of each file the ledger is checked (names distinct, nothing escaped) and one summary line is
 * printed: `[security] <file>: tried N, refused R, contained C`. README.md's security section adds these up.
 */
export type AttackOutcome = 'refused' | 'contained' | 'escaped';

const ledger = new Map<string, { tool: string; outcome: AttackOutcome }>();

afterAll(() => {
  const rows = [...ledger.values()];
  const count = (o: AttackOutcome) => rows.filter((r) => r.outcome === o).length;
  const file = (expect.getState().testPath ?? 'unknown').split('/').slice(-1)[0];
  console.log(
    `[security] ${file}: tried ${rows.length}, refused ${count('refused')}, contained ${count('contained')}, escaped ${count('escaped')}`,
  );
  expect([...ledger.entries()].filter(([, r]) => r.outcome === 'escaped').map(([k]) => k)).toEqual([]);
});

export function recordAttack(tool: string, name: string, outcome: AttackOutcome): void {
  const key = `${tool}: ${name}`;
  const previous = ledger.get(key);
  // The same attack run twice (e.g. a loop over engines names the engine) must keep its worst outcome.
  if (previous && previous.outcome === 'escaped') return;
  ledger.set(key, { tool, outcome });
}

export function attackCount(): number {
  return ledger.size;
}

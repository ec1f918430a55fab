/**
 * The downstream agent's settings from the paper. CodeGrep §4.1: "using OpenHands ... as the downstream
 * agent (temperature 0, 100-round max)"; CodeScout §6.1 likewise allows "upto 100 steps".
 */
export const PAPER_DOWNSTREAM_AGENT = {
  temperature: 0,
  maxRounds: 100,
} as const;

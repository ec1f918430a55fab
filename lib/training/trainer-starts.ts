import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { TrainerEventSchema, type TrainerEvent } from '../../schemas/training/trainer-protocol';
import { listSegments, segmentDir } from './layout';

type TrainerStartEvent = Extract<TrainerEvent, { event: 'start' }>;

/** The `start` line of each trainer attempt of one segment, oldest attempt first (attempt files sort by name). */
export function segmentTrainerStarts(runDir: string, segment: number): TrainerStartEvent[] {
  const dir = segmentDir(runDir, segment);
  if (!existsSync(dir)) return [];
  const starts: TrainerStartEvent[] = [];
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.stdout.jsonl'))
    .sort()) {
    for (const line of readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        continue;
      }
      const event = TrainerEventSchema.safeParse(value);
      if (!event.success || event.data.event !== 'start') continue;
      starts.push(event.data as TrainerStartEvent);
      break;
    }
  }
  return starts;
}

/**
 * The rollout engines the run's trainers reported in their `start` lines (trainer/engines.py), each once, e.g.
 * `hf — auto: no CUDA device (cpu), so vLLM cannot run — 2 processes`: the run report names them.
 */
export function rolloutEngines(runDir: string): string[] {
  const found = new Set<string>();
  for (const segment of listSegments(runDir)) {
    for (const start of segmentTrainerStarts(runDir, segment)) {
      const processes = start.world_size ?? 1;
      found.add(
        [start.generator, start.generator_reason, `${processes} process${processes === 1 ? '' : 'es'} on ${start.device}`]
          .filter(Boolean)
          .join(' — '),
      );
    }
  }
  return [...found];
}

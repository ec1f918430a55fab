import { z } from 'zod';
import { TrainerConfigSchema } from '../../schemas/training/trainer-config';

/** The committed JSON Schema of the trainer's config, which trainer/config.py validates against. */
export const TRAINER_CONFIG_SCHEMA_FILE = 'trainer/config.schema.json';

/** TrainerConfigSchema as JSON Schema text, exactly as committed in TRAINER_CONFIG_SCHEMA_FILE. */
export function trainerConfigJsonSchema(): string {
  const schema = z.toJSONSchema(TrainerConfigSchema, { target: 'draft-2020-12' });
  const described = {
    ...schema,
    title: 'codegrep trainer config',
    description:
      'Generated from schemas/training/trainer-config.ts by `npx tsx scripts/write-trainer-config-schema.ts`; do not edit by hand.',
  };
  return JSON.stringify(described, null, 2) + '\n';
}

// Writes trainer/config.schema.json from schemas/training/trainer-config.ts (run after changing the schema;
// lib/training/trainer-config-schema.test.ts fails while the committed file is stale).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TRAINER_CONFIG_SCHEMA_FILE, trainerConfigJsonSchema } from '../lib/training/trainer-config-schema';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
writeFileSync(path.join(root, TRAINER_CONFIG_SCHEMA_FILE), trainerConfigJsonSchema());
console.log(`wrote ${TRAINER_CONFIG_SCHEMA_FILE}`);

import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root (the folder holding package.json), whatever the current directory is. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

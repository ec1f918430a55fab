import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The real data shared beside the project (SWE-bench instances, OpenHands trajectories). */
export const sharedData = path.resolve(repoRoot, '../shared/data');

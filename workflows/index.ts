// The workflow bundle entry: every workflow type the CPU worker serves.
export { catm } from './catm';
export { environment } from './environment';
export { pipeline } from './pipeline';
export { downstream } from './downstream';
export { evaluation } from './evaluation';
export { training } from './training';
export { rft } from './rft';

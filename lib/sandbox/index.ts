export { grep } from './grep';
export { glob } from './glob';
export { read } from './read';
export { terminal, planCommand } from './terminal';
export { runTool, formatObservation } from './run-tool';
export { guardPath, canonicalRoot, type GuardedPath } from './paths';
export { subprocessSlots, Semaphore } from './semaphore';
export { defaultEngine, type SearchEngine, type SandboxOptions } from './engine';
export { PAPER_LIMITS, SANDBOX_LIMITS } from './limits';

// Outside programs: started in a process group of their own, stopped whole, always reaped.
export {
  ProcessGroup,
  signalProcessGroup,
  startProcessGroup,
  type OutputTarget,
  type ProcessGroupExit,
  type ProcessGroupOptions,
} from './process-group';
export { isProcessAlive, processStartTicks } from './proc-stat';
export { LineTail } from './line-tail';

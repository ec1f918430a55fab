// Outside programs: started in a process group of their own, stopped whole, always reaped.
export {
  ProcessGroup,
  signalProcessGroup,
  startProcessGroup,
  type OutputTarget,
  type ProcessGroupExit,
  type ProcessGroupOptions,
  type UnkillableProcess,
} from './process-group';
export { describeProcessState, isProcessAlive, processStartTicks, processState } from './proc-stat';
export { LineTail } from './line-tail';

export * from './params';
export * from './tool-efficiency';
export * from './codegrep';
export * from './codescout';

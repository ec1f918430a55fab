export * from './params';
export * from './set-scores';
export * from './levels';
export * from './line-ranges';
export * from './ranked';
export * from './summary';
export { seededRandom } from './seeded-random';

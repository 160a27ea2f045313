// The nestjs-periodic/testing subpath: what helps test the package's extensions, without Nest and without a
// test runner of its own.
export { type ContractSubject, coordinatorContract } from './contract.js';

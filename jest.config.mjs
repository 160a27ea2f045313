// Jest runs in native ESM mode (`--experimental-vm-modules`, see package.json): Nest 12 ships as ES modules
// only, and on Node 20 Jest's CommonJS loader cannot require them.
export default {
  testEnvironment: 'node',
  // A test on fake timers that computes a few thousand ticks takes well under a second, and much longer on a
  // machine whose cores are all busy: the margin is wide, and a test that waits for events ends with them.
  testTimeout: 30_000,
  // Every core: most of the slow files wait on real timers and replica processes rather than compute, and
  // the tests wait for events with wide margins, so two files side by side on 2 cores take half the time.
  maxWorkers: '100%',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  // The consumer fixtures run with their own Jest or Vitest: npm run test:consumers.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/consumers/'],
  extensionsToTreatAsEsm: ['.ts'],
  // Sources import each other with `.js` extensions, as Node's ESM loader requires; map them back to `.ts`.
  // The README's examples import the package by its name: that is `lib/`.
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^nestjs-periodic$': '<rootDir>/lib/index.ts',
    '^nestjs-periodic/terminus$': '<rootDir>/lib/terminus/index.ts',
    '^nestjs-periodic/dashboard$': '<rootDir>/lib/dashboard/index.ts',
    '^nestjs-periodic/testing$': '<rootDir>/lib/testing/index.ts',
  },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }] },
};

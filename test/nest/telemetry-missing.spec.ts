// `telemetry: true` in an application where @opentelemetry/api cannot be loaded (a module mock that throws, as
// the import of a package that is not installed does).
import { describe, expect, it, jest } from '@jest/globals';

jest.unstable_mockModule('@opentelemetry/api', () => {
  throw Object.assign(new Error("Cannot find package '@opentelemetry/api'"), {
    code: 'ERR_MODULE_NOT_FOUND',
  });
});
const { PeriodicConfigError, PeriodicModule } = await import('../../lib/index.js');
const { useApps } = await import('./helpers.js');

describe('telemetry: true without @opentelemetry/api', () => {
  const createApp = useApps();

  it('fails the bootstrap with a PeriodicConfigError that says what to install', async () => {
    const app = createApp({ imports: [PeriodicModule.forRoot({ telemetry: true })] });
    await expect(app).rejects.toThrow(PeriodicConfigError);
    await expect(app).rejects.toThrow('needs @opentelemetry/api, which cannot be loaded: install it');
  });
});

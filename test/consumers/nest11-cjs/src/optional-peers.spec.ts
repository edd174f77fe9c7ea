import { Test } from '@nestjs/testing';
import { HerdGuardModule } from 'herd-guard';

// Runs where the app installed no optional peer (the memory-only runs of run-consumers.mjs).
describe('herd-guard without ioredis installed', () => {
  it('fails the start of a module configured for Redis with a hint to install ioredis', async () => {
    const moduleRef = Test.createTestingModule({
      imports: [HerdGuardModule.forRoot({ redis: 'redis://127.0.0.1:6399' })],
    });
    await expect(moduleRef.compile()).rejects.toMatchObject({
      code: 'HERD_GUARD_CONFIG',
      field: 'redis',
      message: expect.stringContaining('npm install ioredis'),
    });
  });
});

import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import {
  Cached,
  HerdGuardModule,
  HerdGuardService,
  InjectHerdGuard,
  getHerdGuardToken,
  methodCacheKey,
} from '../../../lib/index.js';
import { startContext } from '../../helpers/nest-app.js';

interface Article {
  readonly id: number;
  readonly archived: boolean;
  readonly author: string;
}

/** A repository whose cached methods choose, from the row they read, how it is cached. */
@Injectable()
class ArticlesRepository {
  readonly calls = { find: 0, draft: 0 };

  constructor(private readonly herd: HerdGuardService) {}

  @Cached()
  async find(id: number): Promise<Article> {
    this.calls.find += 1;
    const article = { id, archived: id < 100, author: `author:${id % 3}` };
    // An archived article never changes: keep it for a day; a live one for a few seconds.
    this.herd.currentLoad()?.setPolicy({
      soft: article.archived ? '1d' : '5s',
      tags: [article.author],
    });
    return article;
  }

  @Cached()
  async draft(id: number): Promise<string> {
    this.calls.draft += 1;
    // A draft is still being edited: never cached.
    this.herd.currentLoad()?.doNotCache();
    return `draft ${id} (${this.calls.draft})`;
  }
}

/** A method of a named cache: it reaches its load through that cache's service. */
@Injectable()
class SessionsStore {
  /** What the default cache's service said inside the named cache's load. */
  defaultSaw: unknown = 'not called';

  constructor(
    @InjectHerdGuard('sessions') private readonly sessions: HerdGuardService,
    private readonly herd: HerdGuardService,
  ) {}

  @Cached({ cache: 'sessions' })
  async find(token: string): Promise<{ token: string; remember: boolean }> {
    const session = { token, remember: token.startsWith('r') };
    this.defaultSaw = this.herd.currentLoad();
    this.sessions.currentLoad()?.setPolicy({ soft: session.remember ? '1h' : '1m' });
    return session;
  }
}

@Module({
  imports: [
    HerdGuardModule.forRoot({ policy: { soft: '30s', jitter: 0 } }),
    HerdGuardModule.forRoot({ name: 'sessions', policy: { soft: '10s', jitter: 0 } }),
  ],
  providers: [ArticlesRepository, SessionsStore],
})
class AppModule {}

const apps: INestApplicationContext[] = [];

async function start(): Promise<INestApplicationContext> {
  const app = await startContext(AppModule);
  apps.push(app);
  return app;
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

describe('a @Cached method choosing how its result is cached (HerdGuardService.currentLoad())', () => {
  it('caches each result with the TTL the method chose from it', async () => {
    const app = await start();
    const repo = app.get(ArticlesRepository);
    const herd = app.get(HerdGuardService);
    await repo.find(7);
    await repo.find(700);
    const archived = await herd.peek(methodCacheKey('ArticlesRepository.find', [7]));
    const live = await herd.peek(methodCacheKey('ArticlesRepository.find', [700]));
    expect(archived!.softExpireAt - archived!.createdAt).toBe(86_400_000);
    expect(live!.softExpireAt - live!.createdAt).toBe(5_000);
    await repo.find(7);
    expect(repo.calls.find).toBe(2);
  });

  it('indexes the tags the method chose: deleteTag removes its entries', async () => {
    const app = await start();
    const repo = app.get(ArticlesRepository);
    await Promise.all([repo.find(1), repo.find(4), repo.find(2)]);
    expect(await app.get(HerdGuardService).deleteTag('author:1')).toBe(2);
    await Promise.all([repo.find(1), repo.find(4), repo.find(2)]);
    expect(repo.calls.find).toBe(5);
  });

  it('runs a method that chose not to be cached again on the next call', async () => {
    const app = await start();
    const repo = app.get(ArticlesRepository);
    const concurrent = await Promise.all([repo.draft(1), repo.draft(1)]);
    expect(concurrent).toEqual(['draft 1 (1)', 'draft 1 (1)']);
    await expect(repo.draft(1)).resolves.toBe('draft 1 (2)');
    expect(
      await app.get(HerdGuardService).peek(methodCacheKey('ArticlesRepository.draft', [1])),
    ).toBeUndefined();
  });

  it("lets a method of a named cache choose through that cache's service (another cache's sees no load)", async () => {
    const app = await start();
    const sessions = app.get(SessionsStore);
    await sessions.find('r-42');
    expect(sessions.defaultSaw).toBeUndefined();
    const entry = await app
      .get<HerdGuardService>(getHerdGuardToken('sessions'))
      .peek(methodCacheKey('SessionsStore.find', ['r-42']));
    expect(entry!.softExpireAt - entry!.createdAt).toBe(3_600_000);
  });

  it('gives no load context outside a load', async () => {
    const app = await start();
    expect(app.get(HerdGuardService).currentLoad()).toBeUndefined();
  });
});

import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Injectable,
  Module,
  NotFoundException,
  type INestApplicationContext,
  type Type,
} from '@nestjs/common';
import { Observable, from, lastValueFrom, toArray } from 'rxjs';
import {
  Cached,
  HerdGuardModule,
  HerdGuardService,
  KeySerializationError,
  methodCacheKey,
} from '../../../lib/index.js';
import { deferred, until } from '../../helpers/deferred.js';
import { startContext } from '../../helpers/nest-app.js';

@Injectable()
class UsersRepository {
  /** Executions of each method, by name. Per instance, so each app counts its own. */
  readonly calls = { find: 0, search: 0, byName: 0, find$: 0, failing: 0 };
  gate: Promise<void> = Promise.resolve();

  @Cached()
  async find(id: number): Promise<{ id: number; name: string }> {
    this.calls.find += 1;
    await this.gate;
    return { id, name: `user-${id}` };
  }

  @Cached({ soft: '2m' })
  async search(_filter: { role?: string; active?: boolean; since?: Date }): Promise<number> {
    this.calls.search += 1;
    return this.calls.search;
  }

  @Cached({
    key: (name: string) => `user-by-name:${name}`,
    tags: (name: string) => ['users', `user:${name}`],
  })
  async byName(name: string): Promise<string> {
    this.calls.byName += 1;
    return name.toUpperCase();
  }

  @Cached()
  find$(id: number): Observable<string> {
    this.calls.find$ += 1;
    return from(this.gate.then(() => `user-${id}`));
  }

  @Cached()
  async failing(id: number): Promise<string> {
    this.calls.failing += 1;
    throw new NotFoundException(`no user ${id}`);
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', jitter: 0 } })],
  providers: [UsersRepository],
})
class AppModule {}

const apps: INestApplicationContext[] = [];

async function start(module: Type = AppModule): Promise<INestApplicationContext> {
  const app = await startContext(module);
  apps.push(app);
  return app;
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

describe('@Cached on a provider method', () => {
  it('runs the method once for 500 concurrent calls with equal arguments', async () => {
    const repo = (await start()).get(UsersRepository);
    const gate = deferred<void>();
    repo.gate = gate.promise;
    const calls = Array.from({ length: 500 }, () => repo.find(7));
    gate.resolve();
    const users = await Promise.all(calls);
    expect(repo.calls.find).toBe(1);
    expect(users.every((user) => user.name === 'user-7')).toBe(true);
    await repo.find(7);
    expect(repo.calls.find).toBe(1);
  });

  it('keeps calls with different arguments in different entries', async () => {
    const repo = (await start()).get(UsersRepository);
    await Promise.all([repo.find(1), repo.find(2), repo.find(1), repo.find(2)]);
    expect(repo.calls.find).toBe(2);
    await expect(repo.find(2)).resolves.toEqual({ id: 2, name: 'user-2' });
  });

  it('shares one entry between object arguments written in a different key order', async () => {
    const repo = (await start()).get(UsersRepository);
    const since = new Date('2024-01-01T00:00:00.000Z');
    const first = await repo.search({ role: 'admin', active: true, since });
    const second = await repo.search({
      since: new Date(since.getTime()),
      active: true,
      role: 'admin',
    });
    const other = await repo.search({ role: 'admin', active: false, since });
    expect([first, second, other]).toEqual([1, 1, 2]);
  });

  it('stores under Class.method(arguments) with the method policy over the module default', async () => {
    const app = await start();
    const repo = app.get(UsersRepository);
    await repo.search({ role: 'admin' });
    const entry = await app
      .get(HerdGuardService)
      .peek(methodCacheKey('UsersRepository.search', [{ role: 'admin' }]));
    expect(entry).toBeDefined();
    expect(entry!.softExpireAt - entry!.createdAt).toBe(120_000);
  });

  it('stores under the key function given, with its tags, so the entry can be invalidated by name', async () => {
    const app = await start();
    const repo = app.get(UsersRepository);
    const herd = app.get(HerdGuardService);
    await expect(repo.byName('ann')).resolves.toBe('ANN');
    await expect(herd.peek('user-by-name:ann')).resolves.toMatchObject({ value: 'ANN' });
    await expect(herd.expireTag('user:ann')).resolves.toBe(1);
    await expect(repo.byName('ann')).resolves.toBe('ANN');
    await until(() => repo.calls.byName === 2, 2_000, 'the background refresh');
  });

  it('returns an Observable from an Observable method: one execution for concurrent subscribers, one value', async () => {
    const repo = (await start()).get(UsersRepository);
    const gate = deferred<void>();
    repo.gate = gate.promise;
    const subscribers = Array.from({ length: 50 }, () =>
      lastValueFrom(repo.find$(3).pipe(toArray())),
    );
    gate.resolve();
    const emitted = await Promise.all(subscribers);
    expect(emitted.every((values) => values.length === 1 && values[0] === 'user-3')).toBe(true);
    expect(repo.calls.find$).toBe(1);
    await expect(lastValueFrom(repo.find$(3))).resolves.toBe('user-3');
    expect(repo.calls.find$).toBe(1);
  });

  it("gives callers the method's own error and runs the method again on the next call", async () => {
    const repo = (await start()).get(UsersRepository);
    await expect(repo.failing(1)).rejects.toBeInstanceOf(NotFoundException);
    await expect(repo.failing(1)).rejects.toBeInstanceOf(NotFoundException);
    expect(repo.calls.failing).toBe(2);
  });

  it('rejects a call with a circular argument with KeySerializationError, without running the method', async () => {
    const repo = (await start()).get(UsersRepository);
    const filter: { role: string; self?: unknown } = { role: 'x' };
    filter.self = filter;
    await expect(repo.search(filter)).rejects.toBeInstanceOf(KeySerializationError);
    expect(repo.calls.search).toBe(0);
  });

  it('keeps separate caches for two apps in one process and leaves the class untouched', async () => {
    const first = (await start()).get(UsersRepository);
    const second = (await start()).get(UsersRepository);
    await first.find(1);
    await first.find(1);
    await second.find(1);
    expect([first.calls.find, second.calls.find]).toEqual([1, 1]);
    expect(Object.hasOwn(first, 'find')).toBe(true);
    expect(Object.getPrototypeOf(first).find).toBe(UsersRepository.prototype.find);
  });

  it('calls a function key with the provider instance as this, so two instances of one class key apart', async () => {
    @Injectable()
    class Regional {
      constructor(readonly region: string) {}

      @Cached({
        key(this: Regional, id: number) {
          return `${this.region}:user:${id}`;
        },
      })
      async find(id: number): Promise<string> {
        return `${this.region} ${id}`;
      }
    }
    @Module({
      imports: [HerdGuardModule.forRoot()],
      providers: [
        { provide: 'EU', useFactory: () => new Regional('eu') },
        { provide: 'US', useFactory: () => new Regional('us') },
      ],
    })
    class RegionsModule {}
    const app = await start(RegionsModule);
    await expect(app.get<Regional>('EU').find(1)).resolves.toBe('eu 1');
    await expect(app.get<Regional>('US').find(1)).resolves.toBe('us 1');
    await expect(app.get(HerdGuardService).peek('us:user:1')).resolves.toMatchObject({
      value: 'us 1',
    });
  });

  it('runs the method uncached, as written, in an app without HerdGuardModule', async () => {
    @Module({ providers: [UsersRepository] })
    class PlainModule {}
    const repo = (await start(PlainModule)).get(UsersRepository);
    await repo.find(1);
    await repo.find(1);
    expect(repo.calls.find).toBe(2);
    const plain = new UsersRepository();
    await plain.find(1);
    expect(plain.calls.find).toBe(1);
  });
});

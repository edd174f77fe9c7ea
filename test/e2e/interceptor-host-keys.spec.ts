import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Headers,
  Injectable,
  type INestApplication,
  Module,
  Param,
  Req,
  UseInterceptors,
} from '@nestjs/common';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, initHttpApp } from '../helpers/nest-app.js';

@Injectable()
class Runs {
  count = 0;
}

@Controller()
@UseInterceptors(HerdGuardInterceptor)
class ShopController {
  constructor(private readonly runs: Runs) {}

  /** A product page of the site asked for, by the host name Nest routes by. */
  @Get('products/:id')
  product(
    @Param('id') id: string,
    @Req() incoming: { hostname: string },
  ): { id: string; site: string; run: number } {
    this.runs.count += 1;
    return { id, site: incoming.hostname, run: this.runs.count };
  }

  /** Absolute links built from the Host header, port included: the route varies by host. */
  @Get('links')
  @CachedRoute({ vary: ['host'] })
  links(@Headers('host') host: string | undefined): { self: string } {
    this.runs.count += 1;
    return { self: `http://${host ?? ''}/links` };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [ShopController],
  providers: [Runs],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor keys by host name on %s', (adapter) => {
  let app: INestApplication;
  // As the e2e test `nest new` generates: the app does not listen, so supertest listens on a new
  // ephemeral port for every request, and each request's Host names that port.
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await initHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  it('answers the e2e test nest new generates, without a Host set, with MISS then HIT', async () => {
    const first = await http().get('/products/1').expect(200);
    const second = await http().get('/products/1').expect(200);
    expect(first.headers['x-cache']).toBe('MISS');
    expect(second.headers['x-cache']).toBe('HIT');
    expect(second.body).toEqual(first.body);
    expect(app.get(Runs).count).toBe(1);
  });

  it('shares one entry between the ports of one host name, in any case', async () => {
    const first = await http().get('/products/2').set('Host', 'shop.example.com:1337');
    const second = await http().get('/products/2').set('Host', 'Shop.Example.com:8080');
    const third = await http().get('/products/2').set('Host', 'shop.example.com');
    expect([first, second, third].map((answer) => answer.headers['x-cache'])).toEqual([
      'MISS',
      'HIT',
      'HIT',
    ]);
    expect(app.get(Runs).count).toBe(1);
  });

  it('never answers one host name with the page built for another (tenants stay apart)', async () => {
    const a = await http().get('/products/3').set('Host', 'tenant-a.example.com:3000');
    const b = await http().get('/products/3').set('Host', 'tenant-b.example.com:3000');
    const aAgain = await http().get('/products/3').set('Host', 'tenant-a.example.com:3000');
    expect([a.body.site, b.body.site, aAgain.body.site]).toEqual([
      'tenant-a.example.com',
      'tenant-b.example.com',
      'tenant-a.example.com',
    ]);
    expect([a, b, aAgain].map((answer) => answer.headers['x-cache'])).toEqual([
      'MISS',
      'MISS',
      'HIT',
    ]);
  });

  it('keys the whole Host, port included, on a route that varies by host', async () => {
    const first = await http().get('/links').set('Host', 'shop.example.com:1337');
    const other = await http().get('/links').set('Host', 'shop.example.com');
    const again = await http().get('/links').set('Host', 'shop.example.com:1337');
    expect([first.body.self, other.body.self, again.body.self]).toEqual([
      'http://shop.example.com:1337/links',
      'http://shop.example.com/links',
      'http://shop.example.com:1337/links',
    ]);
    expect(again.headers['x-cache']).toBe('HIT');
    expect(again.headers['vary']).toMatch(/host/i);
  });
});

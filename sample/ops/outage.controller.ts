import { Controller, HttpCode, Post } from '@nestjs/common';
import { CatalogDatabase } from '../catalog/catalog.database.js';

/**
 * A switch for a database outage, served only with `OUTAGE_SWITCH=1`: the cache then serves what
 * it holds as stale while loads fail, which is what the dashboard and the alerts must show.
 */
@Controller('ops/database')
export class OutageController {
  constructor(private readonly db: CatalogDatabase) {}

  @Post('down')
  @HttpCode(200)
  down(): { database: 'down' } {
    this.db.setDown(true);
    return { database: 'down' };
  }

  @Post('up')
  @HttpCode(200)
  up(): { database: 'up' } {
    this.db.setDown(false);
    return { database: 'up' };
  }
}

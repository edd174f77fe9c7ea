import 'reflect-metadata';
import { ConsoleLogger, type LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { type SampleConfig, configFromEnv } from './config.js';

// LOG_FORMAT=json for one JSON object per line (every line, the banner too); LOG_LEVEL=log,warn,error
// to hide herd-guard's debug lines.
const json = process.env['LOG_FORMAT'] === 'json';
const logger = new ConsoleLogger({
  json,
  compact: true,
  breakLength: Number.POSITIVE_INFINITY,
  logLevels: (process.env['LOG_LEVEL'] ?? 'log,warn,error,fatal,debug').split(',') as LogLevel[],
});

async function main(): Promise<void> {
  let config: SampleConfig;
  try {
    config = configFromEnv();
  } catch (error) {
    logger.fatal(error instanceof Error ? error.message : String(error), 'Sample');
    process.exitCode = 1;
    return;
  }
  const app = await NestFactory.create(AppModule.register(config), { logger });
  app.enableShutdownHooks();
  await app.listen(config.port, config.host);
  const base = `http://${config.host}:${config.port}`;
  const summary =
    `herd-guard sample on ${base} (${config.redisUrl === undefined ? 'memory store' : `Redis ${config.redisUrl}`}, ` +
    `queries delayed ${config.queryDelayMs} ms, soft ${config.soft}, hard ${config.hard})`;
  if (json) {
    logger.log(summary, 'Sample');
    return;
  }
  console.log(
    [
      summary,
      `  curl -i ${base}/products/42          # X-Cache: MISS, then HIT; STALE after ${config.soft}`,
      `  curl -i ${base}/products/999999      # 404, cached as "not found"`,
      `  curl    ${base}/categories           # an aggregate served by a @Cached method`,
      `  curl    ${base}/stats                # database queries vs cache reads`,
      `  curl    ${base}/health  ${base}/metrics  ${base}/cache/hot-keys`,
    ].join('\n'),
  );
}

await main();

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

export interface Product {
  readonly id: number;
  readonly name: string;
  readonly category: string;
  readonly priceCents: number;
  readonly stock: number;
}

export interface CategorySummary {
  readonly category: string;
  readonly products: number;
  readonly averagePriceCents: number;
  readonly totalStock: number;
}

export interface CatalogDatabaseOptions {
  /** SQLite file, created and seeded on first start; `:memory:` for a throwaway database. */
  readonly file: string;
  /** Artificial latency of every query, standing for a heavy query on a loaded database. */
  readonly queryDelayMs: number;
  readonly products?: number;
}

const CATEGORIES = ['books', 'games', 'garden', 'kitchen', 'music', 'sports', 'tools', 'toys'];

/**
 * The slow backend herd-guard protects: a real SQLite database whose every query is delayed and
 * counted, so the effect of a stampede (or its absence) is visible in `queries`.
 */
export class CatalogDatabase {
  readonly #db: Database.Database;
  readonly #delayMs: number;
  #queries = 0;
  /** Set by {@link setDown}: every query fails, after its usual delay, as in an outage. */
  #down = false;

  constructor(options: CatalogDatabaseOptions) {
    if (options.file !== ':memory:') mkdirSync(dirname(options.file), { recursive: true });
    this.#db = new Database(options.file);
    this.#db.pragma('journal_mode = WAL');
    this.#delayMs = options.queryDelayMs;
    this.#seed(options.products ?? 1_000);
  }

  /** Queries run since start. */
  get queries(): number {
    return this.#queries;
  }

  get down(): boolean {
    return this.#down;
  }

  /** Simulates an outage of the database (`true`) or its recovery. */
  setDown(down: boolean): void {
    this.#down = down;
  }

  findProduct(id: number): Promise<Product | undefined> {
    return this.#query(
      () =>
        this.#db
          .prepare(
            'SELECT id, name, category, price_cents AS priceCents, stock FROM products WHERE id = ?',
          )
          .get(id) as Product | undefined,
    );
  }

  categorySummary(): Promise<CategorySummary[]> {
    return this.#query(
      () =>
        this.#db
          .prepare(
            `SELECT category, COUNT(*) AS products, ROUND(AVG(price_cents)) AS averagePriceCents, SUM(stock) AS totalStock
             FROM products GROUP BY category ORDER BY category`,
          )
          .all() as CategorySummary[],
    );
  }

  productsIn(category: string, limit: number): Promise<Product[]> {
    return this.#query(
      () =>
        this.#db
          .prepare(
            'SELECT id, name, category, price_cents AS priceCents, stock FROM products WHERE category = ? ORDER BY id LIMIT ?',
          )
          .all(category, limit) as Product[],
    );
  }

  /** Changes a price, as an admin would (the caller then invalidates the cache). */
  setPrice(id: number, priceCents: number): boolean {
    return (
      this.#db.prepare('UPDATE products SET price_cents = ? WHERE id = ?').run(priceCents, id)
        .changes === 1
    );
  }

  close(): void {
    this.#db.close();
  }

  async #query<T>(run: () => T): Promise<T> {
    this.#queries += 1;
    if (this.#delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#delayMs));
    if (this.#down) throw new Error('the catalog database is down (simulated outage)');
    return run();
  }

  #seed(count: number): void {
    this.#db.exec(
      `CREATE TABLE IF NOT EXISTS products (
         id INTEGER PRIMARY KEY,
         name TEXT NOT NULL,
         category TEXT NOT NULL,
         price_cents INTEGER NOT NULL,
         stock INTEGER NOT NULL
       )`,
    );
    const { existing } = this.#db.prepare('SELECT COUNT(*) AS existing FROM products').get() as {
      existing: number;
    };
    if (existing > 0) return;
    const insert = this.#db.prepare(
      'INSERT INTO products (id, name, category, price_cents, stock) VALUES (?, ?, ?, ?, ?)',
    );
    const seedAll = this.#db.transaction(() => {
      for (let id = 1; id <= count; id += 1) {
        const category = CATEGORIES[id % CATEGORIES.length]!;
        insert.run(
          id,
          `${category} item ${id}`,
          category,
          499 + ((id * 7_919) % 20_000),
          (id * 31) % 250,
        );
      }
    });
    seedAll();
  }
}

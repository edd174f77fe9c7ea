import { Injectable } from '@nestjs/common';

export interface Product {
  id: number;
  name: string;
}

/** The app's slow data source: counts its queries, and a test can hold them until it says go. */
@Injectable()
export class Catalog {
  queries = 0;
  /** Every query waits for this before answering. */
  gate: Promise<void> = Promise.resolve();

  async find(id: number): Promise<Product | undefined> {
    this.queries++;
    await this.gate;
    return id > 0 ? { id, name: `product ${id}` } : undefined;
  }
}

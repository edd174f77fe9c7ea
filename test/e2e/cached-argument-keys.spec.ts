import { describe, expect, it } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { Cached, HerdGuardModule, KeySerializationError } from '../../lib/index.js';
import { startContext } from '../helpers/nest-app.js';

/** A value object as domain code writes it: its state in private fields, read through a getter. */
class AccountId {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  get value(): string {
    return this.#value;
  }
}

@Injectable()
class AccountsService {
  @Cached()
  async balance(account: AccountId): Promise<string> {
    return `balance of ${account.value}`;
  }
}

@Module({ imports: [HerdGuardModule.forRoot()], providers: [AccountsService] })
class AppModule {}

describe('@Cached default keys from arguments', () => {
  it("never answers one account's call from the entry of another when the argument keeps its state in private fields", async () => {
    const context = await startContext(AppModule);
    try {
      const accounts = context.get(AccountsService);
      expect(await accounts.balance(new AccountId('alice'))).toBe('balance of alice');
      // Either the key tells the two apart, or the call fails with an error that asks for a key.
      const bob = await accounts.balance(new AccountId('bob')).catch((error: unknown) => error);
      if (bob instanceof KeySerializationError) return;
      expect(bob).toBe('balance of bob');
    } finally {
      await context.close();
    }
  });
});

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
      const alice = await accounts.balance(new AccountId('alice')).catch((error: unknown) => error);
      const bob = await accounts.balance(new AccountId('bob')).catch((error: unknown) => error);
      // Either the key tells the two apart, or every such call fails with an error that asks for a key.
      if (alice instanceof KeySerializationError) {
        expect(alice.path).toBe('args[0]');
        expect(alice.message).toContain('`key` function');
        expect(bob).toBeInstanceOf(KeySerializationError);
        return;
      }
      expect([alice, bob]).toEqual(['balance of alice', 'balance of bob']);
    } finally {
      await context.close();
    }
  });
});

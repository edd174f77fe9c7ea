import { MemoryStore } from '../../lib/index.js';
import { describeStoreContract } from './store.contract.js';

describeStoreContract('memory', async () => {
  const store = new MemoryStore();
  return { store, close: () => store.close() };
});

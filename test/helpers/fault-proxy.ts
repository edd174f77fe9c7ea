/**
 * A fault-injecting TCP proxy for integration tests. It sits between clients (ioredis, herd-guard
 * pods) and a real redis-server and can add latency, reset connections, black-hole or pause
 * traffic, in one or both directions, without touching the server process. Every fault is undone
 * by its own call or by `restore()`.
 *
 * It listens on a free loopback port and forwards each connection to the target given to
 * `start()`; the target may restart on its port (RedisServer.restart) behind it. Call
 * `stopAllFaultProxies()` in an `afterEach` so no client, socket or timer outlives a test.
 */
import { once } from 'node:events';
import {
  createConnection,
  createServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { performance } from 'node:perf_hooks';
import { Redis, type RedisOptions } from 'ioredis';

const LOOPBACK = '127.0.0.1';
const MAX_DELAY_MS = 2 ** 31 - 1;
/** The first bulk string of a RESP array is the command name. */
const COMMAND_NAME = /\*\d+\r\n\$\d+\r\n([A-Za-z][A-Za-z_|-]*)\r\n/g;
/** Tail of the previous chunk scanned again, so a command name split across two chunks is seen. */
const SCAN_OVERLAP_CHARS = 64;
const SUBSCRIBE_COMMANDS = ['subscribe', 'psubscribe', 'ssubscribe'];

/** Written by `start`, `stop` and `stopAllFaultProxies`; read by `stopAllFaultProxies`. */
const proxies = new Set<FaultProxy>();
const clients = new Set<Redis>();

/** `toServer`: bytes the client sends; `toClient`: replies and pushes from the server. */
export type ProxyDirection = 'toServer' | 'toClient' | 'both';

export interface ProxyTarget {
  readonly host: string;
  readonly port: number;
}

export interface BlackholeOptions {
  /** Which traffic is discarded; default both directions. */
  readonly direction?: ProxyDirection;
  /** Also reset new connections as soon as they are accepted (the client sees ECONNRESET). */
  readonly refuseNew?: boolean;
}

/** One client connection through the proxy, with its own upstream connection to the target. */
export interface ProxyConnection {
  /** 1, 2, 3… in order of acceptance. */
  readonly id: number;
  /** Bytes received from each side so far, forwarded or not. */
  readonly bytesFromClient: number;
  readonly bytesFromServer: number;
  /**
   * Lower-case names of the commands the client has sent, e.g. `subscribe`. Found by scanning
   * the RESP stream, so an argument that looks exactly like a command header would count too.
   */
  readonly commands: ReadonlySet<string>;
  /** The client has sent SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE on this connection. */
  readonly isSubscriber: boolean;
  /** Resets this connection alone: the client sees ECONNRESET, the server a closed socket. */
  drop(): void;
}

/** The faults of one direction, shared by every connection; written only by FaultProxy's methods. */
interface Flow {
  delayMs: number;
  paused: boolean;
  blackholed: boolean;
}
type Flows = Record<'toServer' | 'toClient', Flow>;

const healthy = (): Flow => ({ delayMs: 0, paused: false, blackholed: false });

/** A TCP proxy to one target, with faults switched on and off by the test. */
export class FaultProxy {
  readonly host = LOOPBACK;
  private readonly flows: Flows = { toServer: healthy(), toClient: healthy() };
  /** Written by refuseNew()/restore(); read when a connection is accepted. */
  private refusing = false;
  /** Every link until both of its sockets have closed, dropped ones included (stop() awaits them). */
  private readonly links = new Set<Link>();
  private nextId = 1;

  private constructor(
    private readonly listener: Server,
    readonly port: number,
    /** Where new connections go; `retarget()` moves it (open connections keep theirs). */
    private current: ProxyTarget,
  ) {}

  get target(): ProxyTarget {
    return this.current;
  }

  /**
   * Sends new connections to `target` from now on, as a DNS name or a virtual IP moved to a new
   * primary does; connections already open stay with the old one.
   */
  retarget(target: ProxyTarget): void {
    this.current = target;
  }

  /** Listens on a free loopback port and forwards every connection to `target`. */
  static async start(target: ProxyTarget): Promise<FaultProxy> {
    const listener = createServer();
    listener.listen({ host: LOOPBACK, port: 0 });
    await once(listener, 'listening');
    // No connection can arrive before the caller learns the port, which it does after this.
    const proxy = new FaultProxy(listener, (listener.address() as AddressInfo).port, target);
    listener.on('connection', (socket: Socket) => proxy.accept(socket));
    proxies.add(proxy);
    return proxy;
  }

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  /** Number of client connections currently open through the proxy. */
  get connections(): number {
    return this.list().length;
  }

  /** The open connections, oldest first; a dropped one leaves at once. */
  list(): ProxyConnection[] {
    return [...this.links].filter((link) => !link.dropped);
  }

  /** A new ioredis client through the proxy; the caller closes it (`stopAllFaultProxies` closes leftovers). */
  client(options: RedisOptions = {}): Redis {
    const client = new Redis({ ...options, host: this.host, port: this.port });
    clients.add(client);
    client.once('end', () => clients.delete(client));
    return client;
  }

  /**
   * Holds every chunk arriving from now on for `delayMs` before forwarding it, keeping the
   * order. `delay(0)` ends it; chunks already held keep their due time.
   */
  delay(delayMs: number, direction: ProxyDirection = 'both'): void {
    if (!Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
      throw new RangeError(`delayMs must be between 0 and ${MAX_DELAY_MS}, got ${delayMs}`);
    }
    for (const flow of this.flowsOf(direction)) flow.delayMs = delayMs;
  }

  /** Resets every open connection at once (clients see ECONNRESET and reconnect). Returns how many. */
  dropAll(): number {
    return this.dropWhere(() => true);
  }

  /** Resets the open connections matching `predicate`, e.g. `(c) => c.isSubscriber`. Returns how many. */
  dropWhere(predicate: (connection: ProxyConnection) => boolean): number {
    const chosen = this.list().filter((link) => predicate(link));
    for (const link of chosen) link.drop();
    return chosen.length;
  }

  /**
   * Half-open network: connections stay open but traffic (and closes) in `direction` is silently
   * discarded, with no RST and no FIN. New connections are accepted and treated alike, or reset
   * with `refuseNew`. `restore()` ends it.
   */
  blackhole(options: BlackholeOptions = {}): void {
    for (const flow of this.flowsOf(options.direction ?? 'both')) flow.blackholed = true;
    if (options.refuseNew) this.refuseNew();
    for (const link of this.links) link.drain();
  }

  /** Resets every new connection as soon as it is accepted, until `restore()`; open ones are kept. */
  refuseNew(): void {
    this.refusing = true;
  }

  /** Stops forwarding in `direction`; incoming chunks are buffered until `resume()`. */
  pause(direction: ProxyDirection = 'both'): void {
    for (const flow of this.flowsOf(direction)) flow.paused = true;
  }

  /** Delivers everything buffered by `pause()`, in order, and forwards again. */
  resume(direction: ProxyDirection = 'both'): void {
    for (const flow of this.flowsOf(direction)) flow.paused = false;
    for (const link of this.links) link.drain();
  }

  /**
   * Ends every fault. A connection that lost traffic or a close to a blackhole is reset: its
   * RESP stream is out of step (replies missing), as when a peer that forgot the connection
   * answers the client's retransmission with RST. Connections that lost nothing carry on.
   */
  restore(): void {
    for (const flow of this.flowsOf('both')) Object.assign(flow, healthy());
    this.refusing = false;
    for (const link of [...this.links]) {
      if (link.lostTraffic) link.drop();
      else link.drain();
    }
  }

  /** Closes the listener and resets every connection; resolves once all of their sockets are closed. */
  async stop(): Promise<void> {
    proxies.delete(this);
    const links = [...this.links];
    for (const link of links) link.drop();
    await Promise.all([
      new Promise<void>((resolve) => this.listener.close(() => resolve())),
      ...links.map((link) => link.closed),
    ]);
  }

  private accept(socket: Socket): void {
    socket.on('error', ignore);
    if (this.refusing) {
      reset(socket);
      return;
    }
    const upstream = createConnection({ host: this.target.host, port: this.target.port });
    const link = new Link(this.nextId++, socket, upstream, this.flows, () =>
      this.links.delete(link),
    );
    this.links.add(link);
  }

  private flowsOf(direction: ProxyDirection): Flow[] {
    if (direction === 'both') return [this.flows.toServer, this.flows.toClient];
    return [this.flows[direction]];
  }
}

/** Closes clients made by `client()` and waits for them to end, then stops every proxy still running. */
export async function stopAllFaultProxies(): Promise<void> {
  // Clients first, so they do not start reconnect loops against the proxies closed below.
  const ended = [...clients].map((client) => new Promise((resolve) => client.once('end', resolve)));
  for (const client of clients) client.disconnect();
  clients.clear();
  await Promise.all(ended);
  await Promise.all([...proxies].map((proxy) => proxy.stop()));
}

/** A client socket and its upstream socket, with one pipe per direction. */
class Link implements ProxyConnection {
  readonly commands = new Set<string>();
  private readonly toServer: Pipe;
  private readonly toClient: Pipe;
  /** The end of the previous client chunk, written by `scan`. */
  private scanTail = '';
  private openSockets = 2;
  /** Set once by drop(); the link is then out of `list()` while its sockets finish closing. */
  dropped = false;
  /** Resolves once both sockets have closed and the link has left the proxy. */
  readonly closed: Promise<void>;

  constructor(
    readonly id: number,
    private readonly client: Socket,
    private readonly server: Socket,
    flows: Flows,
    onClosed: () => void,
  ) {
    this.toServer = new Pipe(flows.toServer, server);
    this.toClient = new Pipe(flows.toClient, client);
    client.setNoDelay(true);
    server.setNoDelay(true);
    server.on('error', ignore);
    client.on('data', (chunk: Buffer) => {
      this.scan(chunk);
      this.toServer.push(chunk);
    });
    server.on('data', (chunk: Buffer) => this.toClient.push(chunk));
    let markClosed!: () => void;
    this.closed = new Promise((resolve) => (markClosed = resolve));
    const closed = (): void => {
      this.openSockets -= 1;
      if (this.openSockets > 0) return;
      this.drop();
      onClosed();
      markClosed();
    };
    client.once('close', (hadError) => {
      this.toServer.finish(hadError);
      closed();
    });
    server.once('close', (hadError) => {
      this.toClient.finish(hadError);
      closed();
    });
  }

  get bytesFromClient(): number {
    return this.toServer.bytes;
  }

  get bytesFromServer(): number {
    return this.toClient.bytes;
  }

  get isSubscriber(): boolean {
    return SUBSCRIBE_COMMANDS.some((name) => this.commands.has(name));
  }

  get lostTraffic(): boolean {
    return this.toServer.lost || this.toClient.lost;
  }

  drain(): void {
    this.toServer.drain();
    this.toClient.drain();
  }

  /** Clears both pipes and resets both sockets; `closed` resolves once they are closed. */
  drop(): void {
    this.dropped = true;
    this.toServer.clear();
    this.toClient.clear();
    reset(this.server);
    reset(this.client);
  }

  private scan(chunk: Buffer): void {
    // latin1 maps each byte to one char, so the overlap is a byte count and nothing is re-decoded.
    const text = this.scanTail + chunk.toString('latin1');
    for (const match of text.matchAll(COMMAND_NAME)) this.commands.add(match[1]!.toLowerCase());
    this.scanTail = text.slice(-SCAN_OVERLAP_CHARS);
  }
}

/** One direction of one connection: chunks wait here while delayed or paused, in arrival order. */
class Pipe {
  bytes = 0;
  /** Set when a chunk or a close was discarded by a blackhole; read by `restore()`. */
  lost = false;
  /** Written by push() and drain(); the head is always the next chunk to forward. */
  private readonly queue: { chunk: Buffer; dueAt: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The source closed cleanly: end the destination once the queue is empty. */
  private ending = false;

  constructor(
    private readonly flow: Flow,
    private readonly to: Socket,
  ) {}

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    this.queue.push({ chunk, dueAt: performance.now() + this.flow.delayMs });
    this.drain();
  }

  /** The source socket closed: pass on its FIN after the queued chunks, or its RST at once. */
  finish(hadError: boolean): void {
    if (this.flow.blackholed) {
      this.lost = true;
    } else if (hadError) {
      this.clear();
      reset(this.to);
    } else {
      this.ending = true;
      this.drain();
    }
  }

  drain(): void {
    if (this.flow.blackholed) {
      if (this.queue.length > 0 || this.ending) this.lost = true;
      this.clear();
      return;
    }
    while (!this.flow.paused) {
      const head = this.queue[0];
      if (!head) {
        if (this.ending && !this.to.destroyed) this.to.end();
        this.ending = false;
        return;
      }
      const waitMs = head.dueAt - performance.now();
      if (waitMs > 0) {
        this.timer ??= setTimeout(() => {
          this.timer = undefined;
          this.drain();
        }, Math.ceil(waitMs));
        return;
      }
      this.queue.shift();
      if (this.to.writable) this.to.write(head.chunk);
    }
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.ending = false;
  }
}

/** Closes with RST rather than FIN where TCP allows it, so the peer sees ECONNRESET. */
function reset(socket: Socket): void {
  if (socket.destroyed) return;
  // A socket still connecting would only reset once connected. One whose sending side is shut
  // down cannot be reset at all: Node then never closes the handle, which leaks and spins.
  if (socket.connecting || socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

function ignore(): void {
  // Errors surface as 'close' with hadError, which the link handles.
}

import { once } from 'node:events';
import { createServer, type Server, type Socket, connect } from 'node:net';

/**
 * A TCP proxy in front of a store, for tests that cut the connection under a client as a network or a server
 * would: `cut()` drops every connection open now; `refuse()` also closes the port, so that the client's
 * reconnections fail until `accept()`; `hang()` keeps connections open but forwards nothing either way;
 * `delay(ms)` forwards everything, in order, `ms` late each way, as an overloaded server answers.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  private hanging = false;
  private delayMs = 0;

  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  /** A proxy on a free port of 127.0.0.1, to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as { port: number };
    probe.close();
    await once(probe, 'close');
    const proxy = new TcpProxy(target, port);
    await proxy.accept();
    return proxy;
  }

  /** Listens again: new connections reach the target. */
  async accept(): Promise<void> {
    this.hanging = false;
    if (this.server !== undefined) return;
    const server = (this.server = createServer((client) => this.relay(client)));
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
  }

  /** Drops every open connection; new ones are still accepted. */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  /** Drops every connection and closes the port: connecting fails until `accept()`. */
  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.cut();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }

  /** Connections stay open, and nothing passes: commands get no answer, as from a hung server. */
  hang(): void {
    this.hanging = true;
  }

  /** Everything passes `ms` late in each direction (0: at once again). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  async close(): Promise<void> {
    await this.refuse();
  }

  private relay(client: Socket): void {
    const server = connect(this.target.port, this.target.host);
    for (const [from, to] of [
      [client, server],
      [server, client],
    ] as const) {
      this.sockets.add(from);
      /** Chunks delayed this way, in order, each with when it is due. */
      const queue: { at: number; chunk: Buffer }[] = [];
      const drain = (): void => {
        while (queue.length > 0 && queue[0].at <= performance.now()) {
          const { chunk } = queue.shift()!;
          if (to.writable) to.write(chunk);
        }
        if (queue.length > 0) setTimeout(drain, queue[0].at - performance.now());
      };
      from.on('data', (chunk: Buffer) => {
        if (this.hanging) return;
        if (this.delayMs === 0 && queue.length === 0) return void to.write(chunk);
        queue.push({ at: performance.now() + this.delayMs, chunk });
        if (queue.length === 1) setTimeout(drain, this.delayMs);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}

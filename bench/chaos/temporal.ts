import path from 'node:path';
import { startDevServer, freePort, type DevServer } from '../../src/temporal/devServer.js';
import { TGS_SEARCH_ATTRIBUTES } from '../../src/temporal/devServer.js';

/**
 * The Temporal dev server with its history on disk (`--db-filename`), on a fixed port, so that it can be
 * SIGKILLed and started again on the same history: workflows, timers and signals survive as they would
 * on a real cluster's persistence.
 */
export class DurableTemporal {
  private server: DevServer | undefined;
  private constructor(
    readonly port: number,
    readonly dbFilename: string,
  ) {}

  static async start(dir: string): Promise<DurableTemporal> {
    const t = new DurableTemporal(await freePort(), path.join(dir, 'temporal.sqlite'));
    await t.up();
    return t;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.server?.process.pid;
  }

  async up(): Promise<void> {
    this.server = await startDevServer({ port: this.port, dbFilename: this.dbFilename, searchAttributes: TGS_SEARCH_ATTRIBUTES });
  }

  /** SIGKILL: no shutdown, whatever the server held in memory is gone. */
  async kill(): Promise<void> {
    const child = this.server?.process;
    this.server = undefined;
    if (!child || child.exitCode !== null || child.signalCode) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    this.server = undefined;
  }
}

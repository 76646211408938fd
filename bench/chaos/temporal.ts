import path from 'node:path';
import { startDevServer, freePort, type DevServer } from '../../src/temporal/devServer.js';
import { TGS_SEARCH_ATTRIBUTES } from '../../src/temporal/devServer.js';
import { startTemporalCluster, type ClusterService, type TemporalCluster } from '../../support/temporalCluster.js';

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

/**
 * A Temporal cluster (support/temporalCluster.ts) on the run's Postgres: frontend, history, matching and worker as
 * four processes whose faults are one service's, the others serving on. Its databases go with it unless kept.
 */
export class ClusterTemporal {
  private constructor(readonly cluster: TemporalCluster) {}

  static async start(dir: string, pgBase: string, log: (line: string) => void): Promise<ClusterTemporal> {
    const url = new URL(pgBase);
    const cluster = await startTemporalCluster({
      dir,
      postgres: { host: url.hostname, port: Number(url.port || 5432), user: decodeURIComponent(url.username || 'postgres'), password: decodeURIComponent(url.password) },
      log: (line) => log(`temporal cluster: ${line}`),
    });
    return new ClusterTemporal(cluster);
  }

  get address(): string {
    return this.cluster.address;
  }

  /** SIGKILL of one service's process: no shutdown; the other three serve on. */
  async kill(service: ClusterService): Promise<void> {
    await this.cluster.kill(service, 'SIGKILL');
  }

  /**
   * Starts the service again (SIGTERM first if it runs, as a rolling restart does); ms until it serves. A process
   * that exits while starting is started again, up to five times, as a supervisor would: a frontend restarted while
   * Postgres had no connection left (max_connections) exited at once with "no usable database connection found".
   */
  async restart(service: ClusterService): Promise<number> {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        await this.cluster.restart(service);
        return Date.now() - started;
      } catch (err) {
        if (attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  /** Stops the four processes; drops the databases unless they are kept for diagnosis. */
  async stop(options: { keep?: boolean } = {}): Promise<void> {
    await this.cluster.stop({ dropDatabases: !options.keep });
  }
}

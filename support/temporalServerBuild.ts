import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { temporalCacheDir, TEMPORAL_CLI_VERSION } from '../src/temporal/devServer.js';

/**
 * The Temporal server as a platform team runs it (one binary, one service a process) and its schema tool, found
 * in or built into the tgs cache the way `tgs dev` builds the CLI (src/temporal/devServer.ts): the version the
 * CLI `TEMPORAL_CLI_VERSION` embeds, so a cluster runs the server the dev server runs.
 */
export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
const MODULE = 'go.temporal.io/server';

export interface TemporalServerBuild {
  /** `temporal-server` (go.temporal.io/server/cmd/server) */
  server: string;
  /** `temporal-sql-tool` (go.temporal.io/server/cmd/tools/sql) */
  sqlTool: string;
  /** the module's schema/postgresql/v12 (temporal/versioned, visibility/versioned) */
  postgresSchemaDir: string;
}

const serverPath = () => path.join(temporalCacheDir, 'temporal-server');
const sqlToolPath = () => path.join(temporalCacheDir, 'temporal-sql-tool');
/** The schema files are copied next to the binaries, so a built cache needs no Go toolchain to set up databases. */
const schemaPath = () => path.join(temporalCacheDir, '..', `temporal-server-${TEMPORAL_SERVER_VERSION}`, 'schema', 'postgresql', 'v12');

/** The binaries and schema when all three are in the cache, else undefined. */
export function findTemporalServerBuild(): TemporalServerBuild | undefined {
  const build = { server: serverPath(), sqlTool: sqlToolPath(), postgresSchemaDir: schemaPath() };
  const complete =
    existsSync(build.server) &&
    existsSync(build.sqlTool) &&
    existsSync(path.join(build.postgresSchemaDir, 'temporal', 'versioned')) &&
    existsSync(path.join(build.postgresSchemaDir, 'visibility', 'versioned'));
  return complete ? build : undefined;
}

function go(args: string[], env: NodeJS.ProcessEnv = process.env, stdio: 'inherit' | 'pipe' = 'inherit'): string {
  const result = spawnSync('go', args, { stdio: ['ignore', stdio, 'inherit'], env, encoding: 'utf8' });
  if (result.error) throw new Error(`running go failed (${result.error.message}); install Go (https://go.dev/dl/) to build the Temporal server`);
  if (result.status !== 0) throw new Error(`\`go ${args.join(' ')}\` exited ${result.status}`);
  return result.stdout ?? '';
}

/**
 * Finds the server, the schema tool and the schema, or builds what is missing from the Go module proxy (5 minutes
 * on an idle 2-core machine the first time, 9 on a busy one; seconds with a warm Go build cache). Says what it
 * does, because a silent 5-minute wait looks like a hang.
 */
export function ensureTemporalServerBuild(log: (line: string) => void = (l) => console.error(l)): TemporalServerBuild {
  const found = findTemporalServerBuild();
  if (found) return found;
  if (spawnSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' }).status !== 0) {
    throw new Error(
      `No Temporal server in ${temporalCacheDir} and no Go toolchain to build one: install Go (https://go.dev/dl/), ` +
        `or build ${MODULE}/cmd/server and cmd/tools/sql ${TEMPORAL_SERVER_VERSION} yourself into ${serverPath()} and ${sqlToolPath()}.`,
    );
  }
  mkdirSync(temporalCacheDir, { recursive: true });
  if (!existsSync(serverPath()) || !existsSync(sqlToolPath())) {
    log(`tgs: building the Temporal server ${TEMPORAL_SERVER_VERSION} (the CLI ${TEMPORAL_CLI_VERSION}'s) and its SQL schema tool into ${temporalCacheDir}`);
    log('tgs: this happens once and takes 5-10 minutes on a 2-core machine...');
    const started = Date.now();
    // go install names the binaries after their packages (`server`, `sql`): install into a directory of their own,
    // then move them to names that say what they are.
    const staging = path.join(temporalCacheDir, '.temporal-server-build');
    rmSync(staging, { recursive: true, force: true });
    go(['install', `${MODULE}/cmd/server@${TEMPORAL_SERVER_VERSION}`, `${MODULE}/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}`], { ...process.env, GOBIN: staging });
    renameSync(path.join(staging, 'server'), serverPath());
    renameSync(path.join(staging, 'sql'), sqlToolPath());
    rmSync(staging, { recursive: true, force: true });
    log(`tgs: built the Temporal server and schema tool in ${Math.round((Date.now() - started) / 1000)} s`);
  }
  if (!existsSync(path.join(schemaPath(), 'temporal', 'versioned'))) {
    const moduleDir = (JSON.parse(go(['mod', 'download', '-json', `${MODULE}@${TEMPORAL_SERVER_VERSION}`], process.env, 'pipe')) as { Dir?: string }).Dir;
    const source = moduleDir && path.join(moduleDir, 'schema', 'postgresql', 'v12');
    if (!source || !existsSync(source)) throw new Error(`the Go module ${MODULE}@${TEMPORAL_SERVER_VERSION} has no schema/postgresql/v12 (looked in ${moduleDir})`);
    cpSync(source, schemaPath(), { recursive: true });
    // the module cache is read-only; a copy that stays so could not be deleted with the cache
    spawnSync('chmod', ['-R', 'u+w', schemaPath()]);
  }
  const build = findTemporalServerBuild();
  if (!build) throw new Error(`the Temporal server build in ${temporalCacheDir} is incomplete after building it`);
  return build;
}

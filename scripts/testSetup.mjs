// What the test suite needs on the machine, found or set up before any test runs: PostgreSQL and RabbitMQ
// (started when installed but stopped), the Temporal CLI (built once, as `tgs dev` builds it), the Temporal server
// and its SQL schema tool (built once, for the tests on a Temporal cluster), helm (built once), Chromium, bubblewrap and slirp4netns
// (installed from Debian's packages when running as root). Says what it does; where it cannot set something up it
// stops at once with the command to run, instead of letting dozens of tests fail on it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { connect } from 'node:net';

const say = (line) => console.log(`setup: ${line}`);

export class SetupError extends Error {}

function hostPort(url, defaultPort) {
  try {
    const u = new URL(url);
    return { host: u.hostname || '127.0.0.1', port: Number(u.port || defaultPort) };
  } catch {
    return { host: '127.0.0.1', port: defaultPort };
  }
}

/** Whether something accepts TCP connections at host:port (1 s timeout). */
export function reachable({ host, port }) {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function waitFor(target, seconds) {
  for (let i = 0; i < seconds * 2; i++) {
    if (await reachable(target)) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0;
const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;
const sh = (cmd) => spawnSync('sh', ['-c', cmd], { stdio: 'inherit' }).status === 0;

async function ensurePostgres() {
  const target = hostPort(process.env.TGS_TEST_PG || 'postgres://127.0.0.1:5432', 5432);
  const socketDir = decodeURIComponent(target.host);
  if (socketDir.startsWith('/')) {
    // a Unix-socket URL (as the bench uses): the server is up when its socket file is there
    if (existsSync(`${socketDir}/.s.PGSQL.${target.port}`)) return;
    throw new SetupError(`PostgreSQL has no socket in ${socketDir}: start it, or unset TGS_TEST_PG`);
  }
  if (await reachable(target)) return;
  const local = target.host === '127.0.0.1' || target.host === 'localhost';
  const versions = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : [];
  if (!local || !has('pg_ctlcluster') || versions.length === 0) {
    throw new SetupError(
      `PostgreSQL is not reachable at ${target.host}:${target.port}. Start it (Debian: ` +
        '`pg_ctlcluster --skip-systemctl-redirect <version> main start`) or point TGS_TEST_PG at a server ' +
        '(postgres://user@host:port, trust or password in the URL).',
    );
  }
  const cmd = `pg_ctlcluster --skip-systemctl-redirect ${versions[0]} main start`;
  say(`PostgreSQL is installed but not running: ${cmd}`);
  sh(cmd);
  if (!(await waitFor(target, 30))) throw new SetupError(`PostgreSQL did not come up after \`${cmd}\`; see its log in /var/log/postgresql`);
  say('PostgreSQL is up');
}

async function ensureRabbit() {
  const target = hostPort(process.env.AMQP_URL || 'amqp://127.0.0.1:5672', 5672);
  if (await reachable(target)) return;
  const local = target.host === '127.0.0.1' || target.host === 'localhost';
  if (!local || !has('rabbitmq-server')) {
    throw new SetupError(
      `RabbitMQ is not reachable at ${target.host}:${target.port}. Start it (\`rabbitmq-server -detached\`) ` +
        'or point AMQP_URL at a broker.',
    );
  }
  say('RabbitMQ is installed but not running: rabbitmq-server -detached (takes up to a minute)');
  sh('rabbitmq-server -detached');
  if (!(await waitFor(target, 90))) throw new SetupError('RabbitMQ did not come up after `rabbitmq-server -detached`; see /var/log/rabbitmq');
  if (has('rabbitmqctl')) spawnSync('rabbitmqctl', ['await_startup'], { stdio: 'ignore' });
  say('RabbitMQ is up');
}

async function ensureTemporal() {
  // The same finder and builder `tgs dev` uses (src/temporal/devServer.ts), loaded through tsx.
  const { register } = await import('tsx/esm/api');
  register();
  const { findTemporalCli, ensureTemporalCli } = await import('../src/temporal/devServer.ts');
  if (findTemporalCli()) return;
  try {
    ensureTemporalCli((line) => say(line.replace(/^tgs: /, '')));
  } catch (err) {
    throw new SetupError(err.message);
  }
}

async function ensureTemporalServer() {
  // The server binary and schema tool the cluster tests start (support/temporalCluster.ts).
  const { findTemporalServerBuild, ensureTemporalServerBuild } = await import('../support/temporalServerBuild.ts');
  if (findTemporalServerBuild()) return;
  try {
    ensureTemporalServerBuild((line) => say(line.replace(/^tgs: /, '')));
  } catch (err) {
    throw new SetupError(err.message);
  }
}

async function ensureHelm() {
  // test/deploy/helm.test.ts lints and renders deploy/helm/tgs: support/helm.ts finds helm or builds it, once.
  const { findHelm, ensureHelm: build } = await import('../support/helm.ts');
  if (findHelm()) return;
  try {
    build((line) => say(line));
  } catch (err) {
    throw new SetupError(err.message);
  }
}

function ensureChromium() {
  const path = process.env.TGS_CHROMIUM || '/usr/bin/chromium';
  if (existsSync(path)) return;
  if (!isRoot() || !has('apt-get')) {
    throw new SetupError(
      `Chromium is missing at ${path} (the browser tests drive it). Install it: ` +
        '`sudo apt-get update && sudo apt-get install -y chromium`, or set TGS_CHROMIUM to a Chromium binary.',
    );
  }
  say('Chromium is missing: apt-get install chromium (about a minute)');
  const ok = sh('apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null');
  if (!ok || !existsSync(path)) throw new SetupError('installing Chromium failed: run `apt-get update && apt-get install -y chromium`');
  say('Chromium installed');
}

/**
 * A Debian package the shell worker's sandbox tests drive as root: bubblewrap (the default sandbox) and slirp4netns
 * (`--network internet`, test/security/network.test.ts).
 */
function ensurePackage(binary, pkg, why) {
  if (has(binary)) return;
  if (!isRoot() || !has('apt-get')) {
    throw new SetupError(`${pkg} (${binary}) is missing (${why}). Install it: \`sudo apt-get update && sudo apt-get install -y ${pkg}\`.`);
  }
  say(`${pkg} is missing: apt-get install ${pkg}`);
  const ok = sh(`apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${pkg} >/dev/null`);
  if (!ok || !has(binary)) throw new SetupError(`installing ${pkg} failed: run \`apt-get update && apt-get install -y ${pkg}\``);
  say(`${pkg} installed`);
}

/** Sets up everything the suite needs; throws SetupError with the command to run when it cannot. */
export async function setUpTestMachine() {
  await ensurePostgres();
  await ensureRabbit();
  ensureChromium();
  ensurePackage('bwrap', 'bubblewrap', "the shell worker's sandbox tests use it");
  ensurePackage('slirp4netns', 'slirp4netns', "the shell worker's --network internet tests use it");
  await ensureTemporal();
  await ensureTemporalServer();
  await ensureHelm();
}

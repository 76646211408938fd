import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { ROOT_CLIENT_ID } from '../../src/config.js';
import type { TgsCredentials } from '../../src/client/http.js';

export interface ApiProcess {
  child: ChildProcess;
  rootUrl: string;
  root: TgsCredentials;
  /** everything it printed so far (stdout and stderr) */
  output(): string;
  /** resolves with the exit code (or signal) once it exited */
  exited: Promise<number | string>;
}

/** A real `tgs api` child process on a free port against `databaseUrl`; resolves once it listens. */
export async function startApiProcess(databaseUrl: string, env: Record<string, string> = {}): Promise<ApiProcess> {
  const token = randomBytes(20).toString('hex');
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'api'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', TGS_ROOT_ACCESS_TOKEN: token, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const rootUrl = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s"]+)/.exec(out);
      if (m) resolve(m[1].replace('[::1]', '127.0.0.1'));
    });
    void exited.then((code) => reject(new Error(`tgs api exited with ${code}:\n${out}`)));
  });
  return { child, rootUrl, root: { clientId: ROOT_CLIENT_ID, accessToken: token }, output: () => out, exited };
}

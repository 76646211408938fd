import type { ApiClient } from '../client/http.js';

/** `public/logs/live.log` → `public/logs/live.log` with each segment URL-encoded (the route takes the rest of the path). */
export function artifactPath(name: string): string {
  return name.split('/').map(encodeURIComponent).join('/');
}

interface PutTarget {
  putUrl: string;
  /** when to ask for a fresh putUrl (a minute before it expires) */
  renewAt: number;
}

/**
 * Creates `s3` artifacts of one run and PUTs their bytes (the putUrl is signed by tgs; no Hawk). A name that is
 * uploaded again (the live log) reuses its putUrl until shortly before it expires: every PUT replaces the bytes.
 */
export class ArtifactUploader {
  private targets = new Map<string, PutTarget>();

  constructor(
    private readonly api: () => ApiClient,
    private readonly taskId: string,
    private readonly runId: number,
  ) {}

  private async create(name: string, body: unknown): Promise<any> {
    return this.api().request('queue', 'POST', `/task/${this.taskId}/runs/${this.runId}/artifacts/${artifactPath(name)}`, body);
  }

  async upload(name: string, data: Buffer, contentType: string, expires: string): Promise<void> {
    let target = this.targets.get(name);
    if (!target || Date.now() >= target.renewAt) {
      const created = await this.create(name, { storageType: 's3', contentType, expires });
      target = { putUrl: created.putUrl, renewAt: Math.min(Date.parse(created.expires) - 60_000, Date.now() + 25 * 60_000) };
      this.targets.set(name, target);
    }
    const res = await fetch(target.putUrl, { method: 'PUT', headers: { 'content-type': contentType }, body: new Uint8Array(data) });
    if (!res.ok) {
      this.targets.delete(name);
      const text = await res.text().catch(() => '');
      throw new Error(`uploading artifact ${name} (${data.length} bytes) failed: ${res.status} ${text.slice(0, 300)}`);
    }
    await res.arrayBuffer().catch(() => undefined);
  }

  /** An `error` artifact: readers get 424 with the reason (a declared file that was not there, …). */
  async error(name: string, reason: 'file-missing-on-worker' | 'invalid-resource-on-worker' | 'too-large-file-on-worker', message: string, expires: string): Promise<void> {
    await this.create(name, { storageType: 'error', reason, message: message.slice(0, 4096), expires });
  }
}

import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { ApiClient } from '../client/http.js';

/** An upload's bytes: in memory (the live log), or an open file streamed from its start (`size` from its fstat). */
export type UploadBody = Buffer | { handle: FileHandle; size: number };

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

  async upload(name: string, data: UploadBody, contentType: string, expires: string): Promise<void> {
    const size = Buffer.isBuffer(data) ? data.length : data.size;
    let target = this.targets.get(name);
    if (!target || Date.now() >= target.renewAt) {
      const created = await this.create(name, { storageType: 's3', contentType, expires });
      target = { putUrl: created.putUrl, renewAt: Math.min(Date.parse(created.expires) - 60_000, Date.now() + 25 * 60_000) };
      this.targets.set(name, target);
    }
    // a file is streamed (never held whole), exactly `size` bytes of it: it cannot grow under the upload
    const body = Buffer.isBuffer(data) ? new Uint8Array(data) : (Readable.toWeb(data.handle.createReadStream({ start: 0, end: Math.max(0, size - 1), autoClose: false })) as ReadableStream<Uint8Array>);
    const res = await fetch(target.putUrl, {
      method: 'PUT',
      headers: { 'content-type': contentType, 'content-length': String(size) },
      body: size === 0 && !Buffer.isBuffer(data) ? new Uint8Array(0) : body,
      duplex: 'half',
    } as RequestInit);
    if (!res.ok) {
      this.targets.delete(name);
      const text = await res.text().catch(() => '');
      throw new Error(`uploading artifact ${name} (${size} bytes) failed: ${res.status} ${text.slice(0, 300)}`);
    }
    await res.arrayBuffer().catch(() => undefined);
  }

  /** An `error` artifact: readers get 424 with the reason (a declared file that was not there, …). */
  async error(name: string, reason: 'file-missing-on-worker' | 'invalid-resource-on-worker' | 'too-large-file-on-worker', message: string, expires: string): Promise<void> {
    await this.create(name, { storageType: 'error', reason, message: message.slice(0, 4096), expires });
  }
}

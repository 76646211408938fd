import http from 'node:http';

export interface StreamedResult {
  status: number;
  body: any;
  headers: http.IncomingHttpHeaders;
  /** Bytes of the body the client had written when the response arrived. */
  sentWhenAnswered: number;
}

/**
 * Sends `totalBytes` of `fill` as a request body, one 1 MiB chunk at a time with backpressure, and stops as
 * soon as the response arrives: the test never holds the body, and the server can only be ahead of what it
 * reads by its socket buffers. A server that closes the connection after answering ends the upload.
 */
export function streamRequest(
  url: string,
  options: { method: string; headers?: Record<string, string>; totalBytes: number; fill?: number; chunked?: boolean },
): Promise<StreamedResult> {
  const chunk = Buffer.alloc(1024 * 1024, options.fill ?? 0x61);
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const length = options.chunked ? {} : { 'content-length': String(options.totalBytes) };
    const req = http.request(url, { method: options.method, headers: { ...length, ...options.headers } });
    req.on('response', (res) => {
      answered = true;
      const sentWhenAnswered = sent;
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON: keep the text
        }
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body, headers: res.headers, sentWhenAnswered });
      });
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const pump = () => {
      while (!answered && sent < options.totalBytes) {
        const piece = Math.min(chunk.length, options.totalBytes - sent);
        sent += piece;
        if (!req.write(piece === chunk.length ? chunk : chunk.subarray(0, piece))) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered && sent >= options.totalBytes) req.end();
    };
    pump();
  });
}

/** A process's resident set peak (VmHWM) and current size (VmRSS), in bytes, from /proc. */
export async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

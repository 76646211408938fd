/**
 * `work`, or a rejection with `timeoutMessage` once `ms` pass first (`work` itself is not canceled: its answer is
 * dropped). For waits that must stay bounded whatever a dependency does: health checks, metric scrapes, an
 * explanation's question to a workflow.
 */
export async function withinTime<T>(work: Promise<T>, ms: number, timeoutMessage = `no answer within ${ms} ms`): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(timeoutMessage)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

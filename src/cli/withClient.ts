import { describeApiError, type ResolvedCredentials } from '../client/credentials.js';
import { GraphNotFinishedError, TgsClient } from '../client/tgsClient.js';

/**
 * Runs `fn` with a client for the resolved root URL, turning API failures into messages that say what to do next.
 * A graph that did not finish is no API failure: it goes through as it is, for the command to report.
 */
export async function withClient<T>(resolved: ResolvedCredentials, fn: (client: TgsClient) => Promise<T>): Promise<T> {
  try {
    return await fn(new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials }));
  } catch (err) {
    if (err instanceof GraphNotFinishedError) throw err;
    throw new Error(describeApiError(err, resolved));
  }
}

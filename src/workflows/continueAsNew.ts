/** When the taskGraph workflow continues as new (pure: unit-tested, safe in workflow code). */

// Far below the server's 50 MB hard limit, whatever the suggestion says.
const MAX_HISTORY_BYTES = 32 * 1024 * 1024;

/**
 * Honour the server's continue-as-new suggestion only once this run wrote more history than loading the structure
 * did (events and bytes): otherwise a graph whose structure alone exceeds the size threshold would continue-as-new
 * forever without dispatching anything (seen with 100,000 tasks: ~7 MB of history after loading), and each new run
 * reloads the whole structure, so a reload never costs more than the work between two. With a quarter of the
 * loaded bytes as the bar, the bench's 100,000-task graph continued as new 6 times (8.6 MB runs); with all of it,
 * once (13.5 MB), and finished in 131-144 s instead of 138-153 s (docs/bench-journal/2026-11-25.md).
 */
export function shouldContinueAsNew(
  info: { historyLength: number; historySize: number; continueAsNewSuggested: boolean },
  loadedAt: { events: number; bytes: number },
  maxHistoryEvents: number,
): boolean {
  if (info.historyLength > maxHistoryEvents || info.historySize > MAX_HISTORY_BYTES) return true;
  if (!info.continueAsNewSuggested) return false;
  const workEvents = info.historyLength - loadedAt.events;
  const workBytes = info.historySize - loadedAt.bytes;
  return workEvents > loadedAt.events && workBytes > loadedAt.bytes;
}

/** A line at most once a minute for a recurring condition, with how often it happened meanwhile. */
export function everyMinute(log: (line: string) => void, render: (count: number, example: string) => string): (example: string) => void {
  let lastAt = 0;
  let count = 0;
  return (example) => {
    count++;
    if (Date.now() - lastAt < 60_000) return;
    lastAt = Date.now();
    log(render(count, example));
    count = 0;
  };
}

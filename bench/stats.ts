export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return Math.round(sorted[i] * 10) / 10;
}

/**
 * The median of the ratios numerator ÷ denominator of paired measurements, to two decimals (for an even count the
 * lower of the middle two, as percentile picks). Not `percentile`: that rounds to a tenth, which is a latency's
 * resolution in ms and turned a ratio of 0.52 into 0.5 and one of 0.57 into 0.6.
 */
export function medianRatio(pairs: [number, number][]): number {
  if (pairs.length === 0) return NaN;
  const sorted = pairs.map(([n, d]) => n / d).sort((a, b) => a - b);
  return Math.round(sorted[Math.ceil(sorted.length / 2) - 1] * 100) / 100;
}

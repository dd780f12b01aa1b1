/**
 * Pearson's chi-square goodness-of-fit test: do `observed` counts fit `probabilities`?
 * The p-value is the regularized upper incomplete gamma Q(df/2, statistic/2).
 */
export function chiSquareTest(observed: number[], probabilities: number[]): { statistic: number; degreesOfFreedom: number; pValue: number } {
  if (observed.length !== probabilities.length) throw new Error('one probability per category');
  const total = observed.reduce((a, b) => a + b, 0);
  let statistic = 0;
  let categories = 0;
  observed.forEach((count, i) => {
    const expected = total * probabilities[i]!;
    if (expected === 0) {
      // An outcome that should never happen and did: no fit at all.
      if (count > 0) statistic = Number.POSITIVE_INFINITY;
      return;
    }
    statistic += (count - expected) ** 2 / expected;
    categories++;
  });
  const degreesOfFreedom = categories - 1;
  return { statistic, degreesOfFreedom, pValue: Number.isFinite(statistic) ? upperRegularizedGamma(degreesOfFreedom / 2, statistic / 2) : 0 };
}

function logGamma(x: number): number {
  // Lanczos approximation (g = 7, n = 9).
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
    1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let sum = c[0]!;
  for (let i = 1; i < 9; i++) sum += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}

/** Q(a, x) = Γ(a, x) / Γ(a): series below a + 1, continued fraction above (Numerical Recipes). */
export function upperRegularizedGamma(a: number, x: number): number {
  if (x <= 0) return 1;
  const logPrefix = a * Math.log(x) - x - logGamma(a);
  if (x < a + 1) {
    let term = 1 / a;
    let sum = term;
    for (let n = 1; n < 1000 && Math.abs(term) > Math.abs(sum) * 1e-15; n++) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - sum * Math.exp(logPrefix);
  }
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 1000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return Math.exp(logPrefix) * h;
}

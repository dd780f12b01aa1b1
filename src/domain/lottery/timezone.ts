/**
 * Local days and hours of an activity's timezone, computed from a table of UTC offsets.
 *
 * Lua has no timezone database, and the day a draw counts toward must come from Redis
 * time, not the app's clock. So Node looks the timezone up once (Intl), when the settings
 * are written, and stores its offsets over the activity's window: `[[fromMs, minutes],
 * ...]`, the first entry valid from the epoch. Scripts and this module read the same
 * table with the same rule, so DST changes inside the window are exact.
 */
export type UtcOffsets = [fromMs: number, offsetMinutes: number][];

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** No timezone changes its offset twice within this step. */
const SAMPLE_STEP_MS = 3 * HOUR_MS;
/** The table covers this much before the start and after the end of the window. */
const MARGIN_MS = 2 * DAY_MS;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timezone: string): Intl.DateTimeFormat {
  let format = formatters.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timezone, format);
  }
  return format;
}

/**
 * The canonical name of a timezone Intl knows ("asia/shanghai" and "PRC" give
 * "Asia/Shanghai"), or undefined. Activities store this name, so the formatter cache
 * holds one entry per zone, however a caller spells it.
 */
export function canonicalTimezone(name: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** The timezone's offset from UTC at an instant, in minutes (Asia/Shanghai: 480). */
function utcOffsetMinutes(timezone: string, atMs: number): number {
  const parts: Record<string, number> = {};
  for (const part of formatter(timezone).formatToParts(atMs)) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  const wallClockAsUtc = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
  return Math.round((wallClockAsUtc - (atMs - mod(atMs, 1000))) / 60_000);
}

/** The offsets of `timezone` from a little before `fromMs` to a little after `toMs`. */
export function utcOffsetTable(timezone: string, fromMs: number, toMs: number): UtcOffsets {
  const start = fromMs - MARGIN_MS;
  const table: UtcOffsets = [[0, utcOffsetMinutes(timezone, start)]];
  let previous = start;
  for (let at = start + SAMPLE_STEP_MS; at < toMs + MARGIN_MS + SAMPLE_STEP_MS; at += SAMPLE_STEP_MS) {
    const offset = utcOffsetMinutes(timezone, at);
    if (offset !== table.at(-1)![1]) table.push([firstInstantWithOffset(timezone, previous, at, offset), offset]);
    previous = at;
  }
  return table;
}

/** Binary search for the transition in (before, after], where `after` already has `offset`. */
function firstInstantWithOffset(timezone: string, before: number, after: number, offset: number): number {
  let low = before;
  let high = after;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (utcOffsetMinutes(timezone, middle) === offset) high = middle;
    else low = middle;
  }
  return high;
}

/** The offset valid at `atMs`, in ms. Same rule as `utc_offset_ms` in lua/drawLottery.lua. */
function offsetAt(offsets: UtcOffsets, atMs: number): number {
  let minutes = offsets[0]![1];
  for (let i = 1; i < offsets.length && offsets[i]![0] <= atMs; i++) minutes = offsets[i]![1];
  return minutes * 60_000;
}

/** Days since 1970-01-01 on the local calendar. */
export function localDay(offsets: UtcOffsets, atMs: number): number {
  return Math.floor((atMs + offsetAt(offsets, atMs)) / DAY_MS);
}

/** The calendar date of a local day number, as YYYY-MM-DD. */
export function localDate(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/**
 * When local day `day + 1` begins (UTC ms): when the daily limits and stock reset. Same
 * rule as `next_day_start_ms` in lua/drawLottery.lua.
 */
export function nextLocalMidnight(offsets: UtcOffsets, day: number): number {
  const guess = (day + 1) * DAY_MS - offsetAt(offsets, day * DAY_MS);
  const midnight = (day + 1) * DAY_MS - offsetAt(offsets, guess);
  // Where DST begins at midnight (America/Santiago), 00:00 never comes: the day begins at the change.
  if (localDay(offsets, midnight) > day) return midnight;
  return offsets.find(([fromMs]) => fromMs > midnight)?.[0] ?? midnight;
}

/** The start (UTC ms) of the local hour that contains `atMs`. */
export function localHourStart(offsets: UtcOffsets, atMs: number): number {
  const offset = offsetAt(offsets, atMs);
  const local = atMs + offset;
  return local - mod(local, HOUR_MS) - offset;
}

/** 0..23: which entry of an hourlyQuota the hour starting at `hourStartMs` uses. */
export function localHourOfDay(offsets: UtcOffsets, hourStartMs: number): number {
  return Math.floor(mod(hourStartMs + offsetAt(offsets, hourStartMs), DAY_MS) / HOUR_MS);
}

export const ONE_HOUR_MS = HOUR_MS;

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}

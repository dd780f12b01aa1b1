import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The file in PGLITE_DIR naming the process that has the embedded database open. */
export const DATA_DIR_LOCK_FILE = 'campaign-backend.lock';

export type DataDirLock = { release(): void } | { heldBy: number };

/**
 * PGlite is PostgreSQL inside one process, without PostgreSQL's guard against a second
 * server on its data directory: two processes on one PGLITE_DIR each write their own view
 * of it, and the files end up a mix of both. So the directory is locked by a file naming
 * the pid that holds it; the lock of a process that is gone (killed, crashed) is taken over.
 * Gives back the pid of the live process holding it instead, if any.
 */
export function lockDataDir(dir: string): DataDirLock {
  const path = join(dir, DATA_DIR_LOCK_FILE);
  // Written aside, then linked in place (which fails if the lock exists, as O_EXCL does):
  // the lock appears with its pid already in it, so no reader ever sees it empty.
  const mine = `${path}.${process.pid}`;
  writeFileSync(mine, `${process.pid}\n`);
  try {
    // Each turn either takes the lock or finds it held, released or stale; a few suffice.
    for (let turn = 0; turn < 5; turn++) {
      try {
        linkSync(mine, path);
        return held(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = pidIn(path);
      if (holder !== undefined && isRunning(holder)) return { heldBy: holder };
      if (holder !== undefined) removeStale(path, holder);
    }
    throw new Error(`the lock ${path} keeps changing hands`);
  } finally {
    unlinkSync(mine);
  }
}

function held(path: string): { release(): void } {
  const release = () => {
    process.off('exit', release);
    try {
      if (pidIn(path) === process.pid) unlinkSync(path);
    } catch {
      // Gone already: nothing to release.
    }
  };
  // An exit that skips closing the database (process.exit on a fatal error) releases it too.
  process.on('exit', release);
  return { release };
}

/** The pid the lock names; 0 for a file naming none; undefined once the file is gone. */
function pidIn(path: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const pid = Number(text.trim());
  return Number.isSafeInteger(pid) && pid > 0 ? pid : 0;
}

function isRunning(pid: number): boolean {
  // This process's own pid is a lock an earlier process left: in a container each start gets the same pid.
  if (pid === 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Moved aside rather than deleted: if another process took the stale lock over between
 * our read and the move, what moved is that process's live lock, and it goes back.
 */
function removeStale(path: string, stalePid: number): void {
  const aside = `${path}.stale.${process.pid}`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    if (pidIn(aside) !== stalePid) linkSync(aside, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(aside);
  }
}

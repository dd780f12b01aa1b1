import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { SERVER_BUNDLE } from '../../scripts/build-server.ts';
import { projectFile } from '../../src/projectFiles.ts';

const ROOT = projectFile();
/** What `npm start` runs (package.json), flags included: the bundle test/support/buildServer.ts built. */
const NPM_START_ARGS = ['--max-semi-space-size=64', '--enable-source-maps', SERVER_BUNDLE];

/**
 * Extra node flags for started servers, from SERVER_NODE_FLAGS (space-separated): for a
 * bench's server, `--cpu-prof --cpu-prof-dir=<dir>` (node refuses those in NODE_OPTIONS).
 */
const serverArgs = () => [...(process.env.SERVER_NODE_FLAGS?.split(' ').filter(Boolean) ?? []), ...NPM_START_ARGS];

export interface ServerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  /** Everything the process wrote to stderr and stdout so far. */
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
}

/**
 * The child's exit code, once what it wrote before exiting has been read: at 'exit' its last
 * lines may still be in its pipes. Not 'close', which waits for every holder of the pipes: a
 * worker that outlived a killed primary would hold it back for good.
 */
async function exitOf(child: ChildProcess): Promise<number | null> {
  const [code] = (child.exitCode ?? child.signalCode) === null ? await once(child, 'exit') : [child.exitCode];
  const drained = [child.stdout!, child.stderr!].map((stream) => (stream.readableEnded ? undefined : once(stream, 'end')));
  await Promise.race([Promise.all(drained), delay(PIPE_DRAIN_MS, undefined, { ref: false })]);
  return code as number | null;
}
const PIPE_DRAIN_MS = 1000;

/** Starts the server in its own process, as `npm start` would, and waits until it listens. */
export async function startServerProcess(vars: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, serverArgs(), {
    cwd: ROOT,
    env: { ...process.env, ...vars },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // Do not leave a half-started server behind.
      child.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = () => {
      const match = /listening on (http:\/\/\S+)"/.exec(output) ?? /"url":"(http:\/\/[^"]+)"/.exec(output);
      if (match) {
        clearTimeout(timer);
        // Matching the whole output on every chunk would grow quadratic with a chatty server.
        child.stdout!.off('data', onData);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output}`));
    });
  });
  const exited = exitOf(child);
  return {
    url,
    port: Number(new URL(url).port),
    child,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** One server for each set of vars, in their order. */
type ServersFor<Each> = { -readonly [K in keyof Each]: ServerProcess };

/**
 * Starts servers side by side. If one fails to start, the others that did are killed before
 * its error is thrown: the file's teardown never learns of them, and they would outlive it.
 */
export async function startServerProcesses<const Each extends readonly Record<string, string>[]>(varsEach: Each, timeoutMs?: number): Promise<ServersFor<Each>> {
  const results = await Promise.allSettled(varsEach.map((vars) => startServerProcess(vars, timeoutMs)));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (!failed) return results.map((result) => (result as PromiseFulfilledResult<ServerProcess>).value) as ServersFor<Each>;
  await Promise.all(results.map((result) => (result.status === 'fulfilled' ? result.value.kill() : undefined)));
  throw failed.reason;
}

/** Runs the server expecting it to refuse to start; resolves with its exit code and output. */
export async function runUntilExit(vars: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, serverArgs(), {
    cwd: ROOT,
    env: { ...process.env, ...vars },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await exitOf(child);
  clearTimeout(timer);
  return { code: code as number | null, output, stdout, stderr };
}

/** A TCP port on 127.0.0.1 that nothing listens on (it was free a moment ago). */
export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

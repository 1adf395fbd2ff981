// CPU time snapshots for the bench: the coordinator's main thread alone, the whole bench process,
// and a set of worker processes, so a run's CPU can be split by where it was spent. Linux /proc
// (schedstat: nanoseconds); NOT a profiler and not a timer of wall time.
import { readdirSync, readFileSync } from 'node:fs';

export interface CpuSnapshot {
  /** The coordinator's main thread only (its tid is the pid); null where /proc has no schedstat. */
  coordinatorThreadNs: number | null;
  /**
   * process.cpuUsage() of the bench process: the main thread, V8's GC and compiler threads, libuv's
   * pool, and every worker_thread (thread transport workers, the thread echo's peers).
   */
  processNs: number;
  /** The given worker processes (every thread of each), summed; 0 when there are none. */
  workerProcessesNs: number;
}

export interface CpuSpent {
  coordinatorThreadNs: number | null;
  processNs: number;
  workerProcessesNs: number;
  /** processNs + workerProcessesNs: everything the run cost the machine. */
  allNs: number;
}

/** The first schedstat field: time this task ran on a CPU, ns. */
function taskRunNs(pid: number, tid: number): number | null {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
}

/** Every live thread of a process, summed (a thread that already exited is not counted). */
function processRunNs(pid: number): number {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0; // already gone
  }
  return tids.reduce((s, tid) => s + (taskRunNs(pid, Number(tid)) ?? 0), 0);
}

function processCpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

/** Worker pids that are other processes: a thread worker reports this process's pid or none (≤ 0). */
export function otherProcesses(pids: readonly number[]): number[] {
  return pids.filter((p) => p > 0 && p !== process.pid);
}

/** Now. Only `workerPids` that are other processes are summed (threads are in processNs already). */
export function cpuSnapshot(workerPids: readonly number[]): CpuSnapshot {
  const others = otherProcesses(workerPids);
  return {
    coordinatorThreadNs: taskRunNs(process.pid, process.pid),
    processNs: processCpuNs(),
    workerProcessesNs: others.reduce((s, p) => s + processRunNs(p), 0),
  };
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuSpent {
  const processNs = b.processNs - a.processNs;
  const workerProcessesNs = b.workerProcessesNs - a.workerProcessesNs;
  return {
    coordinatorThreadNs:
      a.coordinatorThreadNs === null || b.coordinatorThreadNs === null
        ? null
        : b.coordinatorThreadNs - a.coordinatorThreadNs,
    processNs,
    workerProcessesNs,
    allNs: processNs + workerProcessesNs,
  };
}

/** Time each live thread of this process has run so far (ns), by thread id. */
export function threadRunNs(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${process.pid}/task`).map(Number)) {
    const ns = taskRunNs(process.pid, tid);
    if (ns !== null) out.set(tid, ns);
  }
  return out;
}

/** A thread's name as the kernel has it (/proc comm: libuv's `libuv-worker`, V8's `V8 DefaultWorke`, …). */
function threadName(tid: number): string {
  try {
    return readFileSync(`/proc/${process.pid}/task/${tid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/**
 * CPU ns each thread alive at both snapshots spent between them, busiest first; the main thread
 * (tid = pid) marked, each with its tid and kernel name.
 */
export function threadsBetween(
  a: Map<number, number>,
  b: Map<number, number>,
): { main: boolean; ns: number; tid: number; name: string }[] {
  return [...b]
    .filter(([tid]) => a.has(tid))
    .map(([tid, ns]) => ({ main: tid === process.pid, ns: ns - a.get(tid)!, tid, name: threadName(tid) }))
    .sort((x, y) => y.ns - x.ns);
}

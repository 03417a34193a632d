/** CPU time (every thread) and memory of a process, read from /proc (Linux). */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

let ticksPerSecond: number | null = null

/** The kernel's clock tick (USER_HZ), asked once. */
function clockTicks(): number {
  if (ticksPerSecond === null) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/** One reading. */
export interface ProcSample {
  /** User + system CPU seconds of every thread so far. */
  readonly cpuSeconds: number
  /** Resident memory now and its peak (MiB). */
  readonly rssMiB: number
  readonly peakRssMiB: number
}

/** Reads /proc/<pid>/stat and /proc/<pid>/status; null once the process is gone. */
export function sampleProcess(pid: number): ProcSample | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const ticks = Number(fields[11]) + Number(fields[12]) // utime, stime (fields 14 and 15 of stat(5))
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0)
    return { cpuSeconds: ticks / clockTicks(), rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024 }
  } catch {
    return null
  }
}

/** The 1-minute load average (what `uptime` shows first). */
export function loadAverage(): number {
  try {
    return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0])
  } catch {
    return Number.NaN
  }
}

/**
 * The main thread's scheduler figures (/proc/<pid>/task/<pid>/schedstat, in ns): seconds on a CPU (the
 * event loop: TLS, requests, re-plans, write preparation; V8's helper threads excluded), and
 * seconds it was ready to run but waited for a core (the run queue). On a shared machine the second tells
 * a loop that waited for work from one that waited for the CPU. Null once the process is gone (or the
 * kernel keeps no schedstat).
 */
export function mainThreadSchedSeconds(pid: number): { readonly cpuS: number; readonly runQueueS: number } | null {
  try {
    const [onCpu, waiting] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number)
    if (onCpu === undefined || waiting === undefined || !Number.isFinite(onCpu) || !Number.isFinite(waiting)) return null
    return { cpuS: onCpu / 1e9, runQueueS: waiting / 1e9 }
  } catch {
    return null
  }
}

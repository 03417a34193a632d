/** Reads the end of an append-only line file without loading all of it. */
import { read } from 'node:fs'
import { promisify } from 'node:util'

const readAsync = promisify(read)
const FIRST_READ = 64 * 1024
const MAX_READ = 16 * 1024 * 1024

/** The file's tail starting at a line boundary, holding at least two whole lines when the file has them. */
export async function readTail(fd: number, size: number): Promise<{ text: string; atFileStart: boolean }> {
  let n = Math.min(size, FIRST_READ)
  for (;;) {
    const buf = Buffer.alloc(n)
    const { bytesRead } = await readAsync(fd, buf, 0, n, size - n)
    let text = buf.subarray(0, bytesRead).toString('utf8')
    const atFileStart = n === size
    if (!atFileStart) {
      // the first line is probably cut (possibly mid-character): drop it
      const cut = text.indexOf('\n')
      text = cut < 0 ? '' : text.slice(cut + 1)
    }
    if (atFileStart || countNewlines(text) >= 2 || n >= MAX_READ) return { text, atFileStart }
    n = Math.min(size, n * 4)
  }
}

function countNewlines(text: string): number {
  let count = 0
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) count++
  return count
}

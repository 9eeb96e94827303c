import type { ServerResponse } from 'node:http'

/**
 * Writes an interim (1xx) answer ahead of the final one. An answer queued behind another on a
 * pipelining connection has no socket yet, and Node would buffer the 1xx and then put the final
 * status line in front of it once a body chunk is written: the client would read the 1xx as that
 * answer's body. So it waits for the answer's turn on the wire, and is dropped if the final
 * answer got there first: it would no longer be interim.
 */
export function writeInterim(response: ServerResponse, write: () => void): void {
  if (response.socket !== null) return write()
  response.once('socket', () => {
    if (!response.headersSent) write()
  })
}

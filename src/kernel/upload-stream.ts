import type { IncomingMessage } from 'node:http'
import { PassThrough, type Transform } from 'node:stream'

/**
 * A request body as an upstream call reads it, through a stream of its own. undici destroys the
 * body it was given when its call ends before reading all of it (an upstream that failed or
 * answered mid-upload), and Node reads no more of a connection for a request destroyed before
 * its end: the rest of the body could not be drained, and the close after the answer would
 * reset the client's upload, and the answer with it. Cut off, this stream only lets go of the
 * request, which the connection's lingering close then drains (connection-close.ts). A request
 * that breaks off breaks this stream, so that the upstream call ends as it would have.
 */
export function uploadStream(request: IncomingMessage, through: Transform = new PassThrough()): Transform {
  // `pipe`, not `pipeline`: the latter destroys the request when `through` is destroyed.
  request.pipe(through)
  const brokenOff = (): void => {
    if (!request.complete) through.destroy(new Error('the request body broke off before its end'))
  }
  request.once('close', brokenOff)
  // Taken from the request before its end (its answer has gone: connection-close.ts), it ends the
  // upstream call's upload rather than leave it waiting for the rest.
  through.once('unpipe', brokenOff)
  through.once('close', () => {
    request.off('close', brokenOff)
    // The call stopped reading before the body's end (`pipe` has let go): the rest is read and
    // dropped, so that a kept-alive connection serves its next request, and one that closes
    // does so without a reset.
    if (!request.complete && !request.destroyed) request.resume()
  })
  return through
}

/**
 * Whether an upload gets its own stream (`uploadStream`): one announced over 64 KiB, or of no
 * announced length. A smaller one has mostly arrived with its head (Node reads 64 KiB at a
 * time), and goes to undici as it is, the common path kept free of a stream per request.
 */
export function isLongUpload(request: IncomingMessage): boolean {
  const length = request.headers['content-length']
  return length === undefined || Number(length) > 65_536
}

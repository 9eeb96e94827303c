import { brotliDecompress, gunzip, inflate, type InputType, type ZlibOptions } from 'node:zlib'
import type { ComparedAnswer } from '../util/shadow-compare.js'

type Decoder = (bytes: InputType, options: ZlibOptions, done: (error: Error | null, result: Buffer) => void) => void

/** RFC 9110 8.4.1's codings Node decodes (`x-gzip` is gzip, 8.4.1.3). */
const DECODERS: ReadonlyMap<string, Decoder> = new Map<string, Decoder>([
  ['gzip', gunzip],
  ['x-gzip', gunzip],
  ['deflate', inflate],
  ['br', brotliDecompress as Decoder]
])

/**
 * An answer's content as SPEC 15 compares it: decoded when its `Content-Encoding` is one coding
 * Node can undo. The legacy side streams the client's `Accept-Encoding` through, so a legacy
 * backend may answer gzip where the candidate's V4 calls ask for `identity`; compared as bytes,
 * the same JSON would always differ. `skipped` when the decoded content is over `maxBytes` (SPEC
 * 15: not compared). Any other coding, several codings, or bytes that do not decode are compared
 * as they came. Decoded on the thread pool: the comparison runs beside the client's path.
 */
export function decodedContent(answer: ComparedAnswer, maxBytes: number): Promise<ComparedAnswer | 'skipped'> {
  const coding = answer.contentEncoding?.trim().toLowerCase()
  const decode = coding === undefined ? undefined : DECODERS.get(coding)
  if (decode === undefined) return Promise.resolve(answer)
  return new Promise((resolve) => {
    decode(answer.body, { maxOutputLength: Math.max(1, maxBytes) }, (error, content) => {
      if (error === null) resolve({ ...answer, body: content, contentEncoding: undefined })
      else resolve((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' ? 'skipped' : answer)
    })
  })
}

import { z } from 'zod'

/** Text of a percentage as `${PCT:-12.5}` leaves it: 0-100, two decimals at most. */
const PERCENT_TEXT = /^(?:100(?:\.0{1,2})?|\d{1,2}(?:\.\d{1,2})?)$/
const TWO_DECIMALS = 'at most two decimals (the bucket is one in 10000)'

/**
 * SPEC 13-15's percentages (brownout clients, canary, shadow): 0-100 with two decimals at most,
 * as the buckets are one in 10,000; written as a number, or as text, as a placeholder leaves it
 * (SPEC 8), like every other number of the config.
 */
export const percentSchema = z.union(
  [
    z
      .number()
      .min(0)
      .max(100)
      .refine((value) => Math.abs(value * 100 - Math.round(value * 100)) < 1e-6, TWO_DECIMALS),
    z.string().regex(PERCENT_TEXT, `expected a percentage from 0 to 100, ${TWO_DECIMALS}`).transform(Number)
  ],
  { error: `expected a percentage from 0 to 100, ${TWO_DECIMALS}` }
)

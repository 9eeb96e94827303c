import type { z } from 'zod'

/**
 * The keys the object at `path` of a config may have, read off the zod schema: what an unknown
 * key there could have meant. Wrappers (defaults, nullables, pipes) are looked through; a union
 * offers the keys of each of its objects.
 */
export function knownKeysAt(schema: z.core.$ZodType, path: readonly PropertyKey[]): string[] {
  return [...new Set(objectsAt(schema, path).flatMap((object) => Object.keys(object._zod.def.shape)))]
}

function objectsAt(schema: z.core.$ZodType, path: readonly PropertyKey[]): z.core.$ZodObject[] {
  const typed = schema as z.core.$ZodTypes
  const def = typed._zod.def
  const [head, ...rest] = path
  switch (def.type) {
    case 'object': {
      if (head === undefined) return [typed as z.core.$ZodObject]
      const child = def.shape[String(head)]
      return child === undefined ? [] : objectsAt(child, rest)
    }
    case 'record':
      return head === undefined ? [] : objectsAt(def.valueType, rest)
    case 'array':
      return head === undefined ? [] : objectsAt(def.element, rest)
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
    case 'readonly':
    case 'catch':
      return objectsAt(def.innerType, path)
    case 'pipe':
      return [...objectsAt(def.in, path), ...objectsAt(def.out, path)]
    case 'union':
      return def.options.flatMap((option) => objectsAt(option, path))
    default:
      return []
  }
}

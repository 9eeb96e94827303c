/** `Link` values are a comma-separated list (RFC 8288 3): the upstream's links, then `link`. */
export function appendLink(existing: string | number | string[] | undefined, link: string): string {
  if (existing === undefined) return link
  return `${[existing].flat().join(', ')}, ${link}`
}

/**
 * The host name of a `Host` header value: lower case, without its port (`Shop.Example.com:8080` →
 * `shop.example.com`, `[::1]:3000` → `[::1]`). Nest routes by host name (`@Controller({ host })`),
 * never by port, and behind a load balancer or in a test the port is the one that socket happened
 * to reach, so cache keys name the host name only. A value whose end is not a port is kept whole
 * (lower case).
 */
export function hostName(host: string): string {
  // An IPv6 literal holds colons of its own: the port can only follow its closing bracket.
  const from = host.startsWith('[') ? host.indexOf(']') + 1 : 0;
  const colon = host.indexOf(':', from);
  const name = colon !== -1 && isPort(host, colon + 1) ? host.slice(0, colon) : host;
  return name.toLowerCase();
}

/** Whether `host` ends with digits only from `start` on (RFC 3986 allows an empty port). */
function isPort(host: string, start: number): boolean {
  for (let i = start; i < host.length; i += 1) {
    const code = host.charCodeAt(i);
    if (code < 48 || code > 57) return false;
  }
  return true;
}

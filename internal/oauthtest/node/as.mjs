// as.mjs runs oauth2-mock-server (pinned in package.json) as the
// authorization server of mcp-mux's connected-accounts tests, on a free
// loopback port; it prints its issuer URL as its first line of output.
//
// On top of the mock's authorization-code grant with PKCE (S256) it:
//   - remembers who authorized: the login_hint on the authorization URL
//     (the test's "browser" adds it), bound to the code it issues; the
//     token's sub is that user, also after a refresh;
//   - issues JWTs (RS256, its /jwks) with aud = the RFC 8707 resource the
//     token request names, a random jti, the scope that was authorized,
//     and exp = iat + the current TTL (TOKEN_TTL, or POST /test/ttl?s=N);
//   - makes codes and refresh tokens single use (a refresh rotates it):
//     anything else is invalid_grant;
//   - with CLIENT_ID set, requires that client and CLIENT_SECRET (Basic
//     or in the body) at the token endpoint;
//   - counts token requests: GET /test/stats; GET /test/secrets lists
//     every code, PKCE verifier, access and refresh token it issued or
//     received (for tests that look for them where they must not be).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { OAuth2Server } from 'oauth2-mock-server';

let ttl = Number(process.env.TOKEN_TTL || '3600');
const clientID = process.env.CLIENT_ID || '';
const clientSecret = process.env.CLIENT_SECRET || '';

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
const svc = server.service;

const codes = new Map();    // code → {user, scope, challenge}
const refresh = new Map();  // refresh token → {user, scope}
const stats = { authorize: 0, authorization_code: 0, refresh_token: 0, refused: 0, pkce_s256: 0, resource: 0, client_ok: 0, client_bad: 0, refused_reasons: {} };

const secrets = new Set();
function keep(v) { if (typeof v === 'string' && v !== '') secrets.add(v); }

function refuse(resp, why) {
  stats.refused++;
  stats.refused_reasons[why] = (stats.refused_reasons[why] || 0) + 1;
  resp.statusCode = 400;
  resp.body = { error: 'invalid_grant' };
}

svc.on('beforeAuthorizeRedirect', (redirect, req) => {
  stats.authorize++;
  const code = redirect.url.searchParams.get('code');
  const user = req.query.login_hint;
  if (req.query.code_challenge_method === 'S256' && req.query.code_challenge) stats.pkce_s256++;
  if (!code || typeof user !== 'string' || user === '') {
    // Nobody signed in: no code.
    redirect.url.searchParams.delete('code');
    redirect.url.searchParams.set('error', 'access_denied');
    return;
  }
  keep(code);
  codes.set(code, { user, scope: typeof req.query.scope === 'string' ? req.query.scope : '', resource: req.query.resource });
});

// who is the grant's user (nil: none), from the token request.
function grantOf(body) {
  if (body.grant_type === 'authorization_code') return codes.get(body.code);
  if (body.grant_type === 'refresh_token') return refresh.get(body.refresh_token);
  return undefined;
}

svc.on('beforeTokenSigning', (token, req) => {
  const g = grantOf(req.body);
  token.payload.sub = g ? g.user : 'nobody';
  token.payload.jti = randomUUID();
  token.payload.exp = token.payload.iat + ttl;
  if (g && g.scope) token.payload.scope = g.scope;
  if (typeof req.body.resource === 'string') token.payload.aud = req.body.resource;
});

function clientOK(req) {
  if (!clientID) return true;
  let id = req.body.client_id, secret = req.body.client_secret;
  const h = req.headers.authorization || '';
  if (h.startsWith('Basic ')) {
    const [u, p] = Buffer.from(h.slice(6), 'base64').toString().split(':');
    id = decodeURIComponent(u); secret = decodeURIComponent(p || '');
  }
  return id === clientID && secret === clientSecret;
}

svc.on('beforeResponse', (resp, req) => {
  const b = req.body;
  if (b.grant_type !== 'authorization_code' && b.grant_type !== 'refresh_token') return;
  keep(b.code); keep(b.code_verifier); keep(b.refresh_token);
  if (!clientOK(req)) {
    stats.client_bad++;
    resp.statusCode = 401;
    resp.body = { error: 'invalid_client' };
    return;
  }
  stats.client_ok++;
  const g = grantOf(b);
  if (b.grant_type === 'authorization_code') codes.delete(b.code);
  else refresh.delete(b.refresh_token);
  if (!g) return refuse(resp, b.grant_type === 'authorization_code' ? 'unknown code' : 'unknown refresh token');
  if (resp.statusCode !== 200) return;
  stats[b.grant_type]++;
  if (typeof b.resource === 'string' && b.resource !== '') stats.resource++;
  resp.body.expires_in = ttl;
  if (g.scope) resp.body.scope = g.scope; else delete resp.body.scope;
  delete resp.body.id_token;
  keep(resp.body.access_token); keep(resp.body.refresh_token);
  refresh.set(resp.body.refresh_token, { user: g.user, scope: g.scope });
});

const handler = svc.requestHandler;
const httpServer = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/test/stats' && req.method === 'GET') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  if (u.pathname === '/test/secrets' && req.method === 'GET') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify([...secrets]));
    return;
  }
  if (u.pathname === '/test/ttl' && req.method === 'POST') {
    ttl = Number(u.searchParams.get('s'));
    res.end('ok');
    return;
  }
  handler(req, res);
});
httpServer.listen(0, '127.0.0.1', () => {
  const { port } = httpServer.address();
  server.issuer.url = `http://127.0.0.1:${port}`;
  process.stdout.write(server.issuer.url + '\n');
});
process.on('SIGTERM', () => process.exit(0));

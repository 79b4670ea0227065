// Package headers resolves the HTTP headers mcp-mux sends upstream: static
// headers < OAuth < token exchange < user_auth < headers_from_context, the
// inbound secrets carrier, OAuth token sources and RFC 8693 token exchange
// (the caller's token for an upstream one, cached per caller). Header name
// and value rules live in package headercheck.
//
// Errors describe what is wrong with a value but never repeat the value
// itself, because header values are usually credentials.
package headers

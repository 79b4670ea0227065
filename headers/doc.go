// Package headers resolves the HTTP headers mcp-mux sends upstream: static
// headers < OAuth < user_auth < headers_from_context, the inbound secrets
// carrier, and OAuth token sources. Header name and value rules live in
// package headercheck.
//
// Errors describe what is wrong with a value but never repeat the value
// itself, because header values are usually credentials.
package headers

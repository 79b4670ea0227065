// Package api holds mcp-mux's HTTP management surfaces beside /mcp: the
// task REST API (tasks.go), and the admin config API and status page. Each
// surface depends on a small interface that proxy, taskpoll or config
// satisfies (the status page reads package status's snapshot, so api
// imports no proxy); none of those packages imports api, and cmd/mcp-mux
// mounts the routes.
package api

package proxy

import "github.com/modelcontextprotocol/go-sdk/mcp"

// Advertised server capabilities.
//
// initialize and server/discover advertise what the catalog serves: tools
// always (mcp-mux has built-ins, and tool_search), prompts when some
// upstream serves prompts, resources when some upstream serves resources or
// the durable-task resource exists (subscribe when one of those can be
// subscribed to), completions when some upstream completes, logging when
// some upstream logs or task events are sent as log messages. listChanged is
// set on every list: the mux announces each change of an aggregated list
// (upstream list changes, reloads, tool_search promotions), on the session's
// stream and on subscriptions/listen.
//
// go-sdk fixes a Server's capabilities when it is built (ServerOptions plus
// what was registered on it), and mcp-mux registers nothing on its shared
// mcp.Server: the receiving middleware replaces the result's capabilities
// with those of the current catalog. Each catalog is rebuilt when an
// upstream's lists change and on every reload, so the next initialize or
// discover advertises the change. A legacy session keeps what its
// initialize advertised (capabilities are fixed for a session's lifetime;
// it still receives list_changed for lists it was told of); a 2026-07-28
// client learns of a change by discovering again (discover is cacheable
// for cacheTTLMs). Only servers that finished a discovery count: one still
// starting or unreachable contributes nothing until it is discovered.

// catalogCapabilities is the union of what the backends serve, and what
// mcp-mux itself serves under pol.
func catalogCapabilities(backends []*backend, pol *catalogPolicy) mcp.ServerCapabilities {
	var prompts, resources, subscribe, completions, logging bool
	// Durable tasks: the task resource template is listed and subscribable,
	// and task events are sent as log messages (tasks.go).
	resources, subscribe, logging = pol.tasks, pol.tasks, pol.tasks
	for _, b := range backends {
		l := b.up.Lists()
		c := l.Capabilities
		if c == nil {
			c = &mcp.ServerCapabilities{}
		}
		prompts = prompts || c.Prompts != nil || len(l.Prompts) > 0
		resources = resources || c.Resources != nil || len(l.Resources) > 0 || len(l.Templates) > 0
		subscribe = subscribe || (c.Resources != nil && c.Resources.Subscribe)
		completions = completions || c.Completions != nil
		logging = logging || c.Logging != nil
	}
	caps := mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if prompts {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if resources {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: subscribe}
	}
	if completions {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	if logging {
		caps.Logging = &mcp.LoggingCapabilities{}
	}
	return caps
}

// setCapabilities puts the catalog's capabilities into an initialize or
// server/discover result. Extensions are each added by their own file after
// it (advertiseTasks, modern_tasks.go), on server/discover only.
func (s *Server) setCapabilities(res mcp.Result) {
	caps := s.rt.Load().cat.Load().caps // a copy: the catalog's pointers are never written
	switch r := res.(type) {
	case *mcp.InitializeResult:
		r.Capabilities = &caps
	case *mcp.DiscoverResult:
		r.Capabilities = &caps
	}
}

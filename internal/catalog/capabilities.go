package catalog

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

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

// served is what a catalog serves besides tools.
type served struct {
	prompts, resources, subscribe, completions, logging bool
	apps                                                bool // MCP Apps (apps.go)
}

// add records what one server's lists and declared capabilities serve.
func (s *served) add(l *upstream.Lists) {
	c := l.Capabilities
	if c == nil {
		c = &mcp.ServerCapabilities{}
	}
	s.prompts = s.prompts || c.Prompts != nil || len(l.Prompts) > 0
	s.resources = s.resources || c.Resources != nil || len(l.Resources) > 0 || len(l.Templates) > 0
	s.subscribe = s.subscribe || (c.Resources != nil && c.Resources.Subscribe)
	s.completions = s.completions || c.Completions != nil
	s.logging = s.logging || c.Logging != nil
	s.apps = s.apps || isAppServer(l)
}

// capabilities is the union of what the sources serve, and what mcp-mux
// itself serves under pol.
func capabilities[S any](sources []Source[S], pol *Policy) mcp.ServerCapabilities {
	// Durable tasks: the task resource template is listed and subscribable,
	// and task events are sent as log messages.
	s := served{resources: pol.tasks, subscribe: pol.tasks, logging: pol.tasks}
	for i := range sources {
		s.add(&sources[i].Lists)
	}
	return s.advertised()
}

// advertised returns the capabilities for what is served.
func (s served) advertised() mcp.ServerCapabilities {
	caps := mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if s.prompts {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if s.resources {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: s.subscribe}
	}
	if s.completions {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	if s.logging {
		caps.Logging = &mcp.LoggingCapabilities{}
	}
	if s.apps {
		caps.AddExtension(UIExtension, nil)
	}
	return caps
}

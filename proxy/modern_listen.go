package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscriptions/listen (2026-07-28) replaces the legacy GET stream and
// resources/subscribe. A listener asks for list changes and resource URIs;
// mcp-mux first acknowledges what it will honour, then fans in every
// upstream's changes: a catalog rebuild that changes a list (notifyChanges) and
// notifications/resources/updated for a URI the listener named, each tagged
// with the listen request's id as io.modelcontextprotocol/subscriptionId.
// The stream lasts until the client closes it or mcp-mux shuts down.

// listener is one open subscriptions/listen stream.
type listener struct {
	ctx                       context.Context // the listen handler's: routes to its stream
	ss                        *mcp.ServerSession
	id                        any // the listen request's id
	tools, prompts, resources bool
	uris                      map[string]bool
	// The tasks extension (modern_tasks_listen.go): the caller, the task
	// ids granted, and the stream mcp-mux writes itself (nil: the SDK's).
	user    string
	taskIDs map[string]bool
	direct  *directStream
}

// listenTable holds the open listeners.
type listenTable struct {
	mu   sync.Mutex
	m    map[*listener]struct{}
	open int // listen streams admitted, those still subscribing included
}

// admit counts one more open listen stream, unless limit are open already.
func (t *listenTable) admit(limit int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open >= limit {
		return false
	}
	t.open++
	return true
}

// leave ends what admit counted.
func (t *listenTable) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open--
}

func (t *listenTable) add(l *listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[*listener]struct{})
	}
	t.m[l] = struct{}{}
}

func (t *listenTable) remove(l *listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, l)
}

func (t *listenTable) all() []*listener {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*listener, 0, len(t.m))
	for l := range t.m {
		out = append(out, l)
	}
	return out
}

// changed tells every listener that asked for it which lists changed.
func (t *listenTable) changed(s *Server, tools, prompts, resources bool) {
	for _, l := range t.all() {
		meta := func() mcp.Meta { return mcp.Meta{metaSubscriptionID: l.id} }
		if tools && l.tools {
			s.sendListener(l, "notifications/tools/list_changed",
				&mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: l.ss, Params: &mcp.ToolListChangedParams{Meta: meta()}})
		}
		if prompts && l.prompts {
			s.sendListener(l, "notifications/prompts/list_changed",
				&mcp.ServerRequest[*mcp.PromptListChangedParams]{Session: l.ss, Params: &mcp.PromptListChangedParams{Meta: meta()}})
		}
		if resources && l.resources {
			s.sendListener(l, "notifications/resources/list_changed",
				&mcp.ServerRequest[*mcp.ResourceListChangedParams]{Session: l.ss, Params: &mcp.ResourceListChangedParams{Meta: meta()}})
		}
	}
}

// resourceUpdated passes an upstream's resource update to the listeners of its URI.
func (t *listenTable) resourceUpdated(s *Server, p *mcp.ResourceUpdatedNotificationParams) {
	for _, l := range t.all() {
		if !l.uris[p.URI] {
			continue
		}
		q := &mcp.ResourceUpdatedNotificationParams{URI: p.URI, Meta: mcp.Meta{metaSubscriptionID: l.id}}
		s.sendListener(l, "notifications/resources/updated", &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: l.ss, Params: q})
	}
}

func (s *Server) sendListener(l *listener, method string, req mcp.Request) {
	if l.direct != nil {
		l.direct.notify(method, req.GetParams())
		return
	}
	if s.send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, notifyTimeout)
	defer cancel()
	if _, err := s.send(ctx, method, req); err != nil {
		s.log.Debug("listener notification not delivered", "method", method, "err", err)
	}
}

// listen serves one subscriptions/listen request until its stream closes.
func (s *Server) listen(ctx context.Context, st *session, req mcp.Request) (mcp.Result, error) {
	p, _ := req.GetParams().(*mcp.SubscriptionsListenParams)
	if p == nil || p.Notifications == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "subscriptions/listen: missing required 'notifications' field"}
	}
	if err := checkListenURIs(p.Notifications.ResourceSubscriptions); err != nil {
		return nil, err
	}
	var id any
	if err := json.Unmarshal([]byte(headerOf(req).Get(requestIDHeader)), &id); err != nil || id == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "subscriptions/listen requires a request id"}
	}
	if limit := s.maxSessions(); !s.listeners.admit(limit) {
		return nil, &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
			"mcp-mux holds at most %d open subscriptions/listen streams (inbound.max_sessions); try again later", limit)}
	}
	defer s.listeners.leave()
	want := p.Notifications
	agreed := mcp.NotificationSubscriptions{
		ToolsListChanged:     want.ToolsListChanged,
		PromptsListChanged:   want.PromptsListChanged,
		ResourcesListChanged: want.ResourcesListChanged,
	}
	l := &listener{ctx: ctx, ss: st.ss, id: id, tools: want.ToolsListChanged, prompts: want.PromptsListChanged,
		resources: want.ResourcesListChanged, uris: map[string]bool{}}
	cat := s.rt.Load().cat.Load()
	for _, uri := range want.ResourceSubscriptions {
		b := cat.res.resourceOwner(uri)
		if b == nil || l.uris[uri] {
			continue // not honoured: left out of the acknowledgement
		}
		if err := s.subscribe(ctx, st, b, uri, true); err != nil {
			s.logFor(ctx).Debug("upstream subscribe failed", "server", b.name, "err", err)
			continue
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
			defer cancel()
			_ = s.subscribe(ctx, st, b, uri, false)
		}()
		l.uris[uri] = true
		agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, uri)
	}
	s.listeners.add(l)
	defer s.listeners.remove(l)
	ack := &mcp.ServerRequest[*mcp.SubscriptionsAcknowledgedParams]{Session: st.ss,
		Params: &mcp.SubscriptionsAcknowledgedParams{Meta: mcp.Meta{metaSubscriptionID: id}, Notifications: agreed}}
	if _, err := s.send(ctx, "notifications/subscriptions/acknowledged", ack); err != nil {
		return nil, fmt.Errorf("sending notifications/subscriptions/acknowledged: %w", err)
	}
	if agreed.ToolsListChanged || agreed.PromptsListChanged || agreed.ResourcesListChanged || len(agreed.ResourceSubscriptions) > 0 {
		select {
		case <-ctx.Done():
		case <-s.life.Done():
		}
	}
	return &mcp.SubscriptionsListenResult{Meta: mcp.Meta{metaSubscriptionID: id}}, nil
}

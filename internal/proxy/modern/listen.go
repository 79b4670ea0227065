package modern

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/listenstream"
	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// subscriptions/listen (2026-07-28) replaces the legacy GET stream and
// resources/subscribe. A listener asks for list changes and resource URIs;
// mcp-mux first acknowledges what it will honour, then fans in every
// upstream's changes: a catalog rebuild that changes a list (notifyChanges) and
// notifications/resources/updated for a URI the listener named, each tagged
// with the listen request's id as io.modelcontextprotocol/subscriptionId.
// The stream lasts until the client closes it or mcp-mux shuts down.
//
// mcp-mux serves listens itself (serveListen) on a stream it writes
// (internal/listenstream), which costs a few KiB and one goroutine; a listen it
// cannot tell the SDK would accept goes to the SDK (listen), which answers
// the error or, for the rare request it accepts, holds the stream its way.
// Either way open streams count against inbound.max_sessions and their
// caller's share of it (package admission), and each URI subscribed
// upstream is one request under the limits rules (callpath.AdmitForward):
// a listen one of them refuses is answered with that refusal, and what it
// had subscribed is dropped.

// listener is one open subscriptions/listen stream.
type listener struct {
	ctx                       context.Context // ends with the stream; on the SDK path, routes to it
	ss                        *mcp.ServerSession
	id                        any // the listen request's id
	tools, prompts, resources bool
	uris                      map[string]bool
	user                      string
	direct                    *listenstream.Stream // the stream mcp-mux writes (nil: the SDK's)
	taskIDs                   map[string]bool      // granted (tasks_listen.go)
}

// listens serves subscriptions/listen on both paths: on the SDK's (listen)
// and, for a listen the fast path can tell the SDK would accept or one
// asking for task ids, on a stream of its own (serveListen).
type listens struct {
	log       hclog.Logger
	rt        *atomic.Pointer[callpath.Runtime]
	calls     *callpath.Router
	send      mcp.MethodHandler // the SDK's sending handler
	gate      *callpath.Life
	life      context.Context
	bg        *sync.WaitGroup
	panics    *panicguard.Guard
	tasks     *taskpoll.Service
	capsCache *capsCache
	listeners listenTable
}

// bounds returns the caps and shares of the config applied now.
func (s *listens) bounds() admission.Bounds { return admission.Of(&s.rt.Load().Config.Inbound) }

// logFor is the logger for a line about the request ctx belongs to.
func (s *listens) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, s.log) }

// listenTable holds the open listeners.
type listenTable struct {
	mu    sync.Mutex
	m     map[*listener]struct{}
	open  int              // listen streams admitted, those still subscribing included
	users admission.Counts // open, by user
}

// admit counts one more open listen stream of user, unless b's cap or the
// user's share of it is full: then it returns an error naming the bound.
func (t *listenTable) admit(b admission.Bound, user string) *jsonrpc.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch b.Refusal(t.open, t.users[user]) {
	case "":
	case b.ShareKey:
		return &jsonrpc.Error{Code: admission.CodeLimit, Message: fmt.Sprintf(
			"this caller already has %d open subscriptions/listen streams, the most one caller may have (%s); close one or try again later", b.Share, b.ShareKey)}
	default:
		return &jsonrpc.Error{Code: admission.CodeLimit, Message: fmt.Sprintf(
			"mcp-mux holds at most %d open subscriptions/listen streams (%s); try again later", b.Limit, b.Key)}
	}
	t.open++
	t.users.Add(user)
	return nil
}

// leave ends what admit counted.
func (t *listenTable) leave(user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open--
	t.users.Done(user)
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
func (t *listenTable) changed(s *listens, tools, prompts, resources bool) {
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
func (t *listenTable) resourceUpdated(s *listens, p *mcp.ResourceUpdatedNotificationParams) {
	for _, l := range t.all() {
		if !l.uris[p.URI] {
			continue
		}
		q := &mcp.ResourceUpdatedNotificationParams{URI: p.URI, Meta: mcp.Meta{metaSubscriptionID: l.id}}
		s.sendListener(l, "notifications/resources/updated", &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: l.ss, Params: q})
	}
}

func (s *listens) sendListener(l *listener, method string, req mcp.Request) {
	if l.direct != nil {
		l.direct.Notify(method, req.GetParams())
		return
	}
	if s.send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, callpath.NotifyTimeout)
	defer cancel()
	if _, err := s.send(ctx, method, req); err != nil {
		s.log.Debug("listener notification not delivered", "method", method, "err", err)
	}
}

// listen serves one subscriptions/listen request until its stream closes.
func (s *listens) listen(ctx context.Context, st *callpath.Session, req mcp.Request) (mcp.Result, error) {
	p, id, err := sdkListen(req)
	if err != nil {
		return nil, err
	}
	if err := s.listeners.admit(s.bounds().Listens, st.User); err != nil {
		return nil, err
	}
	defer s.listeners.leave(st.User)
	want := p.Notifications
	l := &listener{ctx: ctx, ss: st.Server(), id: id, tools: want.ToolsListChanged, prompts: want.PromptsListChanged,
		resources: want.ResourcesListChanged, uris: map[string]bool{}}
	uris, owners, refused := s.subscribeSDKListener(ctx, st, l, want.ResourceSubscriptions)
	defer s.unsubscribeSDKListener(ctx, st, uris, owners)
	if refused != nil {
		return nil, refused
	}
	agreed := mcp.NotificationSubscriptions{
		ToolsListChanged:      want.ToolsListChanged,
		PromptsListChanged:    want.PromptsListChanged,
		ResourcesListChanged:  want.ResourcesListChanged,
		ResourceSubscriptions: uris,
	}
	s.listeners.add(l)
	defer s.listeners.remove(l)
	ack := &mcp.ServerRequest[*mcp.SubscriptionsAcknowledgedParams]{Session: st.Server(),
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

// sdkListen returns an SDK-path listen's params and id (decoded from the
// header serveModern set), after checking them.
func sdkListen(req mcp.Request) (*mcp.SubscriptionsListenParams, any, error) {
	p, _ := req.GetParams().(*mcp.SubscriptionsListenParams)
	if p == nil || p.Notifications == nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "subscriptions/listen: missing required 'notifications' field"}
	}
	if err := subscriptions.CheckListenURIs(p.Notifications.ResourceSubscriptions); err != nil {
		return nil, nil, err
	}
	var id any
	if err := json.Unmarshal([]byte(callpath.HeaderOf(req).Get(requestIDHeader)), &id); err != nil || id == nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "subscriptions/listen requires a request id"}
	}
	return p, id, nil
}

// subscribeSDKListener subscribes st upstream to each URI of uris that a
// server owns, and returns those (each once) and their owners; refused by
// a limits rule, it stops there and returns the refusal too.
func (s *listens) subscribeSDKListener(ctx context.Context, st *callpath.Session, l *listener, uris []string) ([]string, []*callpath.Backend, *jsonrpc.Error) {
	var agreed []string
	var owners []*callpath.Backend
	cat := s.rt.Load().View(st.Profile)
	for _, uri := range uris {
		b := cat.ResourceOwner(uri)
		if b == nil || l.uris[uri] {
			continue // not honoured: left out of the acknowledgement
		}
		release, refused := s.calls.AdmitForward(ctx, st, b, "resources/subscribe")
		if refused != nil {
			return agreed, owners, refused
		}
		err := s.calls.Subscribe(ctx, st, b, uri, true)
		release()
		if err != nil {
			s.logFor(ctx).Debug("upstream subscribe failed", "server", b.Name, "err", err)
			continue
		}
		l.uris[uri] = true
		agreed = append(agreed, uri)
		owners = append(owners, b)
	}
	return agreed, owners, nil
}

// unsubscribeSDKListener drops an SDK-path listen's subscriptions, the
// latest first, each bounded by callpath.NotifyTimeout.
func (s *listens) unsubscribeSDKListener(ctx context.Context, st *callpath.Session, uris []string, owners []*callpath.Backend) {
	for i := len(uris) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callpath.NotifyTimeout)
		_ = s.calls.Subscribe(ctx, st, owners[i], uris[i], false)
		cancel()
	}
}

// listenParams is what mcp-mux reads of a listen request's params.
type listenParams struct {
	Meta          json.RawMessage `json:"_meta"`
	Notifications *struct {
		TaskIDs               []string `json:"taskIds"`
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// listenVerdict is what serveListen does with a listen request.
type listenVerdict int

const (
	listenServe listenVerdict = iota // serve it
	listenDone                       // answered (refused)
	listenSDK                        // the SDK's to answer
)

// serveListen serves a 2026-07-28 subscriptions/listen on a stream of its
// own and reports whether it answered r; it declines (false) what it cannot
// tell the SDK would accept, which the SDK then answers. m's bytes belong to
// the handler: nothing of them is kept.
func (s *listens) serveListen(w http.ResponseWriter, r *http.Request, m *wire.Message) bool {
	var p listenParams
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil {
		return false
	}
	rq, id, v := s.checkListen(w, r, m, &p)
	if v != listenServe {
		return v == listenDone
	}
	s.runListen(w, r, m, rq, id, &p)
	return true
}

// checkListen makes the checks of a listen before it is served; it
// returns the caller and the request's id (decoded), and whether to serve
// the listen (then admitted: runListen leaves the table), or that it was
// answered, or is the SDK's to answer.
func (s *listens) checkListen(w http.ResponseWriter, r *http.Request, m *wire.Message, p *listenParams) (modernReq, any, listenVerdict) {
	if v := s.listenHeaders(w, r, m, p); v != listenServe {
		return modernReq{}, nil, v
	}
	rq, ok := s.capsCache.request(callpath.CallerFrom(r.Context()), p.Meta)
	if !ok {
		return modernReq{}, nil, listenSDK
	}
	id, err := listenID(m, p)
	if err == nil {
		err = s.listeners.admit(s.bounds().Listens, rq.user)
	}
	if err != nil {
		writeJSONRPCError(w, m.ID, err)
		return modernReq{}, nil, listenDone
	}
	return rq, id, listenServe
}

// listenHeaders checks a listen's headers: as the SDK would for one that
// asks for task ids (checkTaskListen), else that the fast path may serve it.
func (s *listens) listenHeaders(w http.ResponseWriter, r *http.Request, m *wire.Message, p *listenParams) listenVerdict {
	if len(p.Notifications.TaskIDs) > 0 {
		return s.checkTaskListen(w, r, m, p)
	}
	if !modernFastHeaders(r.Header) || r.Header.Get("Mcp-Method") != m.Method {
		return listenSDK
	}
	return listenServe
}

// listenID checks a listen's resource URIs and returns its decoded id.
func listenID(m *wire.Message, p *listenParams) (any, *jsonrpc.Error) {
	if err := subscriptions.CheckListenURIs(p.Notifications.ResourceSubscriptions); err != nil {
		return nil, err
	}
	var id any
	if json.Unmarshal(m.ID, &id) != nil || id == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "subscriptions/listen requires a request id"}
	}
	return id, nil
}

// runListen serves an admitted listen of rq on its own stream until the
// stream closes, mcp-mux shuts down, or (with nothing to listen for) at once.
func (s *listens) runListen(w http.ResponseWriter, r *http.Request, m *wire.Message, rq modernReq, id any, p *listenParams) {
	n := p.Notifications
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	l := &listener{ctx: ctx, id: id, user: rq.user, tools: n.ToolsListChanged, prompts: n.PromptsListChanged,
		resources: n.ResourcesListChanged, direct: &listenstream.Stream{WriteTimeout: callpath.NotifyTimeout}}
	st := &callpath.Session{}
	rq.init(st)
	granted := s.grantListen(ctx, l, n.TaskIDs)
	uris, refused := s.subscribeListener(ctx, st, l, n.ResourceSubscriptions)
	end := func() {
		s.listeners.remove(l)
		s.unsubscribeListener(ctx, st, uris)
		cancel()
		s.listeners.leave(rq.user)
	}
	if refused != nil {
		end()
		writeJSONRPCError(w, m.ID, refused)
		return
	}
	meta := map[string]any{metaSubscriptionID: id}
	res, _ := json.Marshal(map[string]any{"_meta": meta, "resultType": "complete"})
	last := wire.AppendResult(nil, slices.Clone(m.ID), res)
	d := l.direct
	detached := d.Start(w, r)
	s.listeners.add(l)
	ack, _ := json.Marshal(map[string]any{"_meta": meta, "notifications": listenAgreed{TaskIDs: granted,
		ToolsListChanged: l.tools, PromptsListChanged: l.prompts, ResourcesListChanged: l.resources, ResourceSubscriptions: uris}})
	d.Write(wire.AppendNotification(nil, "notifications/subscriptions/acknowledged", ack))
	idle := len(granted) == 0 && len(uris) == 0 && !l.tools && !l.prompts && !l.resources
	if s.holdListen(r, d, last, end, idle, detached) {
		return
	}
	end()
}

// grantListen grants l the task ids of ids its user may follow
// (grantTasks) and returns them.
func (s *listens) grantListen(ctx context.Context, l *listener, ids []string) []string {
	granted := s.grantTasks(ctx, l.user, ids)
	for _, tid := range granted {
		if l.taskIDs == nil {
			l.taskIDs = make(map[string]bool, len(granted))
		}
		l.taskIDs[tid] = true
	}
	return granted
}

// unsubscribeListener drops a finished listen's upstream subscriptions.
func (s *listens) unsubscribeListener(ctx context.Context, st *callpath.Session, uris []string) {
	for _, uri := range uris {
		if b := s.rt.Load().View(st.Profile).ResourceOwner(uri); b != nil {
			uctx, stop := context.WithTimeout(ctx, callpath.NotifyTimeout)
			_ = s.calls.Subscribe(uctx, st, b, uri, false)
			stop()
		}
	}
}

// holdListen keeps an acknowledged listen's stream d open: it ends it at
// once when there is nothing to listen for (idle), hands a detached one to
// watchListen (true: end runs when it closes), and otherwise waits for the
// request or mcp-mux to end. It ends d with last when mcp-mux ends it.
func (s *listens) holdListen(r *http.Request, d *listenstream.Stream, last []byte, end func(), idle, detached bool) bool {
	switch {
	case idle:
		d.End(last) // nothing to listen for
	case detached:
		if s.watchListen(d, last, end) {
			return true
		}
		d.End(last) // shutting down
	default:
		select {
		case <-r.Context().Done():
			d.End(nil)
		case <-s.life.Done():
			d.End(last)
		}
	}
	return false
}

// watchListen ends a detached listen stream d (sending last) when mcp-mux
// shuts down, and calls end once its connection has closed. It reports
// false, doing nothing, once Close has begun: Close waits for the watchers
// it knows of (s.bg), and the gate orders their start against it.
func (s *listens) watchListen(d *listenstream.Stream, last []byte, end func()) bool {
	return s.gate.Shared(func() {
		stop := context.AfterFunc(s.life, func() { d.End(last) })
		s.bg.Go(func() {
			d.Watch()
			stop()
			d.End(nil)
			end()
		})
	})
}

// listenAgreed is the notifications member of a listen's acknowledgement.
type listenAgreed struct {
	TaskIDs               []string `json:"taskIds,omitempty"`
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// subscribeListener subscribes st upstream to each URI of uris that a
// server owns and returns those (each once); the others are not honoured
// and are left out of the acknowledgement. Refused by a limits rule, it
// stops there and returns the refusal too.
func (s *listens) subscribeListener(ctx context.Context, st *callpath.Session, l *listener, uris []string) ([]string, *jsonrpc.Error) {
	var agreed []string
	cat := s.rt.Load().View(st.Profile)
	for _, uri := range uris {
		b := cat.ResourceOwner(uri)
		if b == nil || l.uris[uri] {
			continue
		}
		release, refused := s.calls.AdmitForward(ctx, st, b, "resources/subscribe")
		if refused != nil {
			return agreed, refused
		}
		err := s.calls.Subscribe(ctx, st, b, uri, true)
		release()
		if err != nil {
			s.logFor(ctx).Debug("upstream subscribe failed", "server", b.Name, "err", err)
			continue
		}
		if l.uris == nil {
			l.uris = make(map[string]bool)
		}
		l.uris[uri] = true
		agreed = append(agreed, uri)
	}
	return agreed, nil
}

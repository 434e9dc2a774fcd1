package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The audit trail (Options.Audit; docs/audit.md). The gateway records,
// from three places only:
//   - the MCP middleware (audited): every tools/call, resources/read and
//     prompts/get, when it has been answered, with the server the
//     handler resolved (auditServer, called where the call starts);
//   - ApproveCall (approve.go): each approval a client answered;
//   - the HTTP handler's outermost wrapper (auditHTTP): each
//     state-changing admin request (POST /admin/…: reconnect, toggle,
//     reload, a permission answer, a login) and each request refused with
//     401 or 403 before it reached a handler.
//
// Recording never waits: the Auditor queues (audit.Writer.Record drops
// when full and counts it).

// Auditor records the gateway's actions: *audit.Writer is one. Its
// methods are called concurrently from the goroutines serving requests,
// and must not block.
type Auditor interface {
	// Record records one action.
	Record(audit.Entry)
	// Arguments and Results report whether the entries should carry the
	// arguments and results (the gateway gathers them only then).
	Arguments() bool
	Results() bool
}

// auditTrail is the audit trail's one job: it turns the audited requests
// (the MCP middleware, ApproveCall, the HTTP wrapper) into entries for
// the Auditor.
//
// Concurrency: safe for concurrent use by the goroutines serving
// requests: its fields are set by New and only read after (the Auditor
// takes concurrent Records; the namer and gate guard their own state).
type auditTrail struct {
	sink   Auditor     // Options.Audit; nil: no trail
	gate   *accessGate // Allow and Deny (a denied tool's outcome)
	naming *namer      // the pool names of the tools called
}

// auditKey is the context key of a request's auditNote.
type auditKey struct{}

// auditNote is what the handler tells the audit middleware of a request
// it served: the server and the name in the pool that it resolved.
//
// Concurrency: written by the goroutine serving the request (or the
// one a stateless-era call runs on, before it answers), read by the
// middleware after the answer.
type auditNote struct {
	server, name string
}

// auditServer notes the server (and pool name) a request resolved to,
// for its audit line; a no-op without a trail.
func auditServer(ctx context.Context, server, name string) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		n.server, n.name = server, name
	}
}

// audited is the middleware that records the audited methods.
func (t *auditTrail) audited(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		switch r.Method {
		case protocol.MethodToolsCall, protocol.MethodResourcesRead, protocol.MethodPromptsGet:
		default:
			next.ServeMCP(ctx, w, r)
			return
		}
		start := time.Now()
		note := &auditNote{}
		ctx = context.WithValue(ctx, auditKey{}, note)
		rec := &answerRecorder{ResponseWriter: w}
		var rw mcpserver.ResponseWriter = rec
		var kept *resultKeeper
		if t.sink.Results() {
			kept = &resultKeeper{ResponseWriter: rec}
			rw = kept
		}
		next.ServeMCP(ctx, rw, r)
		e := audit.Entry{Time: start, Action: r.Method, Duration: time.Since(start), Server: note.server}
		t.auditCaller(ctx, &e, r.Session)
		e.RequestID, _ = r.ID.MarshalJSON()
		e.TraceID = traceID(ctx, r.Params)
		name, _ := protocol.PlainStringMember(r.Params, "name")
		switch r.Method {
		case protocol.MethodToolsCall:
			e.Tool = name
			if note.name != "" {
				e.Tool = note.name
			}
		case protocol.MethodPromptsGet:
			e.Prompt = name
			if note.name != "" {
				e.Prompt = note.name
			}
		case protocol.MethodResourcesRead:
			e.URI, _ = protocol.PlainStringMember(r.Params, "uri")
		}
		if t.sink.Arguments() && r.Method != protocol.MethodResourcesRead {
			e.Arguments, _, _ = protocol.RawMember(r.Params, "arguments")
		}
		if kept != nil {
			e.Result = kept.result
		}
		t.auditOutcome(ctx, &e, rec, r.Method, name)
		t.sink.Record(e)
	})
}

// auditCaller fills in who made a request: the identity in ctx and the
// session.
func (t *auditTrail) auditCaller(ctx context.Context, e *audit.Entry, s *mcpserver.Session) {
	if id, ok := IdentityFrom(ctx); ok {
		e.Subject, e.ClientID = id.Subject, id.ClientID
	}
	if s != nil {
		e.SessionID = s.ID()
	}
}

// auditOutcome sets e's outcome from how the request was answered.
func (t *auditTrail) auditOutcome(ctx context.Context, e *audit.Entry, a *answerRecorder, method, name string) {
	if a.frame != nil {
		if raw, found, _ := protocol.RawMember(a.frame, "error"); found {
			var pe protocol.Error
			if json.Unmarshal(raw, &pe) == nil {
				a.err = &pe
			}
		} else if res, found, _ := protocol.RawMember(a.frame, "result"); found {
			a.toolErr = isErrorResult(res)
		}
	}
	switch {
	case a.err != nil:
		e.Outcome, e.Code, e.Reason = audit.OutcomeError, a.err.Code, a.err.Message
		switch {
		case a.err.Code == CodeCallRefused, a.err.Code == CodeAccessDenied, a.err.Code == CodeRateLimited:
			e.Outcome = audit.OutcomeRefused
		case method == protocol.MethodToolsCall && a.err.Code == protocol.CodeInvalidParams && e.Server == "" && t.deniedTool(name):
			e.Outcome, e.Reason = audit.OutcomeRefused, "the tool is not offered (allow/deny)"
		}
	case !a.answered && ctx.Err() != nil:
		e.Outcome = audit.OutcomeCancelled
	case a.toolErr && method == protocol.MethodToolsCall:
		e.Outcome = audit.OutcomeToolError
	default:
		e.Outcome = audit.OutcomeOK
	}
}

// deniedTool reports whether the tool a client called by name is in the
// pool but kept from it by Options.Allow and Deny.
func (t *auditTrail) deniedTool(name string) bool {
	q := t.naming.qualifiedTool(name)
	if _, known := t.naming.current().server[q]; !known {
		return false
	}
	return !t.gate.offered(q)
}

// traceID returns the trace id of the request: its server span's, or
// the one its _meta carries.
func traceID(ctx context.Context, params json.RawMessage) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() && bytes.Contains(params, []byte("traceparent")) {
		sc = trace.SpanContextFromContext(mcptrace.Extract(ctx, params))
	}
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// resultKeeper keeps the result a request was answered with, for an
// audit trail that keeps results.
//
// Concurrency: as answerRecorder's.
type resultKeeper struct {
	mcpserver.ResponseWriter
	result json.RawMessage
}

func (k *resultKeeper) Reply(result any) {
	switch r := result.(type) {
	case protocol.ValidJSON:
		k.result = json.RawMessage(r)
	case json.RawMessage:
		k.result = r
	default:
		k.result, _ = json.Marshal(result)
	}
	k.ResponseWriter.Reply(result)
}

func (k *resultKeeper) WriteFrame(frame []byte) {
	k.result, _, _ = protocol.RawMember(frame, "result")
	k.ResponseWriter.WriteFrame(frame)
}

// auditApproval records a client's answer to an approval.
func (t *auditTrail) auditApproval(ctx context.Context, s *mcpserver.Session, tool, server string, start time.Time, approved bool, err error) {
	if t.sink == nil {
		return
	}
	e := audit.Entry{Time: start, Action: audit.ActionApproval, Server: server, Tool: tool, Duration: time.Since(start), Outcome: "approved"}
	t.auditCaller(ctx, &e, s)
	e.TraceID = traceID(ctx, nil)
	switch {
	case err != nil:
		e.Outcome, e.Reason = audit.OutcomeError, err.Error()
	case !approved:
		e.Outcome = "declined"
	}
	t.sink.Record(e)
}

// httpNote carries, from inside the security checks out to auditHTTP,
// the identity they established.
//
// Concurrency: written by the goroutine serving the request, read by
// the same goroutine after.
type httpNote struct {
	id     Identity
	hasID  bool
	inside bool // the request passed the checks
}

type httpNoteKey struct{}

// auditHTTP wraps the whole HTTP handler (outside the security checks):
// it records the state-changing admin requests and the requests refused
// with 401 or 403. inner is what runs past the checks.
func (t *auditTrail) auditHTTP(outer func(http.Handler) http.Handler, inner http.Handler) http.Handler {
	if t.sink == nil {
		return outer(inner)
	}
	past := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := r.Context().Value(httpNoteKey{}).(*httpNote); ok {
			n.inside = true
			n.id, n.hasID = IdentityFrom(r.Context())
		}
		inner.ServeHTTP(w, r)
	})
	h := outer(past)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, server := adminOp(r)
		start := time.Now()
		note := &httpNote{}
		sw := &statusWriter{ResponseWriter: w}
		if op != "" { // only an admin request's line names the caller
			r = r.WithContext(context.WithValue(r.Context(), httpNoteKey{}, note))
		}
		h.ServeHTTP(sw, r)
		refused := sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden
		if op == "" && !refused {
			return
		}
		e := audit.Entry{Time: start, Action: audit.ActionAdmin, Op: op, Server: server, HTTPStatus: sw.status, Duration: time.Since(start), Outcome: audit.OutcomeOK}
		if note.hasID {
			e.Subject, e.ClientID = note.id.Subject, note.id.ClientID
		}
		switch {
		case refused && (op == "" || !note.inside):
			e.Action, e.Outcome, e.Op = audit.ActionRefused, audit.OutcomeRefused, r.Method+" "+r.URL.Path
			e.Reason = refusalReason(sw)
		case refused:
			e.Outcome, e.Reason = audit.OutcomeRefused, refusalReason(sw)
		case sw.status >= 400:
			e.Outcome = audit.OutcomeError
		}
		t.sink.Record(e)
	})
}

// adminOp names the state-changing admin request r (POST /admin/…, a
// login), with the server it acts on; "" for any other request.
func adminOp(r *http.Request) (op, server string) {
	if r.Method != http.MethodPost {
		return "", ""
	}
	p := r.URL.Path
	if p == "/login" || p == "/logout" {
		return strings.TrimPrefix(p, "/"), ""
	}
	rest, ok := strings.CutPrefix(p, "/admin/")
	if !ok || rest == "" {
		return "", ""
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == "servers":
		return parts[2], parts[1] // servers/{name}/reconnect, toggle, login
	case len(parts) == 2 && parts[0] == "permissions":
		return "permission " + parts[1], ""
	}
	return rest, "" // reconnect, reload
}

// refusalReason is the first line of a refusal's plain-text body.
func refusalReason(sw *statusWriter) string {
	s, _, _ := strings.Cut(string(sw.head), "\n")
	return s
}

// statusWriter notes the status (and the start of the body) of an HTTP
// answer; Unwrap gives http.ResponseController the writer beneath.
//
// Concurrency: used by the goroutine serving the request.
type statusWriter struct {
	http.ResponseWriter
	status int
	head   []byte // the first bytes of a refusal's body
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if (s.status == http.StatusUnauthorized || s.status == http.StatusForbidden) && len(s.head) < 200 {
		s.head = append(s.head, b[:min(len(b), 200-len(s.head))]...)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes a flush on (for callers that assert http.Flusher).
func (s *statusWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

// withAudit puts the audit middleware into mws (middleware's list) just
// before the request count, inside the server span (whose trace id the
// lines carry) and outside the drain check (whose refusals they record).
func (t *auditTrail) withAudit(mws []mcpserver.Middleware) []mcpserver.Middleware {
	if t.sink == nil {
		return mws
	}
	n := len(mws)
	return append(mws[:n-1:n-1], t.audited, mws[n-1])
}

// writeAuditMetrics writes the trail's counters to /metrics, when the
// Auditor has them (an *audit.Writer does).
func (t *auditTrail) writeAuditMetrics(p *promWriter) {
	s, ok := t.sink.(interface{ Stats() audit.Stats })
	if !ok {
		return
	}
	st := s.Stats()
	p.help("mcpvisor_audit_lines_total", "counter", "Lines written to the audit trail.")
	p.sample("mcpvisor_audit_lines_total", float64(st.Lines))
	p.help("mcpvisor_audit_dropped_total", "counter", "Audit entries dropped because the trail's queue was full (each is counted in the next line's dropped).")
	p.sample("mcpvisor_audit_dropped_total", float64(st.Dropped))
	p.help("mcpvisor_audit_errors_total", "counter", "Failed writes, syncs and rotations of the audit trail.")
	p.sample("mcpvisor_audit_errors_total", float64(st.Errors))
	p.help("mcpvisor_audit_seq", "gauge", "Sequence number of the last line of the audit trail.")
	p.sample("mcpvisor_audit_seq", float64(st.Seq))
}

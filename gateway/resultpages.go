package gateway

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Results that fit: a tools/call result larger than its bound is cut, and
// the rest is kept for a while, to be read page by page with the
// gateway's tool read_result_page.
//
// The bound of a call is the smallest of Options.MaxResultChars, the
// server's Options.MaxResultCharsByServer and what the client asks in the
// request's _meta (MetaMaxResultSizeChars); a bound of zero or less is no
// bound. The size of a result is counted in characters: the runes of its
// text (of text blocks and embedded text resources), the characters of
// its base64 data (images, audio, embedded blobs) and of its
// structuredContent's JSON.
//
// A result over its bound keeps its structuredContent whole when it fits
// (a client that validates the tool's output schema needs it), else
// leaves it out whole (never cut mid-value); then its first content
// blocks whole while they fit in the room left. A text block that does
// not fit whole is cut at its last line break within the room left (else
// at its last space, else at a character); any other block (an image,
// audio, a resource) is never cut: it is kept whole or left out, and
// every block after the first left out is left out too, so the order is
// kept. A note text block, appended, says how much was left out and how
// to read it.

// MetaMaxResultSizeChars is the request _meta key with which a client asks
// for results of at most that many characters.
const MetaMaxResultSizeChars = "anthropic/maxResultSizeChars"

// Defaults of the store of the parts left out.
const (
	// DefaultResultStoreBytes bounds what the gateway keeps of results it
	// cut (Options.ResultStoreBytes).
	DefaultResultStoreBytes = 64 << 20
	// DefaultResultStoreTTL is how long a cut result's rest is kept
	// (Options.ResultStoreTTL).
	DefaultResultStoreTTL = 10 * time.Minute
)

// pageToolName is the gateway's tool that reads what a cut result left
// out.
const pageToolName = "read_result_page"

// noteRoom is the room kept for the note of a cut result.
const noteRoom = 400

var pageTool = protocol.Tool{
	Name:  pageToolName,
	Title: "Read the rest of a cut result",
	Description: "Reads a page of what the mcpvisor gateway left out of a tool result that was too large for the client's bound. " +
		"A cut result ends with a note that gives its handle and its number of pages; call this tool with that handle and " +
		"page 1, 2, … to read the rest in order. Pages are kept for a few minutes after the call.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"handle":{"type":"string","description":"the handle the note of the cut result gives"},` +
		`"page":{"type":"integer","minimum":1,"description":"the page to read, from 1"}},"required":["handle","page"]}`),
}

// resultStore keeps the parts of cut results left out, bounded in bytes
// (the oldest is evicted first) and in time.
//
// Concurrency: safe for concurrent use; mu guards entries and order.
type resultStore struct {
	maxBytes int64
	ttl      time.Duration
	now      func() time.Time // time, injected by tests

	mu      sync.Mutex
	entries map[string]*list.Element // handle → element of order (*storedResult)
	order   *list.List               // oldest first
	bytes   int64                    // the sum of the entries' sizes
}

// storedResult is the rest of one cut result, in pages.
type storedResult struct {
	handle string
	owner  string // who called the tool (ownerOf): only they read its pages
	tool   string // the qualified name of the tool that answered
	pages  []resultPage
	bytes  int64
	added  time.Time
}

// resultPage is one page of a stored rest: content blocks, or the
// structuredContent left out (whole).
type resultPage struct {
	content    []protocol.Content
	structured json.RawMessage
}

func newResultStore(maxBytes int64, ttl time.Duration) *resultStore {
	if maxBytes == 0 {
		maxBytes = DefaultResultStoreBytes
	}
	if ttl <= 0 {
		ttl = DefaultResultStoreTTL
	}
	return &resultStore{maxBytes: maxBytes, ttl: ttl, now: time.Now, entries: map[string]*list.Element{}, order: list.New()}
}

// put keeps r and returns its handle, or "" when it is larger than the
// whole store (or the store keeps nothing). It evicts the expired, then
// the oldest, to make room.
func (st *resultStore) put(r *storedResult) string {
	if st.maxBytes < 0 || r.bytes > st.maxBytes {
		return ""
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	r.handle = hex.EncodeToString(b[:])
	st.mu.Lock()
	defer st.mu.Unlock()
	r.added = st.now()
	st.expireLocked(r.added)
	for st.bytes+r.bytes > st.maxBytes && st.order.Len() > 0 {
		st.removeLocked(st.order.Front())
	}
	st.entries[r.handle] = st.order.PushBack(r)
	st.bytes += r.bytes
	return r.handle
}

// get returns the stored result of handle, or nil when it is unknown or
// expired.
func (st *resultStore) get(handle string) *storedResult {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expireLocked(st.now())
	if e, ok := st.entries[handle]; ok {
		return e.Value.(*storedResult)
	}
	return nil
}

// expireLocked drops the entries older than the TTL (the oldest are at the
// front). st.mu is held.
func (st *resultStore) expireLocked(now time.Time) {
	for e := st.order.Front(); e != nil; e = st.order.Front() {
		if now.Sub(e.Value.(*storedResult).added) < st.ttl {
			return
		}
		st.removeLocked(e)
	}
}

func (st *resultStore) removeLocked(e *list.Element) {
	r := st.order.Remove(e).(*storedResult)
	delete(st.entries, r.handle)
	st.bytes -= r.bytes
}

// stats returns the entries and bytes kept.
func (st *resultStore) stats() (entries int, bytes int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expireLocked(st.now())
	return st.order.Len(), st.bytes
}

// resultPages is the results-that-fit job: it cuts a call's result to
// its bound (Options.MaxResultChars, MaxResultCharsByServer, the
// client's _meta), keeps the rest in the store, and serves
// read_result_page.
//
// Concurrency: safe for concurrent use by the calls' goroutines: store
// has its own lock; the other fields are set by New and only read after.
type resultPages struct {
	store       *resultStore
	maxChars    int            // Options.MaxResultChars
	maxByServer map[string]int // Options.MaxResultCharsByServer
	gate        *accessGate    // a page is read only by a caller that may use its tool
}

// newResultPages returns the results-that-fit part of a gateway with
// opts, whose access rules are gate.
func newResultPages(opts Options, gate *accessGate) *resultPages {
	return &resultPages{store: newResultStore(opts.ResultStoreBytes, opts.ResultStoreTTL), maxChars: opts.MaxResultChars, maxByServer: opts.MaxResultCharsByServer, gate: gate}
}

// resultBound returns the bound of a call of tool server's tool whose
// request carried meta: the smallest positive of the gateway's, the
// server's and the client's; 0 means none.
func (rp *resultPages) resultBound(server string, meta protocol.Meta) int {
	bound := 0
	take := func(n int) {
		if n > 0 && (bound == 0 || n < bound) {
			bound = n
		}
	}
	take(rp.maxChars)
	take(rp.maxByServer[server])
	if raw, ok := meta[MetaMaxResultSizeChars]; ok {
		var n float64
		if json.Unmarshal(raw, &n) == nil && n >= 1 && n <= 1<<40 {
			take(int(n))
		}
	}
	return bound
}

// fitResult returns res cut to the call's bound, with a note, keeping
// the rest in the store; res itself when it fits (or has no bound).
// res is not changed.
func (rp *resultPages) fitResult(owner, tool, server string, meta protocol.Meta, res *protocol.CallToolResult) *protocol.CallToolResult {
	bound := rp.resultBound(server, meta)
	if bound <= 0 || res == nil || (res.ResultType != "" && res.ResultType != "complete") {
		return res
	}
	total := resultChars(res)
	if total <= bound {
		return res
	}
	room := max(bound-noteRoom, bound/2)
	out := *res
	out.Content = nil
	// structuredContent first: a client that validates a tool's output
	// schema needs it, and it cannot be cut.
	var structured json.RawMessage
	if res.StructuredContent != nil {
		if n := len(res.StructuredContent); n <= room {
			room -= n
		} else {
			structured = res.StructuredContent
			out.StructuredContent = nil
		}
	}
	var rest []protocol.Content
	for i, c := range res.Content {
		n := contentChars(c)
		if n <= room {
			out.Content = append(out.Content, c)
			room -= n
			continue
		}
		if c.Type == protocol.ContentText && room > 0 {
			head, tail := cutText(c.Text, room)
			if head != "" {
				kept := c
				kept.Text = head
				out.Content = append(out.Content, kept)
				room -= utf8.RuneCountInString(head)
			}
			left := c
			left.Text = tail
			rest = append(rest, left)
		} else {
			rest = append(rest, c)
		}
		rest = append(rest, res.Content[i+1:]...)
		break
	}
	if rest == nil && structured == nil {
		return res // nothing left out after all (the note's room was not needed)
	}
	left := total - (resultChars(&out))
	pages := paginate(rest, bound)
	if structured != nil {
		pages = append(pages, resultPage{structured: structured})
	}
	stored := &storedResult{owner: owner, tool: tool, pages: pages}
	for _, p := range pages {
		stored.bytes += pageBytes(p)
	}
	handle := rp.store.put(stored)
	out.Content = append(out.Content, protocol.TextContent(cutNote(left, total, len(rest), structured != nil, handle, len(pages), rp.store.ttl)))
	return &out
}

// cutNote is the note appended to a cut result.
func cutNote(left, total, blocks int, structured bool, handle string, pages int, ttl time.Duration) string {
	var what []string
	if blocks > 0 {
		what = append(what, plural(blocks, "content block")+" or part of one")
	}
	if structured {
		what = append(what, "the structuredContent (too large to keep whole)")
	}
	s := fmt.Sprintf("[mcpvisor: this result was cut to fit: %d of its %d characters were left out (%s).", left, total, strings.Join(what, " and "))
	if handle == "" {
		return s + " The rest was too large to keep; call the tool again with narrower arguments.]"
	}
	return s + fmt.Sprintf(" Read the rest with the tool %s {\"handle\": %q, \"page\": 1}; it has %s, kept for %s.]",
		pageToolName, handle, plural(pages, "page"), ttl.Round(time.Second))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// paginate splits blocks into pages of at most size characters each
// (text cut at clean boundaries); a block that is not text and larger
// than size is a page of its own.
func paginate(blocks []protocol.Content, size int) []resultPage {
	size = max(size, 1)
	var pages []resultPage
	var cur []protocol.Content
	room := size
	flush := func() {
		if len(cur) > 0 {
			pages = append(pages, resultPage{content: cur})
			cur, room = nil, size
		}
	}
	for _, c := range blocks {
		for {
			n := contentChars(c)
			if n <= room {
				cur = append(cur, c)
				room -= n
				break
			}
			if c.Type != protocol.ContentText {
				flush()
				if n > size {
					pages = append(pages, resultPage{content: []protocol.Content{c}})
					break
				}
				continue
			}
			head, tail := cutText(c.Text, room)
			if head == "" {
				if len(cur) > 0 {
					flush()
					continue
				}
				head, tail = cutAt(c.Text, room) // a page must make progress
			}
			part := c
			part.Text = head
			cur = append(cur, part)
			flush()
			c.Text = tail
			if c.Text == "" {
				break
			}
		}
	}
	flush()
	return pages
}

// cutText splits s after at most room runes at a clean boundary: after
// the last line break within them, else after the last space, else (a
// word longer than room) at room runes. The head is "" when room is 0.
func cutText(s string, room int) (head, tail string) {
	if room <= 0 {
		return "", s
	}
	hard, _ := cutAt(s, room)
	if len(hard) == len(s) {
		return s, ""
	}
	// Cut only where it keeps a fair share of the room: a line break in the
	// second half, else a space in the second half, else the hard cut.
	if i := strings.LastIndexByte(hard, '\n'); i >= 0 && i+1 > len(hard)/2 {
		return s[:i+1], s[i+1:]
	}
	if i := strings.LastIndexByte(hard, ' '); i >= 0 && i+1 > len(hard)/2 {
		return s[:i+1], s[i+1:]
	}
	if i := strings.LastIndexByte(hard, '\n'); i >= 0 {
		return s[:i+1], s[i+1:]
	}
	if i := strings.LastIndexByte(hard, ' '); i >= 0 {
		return s[:i+1], s[i+1:]
	}
	return hard, s[len(hard):]
}

// cutAt splits s after n runes.
func cutAt(s string, n int) (head, tail string) {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return s[:i], s[i:]
}

// resultChars is the size of a result in characters (see above).
func resultChars(r *protocol.CallToolResult) int {
	n := len(r.StructuredContent)
	for _, c := range r.Content {
		n += contentChars(c)
	}
	return n
}

// contentChars is the size of a content block in characters: its text's
// runes, its data's characters, an embedded resource's text or blob; a
// resource link counts its URI and name.
func contentChars(c protocol.Content) int {
	n := utf8.RuneCountInString(c.Text) + len(c.Data) + len(c.URI) + len(c.Name) + len(c.Description)
	if c.Resource != nil {
		n += utf8.RuneCountInString(c.Resource.Text) + len(c.Resource.Blob) + len(c.Resource.URI)
	}
	return n
}

// pageBytes is what a page costs the store, in bytes (its strings, and a
// little for each block).
func pageBytes(p resultPage) int64 {
	n := int64(len(p.structured)) + 64
	for _, c := range p.content {
		n += int64(len(c.Text)+len(c.Data)+len(c.URI)+len(c.Name)+len(c.Description)) + 64
		if c.Resource != nil {
			n += int64(len(c.Resource.Text) + len(c.Resource.Blob) + len(c.Resource.URI))
		}
	}
	return n
}

// readPage serves read_result_page: the page asked for, with a line
// saying which page it is and what comes next. An unknown or expired
// handle, or a page out of range, is a tool error the model can read.
func (rp *resultPages) readPage(ctx context.Context, args json.RawMessage) (any, *protocol.Error) {
	var a struct {
		Handle string  `json:"handle"`
		Page   float64 `json:"page"`
	}
	if len(args) == 0 || json.Unmarshal(args, &a) != nil || a.Handle == "" {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {handle, page}", pageToolName)
	}
	if a.Page == 0 {
		a.Page = 1
	}
	r := rp.store.get(a.Handle)
	if r == nil || r.owner != ownerOf(ctx) || !rp.gate.allowedFor(ctx)(r.tool) {
		return toolError(fmt.Sprintf("No kept result has the handle %q: it may have expired (results are kept for %s); call the tool again.",
			a.Handle, rp.store.ttl.Round(time.Second))), nil
	}
	page := int(a.Page)
	if float64(page) != a.Page || page < 1 || page > len(r.pages) {
		return toolError(fmt.Sprintf("The result %q has pages 1 to %d.", a.Handle, len(r.pages))), nil
	}
	p := r.pages[page-1]
	out := &protocol.CallToolResult{Content: append([]protocol.Content(nil), p.content...), StructuredContent: p.structured}
	var line string
	if p.structured != nil {
		line = "the structuredContent left out, whole"
	}
	if page < len(r.pages) {
		line = strings.TrimPrefix(line+fmt.Sprintf("; next: %s {\"handle\": %q, \"page\": %d}", pageToolName, a.Handle, page+1), "; ")
	} else {
		line = strings.TrimPrefix(line+"; this is the last page", "; ")
	}
	out.Content = append(out.Content, protocol.TextContent(fmt.Sprintf("[mcpvisor: page %d of %d: %s.]", page, len(r.pages), line)))
	return out, nil
}

// toolError is a tool result with isError set and text.
func toolError(text string) *protocol.CallToolResult {
	return &protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent(text)}}
}

// offered reports whether read_result_page is listed: when the
// gateway bounds results itself (a client's own bound makes it callable,
// and the note names it).
func (rp *resultPages) offered() bool {
	return (rp.maxChars > 0 || len(rp.maxByServer) > 0) && rp.gate.offered(pageToolName)
}

// call serves a tools/call of read_result_page, if name is it.
func (rp *resultPages) call(ctx context.Context, name string, args json.RawMessage) (any, *protocol.Error, bool) {
	if name != pageToolName || !rp.gate.offered(pageToolName) {
		return nil, nil, false
	}
	res, perr := rp.readPage(ctx, args)
	return res, perr, true
}

// ownerOf is who a request's caller is for the pages of its cut results:
// its Identity's subject and client (the zero Identity, everyone
// unauthenticated, is one owner). A handle another caller learns reads
// nothing.
func ownerOf(ctx context.Context) string {
	id, _ := IdentityFrom(ctx)
	return id.Subject + "\x00" + id.ClientID
}

// Package audit writes and verifies an audit trail: one JSON line per
// action a gateway serves (a tools/call, a resources/read, a
// prompts/get, an approval, an admin action, a refused request), each
// line chained to the one before by its SHA-256, so that a line edited,
// removed, reordered or cut off is found (Verify).
//
// A Writer takes entries from any goroutine without blocking (a bounded
// queue; a full queue drops the entry, counts it, and says so in the
// next line) and writes them on a goroutine of its own to a file, which
// it rotates by size, or to a stream (stdout). See docs/audit.md.
package audit

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Options.
const (
	// DefaultMaxSize is the size at which a trail file is rotated.
	DefaultMaxSize = 64 << 20
	// DefaultKeep is how many rotated files are kept.
	DefaultKeep = 10
	// DefaultQueue bounds the entries waiting to be written.
	DefaultQueue = 4096
	// DefaultSyncInterval is how often written lines are synced to disk.
	DefaultSyncInterval = time.Second
	// DefaultMaxValue bounds the arguments or result kept in a line.
	DefaultMaxValue = 16 << 10
)

// Options configure a Writer. The zero value is not usable: set Path or
// Output.
type Options struct {
	// Path is the trail's file, created (0600) or appended to: a Writer
	// that opens an existing trail goes on with its chain (seq and prev
	// of its last line, or of Path.1's when Path is empty).
	Path string
	// Output, when not nil, is a stream the trail goes to instead of a
	// file (stdout for `--audit -`): no rotation, no sync, and the chain
	// starts at Genesis.
	Output io.Writer
	// MaxSize rotates the file before a line would take it beyond this
	// many bytes: Path becomes Path.1 (Path.1 Path.2, …) and a new Path
	// starts, its first line chained to the last line of Path.1. Zero
	// means DefaultMaxSize; negative: never rotate.
	MaxSize int64
	// Keep is how many rotated files are kept (Path.1 … Path.Keep; the
	// oldest is removed). Zero means DefaultKeep.
	Keep int
	// Queue bounds the entries waiting to be written (DefaultQueue when
	// zero). Record never blocks: an entry beyond it is dropped, counted
	// (Stats.Dropped), and the next line written says how many were.
	Queue int
	// SyncInterval is how often written lines are synced to disk (fsync):
	// zero means DefaultSyncInterval; negative: after every batch of
	// lines written (each time the queue runs empty). Rotation and Close
	// always sync.
	SyncInterval time.Duration
	// Arguments and Results write the arguments of a call (and of a
	// prompts/get) and its result into the line, redacted (Redact), cut
	// at MaxValue bytes. Both are off by default: then neither ever
	// reaches the trail.
	Arguments, Results bool
	// MaxValue bounds the arguments or result kept (DefaultMaxValue when
	// zero): a longer one is replaced by its size.
	MaxValue int
	// Member is written into every line (a cluster member's id).
	Member string
	// SessionKey keys the session tags (HMAC-SHA256 of the session id).
	// Nil: a random key per Writer, so tags link the lines of a session
	// within one process run only.
	SessionKey []byte
	// Logger receives the writer's own problems (a failed write or
	// rotation); never the trail.
	Logger zerolog.Logger
}

// Entry is what a caller records: one action. The Writer adds the
// sequence number, the chain and the session tag.
type Entry struct {
	// Time is when the action began (zero: when Record was called).
	Time   time.Time
	Action string
	// Subject and ClientID name the caller; empty when anonymous.
	Subject, ClientID string
	// SessionID is hashed into the line's session tag; the id itself is
	// never written.
	SessionID                 string
	Server, Tool, Prompt, URI string
	Op                        string
	Outcome                   string
	Code                      int64
	Reason                    string
	HTTPStatus                int
	Duration                  time.Duration
	RequestID                 json.RawMessage
	TraceID                   string
	// Arguments and Result are written only with Options.Arguments and
	// Options.Results, redacted; the Writer does that off the caller's
	// goroutine (the caller need not copy them, but must not change them
	// after Record).
	Arguments, Result json.RawMessage
}

// Stats are a Writer's counters.
type Stats struct {
	// Lines is the number of lines written since New (handed to the
	// file or stream; see Errors).
	Lines uint64
	// Dropped is the number of entries dropped because the queue was full
	// (or Record was called after Close).
	Dropped uint64
	// Errors is the number of failed writes, syncs and rotations.
	Errors uint64
	// Seq is the sequence number of the last line written.
	Seq uint64
}

// ErrInvalidOptions is wrapped by New's error for Options it cannot use
// (neither Path nor Output).
var ErrInvalidOptions = errors.New("audit: invalid options")

// ErrBadTrail is wrapped by New's error when Path holds a trail whose
// last line does not decode: the Writer cannot chain to it.
var ErrBadTrail = errors.New("audit: the existing trail's last line is not a trail line")

// Writer writes a trail. Create it with New, record with Record from any
// goroutine, end it with Close.
//
// Concurrency: Record and Stats are safe for concurrent use. The queue
// is the hand-off: Record sends on it under mu's read lock (Close takes
// the write lock to stop sends before it drains); one goroutine (run)
// owns everything written after New: the file, its size, seq, prev and
// the tag cache. The counters are atomic.
type Writer struct {
	opts Options // fixed at New
	key  []byte  // the session tag key, fixed at New

	mu     sync.RWMutex // guards closed against Record's sends
	closed bool         // set by Close under mu
	queue  chan Entry
	stop   chan struct{} // closed by Close: run drains the queue and ends
	done   chan struct{} // closed by run when it ended

	lines, dropped, errs, lastSeq atomic.Uint64
	pendingDrops                  atomic.Uint64 // dropped since the last line; run reports and clears

	// Owned by run (and by New before run starts).
	out   io.Writer
	file  *os.File
	size  int64
	seq   uint64
	prev  string
	dirty bool
	tags  map[string]string
	buf   []byte // lines encoded, not yet written (flush)
	err   error  // the first write error, for Close
}

// New opens the trail and starts the Writer's goroutine. It fails when
// opts has neither Path nor Output (ErrInvalidOptions), the file cannot
// be opened, or its last line does not decode (ErrBadTrail).
func New(opts Options) (*Writer, error) {
	if opts.Output == nil && opts.Path == "" {
		return nil, fmt.Errorf("%w: no Path or Output", ErrInvalidOptions)
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.MaxValue <= 0 {
		opts.MaxValue = DefaultMaxValue
	}
	w := &Writer{opts: opts, key: opts.SessionKey, queue: make(chan Entry, opts.Queue),
		stop: make(chan struct{}), done: make(chan struct{}), prev: Genesis, tags: map[string]string{}}
	if w.key == nil {
		w.key = make([]byte, 32)
		_, _ = rand.Read(w.key)
	}
	if opts.Output != nil {
		w.out = opts.Output
	} else if err := w.open(); err != nil {
		return nil, err
	}
	w.lastSeq.Store(w.seq)
	go w.run()
	return w, nil
}

// Arguments reports whether the Writer keeps arguments
// (Options.Arguments): a caller need not gather them otherwise.
func (w *Writer) Arguments() bool { return w.opts.Arguments }

// Results reports whether the Writer keeps results (Options.Results).
func (w *Writer) Results() bool { return w.opts.Results }

// Record queues e to be written. It never blocks: when the queue is
// full, or the Writer is closed, e is dropped and counted.
func (w *Writer) Record(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w.mu.RLock()
	if !w.closed {
		select {
		case w.queue <- e:
			w.mu.RUnlock()
			return
		default:
		}
	}
	w.mu.RUnlock()
	w.dropped.Add(1)
	w.pendingDrops.Add(1)
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() Stats {
	return Stats{Lines: w.lines.Load(), Dropped: w.dropped.Load(), Errors: w.errs.Load(), Seq: w.lastSeq.Load()}
}

// Close writes what is queued, syncs and closes the file. It waits for
// that until ctx ends, and returns the first write error (or ctx's
// error). It may be called more than once; Record after Close drops.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes the queue's entries until Close, then drains it.
func (w *Writer) run() {
	defer close(w.done)
	var tick <-chan time.Time
	if w.file != nil && w.opts.SyncInterval > 0 {
		t := time.NewTicker(w.opts.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case e := <-w.queue:
			w.write(e)
			if len(w.queue) == 0 {
				w.flush()
				if w.opts.SyncInterval < 0 {
					w.sync()
				}
			}
		case <-tick:
			w.sync()
		case <-w.stop:
		drain:
			for {
				select {
				case e := <-w.queue:
					w.write(e)
				default:
					break drain
				}
			}
			w.sync()
			if w.file != nil {
				if err := w.file.Close(); err != nil {
					w.fail(err, "closing the trail")
				}
			}
			return
		}
	}
}

// write encodes e as the next line and writes it (run's goroutine).
func (w *Writer) write(e Entry) {
	l := Line{
		Seq: w.seq + 1, Prev: w.prev, Time: e.Time.UTC().Format(time.RFC3339Nano), Member: w.opts.Member,
		Action: e.Action, Subject: e.Subject, ClientID: e.ClientID, Session: w.tag(e.SessionID),
		Server: e.Server, Tool: e.Tool, Prompt: e.Prompt, URI: e.URI, Op: e.Op,
		Outcome: e.Outcome, Code: e.Code, Reason: cut(e.Reason, 300), HTTPStatus: e.HTTPStatus,
		DurationNs: int64(e.Duration), TraceID: e.TraceID, Dropped: w.pendingDrops.Swap(0),
	}
	if len(e.RequestID) > 0 && json.Valid(e.RequestID) {
		l.RequestID = e.RequestID
	}
	if w.opts.Arguments {
		l.Arguments = Redact(e.Arguments, w.opts.MaxValue)
	}
	if w.opts.Results {
		l.Result = Redact(e.Result, w.opts.MaxValue)
	}
	b, err := json.Marshal(&l)
	if err != nil { // cannot happen: every field encodes
		w.fail(err, "encoding a line")
		return
	}
	if w.file != nil && w.opts.MaxSize > 0 && w.size > 0 && w.size+int64(len(b))+1 > w.opts.MaxSize {
		w.flush()
		w.rotate()
	}
	w.buf = append(append(w.buf, b...), '\n')
	w.size += int64(len(b)) + 1
	w.dirty = true
	w.seq, w.prev = l.Seq, lineHash(b)
	w.lines.Add(1)
	w.lastSeq.Store(w.seq)
	if len(w.buf) >= flushSize {
		w.flush()
	}
}

// flushSize is how many bytes of lines run holds before it writes them
// while the queue is busy; it writes them at once when the queue runs
// empty.
const flushSize = 64 << 10

// flush writes the lines held (run's goroutine): one write for a batch.
// A failed write loses them (the chain then shows a gap there) and is
// counted and logged.
func (w *Writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.out.Write(w.buf); err != nil {
		w.fail(err, "writing the trail")
	}
	w.buf = w.buf[:0]
	if cap(w.buf) > 4*flushSize {
		w.buf = nil
	}
}

// tag returns the session tag of id: the first 16 bytes of
// HMAC-SHA256(key, id), hex; "" for no session. Tags are cached (run's
// goroutine), the cache cleared when it grows past 4096.
func (w *Writer) tag(id string) string {
	if id == "" {
		return ""
	}
	if t, ok := w.tags[id]; ok {
		return t
	}
	if len(w.tags) >= 4096 {
		clear(w.tags)
	}
	m := hmac.New(sha256.New, w.key)
	_, _ = m.Write([]byte(id))
	t := hex.EncodeToString(m.Sum(nil)[:16])
	w.tags[id] = t
	return t
}

func (w *Writer) sync() {
	w.flush()
	if w.file == nil || !w.dirty {
		return
	}
	w.dirty = false
	if err := w.file.Sync(); err != nil {
		w.fail(err, "syncing the trail")
	}
}

func (w *Writer) fail(err error, what string) {
	w.errs.Add(1)
	if w.err == nil {
		w.err = fmt.Errorf("audit: %s: %w", what, err)
	}
	w.opts.Logger.Error().Err(err).Str("path", w.opts.Path).Msg("audit trail: " + what)
}

// cut shortens s to at most n bytes (at a rune boundary).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// rotated is the name of the i-th rotated file of path.
func rotated(path string, i int) string { return path + "." + strconv.Itoa(i) }

package harness

import "time"

// Results are every figure of a run.
type Results struct {
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	DurationSec float64   `json:"durationSec"`
	Command     string    `json:"command,omitempty"`
	Config      Config    `json:"config"`
	Machine     Machine   `json:"machine"`

	Call    []CallResult       `json:"call"`
	Servers []ServerCallResult `json:"servers,omitempty"`
	Connect []ConnectResult    `json:"connect"`
	Storm   []StormResult      `json:"storm"`
	FanOut  []FanOutResult     `json:"fanOut"`
	Sandbox []SandboxResult    `json:"sandbox"`
	Targets []Target           `json:"targets"`

	// Notes say what was not measured and why; Errors what failed.
	Notes  []string `json:"notes,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

// Floor is the client name of the limit scenario's rows.
const Floor = "floor"

// CallResult is one batch of the call (or limit) scenario.
type CallResult struct {
	Client       string `json:"client"` // mcpvisor, gosdk, mcpgo, or floor
	Transport    string `json:"transport"`
	Era          string `json:"era,omitempty"` // none for the floor
	Version      string `json:"version,omitempty"`
	PayloadBytes int    `json:"payloadBytes"`
	InFlight     int    `json:"inFlight"`
	CallStats
	Error string `json:"error,omitempty"`
}

// ConnectResult is one run of the connect scenario: N servers (sessions)
// of one client from nothing to all ready, then closed.
type ConnectResult struct {
	Client    string `json:"client"` // mcpvisor, gosdk, mcpgo, or spawn (bare processes exiting at once)
	Transport string `json:"transport"`
	Era       string `json:"era,omitempty"`
	N         int    `json:"n"`
	Pool      int    `json:"pool"`

	AllReadyMs float64 `json:"allReadyMs"`
	CloseMs    float64 `json:"closeMs"`
	CPUMs      float64 `json:"cpuMs"` // the client's CPU until all were ready, its process helper's included
	// HelperCPUMs is the part of CPUMs spent in mcpvisor's process helper
	// (the reaper that forks and executes its stdio servers); 0 for the
	// peers, which start their servers in their own process.
	HelperCPUMs float64 `json:"helperCpuMs,omitempty"`

	// PeakRSSBytes is the process's peak RSS while connecting (VmHWM,
	// reset before; PeakRSSSinceStart when it could not be reset).
	PeakRSSBytes      int64 `json:"peakRssBytes"`
	PeakRSSSinceStart bool  `json:"peakRssSinceStart,omitempty"`
	// PeakRSSGrowthBytes is PeakRSSBytes over the RSS before connecting;
	// RSSGrowthBytes the RSS with all idle over the same.
	PeakRSSGrowthBytes int64 `json:"peakRssGrowthBytes"`
	RSSGrowthBytes     int64 `json:"rssGrowthBytes"`
	PeakGoroutines     int   `json:"peakGoroutines"`

	// Per connection, once all are ready and idle (after a GC): the growth
	// of the heap (HeapAlloc), of its spans (HeapInuse), of goroutine
	// stacks (StackInuse), of goroutines and of open descriptors, over the
	// client's state before connecting, divided by N.
	HeapPerConn       float64 `json:"heapBytesPerConn"`
	HeapInusePerConn  float64 `json:"heapInuseBytesPerConn"`
	StackPerConn      float64 `json:"stackBytesPerConn"`
	GoroutinesPerConn float64 `json:"goroutinesPerConn"`
	FDsPerConn        float64 `json:"fdsPerConn"`
	FDs               int     `json:"fds"` // open descriptors with all connected

	Error string `json:"error,omitempty"`
}

// StormResult is one reconnect storm: N ready stdio servers of one
// Supervisor, each with a call in flight, SIGKILLed at once.
type StormResult struct {
	N    int `json:"n"`
	Pool int `json:"pool"`

	InitialReadyMs float64 `json:"initialReadyMs"` // the first connect of all N, for comparison
	// AllReadyAgainMs is from the kill until the last server was ready
	// again (its ConnectedSince); DetectedMs until Status showed all ready.
	AllReadyAgainMs float64 `json:"allReadyAgainMs"`
	DetectedMs      float64 `json:"detectedMs"`
	// InitialCPUMs is the client's CPU for the first connect of all N;
	// RecoveryCPUMs from the kill until Status showed all ready again
	// (it includes the probes' calls and the failing of the calls in
	// flight).
	InitialCPUMs  float64 `json:"initialCpuMs"`
	RecoveryCPUMs float64 `json:"recoveryCpuMs"`

	// The calls in flight at the kill (one per server): how many failed,
	// how fast (from the kill), and how.
	InFlight   int            `json:"inFlight"`
	Failed     int            `json:"failed"`
	FailP50Ms  float64        `json:"failP50Ms"`
	FailP99Ms  float64        `json:"failP99Ms"`
	FailMaxMs  float64        `json:"failMaxMs"`
	FailKinds  map[string]int `json:"failKinds,omitempty"`
	Succeeded  int            `json:"succeeded"` // calls in flight that succeeded anyway (should be none)
	LostBefore int            `json:"lostBefore,omitempty"`

	// The calls sent while the servers recovered (StormProbes goroutines
	// calling echo on servers in turn, from the kill until all were
	// ready): how many, how many failed, and how long they took.
	ProbeSent   int            `json:"probeSent"`
	ProbeOK     int            `json:"probeOK"`
	ProbeFailed int            `json:"probeFailed"`
	ProbeP50Ms  float64        `json:"probeP50Ms"`
	ProbeP99Ms  float64        `json:"probeP99Ms"`
	ProbeMaxMs  float64        `json:"probeMaxMs"`
	ProbeKinds  map[string]int `json:"probeFailKinds,omitempty"`

	Error string `json:"error,omitempty"`
}

// FanOutResult is one list_changed sent Ops times to Subscribers.
type FanOutResult struct {
	Subscribers int `json:"subscribers"`
	Ops         int `json:"ops"`
	// Delivery is from the event's Time (stamped when the registry
	// publishes it) to its receipt, over every subscriber and op.
	DeliveryP50Us float64 `json:"deliveryP50Us"`
	DeliveryP99Us float64 `json:"deliveryP99Us"`
	DeliveryMaxUs float64 `json:"deliveryMaxUs"`
	// Op is from the announce call until every subscriber had the event:
	// the call, the server's list_changed, the re-list, the publication.
	OpP50Ms float64 `json:"opP50Ms"`
	OpP99Ms float64 `json:"opP99Ms"`
	Drops   uint64  `json:"drops"` // events lost by slow subscribers (gap events' Dropped)
	Error   string  `json:"error,omitempty"`
}

// Target is one of issue 6's targets, evaluated on this run.
type Target struct {
	Name string `json:"name"`
	Cell string `json:"cell"` // where it was measured
	Want string `json:"want"`
	Got  string `json:"got"`
	// Met is nil when the run did not measure it.
	Met  *bool  `json:"met"`
	Note string `json:"note,omitempty"`
}

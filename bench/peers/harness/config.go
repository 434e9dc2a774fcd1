package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The scenarios.
const (
	ScenarioCall    = "call"    // round trips per tools/call, per client, transport, payload and calls in flight
	ScenarioLimit   = "limit"   // the same round trip over a bare echo: the floor
	ScenarioConnect = "connect" // N servers (sessions) to all-ready, and what they cost the client
	ScenarioStorm   = "storm"   // kill N stdio servers at once; time until all are ready again
	ScenarioFanOut  = "fanout"  // one list_changed to N subscribers
)

// AllScenarios are the scenarios in the order they run.
var AllScenarios = []string{ScenarioCall, ScenarioLimit, ScenarioServers, ScenarioConnect, ScenarioStorm, ScenarioFanOut, ScenarioSandbox}

// The transports of the call scenario.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // Streamable HTTP
	TransportWS    = "ws"   // WebSocket: mcpvisor only (go-sdk and mcp-go have no WebSocket client)
)

// Duration is a time.Duration that reads and writes as "1.5s".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// CallSet is one payload's part of the call scenario: the calls-in-flight
// levels and eras it runs, and the bounds of each batch.
type CallSet struct {
	Payload  int      `json:"payloadBytes"` // the echo's answer text; 16 is EchoText itself
	InFlight []int    `json:"inFlight"`     // 1 is sequential
	Eras     []string `json:"eras"`
	Warmup   int      `json:"warmupCalls"` // unmeasured calls before each level
	Calls    int      `json:"maxCalls"`    // a level ends after this many calls per client …
	Duration Duration `json:"maxDuration"` // … or when this has passed, whichever comes first
	// Rounds splits each level into this many turns per client, the
	// clients taking turns in a rotating order, so that the machine's load
	// over time affects them alike.
	Rounds int `json:"rounds"`
}

// Config is what a run measures.
type Config struct {
	Profile    string    `json:"profile"`
	Scenarios  []string  `json:"scenarios"`
	Clients    []string  `json:"clients"`
	Transports []string  `json:"transports"`
	CallSets   []CallSet `json:"callSets"`

	// ServerCalls is the servers scenario's set (16 B echoes over stdio;
	// Payload is ignored, Eras pins every client: the servers' eras
	// differ). EverythingServer, when set, is server-everything's command
	// line (default: node and the repository's .deps install, "stdio").
	ServerCalls      CallSet  `json:"serverCalls"`
	EverythingServer []string `json:"everythingServer,omitempty"`

	// ConnectStdio and ConnectHTTP are the numbers of servers (sessions)
	// of the connect scenario; Pool and HTTPPool bound the connects in
	// progress at once (mcpvisor: LocalConnectLimit and RemoteConnectLimit;
	// the peers and the bare spawn: a semaphore).
	ConnectStdio []int `json:"connectStdio"`
	ConnectHTTP  []int `json:"connectHTTP"`
	Pool         int   `json:"pool"`
	HTTPPool     int   `json:"httpPool"`
	// ConnectProfiles, when set, is a directory that receives a CPU
	// profile of mcpvisor's part of each connect run (from the start of
	// the connects until all are ready): connect-<transport>-<N>.pprof.
	ConnectProfiles string `json:"connectProfiles,omitempty"`

	// StormN are the numbers of servers of the reconnect storm; StormProbes
	// the goroutines calling while they recover.
	StormN      []int `json:"stormN"`
	StormProbes int   `json:"stormProbes"`

	// FanOut are the numbers of subscribers; FanOutOps the list_changed
	// sent to each number.
	FanOut    []int `json:"fanOut"`
	FanOutOps int   `json:"fanOutOps"`

	// SandboxN is the number of servers of the sandbox scenario, in
	// SandboxRounds rounds; SandboxCallDuration the time of its calls per
	// variant (split over the rounds).
	SandboxN            int      `json:"sandboxN"`
	SandboxRounds       int      `json:"sandboxRounds"`
	SandboxCallDuration Duration `json:"sandboxCallDuration"`
	// SandboxServer, when set, is the command line of the sandbox
	// scenario's servers instead of the mock server (which starts in a
	// few ms, the worst case for a sandbox's fixed cost): a real server
	// such as server-everything, which must offer an "echo" tool.
	SandboxServer []string `json:"sandboxServer,omitempty"`

	// Plots says whether to draw the PNG plots.
	Plots bool `json:"-"`
}

// The eras of the connect scenario: stdio servers in the library's
// default era; HTTP sessions in the session era (2025-11-25), where a
// session holds state (a session id, a standalone GET stream) on both
// sides, as the idle-session benchmark of this module measures.
const (
	ConnectEraStdio = EraModern
	ConnectEraHTTP  = EraLegacy
)

// QuickProfile is `make bench`: about three minutes on 2 vCPUs.
func QuickProfile() Config {
	return Config{
		Profile:    "quick",
		Scenarios:  AllScenarios,
		Clients:    []string{Mcpvisor, GoSDK, McpGo},
		Transports: []string{TransportStdio, TransportHTTP, TransportWS},
		CallSets: []CallSet{
			{Payload: 16, InFlight: []int{1, 8, 32, 128}, Eras: []string{EraModern, EraLegacy}, Warmup: 200, Calls: 30000, Duration: Duration(1500 * time.Millisecond), Rounds: 3},
			{Payload: 4 << 10, InFlight: []int{1, 32}, Eras: []string{EraModern}, Warmup: 100, Calls: 10000, Duration: Duration(time.Second), Rounds: 2},
			{Payload: 1 << 20, InFlight: []int{1}, Eras: []string{EraModern}, Warmup: 3, Calls: 30, Duration: Duration(time.Second), Rounds: 1},
		},
		ServerCalls:  CallSet{Payload: len(EchoText), InFlight: []int{1, 32}, Eras: []string{EraLegacy}, Warmup: 200, Calls: 30000, Duration: Duration(1500 * time.Millisecond), Rounds: 3},
		ConnectStdio: []int{10, 100},
		ConnectHTTP:  []int{100, 1000},
		Pool:         3,
		HTTPPool:     20,
		StormN:       []int{100},
		StormProbes:  8,
		FanOut:       []int{1, 100, 1000},
		FanOutOps:    20,

		SandboxN:            50,
		SandboxRounds:       3,
		SandboxCallDuration: Duration(3 * time.Second),

		Plots: true,
	}
}

// FullProfile is every size of issue 6 but the largest (see Large).
func FullProfile() Config {
	c := QuickProfile()
	c.Profile = "full"
	c.CallSets = []CallSet{
		{Payload: 16, InFlight: []int{1, 8, 32, 128}, Eras: []string{EraModern, EraLegacy}, Warmup: 500, Calls: 200000, Duration: Duration(5 * time.Second), Rounds: 5},
		{Payload: 4 << 10, InFlight: []int{1, 8, 32, 128}, Eras: []string{EraModern, EraLegacy}, Warmup: 200, Calls: 100000, Duration: Duration(4 * time.Second), Rounds: 4},
		{Payload: 1 << 20, InFlight: []int{1, 8, 32}, Eras: []string{EraModern}, Warmup: 5, Calls: 400, Duration: Duration(4 * time.Second), Rounds: 2},
	}
	c.ServerCalls.Calls, c.ServerCalls.Duration, c.ServerCalls.Rounds = 200000, Duration(5*time.Second), 5
	c.StormN = []int{10, 100}
	c.FanOutOps = 100
	return c
}

// Large adds the largest sizes: 1,000 stdio servers (a thousand live
// processes, several GiB) to the connect scenario and the storm.
func (c *Config) Large() {
	if !slices.Contains(c.ConnectStdio, 1000) {
		c.ConnectStdio = append(c.ConnectStdio, 1000)
	}
	if !slices.Contains(c.StormN, 1000) {
		c.StormN = append(c.StormN, 1000)
	}
}

// Has reports whether the run includes scenario s.
func (c *Config) Has(s string) bool { return slices.Contains(c.Scenarios, s) }

// Validate checks names and sizes.
func (c *Config) Validate() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return fmt.Errorf("unknown scenario %q (want %s)", s, strings.Join(AllScenarios, ", "))
		}
	}
	for _, name := range c.Clients {
		if _, ok := PeerByName(name); !ok {
			return fmt.Errorf("unknown client %q (want mcpvisor, gosdk or mcpgo)", name)
		}
	}
	for _, t := range c.Transports {
		if t != TransportStdio && t != TransportHTTP && t != TransportWS {
			return fmt.Errorf("unknown transport %q (want stdio, http or ws)", t)
		}
	}
	for _, s := range c.CallSets {
		if s.Payload < 1 {
			return fmt.Errorf("payload %d: want at least 1 byte", s.Payload)
		}
		for _, e := range s.Eras {
			if _, ok := WantVersion[e]; !ok {
				return fmt.Errorf("unknown era %q (want modern or 2025-11-25)", e)
			}
		}
		for _, n := range s.InFlight {
			if n < 1 {
				return fmt.Errorf("calls in flight %d: want at least 1", n)
			}
		}
		if s.Calls < 1 || s.Duration <= 0 {
			return fmt.Errorf("payload %d: want a positive call count and duration", s.Payload)
		}
	}
	for _, n := range slices.Concat(c.ConnectStdio, c.ConnectHTTP, c.StormN, c.FanOut, []int{c.SandboxN}) {
		if n < 1 {
			return fmt.Errorf("size %d: want at least 1", n)
		}
	}
	if c.Pool < 1 || c.HTTPPool < 1 {
		return fmt.Errorf("pool sizes must be at least 1")
	}
	return nil
}

// ParseSize reads a byte size: 16, 4k, 4KiB, 1m, 1MiB.
func ParseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := 1
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1<<10, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "m"):
		mult, t = 1<<20, strings.TrimSuffix(t, "m")
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad size %q (want e.g. 16, 4k, 1m)", s)
	}
	return n * mult, nil
}

// ParseInts reads a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// SizeName writes a payload size as 16 B, 4 KiB, 1 MiB.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

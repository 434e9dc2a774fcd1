// Package config loads the MCP servers a host should run from .mcp.json
// files and produces the root package's entries for them,
// map[string]mcpvisor.ServerConfig, which a host hands to
// Supervisor.SetServers:
//
//	cfg, err := config.Load(config.Options{Approvals: store})
//	res, err := sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(10*time.Second))
//
// Its one job is reading and vetting those files: the layers (managed,
// user, project, local, a host's own, or files named by the user), the
// ${VAR} expansion, VS Code's env files, the administrator's server policy
// (Policy, the managed file's allowedMcpServers and deniedMcpServers),
// and the approval gate that holds the servers of untrusted layers until
// the user approved their entry and what it launches (Approvals, with
// trust.Store; Config.Pending and Config.Approval). Running the servers is
// the root package's job; this package starts nothing.
//
// Errors: a problem in a file's content is a *Error naming the file and
// the member (several are joined with errors.Join); the sentinels
// (ErrUnsetVariable, ErrEnvFile, ErrNotPending, …) are matched with
// errors.Is.
//
// Concurrency: Load and LoadFiles keep no state between calls and may run
// on any goroutines at once; they call Options.Approvals and
// Options.LookupEnv on the calling goroutine. A *Config is not modified
// once returned: its fields and methods may be read from any goroutines.
package config

package toolsearch

// synonymGroups is the built-in table of tool vocabulary: words a caller
// and a tool's author use for the same thing. A query that contains every
// word of one member of a group also searches for the other members'
// words, at Options.ExpansionWeight. The table is general on purpose: it
// is what tool definitions across many servers say, not tuned to any test.
var synonymGroups = [][]string{
	{"read", "get", "fetch", "retrieve", "load", "view", "show", "open", "obtain", "display"},
	{"write", "save", "create", "put", "store", "add", "new", "insert", "make"},
	{"update", "edit", "modify", "change", "patch", "set", "replace", "alter"},
	{"delete", "remove", "erase", "drop", "destroy", "purge", "rm", "unlink", "clear"},
	{"list", "enumerate", "ls", "all", "index", "show"},
	{"search", "find", "query", "lookup", "look up", "grep", "locate", "seek"},
	{"file", "document", "doc"},
	{"directory", "folder", "dir"},
	{"issue", "ticket", "bug"},
	{"pull request", "pr", "merge request", "mr"},
	{"message", "chat", "post", "send", "dm", "notify"},
	{"web page", "webpage", "url", "website", "web", "site", "link", "browse", "navigate", "visit"},
	{"screenshot", "capture", "snapshot", "screen grab"},
	{"run", "execute", "exec", "invoke", "command", "shell", "cmd", "terminal"},
	{"calendar", "event", "meeting", "schedule", "appointment"},
	{"user", "account", "member", "person", "people", "profile"},
	{"repository", "repo", "codebase"},
	{"email", "mail", "inbox"},
	{"image", "picture", "photo"},
	{"database", "db", "sql", "table"},
	{"stop", "kill", "terminate", "cancel", "abort", "halt"},
	{"move", "rename", "mv", "relocate"},
	{"copy", "duplicate", "cp", "clone"},
	{"upload", "attach", "attachment"},
	{"download", "export"},
	{"summary", "summarize", "overview", "digest"},
	{"time", "date", "clock", "timezone"},
	{"comment", "reply", "annotation"},
	{"error", "exception", "failure", "crash"},
	{"log", "logs", "trace"},
	{"memory", "remember", "recall", "knowledge"},
	{"close", "resolve", "finish", "complete"},
	{"click", "press", "tap"},
	{"type", "fill", "enter", "input"},
	{"wait", "sleep", "pause", "delay"},
	{"install", "setup"},
	{"owner", "author", "creator"},
	{"price", "cost"},
	{"weather", "forecast", "temperature"},
	{"size", "length", "count", "big", "large"},
	{"info", "information", "detail", "details", "metadata", "stat", "stats"},
	{"note", "notes", "memo"},
	{"task", "todo", "job"},
}

// expansion is one synonym group after analysis: each member as stemmed terms.
type expansion [][]string

// builtinExpansions is synonymGroups analysed once.
var builtinExpansions = analyzeGroups(synonymGroups)

func analyzeGroups(groups [][]string) []expansion {
	out := make([]expansion, 0, len(groups))
	for _, g := range groups {
		var e expansion
		for _, m := range g {
			if terms := analyze(m); len(terms) > 0 {
				e = append(e, terms)
			}
		}
		if len(e) > 1 {
			out = append(out, e)
		}
	}
	return out
}

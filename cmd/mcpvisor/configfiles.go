package main

// configFiles is the configuration the commands read and edit: the
// --config files (else the layered discovery of config.Load) with the
// approvals of the state directory, or every project entry approved with
// --trust-project. Its methods load it (main.go, entrystate.go,
// access.go), find and edit the files of add, remove and get (scopes.go,
// configedit.go), and log what does not load.
//
// Owned by cobra's goroutine (see app): the fields are set by flag
// parsing and only read afterwards.
type configFiles struct {
	files        []string // --config
	trustProject bool     // --trust-project
	state        *stateDir
	out          *output
}

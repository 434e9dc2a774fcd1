package gateway

import "github.com/rs/zerolog"

// pool is the gateway's view of what it serves: the Backend's servers
// under their downstream names, and the host's Features. It lists the
// prompts and resources, finds the server behind a name or URI, passes
// the extensions' requests on (tasks, skills, completions), checks the
// tools' header annotations and derives the caching hints of results.
//
// Concurrency: safe for concurrent use. It keeps no state of its own:
// opts is fixed at New, naming and features guard their own.
type pool struct {
	b        Backend
	opts     Options
	log      zerolog.Logger
	naming   *namer
	features *Features
}
